#!/usr/bin/env python3
"""trainer.precision bf16-mixed on the CPU against trainer's fp32 and PyTorch's CPU autocast.

    tools/bench/bf16_cpu.py [--build DIR] [--reps N] [--threads T] [--only encoder,gpt] [--quick]

For the transformer encoder classifier and the GPT-style LM of cpu_vs_torch.py (same data,
configs, initial weights and timed windows), on T cores (default 1) pinned with taskset:
trainer fp32, trainer bf16-mixed with its default kernel for the CPU and with the vdpbf16ps one
(TRAINER_CPU_BF16_KERNEL=dpbf16; kernels/gemm_bf16.c), and the current PyTorch from PyPI
(tools/bench/peer_venv.py) in fp32 and under torch.autocast("cpu", dtype=torch.bfloat16)
(torch_peer.py --bf16), the five interleaved, REPS times each; each figure is the median over the runs of the median window.
First a loss check: trainer bf16-mixed and torch's autocast over 5 steps from the same weights,
dropout off, within 3e-2 (the bound of the GPU bf16-mixed tests), or the run stops.

Targets (issue 49): bf16-mixed at least 1.6x trainer's own fp32 and 1.3x torch's autocast.
A missed target is reported, never an error. Needs a CPU with AVX512-BF16.
"""
import argparse
import os
import statistics
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cpu_vs_torch import PEER, PY, WORKLOADS, Bench  # noqa: E402
from trainer_runs import run  # noqa: E402
import peer_venv  # noqa: E402

CHECK_STEPS = 5
CHECK_TOL = 3e-2
TARGET_FP32, TARGET_TORCH = 1.6, 1.3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="encoder,gpt")
    ap.add_argument("--quick", action="store_true", help="3 windows per run")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    cores = ",".join(str(c) for c in cpus[:args.threads])
    peer = peer_venv.ensure(sys.executable)
    tmp = tempfile.mkdtemp(prefix="bf16-cpu-")
    try:
        b = Bench(args, tmp)
        run([PY, PEER, "data", b.data], "torch_peer.py data")
        version = run([peer, "-c", "import torch; print(torch.__version__)"], "torch version").strip()
        print(f"trainer vs PyTorch {version} (peer venv), {args.threads} thread(s) on cores {cores}, "
              f"{args.reps} runs each, median\n")
        rows = []
        for w in args.only.split(","):
            weights = b.init_weights(w)
            ours, _ = b.trainer(w, [f"trainer.max_steps={CHECK_STEPS}", "trainer.log_every=1", "data.shuffle=false",
                                    "model.params.dropout=0", "trainer.precision=bf16-mixed"])
            ours = [r["loss"] for r in ours]
            theirs = [float(v) for v in run([peer, PEER, "check", w, b.data, weights, str(CHECK_STEPS), "--bf16"],
                                            f"torch check {w}").split()]
            worst = max(abs(a - c) for a, c in zip(ours, theirs)) if len(ours) == len(theirs) else float("inf")
            if not worst <= CHECK_TOL:
                sys.exit(f"bf16_cpu: {w}: bf16-mixed and torch's autocast differ by {worst:.2e}:\n"
                         f"  trainer {ours}\n  torch   {theirs}")
            print(f"loss check {w}: bf16-mixed vs torch autocast over {CHECK_STEPS} steps, max difference {worst:.1e}",
                  flush=True)
            _, per, windows, _ = WORKLOADS[w]
            if args.quick:
                windows = 3
            t32, t16, tdp, p32, p16 = [], [], [], [], []
            for _ in range(args.reps):
                t32.append(b.time_ours(w, args.threads, cores))
                t16.append(ours_bf16(b, w, args.threads, cores))
                tdp.append(ours_bf16(b, w, args.threads, cores, "dpbf16"))
                for extra, out in (([], p32), (["--bf16"], p16)):
                    o = run(["taskset", "-c", cores, peer, PEER, "time", w, b.data, weights, str(args.threads),
                             str(windows), str(per)] + extra, f"torch {w}")
                    out.append(statistics.median(float(v) for v in o.split()))
                print(f"  {w}: trainer fp32 {t32[-1]:.1f}, bf16 {t16[-1]:.1f}, bf16 vdpbf16ps {tdp[-1]:.1f}; "
                      f"torch fp32 {p32[-1]:.1f}, autocast {p16[-1]:.1f} samples/s", flush=True)
            rows.append((w, *(statistics.median(v) for v in (t32, t16, tdp, p32, p16))))
        print(f"\ntrainer's default bf16 kernel here: {kernel_name(b, args.only.split(',')[0])}")
        print("\n| workload | trainer fp32 | trainer bf16-mixed | (vdpbf16ps kernel) | torch fp32 | torch autocast bf16 "
              "| bf16 / fp32 (target 1.6x) | bf16 / torch autocast (target 1.3x) | vdpbf16ps: / fp32, / autocast |")
        print("|---|---|---|---|---|---|---|---|---|")
        for w, t32, t16, tdp, p32, p16 in rows:
            def verdict(r, target):
                return f"**{r:.2f}x** {'met' if r >= target else 'missed'}"
            print(f"| {WORKLOADS[w][0]} | {t32:.1f} | {t16:.1f} | {tdp:.1f} | {p32:.1f} | {p16:.1f} | "
                  f"{verdict(t16 / t32, TARGET_FP32)} | {verdict(t16 / p16, TARGET_TORCH)} | "
                  f"{tdp / t32:.2f}x, {tdp / p16:.2f}x |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ours_bf16(b, w, threads, cores, kernel=None):
    """Bench.time_ours with trainer.precision bf16-mixed (and TRAINER_CPU_BF16_KERNEL=kernel)."""
    _, per, windows, _ = WORKLOADS[w]
    if b.quick:
        windows = 3
    if kernel:
        os.environ["TRAINER_CPU_BF16_KERNEL"] = kernel
    try:
        rows, _ = b.trainer(w, [f"trainer.threads={threads}", f"trainer.max_steps={per * (windows + 1)}",
                                f"trainer.log_every={per}", "trainer.precision=bf16-mixed"], cores)
    finally:
        os.environ.pop("TRAINER_CPU_BF16_KERNEL", None)
    return statistics.median(r["samples_per_sec"] for r in rows[1:])


def kernel_name(b, w):
    """The bf16 GEMM kernel a bf16-mixed run on the CPU names in its log ("kernel: NAME")."""
    import glob
    import re
    b.trainer(w, ["trainer.precision=bf16-mixed", "trainer.max_steps=1"])
    logs = sorted(glob.glob(os.path.join(b.tmp, f"run{b.n}", "*", "0", "log.txt")))
    text = open(logs[-1]).read() if logs else ""
    m = re.search(r"bf16 GEMM kernel: (\w+)", text)
    return m.group(1) if m else "unknown (not in the run's log)"


if __name__ == "__main__":
    main()
