#!/usr/bin/env python3
"""Checks libtrainer's layering (docs/design.md "Layers") from its #include lines.

tools/layers.map lists the layers bottom first. Every file under core/src/ belongs to the
longest path of the map that matches it; every public header (trainer/NAME.h) to the line
that names it, and to the unit that implements it (`trainer/graph.h=autograd/`, else the
line's first path). A folder is a unit; the single files a line names are one unit together. The check fails on

  - an upward include: a file, or a public header, including a header of a layer listed
    after its own;
  - a cycle between units (folders, or files the map names alone): A includes B's headers
    and B, directly or not, includes A's;
  - a file or public header the map does not place.

Usage: tools/layers.py [--root DIR] [--map FILE] [--graph]
Exit 0 when the layering holds, 1 with one line per violation, 2 on a bad map."""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


class MapError(Exception):
    """A line of the map that cannot be read (exit 2)."""


GROUP = {}  # a single file of the map -> its line's unit ("strategy files")


def read_map(path):
    layers, owner, unit_of_entry = [], {}, {}
    GROUP.clear()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, rest = line.partition(":")
            if not sep or not rest.split():
                raise MapError(f"{path}:{n}: expected `layer: path...`")
            entries = rest.split()
            first_src = next((e for e in entries if not e.startswith("trainer/")), None)
            files_unit = f"{name.strip()} files"  # a line's single files are one unit
            if first_src and not first_src.endswith("/"):
                first_src = files_unit
            for e in entries:
                e, _, impl = e.partition("=")
                if e in unit_of_entry:
                    raise MapError(f"{path}:{n}: {e} is placed twice")
                unit_of_entry[e] = len(layers)
                if e.startswith("trainer/"):
                    owner[e] = impl or first_src or name
                elif not e.endswith("/"):
                    GROUP[e] = files_unit
            layers.append((name.strip(), [e.partition("=")[0] for e in entries]))
    return layers, owner, unit_of_entry


def place(rel, unit_of_entry):
    """(layer index, unit) of a core/src-relative path or a public header, or None."""
    if rel in unit_of_entry:
        return unit_of_entry[rel], GROUP.get(rel, rel)
    best = None
    for e, layer in unit_of_entry.items():
        if e.endswith("/") and rel.startswith(e) and (best is None or len(e) > len(best[1])):
            best = (layer, e)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--map", default=os.path.join(here, "layers.map"))
    ap.add_argument("--graph", action="store_true", help="print the unit graph")
    a = ap.parse_args()
    try:
        layers, owner, unit_of_entry = read_map(a.map)
    except MapError as e:
        print(e, file=sys.stderr)
        return 2
    src = os.path.join(a.root, "core", "src")
    inc = os.path.join(a.root, "core", "include")
    errors, edges = [], {}

    for h in sorted(os.listdir(os.path.join(inc, "trainer"))):
        if not h.endswith(".h"):
            continue
        if "trainer/" + h not in unit_of_entry:
            errors.append(f"core/include/trainer/{h}: not placed in {os.path.relpath(a.map, a.root)}")
            continue
        layer = unit_of_entry["trainer/" + h]
        with open(os.path.join(inc, "trainer", h), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                t = unit_of_entry.get(m.group(1)) if m else None
                if t is not None and t > layer:
                    errors.append(f"core/include/trainer/{h}:{n}: includes {m.group(1)} ({layers[t][0]}) from layer "
                                  f"{layers[layer][0]}: upward")

    for dirpath, _, files in os.walk(src):
        for fn in sorted(files):
            if not fn.endswith((".c", ".h", ".inc")):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, src)
            here_place = place(rel, unit_of_entry)
            if here_place is None:
                errors.append(f"core/src/{rel}: not placed in {os.path.relpath(a.map, a.root)}")
                continue
            layer, unit = here_place
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    if target.startswith("trainer/"):
                        t = place(target, unit_of_entry)
                        t_unit = owner.get(target)
                    else:
                        local = os.path.normpath(os.path.join(os.path.dirname(rel), target))
                        cand = local if os.path.exists(os.path.join(src, local)) else target
                        t = place(cand, unit_of_entry)
                        t_unit = t[1] if t else None
                    if t is None:
                        continue  # a header outside libtrainer (system, generated)
                    if t[0] > layer:
                        errors.append(f"core/src/{rel}:{n}: includes {target} ({layers[t[0]][0]}) from layer "
                                      f"{layers[layer][0]}: upward")
                    if t_unit and t_unit != unit:
                        edges.setdefault(unit, {}).setdefault(t_unit, f"core/src/{rel}:{n}")

    # Cycles between units: strongly connected components (Tarjan).
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    for comp in sccs:
        links = [f"{u} -> {w} ({edges[u][w]})" for u in comp for w in sorted(edges.get(u, {})) if w in comp]
        errors.append("cycle between " + ", ".join(comp) + ": " + "; ".join(links))

    if a.graph:
        for u in sorted(edges):
            print(f"{u} -> {' '.join(sorted(edges[u]))}")
    for e in errors:
        print(e)
    if errors:
        print(f"layers: {len(errors)} violation(s) of {os.path.relpath(a.map, a.root)}", file=sys.stderr)
        return 1
    print(f"layers: ok ({len(layers)} layers, {len(edges)} units with includes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
