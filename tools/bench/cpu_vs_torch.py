#!/usr/bin/env python3
"""CPU training throughput, trainer beside PyTorch in one run (issue 12).

    tools/bench/cpu_vs_torch.py [--build DIR] [--reps N] [--threads 1,2] [--only W,...] [--quick]
                                [--peer pypi|debian]

The peer is the current PyTorch from PyPI (pinned in tools/bench/peer_requirements.txt, in
the venv tools/bench/peer_venv.py makes once: MKL, oneDNN); --peer debian takes Debian's
python3-torch (OpenBLAS) instead.

For each workload (MLP 784-512-512-10 at batch 128 and 8, FashionCNN at 128, a transformer
encoder classifier and a GPT-style LM of 4 layers, d_model 256, 4 heads, FFN 1024, 128 tokens,
at batch 32 and 16; AdamW everywhere, dropout as the models define it) and each thread count:

  1. the same data files for both sides (`torch_peer.py data`), loaded whole into memory;
  2. the same initial weights: trainer's weights after one step at lr 1e-12 (no weight moves
     by more than 1e-12), read by torch from the checkpoint's model.safetensors;
  3. a loss check: 5 steps with dropout off and batches in file order on both sides; the
     loss curves must agree (relative 1e-4) or the run stops, so neither side skips work;
  4. throughput: `trainer run` (cpu strategy, trainer.threads=T, loading on the training
     thread, no validation: torch's loop has none) and torch_peer.py (torch.set_num_threads(T)) pinned to the same T cores with
     taskset, interleaved, REPS times each; a run's figure is the median of its timed windows
     (trainer: the windows it logs, the first left out as warm-up; torch: after two warm-up
     windows), the table shows the median over the runs;
  5. GFLOP/s of the GEMM-shaped work (torch_peer.py flops) against OpenBLAS's sgemm rate
     measured on the same cores in the same run (bench_core --sgemm), and against the cores'
     multiply-add peak measured there too (bench_core --peak): where OpenBLAS has no kernel for
     the CPU's widest vectors the sgemm rate is well below the peak, and trainer's own GEMM
     runs above it.

Prints a markdown table (docs/benchmarks.md keeps the latest). Exit 1 when a loss check fails
or a run fails; a missed speed target is reported, never an error.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

from trainer_runs import read_run, run, worst_relative

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(ROOT, "tools", "bench", "torch_peer.py")
DEBIAN_PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PY = DEBIAN_PY  # the peer's python: set in main() by --peer

# workload: (label, steps per timed window, timed windows, target ratio: issue 49's 1.5x for every
# workload, the MLP at batch 8 and the CNN keeping their earlier, higher ones)
WORKLOADS = {
    "mlp128": ("MLP 784-512-512-10, batch 128", 100, 6, 1.5),
    "mlp8": ("MLP 784-512-512-10, batch 8", 500, 6, 4.0),
    "cnn": ("FashionCNN, batch 128", 10, 6, 2.0),
    "encoder": ("transformer encoder classifier, batch 32", 2, 5, 1.5),
    "gpt": ("GPT-style LM, batch 16", 4, 5, 1.5),
}
CHECK_STEPS = 5
CHECK_RTOL = 1e-4


def data_overrides(w, data):
    if w in ("mlp128", "mlp8", "cnn"):
        return [f"data.params.images={data}/images", f"data.params.labels={data}/labels",
                f"data.val_params.images={data}/images", f"data.val_params.labels={data}/labels"]
    return [f"data.params.path={data}/{'classify.tsv' if w == 'encoder' else 'lm.txt'}"]


class Bench:
    def __init__(self, args, tmp):
        self.bin = os.path.join(args.build, "bin", "trainer")
        self.core = os.path.join(args.build, "bin", "bench_core")
        self.tmp = tmp
        self.data = os.path.join(tmp, "data")
        self.quick = args.quick
        self.n = 0

    def trainer(self, w, extra, cores=None):
        self.n += 1
        out = os.path.join(self.tmp, f"run{self.n}")
        cmd = (["taskset", "-c", cores] if cores else []) + [
            self.bin, "run", os.path.join(ROOT, "tools", "bench", "configs", f"vs_torch_{w}.yaml"),
            f"run.output_dir={out}", "data.workers=0", "trainer.max_epochs=100000"] + data_overrides(w, self.data) + extra
        run(cmd, f"trainer {w}")
        return read_run(out)

    def init_weights(self, w):
        _, ck = self.trainer(w, ["optimizer.lr=1e-12", "trainer.max_steps=1"])
        return os.path.join(ck, "model.safetensors")

    def check(self, w, weights):
        rows, _ = self.trainer(w, [f"trainer.max_steps={CHECK_STEPS}", "trainer.log_every=1", "data.shuffle=false",
                                   "model.params.dropout=0"])
        ours = [r["loss"] for r in rows]
        theirs = [float(v) for v in run([PY, PEER, "check", w, self.data, weights, str(CHECK_STEPS)], f"torch check {w}").split()]
        worst = worst_relative(ours, theirs, CHECK_STEPS)
        if not worst <= CHECK_RTOL:
            sys.exit(f"cpu_vs_torch: {w}: the loss curves differ (worst relative {worst:.2e}):\n"
                     f"  trainer {ours}\n  torch   {theirs}")
        return worst

    def time_ours(self, w, threads, cores):
        _, per, windows, _ = WORKLOADS[w]
        if self.quick:
            windows = 3
        rows, _ = self.trainer(w, [f"trainer.threads={threads}", f"trainer.max_steps={per * (windows + 1)}",
                                   f"trainer.log_every={per}"], cores)
        return statistics.median(r["samples_per_sec"] for r in rows[1:])

    def time_torch(self, w, weights, threads, cores):
        _, per, windows, _ = WORKLOADS[w]
        if self.quick:
            windows = 3
        out = run(["taskset", "-c", cores, PY, PEER, "time", w, self.data, weights, str(threads), str(windows), str(per)],
                  f"torch {w}")
        return statistics.median(float(v) for v in out.split())

    def rate(self, flag, threads, cores):
        """bench_core --sgemm or --peak on the given cores: one number, GFLOP/s."""
        return float(run(["taskset", "-c", cores, self.core, "--threads", str(threads), flag], f"bench_core {flag}"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="3 windows per run")
    ap.add_argument("--peer", choices=["pypi", "debian"], default="pypi",
                    help="pypi: the current PyTorch from PyPI (tools/bench/peer_venv.py, made once); "
                         "debian: Debian's python3-torch")
    args = ap.parse_args()
    global PY
    if args.peer == "pypi":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import peer_venv
        try:
            PY = peer_venv.ensure(DEBIAN_PY)
        except (peer_venv.oracle_venv.Unreachable, peer_venv.oracle_venv.Failed) as e:
            sys.exit(f"cpu_vs_torch: the PyTorch peer from PyPI: {e} (--peer debian uses Debian's torch)")
    cpus = sorted(os.sched_getaffinity(0))
    threads = [int(t) for t in args.threads.split(",")]
    if max(threads) > len(cpus):
        sys.exit(f"cpu_vs_torch: {max(threads)} threads asked, {len(cpus)} cores available")
    works = args.only.split(",")
    for w in works:
        if w not in WORKLOADS:
            sys.exit(f"cpu_vs_torch: unknown workload {w!r} (known: {', '.join(WORKLOADS)})")
    tmp = tempfile.mkdtemp(prefix="vs-torch-")
    try:
        b = Bench(args, tmp)
        run([PY, PEER, "data", b.data], "torch_peer.py data")
        torch_version = run([PY, "-c", "import torch; print(torch.__version__)"], "torch version").strip()
        print(f"trainer vs PyTorch {torch_version}, cores {cpus}, {args.reps} runs each, median\n")
        rows = []
        weights, worst = {}, {}
        for w in works:
            weights[w] = b.init_weights(w)
            worst[w] = b.check(w, weights[w])
            print(f"loss check {w}: {CHECK_STEPS} steps, worst relative difference {worst[w]:.1e}", flush=True)
        for t in threads:
            cores = ",".join(str(c) for c in cpus[:t])
            peak, fma = b.rate("--sgemm", t, cores), b.rate("--peak", t, cores)
            print(f"\n{t} thread(s) on cores {cores}: sgemm {peak:.1f} GFLOP/s, multiply-add peak {fma:.1f} GFLOP/s",
                  flush=True)
            for w in works:
                ours, theirs = [], []
                for _ in range(args.reps):
                    ours.append(b.time_ours(w, t, cores))
                    theirs.append(b.time_torch(w, weights[w], t, cores))
                o, p = statistics.median(ours), statistics.median(theirs)
                fl = float(run([PY, PEER, "flops", w], "flops"))
                rows.append((w, t, o, p, fl, peak, fma))
                print(f"  {w:8s} trainer {o:10.1f}  torch {p:10.1f}  ratio {o / p:5.2f}  "
                      f"(runs: {' '.join(f'{v:.0f}' for v in ours)} | {' '.join(f'{v:.0f}' for v in theirs)})", flush=True)
        print("\n| workload | threads | trainer samples/s | torch samples/s | ratio | target "
              "| trainer GFLOP/s (% of sgemm, % of peak) | torch GFLOP/s (% of sgemm, % of peak) |")
        print("|---|---|---|---|---|---|---|---|")

        def gflops(samples, fl, peak, fma):
            g = samples * fl / 1e9
            return f"{g:.1f} ({100 * g / peak:.0f}%, {100 * g / fma:.0f}%)"

        for w, t, o, p, fl, peak, fma in rows:
            label, _, _, target = WORKLOADS[w]
            met = "met" if o / p >= target else "**missed**"
            print(f"| {label} | {t} | {o:,.0f} | {p:,.0f} | **{o / p:.2f}x** | {target}x: {met} | "
                  f"{gflops(o, fl, peak, fma)} | {gflops(p, fl, peak, fma)} |")
        print("\nsgemm rates: " + ", ".join(sorted({f'{t} thread(s) {peak:.1f} GFLOP/s' for _, t, _, _, _, peak, _ in rows})))
        print("multiply-add peaks: " + ", ".join(sorted({f'{t} thread(s) {fma:.1f} GFLOP/s' for _, t, _, _, _, _, fma in rows})))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
