#!/usr/bin/env python3
"""`trainer plot` and the run folder's curves.svg, read back as XML and rendered.

  plot.py TRAINER PNG(ON|OFF) RSVG_CONVERT

Two MLP runs on synthetic data with a validation every 3 steps: `a` gets a NaN at step 3
(on_nan skip: a loss of null, a gap) and is killed at step 6, then resumed from its step-4
checkpoint (metrics.jsonl then holds steps 5 and 6 twice), and `trainer eval` adds its record;
`b` runs straight with another lr.
Each SVG is parsed by xml.etree: the axes' tick labels and positions give the scale (1-2-5
steps, linear or log10), through which every polyline point and marker must be a metrics.jsonl
value by its rules (docs/config.md "metrics.jsonl": the points after a resume's step
superseded, the last record of a step or epoch counting, null a gap). rsvg-convert (Debian's
librsvg2-bin) renders curves.svg to PNG, decoded here with zlib: 800x500, the background and
the curves' colours present. Then: two runs overlaid with a legend naming each, --metric and
--log-y, RUN as runs/<name> (its newest version) or a metrics.jsonl, --output - and PNG (or
its refusal in a build without librsvg), XML special characters and bytes that are not UTF-8
in a run's name, each refusal's message (an existing output file left as it was), curves.svg
after an early stop, after Ctrl-C (exit 130), none without the jsonl logger, and a curves.svg
that cannot be written being a warning of a run that succeeds.
Exit 0 pass, 1 fail, 77 (skip): rsvg-convert is missing (tools/dev installs librsvg2-bin).
"""
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import bad, check, summary  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
MLP = """run: {{name: {name}, seed: 5, output_dir: {out}}}
model: {{name: mlp, params: {{layers: [16]}}}}
data: {{name: synthetic, params: {{samples: 320, val_samples: 64, features: 12, classes: 4}}, batch_size: 32}}
optimizer: {{name: adamw, lr: {lr}}}
trainer: {{max_epochs: 2, log_every: 1, val_every_n_steps: 3, on_nan: skip, progress: lines, threads: 1}}
checkpoint: {{every_n_steps: 4, every_n_epochs: 0}}
"""
LONG = """run: {{name: irq, seed: 3, output_dir: {out}}}
model: {{name: mlp, params: {{layers: [64, 64]}}}}
data: {{name: synthetic, params: {{samples: 4096, val_samples: 256, features: 16, classes: 4}}, batch_size: 16}}
trainer: {{max_epochs: 30, log_every: 1, progress: lines, threads: 1}}
checkpoint: {{every_n_epochs: 0}}
"""
PX = 0.02  # SVG coordinates are written to 0.01 px; the scale comes from tick positions as rounded
def run(cmd, env=None, timeout=120):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})},
                          timeout=timeout)


def text(p):
    return (p.stdout + p.stderr).decode("utf-8", "replace")


# ---- metrics.jsonl by its rules: the oracle ----

def expected(metrics_path):
    """{metric: [(step, value)]} in step order: after {"resumed_from_step": N} the points of later
    steps go; the last record of a step (of an epoch, for epoch records) counts; null is NaN."""
    pts = {}
    with open(metrics_path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if "resumed_from_step" in r:
                n = r["resumed_from_step"]
                pts = {m: {k: p for k, p in d.items() if p[0] <= n} for m, d in pts.items()}
                continue
            if "step" not in r or any(k in r for k in ("skipped", "early_stopped", "memory")):
                continue
            key = ("epoch", r["epoch"]) if "train_loss" in r else ("step", r["step"])
            for k, v in r.items():
                if k in ("step", "epoch") or isinstance(v, bool) or not (v is None or isinstance(v, (int, float))):
                    continue
                pts.setdefault(k, {})[key] = (r["step"], math.nan if v is None else float(v))
    return {m: sorted(d.values()) for m, d in pts.items()}


def stretches(points, log):
    """The polylines a curve must have: its runs of drawable values, two points or more."""
    out, cur = [], []
    for s, v in points + [(None, math.nan)]:
        if math.isfinite(v) and (not log or v > 0):
            cur.append((s, v))
            continue
        if len(cur) > 1:
            out.append(cur)
        cur = []
    return out


# ---- the SVG read back ----

def parse_svg(path_or_bytes, name):
    try:
        if isinstance(path_or_bytes, bytes):
            return ET.fromstring(path_or_bytes)
        return ET.parse(path_or_bytes).getroot()
    except (ET.ParseError, OSError) as e:
        bad(f"{name}: well-formed XML", str(e))
        return None


def axis(root, which):
    """The axis' map from values to pixels, from its ticks' labels and positions, checked: ticks
    1, 2 or 5 x 10^k apart (log: decades or 1-2-5 values), every tick where the map puts it."""
    g = root.find(f".//{SVG}g[@id='{which}-axis']")
    log = g.get("data-scale") == "log"
    ticks = [(float(t.find(f"{SVG}text").text), float(t.find(f"{SVG}line").get("x1" if which == "x" else "y1")))
             for t in g.findall(f"{SVG}g[@class='tick']")]
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    f = math.log10 if log else (lambda v: v)

    def to_px(v):
        return p0 + (f(v) - f(v0)) * (p1 - p0) / (f(v1) - f(v0))
    off = [abs(to_px(v) - p) for v, p in ticks]
    if log:
        steps = [v for v, _ in ticks]
        nice = all(float(f"{v:.0e}") == v and f"{v:.0e}"[0] in "125" for v in steps)
    else:
        gaps = {round(b[0] - a[0], 12) for a, b in zip(ticks, ticks[1:])}
        gap = gaps.pop() if len(gaps) == 1 else None
        nice = gap is not None and f"{gap:.0e}"[0] in "125" and abs(float(f"{gap:.0e}") - gap) < 1e-12 * max(1, gap)
    return to_px, log, len(ticks) >= 2 and max(off) <= PX and nice, ticks


def curves(root):
    """{(run, metric): (polylines [[(x, y)]], markers [(x, y)])}."""
    out = {}
    for g in root.findall(f".//{SVG}g[@class='curve']"):
        lines = [[tuple(map(float, p.split(","))) for p in pl.get("points").split()] for pl in g.findall(f"{SVG}polyline")]
        marks = []
        for m in g.find(f"{SVG}g[@class='markers']"):
            if m.tag == f"{SVG}circle":
                marks.append((float(m.get("cx")), float(m.get("cy"))))
            elif m.tag == f"{SVG}rect":
                marks.append((float(m.get("x")) + float(m.get("width")) / 2, float(m.get("y")) + float(m.get("height")) / 2))
            else:  # a triangle or diamond: its first point is straight above the centre
                marks.append((float(m.get("d")[1:].split()[0]), None))
        out[(g.get("data-run"), g.get("data-metric"))] = (lines, marks)
    return out


def legend(root):
    return [t.text for t in root.findall(f".//{SVG}g[@class='legend']//{SVG}text")]


def close(a, b):
    return abs(a - b) <= PX


def check_curves(name, root, runs, metrics, log=False):
    """Every curve of `runs` ({label: metrics.jsonl}) x `metrics` against the oracle."""
    tx, _, fine_x, xt = axis(root, "x")
    ty, ylog, fine_y, yt = axis(root, "y")
    check(fine_x and fine_y and ylog == log, f"{name}: axes on 1-2-5 ticks ({'log' if log else 'linear'} y), labels "
          "where the scale puts them", f"x ticks {xt}", f"y ticks {yt}, log {ylog}")
    got = curves(root)
    for label, path in runs.items():
        want = expected(path)
        for m in metrics:
            if m not in want:
                check((label, m) not in got, f"{name}: no curve {label} {m} (the run has none)")
                continue
            lines, marks = got.get((label, m), ([], []))
            wl = stretches(want[m], log)
            same = len(lines) == len(wl) and all(
                len(a) == len(b) and all(close(x, tx(s)) and close(y, ty(v)) for (x, y), (s, v) in zip(a, b))
                for a, b in zip(lines, wl))
            n = sum(len(x) for x in wl)
            check(same, f"{name}: {label} {m}: {len(wl)} polyline(s), {n} points, each metrics.jsonl's value on the "
                  "axes' scale", f"got {[len(x) for x in lines]} points: {lines[:1]}",
                  f"expected {[len(x) for x in wl]}: {[[(tx(s), ty(v)) for s, v in x] for x in wl[:1]]}")
            if m.startswith("val_") or m == "train_loss":
                pts = [(s, v) for s, v in want[m] if math.isfinite(v) and (not log or v > 0)]
                check(len(marks) == len(pts) and all(close(x, tx(s)) and (y is None or close(y, ty(v)))
                                                     for (x, y), (s, v) in zip(marks, pts)),
                      f"{name}: {label} {m}: a marker at each of its {len(pts)} points", f"markers {marks}")


# ---- PNG read back (zlib, no third-party module) ----

def png_read(data):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"PNG of depth {depth}, colour type {ctype}, interlace {interlace}")
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev, i = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp), 0
    for _ in range(h):
        ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def check_png(name, data, w, h):
    try:
        pw, ph, rows = png_read(data)
    except (ValueError, zlib.error, struct.error, TypeError) as e:
        bad(f"{name}: a PNG", str(e))
        return
    px = [p for r in rows for p in r]
    ink = sum(p != (255, 255, 255) for p in px)

    def near(c):
        return sum(all(abs(a - b) <= 30 for a, b in zip(p, c)) for p in px)
    blue, orange = near((0x1f, 0x77, 0xb4)), near((0xff, 0x7f, 0x0e))
    check((pw, ph) == (w, h) and 0.01 * w * h < ink < 0.5 * w * h and blue > 300 and orange > 100,
          f"{name}: {pw}x{ph} PNG, not blank: {ink} pixels not white, {blue} of loss' blue, {orange} of val_loss' orange",
          f"expected {w}x{h}, 1% to 50% ink, some of both colours")


def main(argv):
    bin_, png, rsvg = argv[1], argv[2] == "ON", argv[3] if len(argv) > 3 and not argv[3].endswith("NOTFOUND") else ""
    t = tempfile.mkdtemp(prefix="trainer-plot-")
    try:
        return body(bin_, png, rsvg, t)
    finally:
        shutil.rmtree(t, ignore_errors=True)


def body(bin_, png, rsvg, t):
    out = os.path.join(t, "runs")
    cfg = os.path.join(t, "mlp.yaml")
    with open(cfg, "w") as f:
        f.write(MLP.format(name="a", out=out, lr=0.02))

    def trainer_run(*args, env=None, expect=0):
        p = run([bin_, "run", cfg, *args], env=env)
        check(p.returncode == expect, f"trainer run {' '.join(args)}: exit {p.returncode}", *text(p).splitlines()[-6:])
        return p

    def plot(*args, expect=0):
        p = run([bin_, "plot", *args])
        if p.returncode != expect:
            bad(f"trainer plot {' '.join(args)}: exit {p.returncode}, expected {expect}", *text(p).splitlines()[-6:])
        return p

    # ---- two runs; a is killed and resumed ----
    trainer_run(env={"TRAINER_FAULT_NAN_AT_STEP": "3", "TRAINER_FAULT_KILL_AT_STEP": "6"}, expect=-9)
    trainer_run(env={"TRAINER_FAULT_NAN_AT_STEP": "3"})
    trainer_run("run.name=b", "optimizer.lr=0.05")
    a, b = os.path.join(out, "a", "0"), os.path.join(out, "b", "0")
    am, bm = os.path.join(a, "metrics.jsonl"), os.path.join(b, "metrics.jsonl")
    with open(am) as f:
        recs = [json.loads(x) for x in f if x.strip()]
    steps = [r["step"] for r in recs if "loss" in r and "step" in r]
    check({"resumed_from_step": 4} in recs and steps.count(5) == 2 and steps.count(6) == 2 and
          [r["loss"] for r in recs if r.get("step") == 3 and "loss" in r] == [None],
          "run a's metrics.jsonl: resumed from step 4 (steps 5, 6 twice), step 3's loss null",
          f"records {recs[:12]}")

    # ---- curves.svg of a run ----
    root = parse_svg(os.path.join(a, "curves.svg"), "a/0/curves.svg")
    if root is not None:
        check(root.tag == f"{SVG}svg" and root.get("width") == "800" and root.get("height") == "500",
              "a/0/curves.svg: an 800x500 SVG", f"{root.tag} {root.attrib}")
        check_curves("a/0/curves.svg", root, {"a/0": am}, ["loss", "val_loss"])
        tx = axis(root, "x")[0]
        lines = curves(root)[("a/0", "loss")][0]
        got_steps = [[round(s) for s in steps_of(tx, pl)] for pl in lines]
        check(got_steps == [[1, 2], list(range(4, 21))], "a/0 loss: steps 1-2, a gap at step 3 (null), 4-20 once each",
              f"{got_steps}")
        check(legend(root) == ["loss", "val_loss"] and root.find(f"{SVG}title").text == "a/0",
              "a/0/curves.svg: legend loss, val_loss; title a/0", f"{legend(root)}")
        titles = [x.text for x in root.findall(f".//{SVG}text[@class='axis-title']")]
        check(titles == ["step", "loss, val_loss"], "axis titles: step, loss, val_loss", f"{titles}")
        if rsvg:
            png_path = os.path.join(t, "curves.png")
            p = run([rsvg, "-o", png_path, os.path.join(a, "curves.svg")])
            if check(p.returncode == 0, "rsvg-convert renders curves.svg", text(p)):
                with open(png_path, "rb") as f:
                    check_png("curves.svg by rsvg-convert", f.read(), 800, 500)

    # ---- trainer plot ----
    p = run([bin_, "eval", cfg, "--checkpoint", a])  # appends {"eval": {...}}: no curve
    with open(am) as f:
        evals = sum('"eval"' in x for x in f)
    root = parse_svg(run([bin_, "plot", a, "--output", "-"]).stdout, "after trainer eval")
    if check(p.returncode == 0 and evals == 1, "trainer eval appends its record to a/0's metrics.jsonl", text(p)) and root:
        check_curves("after trainer eval's record", root, {"a/0": am}, ["loss", "val_loss"])
    two = os.path.join(t, "two.svg")
    p = plot(a, os.path.join(out, "b"), "--output", two)
    check(text(p).strip() == f"wrote {two}", "trainer plot says what it wrote", text(p))
    root = parse_svg(two, "two runs")
    if root is not None:
        check_curves("two runs", root, {"a/0": am, "b/0": bm}, ["loss", "val_loss"])
        check(legend(root) == ["a/0 loss", "a/0 val_loss", "b/0 loss", "b/0 val_loss"],
              "two runs: the legend names each run and metric", f"{legend(root)}")
        colours = {g.get("data-run"): g.get("stroke") for g in root.findall(f".//{SVG}g[@class='curve']")}
        dashes = {g.get("data-metric"): g.get("stroke-dasharray") for g in root.findall(f".//{SVG}g[@class='curve']")}
        check(colours["a/0"] != colours["b/0"] and dashes["loss"] != dashes["val_loss"],
              "two runs: a colour per run, a dash per metric", f"{colours} {dashes}")

    m = os.path.join(t, "metric.svg")
    plot(b, "--metric", "val_accuracy,lr", "--metric", "train_loss", "--output", m)
    root = parse_svg(m, "--metric")
    if root is not None:
        check_curves("--metric val_accuracy,lr --metric train_loss", root, {"b/0": bm}, ["val_accuracy", "lr", "train_loss"])
        check(legend(root) == ["val_accuracy", "lr", "train_loss"], "--metric: those curves alone", f"{legend(root)}")

    lg = os.path.join(t, "log.svg")
    plot(a, b, "--metric", "loss,grad_norm", "--log-y", "--size", "640x400", "--output", lg)
    root = parse_svg(lg, "--log-y")
    if root is not None:
        check(root.get("width") == "640" and root.get("height") == "400", "--size 640x400", f"{root.attrib}")
        check_curves("--log-y", root, {"a/0": am, "b/0": bm}, ["loss", "grad_norm"], log=True)

    # RUN as runs/<name> (its newest version) and as a metrics.jsonl; --output -.
    v7 = os.path.join(out, "b", "7")
    os.makedirs(v7)
    with open(bm) as f, open(os.path.join(v7, "metrics.jsonl"), "w") as g:
        g.writelines(f.readlines()[:5])
    os.makedirs(os.path.join(out, "b", "9"))  # newer, but without metrics.jsonl
    p = plot(os.path.join(out, "b"), "--output", "-")
    root = parse_svg(p.stdout, "--output -")
    if root is not None:
        check(root.find(f"{SVG}title").text == "b/7" and text(p).startswith("<?xml"),
              "runs/b: its newest version with a metrics.jsonl (b/7), the SVG alone on stdout", f"{text(p)[:80]}")
        check_curves("runs/b -> b/7", root, {"b/7": os.path.join(v7, "metrics.jsonl")}, ["loss", "val_loss"])
    p = plot(am, "--output", "-")
    root = parse_svg(p.stdout, "a metrics.jsonl")
    if root is not None:
        check(root.find(f"{SVG}title").text == "a/0", "RUN as a metrics.jsonl: named by its folder (a/0)")

    # A run's name with XML's special characters and a byte that is not UTF-8.
    odd = os.path.join(os.fsencode(out), b"x&<y>\"q'\xff", b"0")
    os.makedirs(odd)
    shutil.copy(bm, os.path.join(odd, b"metrics.jsonl"))
    p = run([os.fsencode(bin_), b"plot", odd, b"--output", b"-"])
    root = parse_svg(p.stdout, "an odd run name")
    if root is not None:
        want = "x&<y>\"q'\ufffd/0"
        check(root.find(f"{SVG}title").text == want and
              {g.get("data-run") for g in root.findall(f".//{SVG}g[@class='curve']")} == {want},
              "a run named x&<y>\"q'\\xff: escaped, the byte as U+FFFD; the SVG well-formed",
              f"{root.find(f'{SVG}title').text!r}")

    if png:
        pp = os.path.join(t, "two.png")
        plot(a, b, "--output", pp)
        if os.path.exists(pp):
            with open(pp, "rb") as f:
                check_png("trainer plot --output two.png (librsvg)", f.read(), 800, 500)
    else:
        p = plot(a, "--output", os.path.join(t, "x.png"), expect=2)
        check("librsvg2-dev" in text(p) and not os.path.exists(os.path.join(t, "x.png")),
              "a build without librsvg refuses PNG, saying what to install", text(p))

    # ---- refusals: a message naming the thing, a non-zero exit, nothing overwritten ----
    keep = os.path.join(t, "keep.svg")
    with open(keep, "w") as f:
        f.write("keep")
    cases = [
        (["--metric", "val_acc", a, "--output", keep], 1,
         f"trainer plot: metric 'val_acc': not in the metrics.jsonl of {a} (its metrics: "
         f"{', '.join(sorted(expected(am)))})"),
        ([a, b, "--metric", "nope", "--output", keep], 1, "(their metrics: grad_norm, loss, lr,"),
        ([os.path.join(t, "missing"), "--output", keep], 1, f"trainer plot: {t}/missing: No such file or directory"),
        ([t, "--output", keep], 1, f"trainer plot: {t}: no metrics.jsonl in it"),
        ([a, "--output", os.path.join(t, "x.pdf")], 2, f"trainer plot: --output '{t}/x.pdf': expected FILE.svg, FILE.png or -"),
        ([a, "--size", "big", "--output", keep], 2, "trainer plot: --size 'big': expected WIDTHxHEIGHT"),
        ([a, "--size", "100x100", "--output", keep], 1, "plot size 100x100: from 200x150"),
        ([a, "--bogus"], 2, "trainer plot: unknown option '--bogus'"),
        (["--output", keep], 2, "trainer plot: RUN is required"),
        ([a, "--metric"], 2, "trainer plot: --metric needs a value"),
        ([a, "--metric", "loss,,lr"], 2, "--metric 'loss,,lr': expected NAME or NAME,NAME"),
        ([a, "--output", os.path.join(t, "no", "such", "dir.svg")], 1, f"{t}/no/such/dir.svg: cannot write"),
    ]
    for args, rc, msg in cases:
        p = plot(*args, expect=rc)
        check(p.returncode == rc and msg in text(p), f"refused ({rc}): {' '.join(args)[:70]}: {msg[:60]}...", text(p))
    with open(keep) as f:
        check(f.read() == "keep", "a refused plot leaves its --output file as it was")
    left = [x for x in os.listdir(t) if ".tmp-" in x]
    check(not left, "no temporary file left behind", f"{left}")
    broken = os.path.join(t, "broken", "0")
    os.makedirs(broken)
    with open(os.path.join(broken, "metrics.jsonl"), "w") as f:
        f.write('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 0.5\n{"step": 3, "loss": 0.2}\n')
    p = plot(broken, "--output", keep, expect=1)
    check(f"{broken}/metrics.jsonl:2: not a metrics record" in text(p), "a broken metrics.jsonl: refused naming file:line",
          text(p))

    # ---- curves.svg whatever the ending ----
    p = trainer_run("run.name=es", "trainer.early_stopping={monitor: val_loss, patience: 1, min_delta: 10}")
    es = os.path.join(out, "es", "0")
    root = parse_svg(os.path.join(es, "curves.svg"), "early stop")
    if root is not None:
        check("early_stopped" in open(os.path.join(es, "metrics.jsonl")).read(), "early stopping ended run es")
        check_curves("curves.svg after an early stop", root, {"es/0": os.path.join(es, "metrics.jsonl")}, ["loss", "val_loss"])

    p = trainer_run("run.name=csv", "trainer.loggers=[csv]")
    check(not os.path.exists(os.path.join(out, "csv", "0", "curves.svg")) and "curves.svg" not in text(p),
          "trainer.loggers [csv]: no metrics.jsonl, no curves.svg, no warning", text(p))
    p = plot(os.path.join(out, "csv", "0"), expect=1)
    check("the run has no metrics.jsonl (its trainer.loggers leave out jsonl?)" in text(p),
          "trainer plot of a run without metrics.jsonl says why", text(p))

    # A run that fails before its first record: nothing to draw, no curves.svg, no warning.
    p = trainer_run("run.name=nan1", "trainer.on_nan=stop", env={"TRAINER_FAULT_NAN_AT_STEP": "1"}, expect=1)
    check(not os.path.exists(os.path.join(out, "nan1", "0", "curves.svg")) and "curves.svg" not in text(p) and
          "not finite" in text(p), "a run stopped at step 1 (on_nan stop): no curves.svg, only its own error",
          *text(p).splitlines()[-3:])

    # A curves.svg that cannot be written (a folder is in its place): a warning, the run succeeds.
    trainer_run("run.name=w", env={"TRAINER_FAULT_KILL_AT_STEP": "6"}, expect=-9)
    os.makedirs(os.path.join(out, "w", "0", "curves.svg"))
    p = trainer_run("run.name=w")
    log = open(os.path.join(out, "w", "0", "log.txt")).read()
    check(p.returncode == 0 and f"warning: curves.svg not written: {out}/w/0/curves.svg: cannot rename" in text(p) and
          "warning: curves.svg not written" in log and not [x for x in os.listdir(os.path.join(out, "w", "0")) if ".tmp-" in x],
          "a curves.svg that cannot be written: a warning (stdout and log.txt), exit 0, no temporary file",
          text(p).splitlines()[-3:])

    # Ctrl-C: stopped at a step boundary, exit 130, curves.svg of what it logged.
    lcfg = os.path.join(t, "long.yaml")
    with open(lcfg, "w") as f:
        f.write(LONG.format(out=out))
    lm = os.path.join(out, "irq", "0", "metrics.jsonl")
    proc = subprocess.Popen([bin_, "run", lcfg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(1200):
            if os.path.exists(lm) and '"step": 20,' in open(lm).read():
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        o, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    root = parse_svg(os.path.join(out, "irq", "0", "curves.svg"), "Ctrl-C")
    check(proc.returncode == 130, f"Ctrl-C: exit {proc.returncode}", o.decode()[-300:])
    if root is not None:
        check_curves("curves.svg after Ctrl-C", root, {"irq/0": lm}, ["loss", "val_loss"])

    if summary():
        return 1
    if not rsvg:
        print("SKIPPED: rsvg-convert not found (tools/dev installs librsvg2-bin): the rendering was not checked")
        return 77
    return 0


def steps_of(tx, points):
    """The steps of a polyline's points, through the x axis' map inverted by two probes."""
    p0, p1 = tx(0), tx(1)
    return [(x - p0) / (p1 - p0) for x, _ in points]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
