#!/usr/bin/env python3
"""trainer eval's metrics against references computed here from trainer predict's CSV, and
trainer predict on data without labels.

  eval_metrics.py TRAINER

- A 4-class MLP on a CSV with named classes (one of them rare): the eval record in the run's
  metrics.jsonl has accuracy, precision/recall/F1 per class, macro (over the classes among the
  labels or the predictions) and weighted, equal to scikit-learn's definitions with
  zero_division=0 computed in plain Python from predict's label and prediction columns (1e-6),
  and the confusion matrix exactly; the printed table and matrix say the same; dataparallel x2
  and ddp x2 give the same record; the run's last validation record has the same scores;
  --split train records train_ keys; a weights file outside a run folder records nothing.
- A regression MLP (csv task regress): MAE, RMSE and R^2 equal numpy's from predict's label_0
  and prediction_0 (1e-6), under cpu, dataparallel x2 and ddp x2.
- predict on files without labels, as the validation file: csv numbers, csv texts with a
  tokenizer (CSV and JSON Lines), text classify lines (bytes and tokenized) and text pairs give
  the labelled file's predictions row for row, without the label (or score) column; run and
  eval refuse those files naming the label column, as does JSON Lines with a label on a later
  line only.
"""
import csv
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOKDATA = os.path.join(HERE, "..", "data", "tokdata")
NAMES = ["cat", "dog", "bird", "fish"]
passes = failures = 0


def check(cond, name, *detail):
    global passes, failures
    if cond:
        passes += 1
        print(f"ok   {name}")
    else:
        failures += 1
        print(f"FAIL {name}")
        for d in detail:
            print(f"     {d}")
    return cond


def trainer(*args, expect=0, launch=0):
    cmd = [BIN, *args] if not launch else [BIN, "launch", "-n", str(launch), "--", BIN, *args]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if (p.returncode == 0) != (expect == 0):
        check(False, f"trainer {' '.join(args[:1])}: exit {p.returncode}", *(" ".join(args),), *p.stdout.splitlines()[-5:])
    return p


def last_eval(run):
    recs = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    evals = [r["eval"] for r in recs if "eval" in r]
    return evals[-1] if evals else None, len(evals)


def read_predictions(path):
    rows = list(csv.reader(open(path)))
    return rows[0], rows[1:]


def train_eval_predict(t, name, seed, data, lr, steps):
    """An MLP config on `data`, trained, then eval (its output and record) and predict (the CSV)."""
    cfg = f"{t}/{name}.yaml"
    open(cfg, "w").write(f"""run: {{name: {name}, seed: {seed}, output_dir: {t}/runs}}
model: {{name: mlp, params: {{layers: [16]}}}}
data: {data}
optimizer: {{name: adamw, lr: {lr}}}
trainer: {{max_steps: {steps}, log_every: {steps // 2}, progress: lines, threads: 1}}
""")
    run = f"{t}/runs/{name}/0"
    if trainer("run", cfg).returncode:
        return None
    out = trainer("eval", cfg, "--checkpoint", run).stdout
    rec, n_rec = last_eval(run)
    trainer("predict", cfg, "--checkpoint", run, "--output", f"{t}/{name}.pred.csv")
    return cfg, run, out, rec, n_rec, f"{t}/{name}.pred.csv"


def close(a, b, tol=1e-6):
    return a is not None and abs(a - b) <= tol * max(1.0, abs(b))


def reference_scores(labels, preds, C):
    """scikit-learn's precision_recall_fscore_support (zero_division=0, default labels)."""
    cm = [[0] * C for _ in range(C)]
    for a, p in zip(labels, preds):
        cm[a][p] += 1
    tp = [cm[c][c] for c in range(C)]
    support = [sum(cm[c]) for c in range(C)]
    predicted = [sum(cm[a][c] for a in range(C)) for c in range(C)]
    prec = [tp[c] / predicted[c] if predicted[c] else 0.0 for c in range(C)]
    rec = [tp[c] / support[c] if support[c] else 0.0 for c in range(C)]
    f1 = [2 * p * r / (p + r) if p + r else 0.0 for p, r in zip(prec, rec)]
    present = sorted(set(labels) | set(preds))
    n = len(labels)
    out = {"accuracy": sum(tp) / n, "confusion_matrix": cm, "support": support, "precision": prec, "recall": rec, "f1": f1}
    for key, v in (("precision", prec), ("recall", rec), ("f1", f1)):
        out[key + "_macro"] = sum(v[c] for c in present) / len(present)
        out[key + "_weighted"] = sum(v[c] * support[c] for c in range(C)) / n
    return out


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def classification(t):
    rng = random.Random(5)
    rows = []
    for i in range(523):
        c = rng.choices(range(4), weights=[5, 5, 4, 1])[0]
        x = [rng.gauss(1.2 * (c == k), 1.0) for k in range(4)] + [rng.gauss(0, 1), rng.gauss(0, 1)]
        rows.append([f"{v:.5f}" for v in x] + [NAMES[c]])
    header = ["f1", "f2", "f3", "f4", "f5", "f6", "label"]
    write_csv(f"{t}/train.csv", header, rows[:400])
    write_csv(f"{t}/val.csv", header, rows[400:])
    write_csv(f"{t}/val_nolabel.csv", header[:-1], [r[:-1] for r in rows[400:]])
    got = train_eval_predict(t, "c", 2, "{name: csv, params: {path: train.csv, classes: [%s]}, val_params: {path: val.csv}, "
                                        "batch_size: 50}" % ", ".join(NAMES), 0.01, 16)
    if not got:
        return
    cfg, run, out, rec, n_rec, pred = got
    head, rows = read_predictions(pred)
    classes = [h[len("prob_"):] for h in head[4:]]
    labels = [classes.index(r[1]) for r in rows]
    preds = [classes.index(r[2]) for r in rows]
    ref = reference_scores(labels, preds, 4)
    check(rec is not None and rec["samples"] == 123 == len(rows) and rec["split"] == "val" and rec["step"] == 16 and
          rec["classes"] == NAMES, "eval appends one record to the run's metrics.jsonl: 123 samples, step 16, class names",
          json.dumps(rec)[:300])
    if rec is None:
        return
    keys = ["accuracy"] + [f"{m}_{a}" for a in ("macro", "weighted") for m in ("precision", "recall", "f1")]
    worst = max(abs(rec["val_" + k] - ref[k]) for k in keys)
    check(worst <= 1e-6, f"eval's accuracy, precision/recall/F1 macro and weighted = the reference from predict's CSV "
                         f"(worst {worst:.1e}; macro F1 {rec['val_f1_macro']:.6f}, weighted {rec['val_f1_weighted']:.6f})",
          *(f"{k}: {rec['val_' + k]} vs {ref[k]}" for k in keys))
    pc = rec["per_class"]
    worst = max(abs(pc[k][c] - ref[k][c]) for k in ("precision", "recall", "f1") for c in range(4))
    check(worst <= 1e-6 and pc["support"] == ref["support"], f"per class scores and support = the reference (worst {worst:.1e})",
          json.dumps(pc), json.dumps({k: ref[k] for k in ("precision", "recall", "f1", "support")}))
    check(rec["confusion_matrix"] == ref["confusion_matrix"], f"confusion matrix = the reference: {rec['confusion_matrix']}",
          json.dumps(ref["confusion_matrix"]))
    check(min(ref["precision"]) < 1 or min(ref["recall"]) < 1, "the model makes mistakes (the scores are not all 1)")
    # The printed table and matrix.
    m = re.search(r"^macro avg +([0-9.]+) +([0-9.]+) +([0-9.]+) +123$", out, re.M)
    w = re.search(r"^weighted avg +([0-9.]+) +([0-9.]+) +([0-9.]+) +123$", out, re.M)
    printed = [float(v) for v in (m.groups() + w.groups())] if m and w else []
    want = [ref[k] for k in ("precision_macro", "recall_macro", "f1_macro", "precision_weighted", "recall_weighted", "f1_weighted")]
    check(len(printed) == 6 and all(abs(a - b) <= 6e-5 for a, b in zip(printed, want)),
          "the printed table's macro and weighted rows", out)
    lines = out.splitlines()
    at = [i for i, l in enumerate(lines) if l.startswith("confusion matrix")]
    grid = [l.split() for l in lines[at[0] + 1:at[0] + 6]] if at else []
    check(len(grid) == 5 and grid[0] == NAMES and [g[0] for g in grid[1:]] == NAMES and
          [[int(v) for v in g[1:]] for g in grid[1:]] == ref["confusion_matrix"], "the printed confusion matrix, by name", out)
    # The run's last validation (the same checkpoint) recorded the same scores.
    val = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.startswith('{"step"') and "val_loss" in l][-1]
    check(val["step"] == 16 and all(abs(val["val_" + k] - rec["val_" + k]) <= 1e-5 for k in keys),
          "the run's last validation record has the same scores (6 digits)", json.dumps(val))
    # Strategies: the same record.
    for name, args, launch in (("dataparallel x2", ["trainer.strategy=dataparallel", "trainer.devices=2"], 0),
                               ("ddp x2", ["trainer.strategy=ddp"], 2)):
        trainer("eval", cfg, "--checkpoint", run, *args, launch=launch)
        r, n = last_eval(run)
        n_rec += 1
        same = n == n_rec and r["confusion_matrix"] == rec["confusion_matrix"] and all(
            abs(r["val_" + k] - rec["val_" + k]) <= 1e-12 for k in keys) and close(r["val_loss"], rec["val_loss"], 1e-6)
        check(same, f"eval under {name}: the same metrics and confusion matrix", json.dumps(r)[:400])
    trainer("eval", cfg, "--checkpoint", run, "--split", "train")
    r, _ = last_eval(run)
    check(r["split"] == "train" and r["samples"] == 360 and "train_f1_macro" in r and "val_f1_macro" not in r,
          f"--split train records train_ keys (train_f1_macro {r.get('train_f1_macro')})", json.dumps(r)[:300])
    # A weights file outside a run folder: printed, not recorded anywhere.
    before = open(os.path.join(run, "metrics.jsonl")).read()
    trainer("checkpoint", "consolidate", run, f"{t}/w.safetensors")
    p = trainer("eval", cfg, "--checkpoint", f"{t}/w.safetensors")
    check(p.returncode == 0 and "macro avg" in p.stdout and "eval record" not in p.stdout and
          open(os.path.join(run, "metrics.jsonl")).read() == before, "a weights file outside a run: printed, no record",
          p.stdout)
    # A run folder whose metrics.jsonl cannot be written: a warning naming it, the scores printed.
    os.makedirs(f"{t}/ro/checkpoints")
    shutil.copy(cfg, f"{t}/ro/config.yaml")
    shutil.copytree(f"{run}/checkpoints/step-00000016", f"{t}/ro/checkpoints/step-00000016")
    os.makedirs(f"{t}/ro/metrics.jsonl")  # a folder: no file can be opened there
    p = trainer("eval", cfg, "--checkpoint", f"{t}/ro")
    check(p.returncode == 0 and "macro avg" in p.stdout and "ro/metrics.jsonl: cannot write the eval record" in p.stdout,
          "an unwritable metrics.jsonl: a warning naming it, the scores printed, exit 0", p.stdout)
    # Unlabelled: the same predictions, no label column; run and eval refuse the file.
    trainer("predict", cfg, "--checkpoint", run, "--output", f"{t}/nolabel.csv", "data.val_params.path=val_nolabel.csv")
    uhead, urows = read_predictions(f"{t}/nolabel.csv")
    check(uhead == [head[0]] + head[2:] and urows == [[r[0]] + r[2:] for r in rows],
          "csv without the label column: predict's rows = the labelled file's, without the label", uhead, head)
    trainer("predict", cfg, "--checkpoint", run, "--output", f"{t}/nolabel2.csv", "data.val_params.path=val_nolabel.csv",
            "trainer.strategy=dataparallel", "trainer.devices=2")
    dhead, drows = read_predictions(f"{t}/nolabel2.csv")
    check(dhead == uhead and len(drows) == len(urows) and all(
        a[:2] == b[:2] and all(abs(float(x) - float(y)) <= 1e-6 for x, y in zip(a[2:], b[2:])) for a, b in zip(drows, urows)),
          "the same without labels under dataparallel x2")
    for cmd in (["eval", cfg, "--checkpoint", run], ["run", cfg, "run.name=u"]):
        p = trainer(*cmd, "data.val_params.path=val_nolabel.csv", expect=1)
        check(p.returncode == 1 and "val_nolabel.csv: no label column 'label'" in p.stdout,
              f"trainer {cmd[0]} refuses the file without labels: {p.stdout.strip()[:160]}", p.stdout)


def regression(t):
    rng = random.Random(9)
    rows = []
    for i in range(331):
        x = [rng.gauss(0, 1) for _ in range(4)]
        y = 5 + 3 * x[0] - 2 * x[1] + 0.5 * x[2] * x[3] + rng.gauss(0, 0.5)
        rows.append([f"{v:.5f}" for v in x] + [f"{y:.5f}"])
    write_csv(f"{t}/reg.csv", ["a", "b", "c", "d", "y"], rows)
    got = train_eval_predict(t, "r", 3, "{name: csv, params: {path: reg.csv, task: regress, label: y}, batch_size: 32, "
                                        "val_fraction: 0.3}", 0.05, 100)
    if not got:
        return
    cfg, run, out, rec, _, pred = got
    d = np.loadtxt(pred, delimiter=",", skiprows=1, ndmin=2)
    y, p = d[:, 1], d[:, 2]
    ref = {"mae": np.mean(np.abs(p - y)), "rmse": np.sqrt(np.mean((p - y) ** 2)),
           "r2": 1 - np.sum((p - y) ** 2) / np.sum((y - y.mean()) ** 2)}
    got = {k: rec and rec.get("val_" + k) for k in ref}
    check(rec is not None and rec["samples"] == len(y) == 99 and all(close(got[k], ref[k]) for k in ref) and 0 < ref["r2"] < 1,
          f"regression: MAE {got['mae']}, RMSE {got['rmse']}, R^2 {got['r2']} = numpy's from predict's CSV "
          f"({ref['mae']:.7g}, {ref['rmse']:.7g}, {ref['r2']:.7g})", out)
    check(re.search(r"MAE [0-9.e+-]+  RMSE [0-9.e+-]+  R\^2 -?[0-9.]+", out) is not None, "the summary line has MAE, RMSE and R^2", out)
    val = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.startswith('{"step"') and "val_loss" in l][-1]
    check(all(close(val["val_" + k], got[k], 1e-5) for k in ref), "the run's last validation record: val_mae, val_rmse, val_r2",
          json.dumps(val))
    for name, args, launch in (("dataparallel x2", ["trainer.strategy=dataparallel", "trainer.devices=2"], 0),
                               ("ddp x2", ["trainer.strategy=ddp"], 2)):
        trainer("eval", cfg, "--checkpoint", run, *args, launch=launch)
        r, _ = last_eval(run)
        check(all(close(r["val_" + k], got[k], 1e-9) for k in ref), f"regression eval under {name}: the same MAE, RMSE, R^2",
              json.dumps(r))


def same_predictions(t, name, cfg, run, labelled, unlabelled, drop):
    """predict on both files: the unlabelled rows are the labelled ones without column `drop`."""
    a = trainer("predict", cfg, "--checkpoint", run, "--output", f"{t}/{name}.l.csv", f"data.val_params.path={labelled}")
    b = trainer("predict", cfg, "--checkpoint", run, "--output", f"{t}/{name}.u.csv", f"data.val_params.path={unlabelled}")
    if a.returncode or b.returncode:
        return check(False, f"{name}: predict", a.stdout[-300:], b.stdout[-300:])
    lh, lr = read_predictions(f"{t}/{name}.l.csv")
    uh, ur = read_predictions(f"{t}/{name}.u.csv")
    cut = lambda r: r[:drop] + r[drop + 1:]
    return check(uh == cut(lh) and len(ur) == len(lr) > 0 and ur == [cut(r) for r in lr] and "without labels" in b.stdout,
                 f"{name}: predict without labels = with labels, row for row ({len(ur)} rows; header {','.join(uh[:4])},...)",
                 lh, uh, *(f"{x} | {y}" for x, y in list(zip(lr, ur))[:3]))


def texts(t):
    for f in ("reviews.csv", "tokenizer.json"):
        shutil.copy(os.path.join(TOKDATA, f), t)
    rows = list(csv.reader(open(f"{t}/reviews.csv")))[1:]
    val = rows[-40:]
    write_csv(f"{t}/rv.csv", ["text", "label"], val)
    write_csv(f"{t}/rv_nolabel.csv", ["text"], [[r[0]] for r in val])
    with open(f"{t}/rv.jsonl", "w") as f:
        f.writelines(json.dumps({"text": r[0], "label": r[1]}) + "\n" for r in val)
    with open(f"{t}/rv_nolabel.jsonl", "w") as f:
        f.writelines(json.dumps({"id": i, "text": r[0]}) + "\n" for i, r in enumerate(val))
    with open(f"{t}/rv_mixed.jsonl", "w") as f:
        f.write(json.dumps({"text": val[0][0]}) + "\n" + json.dumps({"text": val[1][0], "label": val[1][1]}) + "\n")
    # text classify lines: label<TAB>text, texts alone (newlines in the reviews become spaces)
    one = lambda s: " ".join(s.split())
    with open(f"{t}/lines.txt", "w") as f:
        f.writelines(f"{r[1]}\t{one(r[0])}\n" for r in rows[:-40])
    with open(f"{t}/lv.txt", "w") as f:
        f.writelines(f"{r[1]}\t{one(r[0])}\n" for r in val)
    with open(f"{t}/lv_nolabel.txt", "w") as f:
        f.writelines(f"{one(r[0])}\n" for r in val)
    model = "{name: transformer, params: {mode: classify, d_model: 16, n_head: 2, n_layer: 1, max_seq: 64}}"
    tok = "tokenizer: tokenizer.json, max_length: 40"
    for name, data in (("csv_tok", f"{{name: csv, params: {{path: reviews.csv, {tok}}}}}"),
                       ("text_tok", f"{{name: text, params: {{path: lines.txt, mode: classify, {tok}}}}}"),
                       ("text_bytes", "{name: text, params: {path: lines.txt, mode: classify, seq_len: 48}}")):
        cfg = f"{t}/{name}.yaml"
        data = data[:-1] + ", batch_size: 16, val_fraction: 0.2}"
        open(cfg, "w").write(f"""run: {{name: {name}, seed: 1, output_dir: {t}/runs}}
model: {model}
data: {data}
optimizer: {{name: adamw, lr: 0.003}}
trainer: {{max_steps: 12, log_every: 12, progress: lines, threads: 1}}
""")
        run = f"{t}/runs/{name}/0"
        if trainer("run", cfg).returncode:
            continue
        if name == "csv_tok":
            same_predictions(t, "csv, tokenized, CSV", cfg, run, "rv.csv", "rv_nolabel.csv", 1)
            same_predictions(t, "csv, tokenized, JSON Lines", cfg, run, "rv.jsonl", "rv_nolabel.jsonl", 1)
            p = trainer("eval", cfg, "--checkpoint", run, "data.val_params.path=rv_nolabel.csv", expect=1)
            check("rv_nolabel.csv: no column 'label'" in p.stdout, f"eval refuses a CSV without labels: {p.stdout.strip()[:140]}",
                  p.stdout)
            p = trainer("predict", cfg, "--checkpoint", run, "--output", f"{t}/x.csv", "data.val_params.path=rv_mixed.jsonl",
                        expect=1)
            check("rv_mixed.jsonl:2: key 'label'" in p.stdout, f"a label on a later line only: {p.stdout.strip()[:160]}",
                  p.stdout)
        else:
            same_predictions(t, f"text classify, {name[5:]}", cfg, run, "lv.txt", "lv_nolabel.txt", 1)
            p = trainer("eval", cfg, "--checkpoint", run, "data.val_params.path=lv_nolabel.txt", expect=1)
            check(p.returncode == 1 and "lv_nolabel.txt" in p.stdout, f"eval refuses text lines without labels: "
                  f"{p.stdout.strip()[:140]}", p.stdout)
    # text pairs (bytes): score<TAB>query<TAB>passage, and query<TAB>passage
    rng = random.Random(3)
    words = ["red apple", "green pear", "fast car", "slow boat", "old house", "new phone"]
    pairs = []
    for i in range(120):
        a, b = rng.choice(words), rng.choice(words)
        pairs.append((1.0 if a == b else 0.0, a, b if a != b else b + " indeed"))
    with open(f"{t}/pairs.txt", "w") as f:
        f.writelines(f"{s}\t{a}\t{b}\n" for s, a, b in pairs[:90])
    with open(f"{t}/pv.txt", "w") as f:
        f.writelines(f"{s}\t{a}\t{b}\n" for s, a, b in pairs[90:])
    with open(f"{t}/pv_noscore.txt", "w") as f:
        f.writelines(f"{a}\t{b}\n" for s, a, b in pairs[90:])
    cfg = f"{t}/pairs.yaml"
    open(cfg, "w").write(f"""run: {{name: pairs, seed: 1, output_dir: {t}/runs}}
model: {{name: transformer, params: {{mode: pairs, d_model: 16, n_head: 2, n_layer: 1, vocab: 256}}}}
data: {{name: text, params: {{path: pairs.txt, mode: pairs, seq_len: 16}}, batch_size: 16}}
trainer: {{max_steps: 6, log_every: 6, progress: lines, threads: 1}}
""")
    if trainer("run", cfg).returncode == 0:
        same_predictions(t, "text pairs, bytes", cfg, f"{t}/runs/pairs/0", "pv.txt", "pv_noscore.txt", 1)


def main():
    global BIN
    BIN = os.path.abspath(sys.argv[1])
    t = tempfile.mkdtemp(prefix="trainer-evalm-")
    try:
        os.chdir(t)
        classification(t)
        regression(t)
        texts(t)
    finally:
        os.chdir("/")
        shutil.rmtree(t, ignore_errors=True)
    print(f"{passes} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
