#!/usr/bin/env python3
"""docs/strategies.md's option tables against the plugins themselves.

Every table that follows a line "Options (... `trainer plugins --describe NAME`):" must list
exactly the options `trainer plugins --describe NAME` prints, each with the same default.
usage: strategy_docs.py TRAINER DOCS_MD"""
import re
import subprocess
import sys


def describe(trainer, name):
    out = subprocess.run([trainer, "plugins", "--describe", name], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"strategy_docs: trainer plugins --describe {name}: {out.stderr.strip()}")
    opts = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^  (\S+)\s+(\S+(?: list)?)\s+default (\S+)", line)
        if m:
            opts[m.group(1)] = m.group(3)
    return opts


def tables(md):
    """{plugin: {key: default}} from the docs' option tables."""
    found, cur = {}, None
    for line in md.splitlines():
        m = re.search(r"Options \(.*`trainer plugins --describe (\w[\w-]*)`\)", line)
        if m:
            cur = found.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) >= 3 and cells[0] not in ("key", "---") and not set(cells[0]) <= set("-"):
                cur[cells[0].strip("`")] = cells[2].strip("`")
        elif line.strip() and cur:
            cur = None  # the table ended
    return found


def main():
    trainer, docs = sys.argv[1], sys.argv[2]
    with open(docs, encoding="utf-8") as f:
        md = f.read()
    bad = 0
    docs_tables = tables(md)
    if not docs_tables:
        print(f"FAIL {docs}: no option table found")
        return 1
    for name, rows in sorted(docs_tables.items()):
        real = describe(trainer, name)
        for key in sorted(set(real) | set(rows)):
            if key not in rows:
                print(f"FAIL {name}.{key}: in --describe (default {real[key]}), missing from {docs}")
                bad += 1
            elif key not in real:
                print(f"FAIL {name}.{key}: in {docs}, not an option of the plugin")
                bad += 1
            elif rows[key] != real[key]:
                print(f"FAIL {name}.{key}: {docs} says default {rows[key]}, --describe says {real[key]}")
                bad += 1
            else:
                print(f"ok {name}.{key} = {real[key]}")
    print(f"{len(docs_tables)} tables, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
