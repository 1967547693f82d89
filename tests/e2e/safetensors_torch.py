"""PyTorch reads what `trainer` writes: a checkpoint's safetensors files load into a torch MLP
(through the `safetensors` package when installed, else a reader of the published format) and
reproduce `trainer predict`'s outputs, for a classifier (its class, confidence and per-class
probabilities: torch.softmax of the logits) and for a regressor on CSV data.

usage: safetensors_torch.py TRAINER_BIN      (exit 0 when every check passes)
"""
import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64}


def read_safetensors(path):
    """Tensors and metadata of a .safetensors file, checked against the format's rules."""
    try:
        from safetensors.torch import load_file  # the real package, when present
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
        return load_file(path), meta
    except ImportError:
        pass
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert 8 + n <= len(blob), f"{path}: header length {n} past the end"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors, end = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, f = e["data_offsets"]
        assert b == end, f"{path}: {name} leaves a gap or overlaps ({b} != {end})"
        dt = DTYPES[e["dtype"]]
        count = int(np.prod(e["shape"])) if e["shape"] else 1
        assert f - b == count * torch.tensor([], dtype=dt).element_size(), f"{path}: {name} size"
        tensors[name] = torch.frombuffer(bytearray(data[b:f]), dtype=dt).reshape(e["shape"])
        end = f
    assert end == len(data), f"{path}: {len(data) - end} bytes after the last tensor"
    return tensors, meta


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)}\n{r.stdout}{r.stderr}")
    return r.stdout


def write_csv(path, x, y, regress):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"f{i}" for i in range(x.shape[1])] + ["label"])
        for xi, yi in zip(x, y):
            w.writerow([f"{v:.6f}" for v in xi] + [f"{yi:.6f}" if regress else int(yi)])


def check(binary, tmp, regress):
    kind = "regression" if regress else "classification"
    rng = np.random.default_rng(7)
    x = rng.normal(size=(600, 6)).astype(np.float32)
    w = rng.normal(size=(6, 3)).astype(np.float32)
    y = (x @ w)[:, 0] + 0.1 * rng.normal(size=600) if regress else np.argmax(x @ w, axis=1)
    write_csv(f"{tmp}/train.csv", x[:500], y[:500], regress)
    write_csv(f"{tmp}/val.csv", x[500:], y[500:], regress)
    cfg = f"{tmp}/cfg.yaml"
    with open(cfg, "w") as f:
        f.write(f"""run: {{name: interop, output_dir: {tmp}/runs}}
model: {{name: mlp, params: {{layers: [16, 8], activation: tanh}}}}
data:
  name: csv
  params: {{path: train.csv, val_path: val.csv, normalize: none, task: {'regress' if regress else 'classify'}}}
  batch_size: 50
optimizer: {{name: adamw, lr: 0.01}}
trainer: {{max_epochs: 3, log_every: 1000, progress: lines}}
""")
    run(binary, "run", cfg)
    ckpt = sorted(os.listdir(f"{tmp}/runs/interop/0/checkpoints"))[-1]
    cdir = f"{tmp}/runs/interop/0/checkpoints/{ckpt}"
    run(binary, "predict", cfg, "--checkpoint", cdir, "--output", f"{tmp}/preds.csv")

    params, meta = read_safetensors(f"{cdir}/model.safetensors")
    names = sorted(params)
    assert names == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "fc3.bias", "fc3.weight"], names
    assert params["fc1.weight"].shape == (16, 6) and params["fc3.weight"].shape == ((1 if regress else 3), 8)
    opt, ometa = read_safetensors(f"{cdir}/optimizer.safetensors")
    # One state tensor per parameter and moment, in the parameter's shape (torch's state_dict).
    assert set(opt) == {f"{p}.{k}" for p in params for k in ("exp_avg", "exp_avg_sq")}, sorted(opt)
    assert all(opt[f"{p}.exp_avg"].shape == params[p].shape for p in params)
    assert all(bool((opt[f"{p}.exp_avg_sq"] >= 0).all()) for p in params)
    assert ometa.get("steps") == "30", ometa  # 3 epochs of 10 batches
    state = json.load(open(f"{cdir}/state.json"))
    assert state["step"] == 30 and state["model"] == "mlp", state

    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 8), torch.nn.Tanh(),
                              torch.nn.Linear(8, 1 if regress else 3))
    net.load_state_dict({k.replace("fc1", "0").replace("fc2", "2").replace("fc3", "4"): v for k, v in params.items()})
    # The features exactly as the CSV holds them.
    xv = torch.tensor([[float(f"{v:.6f}") for v in row] for row in x[500:]], dtype=torch.float32)
    with torch.no_grad():
        out = net(xv)
    rows = list(csv.DictReader(open(f"{tmp}/preds.csv")))
    assert len(rows) == 100 and [int(r["index"]) for r in rows] == list(range(100))
    if regress:
        got = torch.tensor([float(r["prediction_0"]) for r in rows])
        err = (got - out[:, 0]).abs().max().item()
        assert err < 1e-5, f"regression outputs differ by {err}"
        labels = torch.tensor([float(r["label_0"]) for r in rows])
        assert (labels - torch.tensor(y[500:], dtype=torch.float32)).abs().max() < 1e-5
    else:
        header = next(csv.reader(open(f"{tmp}/preds.csv")))
        assert header == ["index", "label", "prediction", "confidence", "prob_0", "prob_1", "prob_2"], header
        prob = torch.softmax(out.double(), dim=1)
        conf, pred = prob.max(dim=1)
        got_pred = torch.tensor([int(r["prediction"]) for r in rows])
        got_conf = torch.tensor([float(r["confidence"]) for r in rows], dtype=torch.float64)
        got_prob = torch.tensor([[float(r[f"prob_{c}"]) for c in range(3)] for r in rows], dtype=torch.float64)
        err = (got_conf - conf).abs().max().item()
        assert err < 1e-5, f"confidences differ by {err}"
        err_p = (got_prob - prob).abs().max().item()
        assert err_p < 1e-5, f"class probabilities differ from torch.softmax of the logits by {err_p}"
        sums = (got_prob.sum(1) - 1).abs().max().item()
        assert sums < 1e-6, f"class probabilities sum to 1 within {sums}"
        assert bool((got_prob.argmax(1) == got_pred).all()), "the most probable class is not the prediction"
        assert (got_prob.max(1).values - got_conf).abs().max().item() < 1e-7, "confidence is not the top probability"
        assert bool((got_pred == pred).all()), "predicted classes differ"
        assert [int(r["label"]) for r in rows] == [int(v) for v in y[500:]]
        print(f"ok   classification: prob_0..prob_2 equal torch.softmax of the torch forward's logits within "
              f"{err_p:.2g}; rows sum to 1 within {sums:.2g}; their argmax is the prediction")
    print(f"ok   {kind}: PyTorch loads the checkpoint ({len(params)} tensors, optimizer steps {ometa['steps']}) "
          f"and matches trainer predict within {err:.2g}")


def main():
    binary = sys.argv[1]
    for regress in (False, True):
        tmp = tempfile.mkdtemp(prefix="trainer-interop-")
        try:
            check(binary, tmp, regress)
        finally:
            shutil.rmtree(tmp)
    print("2 passed, 0 failed")


if __name__ == "__main__":
    main()
