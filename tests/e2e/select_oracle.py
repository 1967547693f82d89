"""Oracles for e2e_ckpt_select (ckpt_select.sh), computed from a run's metrics.jsonl and its
checkpoint files independently of the trainer's own code.

    select_oracle.py topk METRICS METRIC MODE K          prints the best step, then the top k's steps (sorted)
    select_oracle.py stop METRICS METRIC MODE PATIENCE MIN_DELTA
                                                         prints the step early stopping ends the run at ("none")
                                                         and the step of the best it kept
    select_oracle.py adam_step BEFORE AFTER LR           exit 0 when AFTER's weights are one fresh Adam step from
                                                         BEFORE's (no weight decay): every element moved by LR, or
                                                         not at all (a zero gradient)
    select_oracle.py add_tensor IN OUT NAME              OUT: IN (a .safetensors file) with one more tensor NAME

A validation record is the last one of its step (a resumed run writes the steps after its
checkpoint again; an epoch's end and every n steps can validate at one step)."""
import json
import struct
import sys

import numpy as np

from compare_runs import checkpoint_weights


def validations(path, metric):
    by_step = {}
    for line in open(path):
        r = json.loads(line)
        if metric in r:
            by_step[r["step"]] = r[metric]
    return sorted(by_step.items())


def better(mode, a, b, delta=0.0):
    return a < b - delta if mode == "min" else a > b + delta


def topk(path, metric, mode, k):
    vals = validations(path, metric)
    # ModelCheckpoint's order: the better value first; among equal values the earlier step.
    ranked = sorted(vals, key=lambda sv: (sv[1] if mode == "min" else -sv[1], sv[0]))
    top = ranked if k < 0 else ranked[:k]
    print(top[0][0], *sorted(s for s, _ in top))


def stop(path, metric, mode, patience, min_delta):
    best, best_step, wait = None, None, 0
    for step, v in validations(path, metric):
        if best is None or better(mode, v, best, min_delta):
            best, best_step, wait = v, step, 0
        else:
            wait += 1
            if wait >= patience:
                print(step, best_step)
                return
    print("none", best_step)


def adam_step(before, after, lr):
    a, b = checkpoint_weights(before), checkpoint_weights(after)
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    d = np.abs(np.concatenate([(b[k].astype(np.float64) - a[k]).ravel() for k in sorted(a)]))
    moved = d > lr / 2
    # Adam's first step is lr * g / (|g| + eps): lr, but for gradients within a few orders of
    # eps (float32 weights add ~1e-7 of rounding). A restored optimizer state (bias
    # corrections past step 1, moments of other gradients) gives steps of many sizes.
    err = np.abs(d[moved] - lr) if moved.any() else np.array([np.inf])
    print(f"{moved.sum()} of {d.size} elements moved, by lr within {err.max():.2e} ({np.median(err):.1e} the median); "
          f"{(~moved).sum()} by at most {d[~moved].max() if (~moved).any() else 0:.2e}")
    sys.exit(0 if moved.mean() > 0.5 and err.max() < lr * 1e-2 and np.median(err) < lr * 1e-4 and
             (d[~moved] < lr * 1e-3).all() else 1)


def add_tensor(src, dst, name):
    b = open(src, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    end = max(e["data_offsets"][1] for k, e in h.items() if k != "__metadata__")
    h[name] = {"dtype": "F32", "shape": [2], "data_offsets": [end, end + 8]}
    head = json.dumps(h).encode()
    head += b" " * (-len(head) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(head)) + head + b[8 + n:8 + n + end] + np.zeros(2, np.float32).tobytes())


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "topk":
        topk(args[0], args[1], args[2], int(args[3]))
    elif cmd == "stop":
        stop(args[0], args[1], args[2], int(args[3]), float(args[4]))
    elif cmd == "adam_step":
        adam_step(args[0], args[1], float(args[2]))
    elif cmd == "add_tensor":
        add_tensor(args[0], args[1], args[2])
    else:
        sys.exit(f"unknown command {cmd}")
