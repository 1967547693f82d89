#!/usr/bin/env python3
"""trainer.loggers [jsonl, tensorboard, csv] read back by TensorBoard itself.

  loggers.py TRAINER

An MLP on synthetic data with validation every 3 steps, a NaN injected at step 3 (on_nan skip: a
skipped record and a loss of null), run straight (B) and killed at step 6 then resumed from its
step-4 checkpoint (A). TensorBoard's EventAccumulator (the `tensorboard` package from PyPI, in the
oracle venv: tools/oracle/oracle_venv.py) reads each run's tensorboard/ folder: every scalar of
metrics.jsonl (the last record of each kind per step, docs/config.md "metrics.jsonl") under its
tag, at its step, equal as float32, and nothing else; A's folder holds two event files and reads
as B's (throughput aside); the resolved config is its text summary, which TensorBoard's text
plugin shows as a code block. metrics.csv, parsed by Python's csv module, holds metrics.jsonl's
records in order. A tiny transformer LM adds tokens_per_sec and val_perplexity. Unknown and
repeated logger names are refused.
Exit 0 pass, 1 fail, 77 (skip): the oracle venv cannot be made (no PyPI).
"""
import csv
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
import oracle_venv  # noqa: E402
sys.path.insert(0, HERE)
from checks import bad, check, summary  # noqa: E402

SKIP = 77
# metrics.jsonl's keys and their TensorBoard tags, by record kind (docs/config.md "Loggers").
TAGS = {
    "train": {"epoch": "train/epoch", "loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
              "samples_per_sec": "train/samples_per_sec", "tokens_per_sec": "train/tokens_per_sec"},
    "val": {"val_loss": "val/loss", "val_accuracy": "val/accuracy", "val_perplexity": "val/perplexity",
            **{f"val_{m}_{a}": f"val/{m}_{a}" for m in ("precision", "recall", "f1") for a in ("macro", "weighted")},
            "val_mae": "val/mae", "val_rmse": "val/rmse", "val_r2": "val/r2"},
    "epoch": {"train_loss": "train/loss_epoch"},
}
MLP = """run: {{name: m, seed: 5, output_dir: {out}}}
model: {{name: mlp, params: {{layers: [16]}}}}
data: {{name: synthetic, params: {{samples: 320, val_samples: 64, features: 12, classes: 4}}, batch_size: 32}}
optimizer: {{name: adamw, lr: 0.02}}
scheduler: {{name: cosine, warmup_steps: 3}}
trainer: {{max_epochs: 2, log_every: 1, val_every_n_steps: 3, on_nan: skip, progress: lines, threads: 1,
          loggers: [jsonl, tensorboard, csv]}}
checkpoint: {{every_n_steps: 4, every_n_epochs: 0}}
"""
LM = """run: {{name: l, seed: 1, output_dir: {out}}}
model: {{name: transformer, params: {{mode: lm, d_model: 16, n_head: 2, n_layer: 1}}}}
data: {{name: text, params: {{path: {text}, mode: lm, seq_len: 8}}, batch_size: 4, val_fraction: 0.2}}
optimizer: {{name: sgd, lr: 0.05}}
trainer: {{max_steps: 6, log_every: 2, progress: lines, threads: 1, loggers: [tensorboard, jsonl, csv]}}
"""

def outer(argv):
    try:
        py = oracle_venv.ensure_venv(sys.executable)
    except oracle_venv.Unreachable as e:
        print(f"SKIPPED: {e}")
        sys.exit(SKIP)
    env = oracle_venv.env()
    env["TRAINER_LOGGERS_INNER"] = "1"
    sys.stdout.flush()
    os.execve(py, [py, os.path.abspath(__file__), *argv], env)


def trainer(bin_, cfg, *args, env=None, expect=0):
    p = subprocess.run([bin_, "run", cfg, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env={**os.environ, **(env or {})}, timeout=120)
    if p.returncode != expect:
        bad(f"trainer run {os.path.basename(cfg)} {' '.join(args)}: exit {p.returncode}, expected {expect}",
            *p.stdout.splitlines()[-8:])
    return p


def kind(rec):
    for k, key in (("train", "loss"), ("val", "val_loss"), ("epoch", "train_loss"), ("skipped", "skipped"),
                   ("resumed", "resumed_from_step"), ("memory", "memory")):
        if key in rec:
            return k
    return "?"


def f32(x):
    """The float32 nearest a metrics.jsonl number (null: NaN), as a Python float."""
    return math.nan if x is None else struct.unpack("f", struct.pack("f", float(x)))[0]


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def expected_scalars(records):
    """{tag: [(step, float32 value)]} by the superseded-records rule: the last record of each kind
    per step (of each epoch record per epoch)."""
    last = {}
    for r in records:
        k = kind(r)
        if k in TAGS:
            last[(k, r["epoch"] if k == "epoch" else r["step"])] = r
    out = {}
    for (k, _), r in last.items():
        for key, v in r.items():
            if key in ("step", "partial") or (k != "train" and key == "epoch"):
                continue
            if key not in TAGS[k]:
                bad(f"metrics.jsonl key {key} ({k} record) has no TensorBoard tag in this test's table")
                continue
            out.setdefault(TAGS[k][key], []).append((r["step"], f32(v)))
    return {t: sorted(v) for t, v in out.items()}


def read_tensorboard(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(folder, size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    from tensorboard.plugins.text import text_plugin
    from tensorboard.util import tensor_util
    scalars = {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}
    texts, html = [], None
    if "config" in ea.Tags()["tensors"]:
        texts = [(e.step, e.tensor_proto.string_val[0].decode()) for e in ea.Tensors("config")]
        html = text_plugin.text_array_to_html(tensor_util.make_ndarray(ea.Tensors("config")[0].tensor_proto), True)
    return scalars, texts, (ea.PluginTagToContent("text"), html)


def same_series(g, w):
    return len(g) == len(w) and all(gs == ws and same(gv, wv) for (gs, gv), (ws, wv) in zip(g, w))


def check_scalars(label, got, want):
    if sorted(got) != sorted(want):
        bad(f"{label}: tags", f"TensorBoard: {sorted(got)}", f"metrics.jsonl: {sorted(want)}")
        return
    wrong = [(t, got[t], want[t]) for t in want if not same_series(got[t], want[t])]
    n = sum(len(v) for v in want.values())
    check(not wrong, f"{label}: {len(want)} tags, {n} scalars at metrics.jsonl's steps, equal as float32",
          *[f"{t}: TensorBoard {g[:6]}... metrics.jsonl {w[:6]}..." for t, g, w in wrong[:3]])


def check_csv(label, run_dir, records):
    rows = list(csv.DictReader(open(os.path.join(run_dir, "metrics.csv"), newline="")))
    keyed = [r for r in records if kind(r) != "memory"]
    header = sorted({k for r in keyed for k in r})
    with open(os.path.join(run_dir, "metrics.csv"), newline="") as f:
        got_header = next(csv.reader(f))
    check(got_header == header, f"{label}: metrics.csv's header is every key, sorted", f"{got_header} != {header}")
    diffs = []
    for i, (row, rec) in enumerate(zip(rows, keyed)):
        for key in header:
            cell, v = row[key], rec.get(key, "absent")
            if v == "absent":
                good = cell == ""
            elif isinstance(v, bool):
                good = cell == ("true" if v else "false")
            elif v is None:
                good = cell in ("nan", "inf", "-inf")
            else:
                good = cell != "" and float(cell) == float(v)
            if not good:
                diffs.append(f"row {i + 1} {key}: csv '{cell}', metrics.jsonl {v}")
    check(len(rows) == len(keyed) and not diffs, f"{label}: metrics.csv's {len(rows)} rows are metrics.jsonl's records",
          f"{len(rows)} rows, {len(keyed)} records", *diffs[:5])


def check_config_text(label, texts, run_dir, steps):
    with open(os.path.join(run_dir, "config.yaml")) as f:
        cfg = f.read()
    good = [s for s, _ in texts] == steps and all(t == "```\n" + cfg + "```" for _, t in texts)
    check(good, f"{label}: the resolved config is the text summary 'config' at steps {steps}",
          f"steps {[s for s, _ in texts]}", f"first text: {texts[0][1][:200] if texts else None!r}")


def records_of(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def inner(bin_):
    tmp = tempfile.mkdtemp(prefix="trainer-loggers-")
    try:
        run(bin_, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


def run(bin_, tmp):
    cfg = os.path.join(tmp, "mlp.yaml")
    with open(cfg, "w") as f:
        f.write(MLP.format(out=tmp))
    nan = {"TRAINER_FAULT_NAN_AT_STEP": "3"}
    trainer(bin_, cfg, "run.name=b", env=nan)
    trainer(bin_, cfg, "run.name=a", env={**nan, "TRAINER_FAULT_KILL_AT_STEP": "6"}, expect=-9)  # SIGKILL
    trainer(bin_, cfg, "run.name=a")
    a, b = os.path.join(tmp, "a", "0"), os.path.join(tmp, "b", "0")
    ra, rb = records_of(a), records_of(b)
    check(any(r.get("step") == 3 and r.get("skipped") for r in rb) and
          {"step": 3, "epoch": 1, "loss": None, "lr": 0.02, "grad_norm": None} in
          [{k: v for k, v in r.items() if k != "samples_per_sec"} for r in rb],
          "run b: step 3 skipped, its loss and gradient norm null")
    check(ra.count({"resumed_from_step": 4}) == 1 and sum(1 for r in ra if r.get("step") == 5 and "loss" in r) == 2,
          "run a: resumed from step 4, steps 5 and 6 written twice")

    events = sorted(glob.glob(os.path.join(a, "tensorboard", "events.out.tfevents.*")))
    check(len(events) == 2 and len(glob.glob(os.path.join(b, "tensorboard", "*"))) == 1,
          "an event file per process start (a: 2, b: 1)", f"a: {events}")
    sa, ta, pa = read_tensorboard(os.path.join(a, "tensorboard"))
    sb, tb, _ = read_tensorboard(os.path.join(b, "tensorboard"))
    check_scalars("run b", sb, expected_scalars(rb))
    check_scalars("run a (killed at step 6, resumed from 4)", sa, expected_scalars(ra))
    thru = "train/samples_per_sec"
    check(sorted(sa) == sorted(sb) and all(same_series(sa[t], sb[t]) for t in sa if t != thru) and
          [s for s, _ in sa[thru]] == [s for s, _ in sb[thru]],
          "run a reads as run b in TensorBoard (every step once; throughput aside)")
    check(pa[0] == {"config": b""} and pa[1].startswith("<pre><code>run:\n  name: a\n"),
          "the config's summary is the text plugin's, which shows it as a code block", f"{pa}")
    check_config_text("run b", tb, b, [0])
    check_config_text("run a", ta, a, [0, 4])
    check_csv("run b", b, rb)
    check_csv("run a", a, ra)

    text = os.path.join(tmp, "lm.txt")
    with open(text, "w") as f:
        f.write("to be or not to be, that is the question. whether tis nobler in the mind to suffer\n" * 4)
    lm = os.path.join(tmp, "lm.yaml")
    with open(lm, "w") as f:
        f.write(LM.format(out=tmp, text=text))
    trainer(bin_, lm)
    rl = records_of(os.path.join(tmp, "l", "0"))
    sl, _, _ = read_tensorboard(os.path.join(tmp, "l", "0", "tensorboard"))
    check("train/tokens_per_sec" in sl and "val/perplexity" in sl, "lm: tokens_per_sec and val_perplexity tagged",
          f"{sorted(sl)}")
    check_scalars("lm", sl, expected_scalars(rl))
    check_csv("lm", os.path.join(tmp, "l", "0"), rl)

    for over, needle in (("trainer.loggers=[jsonl, tensorbord]",
                          "trainer.loggers[1]: expected jsonl, tensorboard or csv, got 'tensorbord'"),
                         ("trainer.loggers=[csv, csv]", "trainer.loggers[1]: 'csv' is listed twice"),
                         ("trainer.loggers=wandb", "trainer.loggers: expected jsonl, tensorboard or csv, got 'wandb'")):
        p = trainer(bin_, cfg, "run.name=x", over, expect=1)
        check(needle in p.stdout and not os.path.exists(os.path.join(tmp, "x")), f"{over} refused: {needle}",
              p.stdout.strip()[-300:])
    trainer(bin_, cfg, "run.name=none", "trainer.loggers=[]", "trainer.max_epochs=1")
    left = sorted(os.listdir(os.path.join(tmp, "none", "0")))
    check(left == ["checkpoints", "config.yaml", "log.txt"], "trainer.loggers: [] writes no metrics file", f"{left}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if os.environ.get("TRAINER_LOGGERS_INNER") != "1":
        outer(sys.argv[1:])
    sys.exit(inner(os.path.abspath(sys.argv[1])))
