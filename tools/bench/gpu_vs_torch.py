#!/usr/bin/env python3
"""GPU training throughput of a GPT-style LM, trainer beside PyTorch eager on one GPU (issue 8).

    tools/bench/gpu_vs_torch.py [--build DIR] [--size gpt2|small] [--precision bf16-mixed|fp32]
                                [--reps N] [--windows N] [--steps N] [--peak-tflops T]

The model is the transformer plugin in mode lm (pre-LN, causal, tied embeddings, byte
vocabulary, GELU, dropout 0.1), AdamW (lr 1e-3, weight decay 0.01), on random bytes:
  gpt2:  12 layers, d_model 768, 12 heads, FFN 3072, 1024 tokens, batch 8 (GPT-2 small's body)
  small: 4 layers, d_model 256, 4 heads, FFN 1024, 128 tokens, batch 16 (cpu_vs_torch's LM)
  tiny:  2 layers, d_model 64, 2 heads, FFN 256, 32 tokens, batch 4: a smoke test of this
         script where no GPU is, with trainer on the CUDA emulator and torch on the CPU:
         TRAINER_PLUGIN_PATH=build/test_plugins/cuda_emu TRAINER_CUDA_EMU_GPUS=1
         GPU_VS_TORCH_DEVICE=cpu tools/bench/gpu_vs_torch.py --size tiny --precision fp32

  1. The same data file for both sides, and the same initial weights: trainer's after one
     step at lr 1e-12, read by torch from the checkpoint's model.safetensors.
  2. A loss check in fp32 (TF32 off on the torch side; trainer's fp32 GEMMs are plain
     cuBLAS sgemm): 5 steps with dropout off, batches in file order. The curves must agree
     to 1e-3 relative, or the run stops: neither side skips work.
  3. Throughput in --precision: `trainer run` (strategy single-gpu) and torch_peer's model on
     the GPU (bf16-mixed: torch.autocast(bfloat16) around forward and loss, fp32 weights and
     AdamW state, as trainer's bf16-mixed). Torch fetches the loss every step (loss.item()),
     as trainer's loop does. Torch runs twice: with the attention scores written out (the
     math trainer's attention op does) and with F.scaled_dot_product_attention (its fused
     kernels: torch eager at its best; torch 2.0 and later). A run's figure is the median of its timed windows
     (trainer: the windows it logs, the first left out; torch: after two warm-up windows); the
     table has the median of --reps runs, interleaved.
  4. MFU: GEMM-shaped FLOPs per token (torch_peer.transformer_flops: forward 2 per
     multiply-add, backward 4, causal attention only the scores it needs) times tokens/s, over
     the GPU's dense peak for the precision (H100/H200 SXM: 989 TFLOP/s bf16, 67 fp32; the
     name from nvidia-smi, --peak-tflops otherwise).

Prints a markdown table for docs/benchmarks.md. Exit 1 when a run or the loss check fails;
exit 77 without a GPU or without the trainer's cuda plugin seeing one. Where torch has no CUDA
(Debian's build on a GPU machine), trainer's side runs alone: the loss check against torch on
the CPU, then trainer's tokens/s and MFU, no ratio. A missed target (at least torch eager's tokens/s) is reported, never an error.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from trainer_runs import read_run, run, worst_relative

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# size: (layers, d_model, heads, ffn, tokens, batch)
SIZES = {"gpt2": (12, 768, 12, 3072, 1024, 8), "small": (4, 256, 4, 1024, 128, 16), "tiny": (2, 64, 2, 256, 32, 4)}
# dense peak TFLOP/s by (name fragment, precision)
PEAKS = {("H200", "bf16-mixed"): 989.0, ("H200", "fp32"): 67.0, ("H100", "bf16-mixed"): 989.0,
         ("H100", "fp32"): 67.0, ("A100", "bf16-mixed"): 312.0, ("A100", "fp32"): 19.5}
CHECK_STEPS = 5
CHECK_RTOL = 1e-3
SAMPLES = 1024  # LM samples in the data file


def gpu_name():
    """GPU 0's name from nvidia-smi ("" where it cannot say)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
        return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else "a GPU"
    except (OSError, subprocess.SubprocessError):
        return "a GPU"


def skip(why):
    print(f"gpu_vs_torch: skipped: {why}")
    sys.exit(77)


class Bench:
    def __init__(self, args, tmp):
        self.bin = os.path.join(args.build, "bin", "trainer")
        self.tmp = tmp
        self.n = 0
        self.layers, self.d, self.heads, self.ffn, self.T, self.batch = SIZES[args.size]
        self.data = os.path.join(tmp, "data")  # lm.txt in it, as torch_peer.load_data reads it
        os.makedirs(self.data)
        with open(os.path.join(self.data, "lm.txt"), "wb") as f:
            f.write(os.urandom(SAMPLES * self.T + 1))
        self.config = os.path.join(tmp, "gpt.yaml")
        with open(self.config, "w") as f:
            f.write(f"run: {{name: gpu_vs_torch, seed: 1}}\n"
                    f"model: {{name: transformer, params: {{mode: lm, d_model: {self.d}, n_head: {self.heads}, "
                    f"n_layer: {self.layers}, d_ff: {self.ffn}, dropout: 0.1}}}}\n"
                    f"data: {{name: text, params: {{path: {self.data}/lm.txt, mode: lm, seq_len: {self.T}}}, val_fraction: 0, "
                    f"batch_size: {self.batch}, workers: 0}}\n"
                    f"optimizer: {{name: adamw, lr: 1.0e-3, weight_decay: 0.01}}\n"
                    f"trainer: {{strategy: single-gpu, devices: 1, max_epochs: 100000, progress: lines}}\n"
                    f"checkpoint: {{every_n_epochs: 0, resume: never}}\n")

    def trainer(self, extra):
        self.n += 1
        out = os.path.join(self.tmp, f"run{self.n}")
        run([self.bin, "run", self.config, f"run.output_dir={out}"] + extra, "trainer run")
        return read_run(out)

    def torch(self, *args):
        return run([PY, os.path.abspath(__file__), "--peer", self.data, str(self.layers), str(self.d), str(self.heads),
                    str(self.ffn), str(self.T), str(self.batch)] + [str(a) for a in args], "torch peer")


# ---- the torch side, run in its own process ----------------------------------------------------

def peer(argv):
    import math
    import time

    import torch
    import torch.nn.functional as F
    import torch_peer as tp

    data, layers, d, heads, ffn, T, batch, cmd = argv[:8]
    tp.L, tp.D, tp.H, tp.FF, tp.SEQ = int(layers), int(d), int(heads), int(ffn), int(T)
    batch = int(batch)
    dev = torch.device(os.environ.get("GPU_VS_TORCH_DEVICE", "cuda"))
    cuda = dev.type == "cuda"
    if cmd == "probe":  # before anything touches the device: a torch without CUDA answers too
        name = torch.cuda.get_device_name(0) if cuda and torch.cuda.is_available() else "" if cuda else "cpu"
        print(torch.__version__, int(hasattr(F, "scaled_dot_product_attention")), name)
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x, y = (t.to(dev) for t in tp.load_data("gpt", data))
    n = x.shape[0]

    def setup(weights):
        params, _ = tp.weights(weights)
        params = {k: v.detach().to(dev).requires_grad_(True) for k, v in params.items()}
        return params, tp.optimizer(params)

    def step(params, opt, xb, yb, drop, bf16, sdpa):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(tp.transformer(params, xb, drop, True, True, sdpa), yb.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    if cmd == "check":
        weights, steps = argv[8], int(argv[9])
        params, opt = setup(weights)
        for s in range(steps):
            print(f"{step(params, opt, x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch], 0.0, False, False):.9g}")
    elif cmd == "time":
        weights, precision, sdpa, windows, per = argv[8], argv[9], argv[10] == "1", int(argv[11]), int(argv[12])
        torch.manual_seed(0)
        params, opt = setup(weights)
        rates, pos, order = [], 0, torch.randperm(n, device=dev)
        for w in range(windows + 2):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(per):
                if pos + batch > n:
                    pos, order = 0, torch.randperm(n, device=dev)
                b = order[pos:pos + batch]
                pos += batch
                loss = step(params, opt, x[b], y[b], 0.1, precision == "bf16-mixed", sdpa)
            if cuda:
                torch.cuda.synchronize()
            if w >= 2:
                rates.append(per * batch * tp.SEQ / (time.perf_counter() - t0))
        if not math.isfinite(loss):
            sys.exit(f"gpu_vs_torch peer: loss {loss}")
        print(" ".join(f"{r:.1f}" for r in rates))
    elif cmd == "flops":
        print(tp.transformer_flops("gpt", tp.SEQ) / tp.SEQ)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        return peer(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size", choices=sorted(SIZES), default="gpt2")
    ap.add_argument("--precision", choices=["bf16-mixed", "fp32"], default="bf16-mixed")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10, help="steps per timed window")
    ap.add_argument("--peak-tflops", type=float, default=0)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpu-vs-torch-")
    try:
        b = Bench(args, tmp)
        devices = run([b.bin, "devices"], "trainer devices")
        if not any(l.split()[:2] == ["gpu", "1"] for l in devices.splitlines()):
            skip("trainer sees no GPU:\n" + devices)
        version, has_sdpa, gpu = (b.torch("probe").strip().split(" ", 2) + [""])[:3]
        alone = not gpu  # torch without CUDA (a GPU machine with Debian's torch): trainer alone
        if alone:
            gpu = gpu_name()
            os.environ["GPU_VS_TORCH_DEVICE"] = "cpu"  # the loss check's torch side on the CPU
            print(f"torch {version} has no CUDA device: trainer's side alone, its loss checked "
                  f"against torch on the CPU\n")
        peak = args.peak_tflops or next((v for (k, p), v in PEAKS.items() if k in gpu and p == args.precision), 0)
        print(f"trainer vs PyTorch {version} on {gpu}, {args.size} ({b.layers} layers, d_model {b.d}, {b.heads} heads, "
              f"FFN {b.ffn}, {b.T} tokens, batch {b.batch}), {args.precision}, {args.reps} runs each, median\n")
        _, ck = b.trainer(["optimizer.lr=1e-12", "trainer.max_steps=1"])
        weights = os.path.join(ck, "model.safetensors")
        rows, _ = b.trainer([f"trainer.max_steps={CHECK_STEPS}", "trainer.log_every=1", "data.shuffle=false",
                             "model.params.dropout=0", "trainer.precision=fp32"])
        ours = [r["loss"] for r in rows]
        theirs = [float(v) for v in b.torch("check", weights, CHECK_STEPS).split()]
        worst = worst_relative(ours, theirs, CHECK_STEPS)
        if not worst <= CHECK_RTOL:
            sys.exit(f"gpu_vs_torch: the fp32 loss curves differ (worst relative {worst:.2e}):\n"
                     f"  trainer {ours}\n  torch   {theirs}")
        print(f"loss check: {CHECK_STEPS} steps in fp32, worst relative difference {worst:.1e}", flush=True)
        per, windows = args.steps, args.windows
        res = {"trainer": []} if alone else {"trainer": [], "torch": []}
        if has_sdpa == "1" and not alone:  # torch 2.0 and later
            res["torch sdpa"] = []
        for _ in range(args.reps):
            rows, _ = b.trainer([f"trainer.precision={args.precision}", f"trainer.max_steps={per * (windows + 1)}",
                                 f"trainer.log_every={per}"])
            res["trainer"].append(statistics.median(r["tokens_per_sec"] for r in rows[1:]))
            for key, sdpa in (("torch", 0), ("torch sdpa", 1)):
                if key not in res:
                    continue
                out = b.torch("time", weights, args.precision, sdpa, windows, per)
                res[key].append(statistics.median(float(v) for v in out.split()))
            print("  " + "  ".join(f"{k} {v[-1]:,.0f}" for k, v in res.items()), flush=True)
        fpt = float(b.torch("flops"))
        if alone:
            m = statistics.median(res["trainer"])
            tf = m * fpt / 1e12
            mfu = f"{100 * tf / peak:.1f}%" if peak else "(peak unknown: --peak-tflops)"
            print(f"\n| side | tokens/s | TFLOP/s | MFU |\n|---|---|---|---|\n| trainer | {m:,.0f} | {tf:.1f} | {mfu} |")
            print(f"\nno torch with CUDA here: no ratio; {fpt / 1e6:.1f} MFLOP per token")
            return
        best = max(statistics.median(v) for k, v in res.items() if k != "trainer")
        print(f"\n| side | tokens/s | ratio to torch eager's best | TFLOP/s | MFU |")
        print("|---|---|---|---|---|")
        for k, v in res.items():
            m = statistics.median(v)
            tf = m * fpt / 1e12
            mfu = f"{100 * tf / peak:.1f}%" if peak else "(peak unknown: --peak-tflops)"
            print(f"| {k} | {m:,.0f} | {m / best:.2f}x | {tf:.1f} | {mfu} |")
        ratio = statistics.median(res["trainer"]) / best
        print(f"\ntarget (at least torch eager's tokens/s in {args.precision}): "
              f"{'met' if ratio >= 1 else 'missed'} ({ratio:.2f}x); peak {peak or 'unknown'} TFLOP/s; "
              f"{fpt / 1e6:.1f} MFLOP per token")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
