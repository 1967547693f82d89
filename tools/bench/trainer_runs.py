"""What the side-by-side benchmarks (cpu_vs_torch.py, gpu_vs_torch.py) share: running a command,
reading a `trainer run`'s step records and last checkpoint, and comparing two loss curves."""
import json
import os
import subprocess
import sys


def run(cmd, what, env=None):
    """cmd's stdout; exits naming the script, what and the output's tail when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {what} failed (exit {r.returncode}): {' '.join(cmd)}\n"
                 f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def read_run(out):
    """The step records (samples/s, tokens/s, loss) of the one run under run.output_dir `out`,
    and its last checkpoint's folder."""
    (name,) = os.listdir(out)
    rows = [json.loads(l) for l in open(os.path.join(out, name, "0", "metrics.jsonl"))]
    ck = os.path.join(out, name, "0", "checkpoints")
    return [r for r in rows if "samples_per_sec" in r], os.path.join(ck, sorted(os.listdir(ck))[-1])


def worst_relative(ours, theirs, steps):
    """The largest relative difference between two loss curves of `steps` values; infinity
    when either has another length."""
    if len(ours) != steps or len(theirs) != steps:
        return float("inf")
    return max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, theirs))
