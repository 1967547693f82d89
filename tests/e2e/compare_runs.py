"""Compares two training runs (run directories): the final weights (relative L2 over every
parameter and buffer), the loss at every logged step and the validation metrics.

    compare_runs.py RUN_A RUN_B [--tol 1e-5] [--weights-only | --losses-only]
                                                  exit 0 when all three (or the weights, or the
                                                  logged losses: the loss curve) are within tol
    (a RUN may also be a .safetensors file: its weights, with --weights-only)
    compare_runs.py --weights CHECKPOINT_OR_FILE  prints name, shape, sum of each tensor

A checkpoint may be full (model.safetensors) or sharded (index.json + one shard file per
rank): the sharded one is assembled here from its pieces, independently of the trainer's own
reader, so the tests check the format itself."""
import glob
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    out = {}
    for name, e in h.items():
        assert e["dtype"] == "F32", (path, name, e["dtype"])
        lo, hi = e["data_offsets"]
        out[name] = np.frombuffer(b[8 + n + lo: 8 + n + hi], dtype=np.float32).reshape(e["shape"])
    return out, meta


def checkpoint_weights(ck):
    """name -> array for a checkpoint directory (full or sharded) or a .safetensors file."""
    if ck.endswith(".safetensors"):
        return read_safetensors(ck)[0]
    if not os.path.exists(f"{ck}/index.json"):
        return read_safetensors(f"{ck}/model.safetensors")[0]
    ix = json.load(open(f"{ck}/index.json"))
    assert ix["format"] == "trainer-sharded" and len(ix["files"]) == ix["world"], ix
    flat = {p["name"]: np.full(int(np.prod(p["shape"])), np.nan, dtype=np.float32) for p in ix["params"]}
    out = {}
    for r, f in enumerate(ix["files"]):
        tensors, meta = read_safetensors(f"{ck}/{f}")
        assert meta["trainer_kind"] == "shard" and int(meta["rank"]) == r, meta
        for name, start in json.loads(meta["starts"]).items():
            piece = tensors[name]
            assert np.isnan(flat[name][start:start + piece.size]).all(), f"{name}: pieces overlap"
            flat[name][start:start + piece.size] = piece
        if r == 0:
            out.update({b["name"]: tensors[b["name"]] for b in ix["buffers"]})
    for p in ix["params"]:
        assert not np.isnan(flat[p["name"]]).any(), f"{p['name']}: not every element is in a shard"
        out[p["name"]] = flat[p["name"]].reshape(p["shape"])
    return out


def last_checkpoint(run):
    return sorted(glob.glob(run + "/checkpoints/step-*"))[-1]


def flat_weights(w):
    return np.concatenate([w[k].ravel() for k in sorted(w)])


def losses(run):
    """Logged window losses; null (a window of steps left out by trainer.on_nan: skip) as NaN."""
    return np.array([np.nan if r["loss"] is None else r["loss"] for r in map(json.loads, open(run + "/metrics.jsonl"))
                     if "loss" in r], dtype=np.float64)


def val(run):
    return [(r["val_loss"], r.get("val_accuracy", -1)) for r in map(json.loads, open(run + "/metrics.jsonl"))
            if "val_loss" in r]


def main():
    if sys.argv[1] == "--weights":
        for k, v in sorted(checkpoint_weights(sys.argv[2]).items()):
            print(k, v.shape, float(v.sum()))
        return 0
    a, b = sys.argv[1], sys.argv[2]
    ck = lambda run: run if run.endswith(".safetensors") else last_checkpoint(run)
    tol = float(sys.argv[sys.argv.index("--tol") + 1]) if "--tol" in sys.argv else 1e-5
    wa, wb = checkpoint_weights(ck(a)), checkpoint_weights(ck(b))
    assert sorted(wa) == sorted(wb), (sorted(wa), sorted(wb))
    fa, fb = flat_weights(wa), flat_weights(wb)
    rel = float(np.linalg.norm(fa - fb) / np.linalg.norm(fa))
    if "--weights-only" in sys.argv:
        print(f"weights rel L2 {rel:.2e}")
        return 0 if rel <= tol else 1
    la, lb = losses(a), losses(b)
    same_gaps = len(la) == len(lb) and bool(np.all(np.isnan(la) == np.isnan(lb)))
    dl = float(np.nanmax(np.abs(la - lb))) if same_gaps and not np.all(np.isnan(la)) else float("inf")
    va, vb = val(a), val(b)
    dv = max(abs(x[0] - y[0]) + abs(x[1] - y[1]) for x, y in zip(va, vb)) if len(va) == len(vb) and va else float("inf")
    print(f"weights rel L2 {rel:.2e}, max loss diff {dl:.2e} over {len(la)} steps, validation diff {dv:.2e}")
    if "--losses-only" in sys.argv:
        return 0 if dl <= tol else 1
    return 0 if rel <= tol and dl <= tol and dv <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
