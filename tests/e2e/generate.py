#!/usr/bin/env python3
"""`trainer generate` on a tiny byte-level transformer LM, against PyTorch.

  generate.py TRAINER [CUDA_EMU_DIR]      (exit 0 when every check passes)

A 2-layer transformer (configs/shakespeare_lm.yaml, made small) trains 60 steps on a text
written here (about 4 s on 2 cores); then:
- greedy (--temperature 0) continuations, of a short prompt and of one longer than the
  model's 32 positions, 48 new bytes (the window slides past seq_len), equal the argmax
  chain of the same model in torch (tools/bench/torch_peer.py's transformer, from the
  checkpoint's model.safetensors), each step checked with torch's logits on trainer's context;
- stdout is the prompt and the new bytes, nothing else; the log line goes to stderr;
- with CUDA_EMU_DIR (the cuda plugin over a CPU emulator of CUDA, 2 GPUs): auto picks
  single-gpu (trainer.devices=1 implied), and its greedy text passes the same torch check;
- the run folder, the checkpoint folder and its model.safetensors give the same text, and so
  do --prompt, --prompt-file FILE and --prompt-file - (standard input);
- sampling: the same seed twice gives the same text, another seed another; no --seed is the
  config's run.seed; --top-k 1 and a tiny --top-p are greedy at any temperature; every token of
  a --top-k 3 draw is among torch's 3 most likely there;
- refusals, each with a non-zero exit, its message and nothing on stdout: bad option values,
  a missing prompt or checkpoint, a classifier (transformer mode classify; mlp), a model
  without a byte vocabulary and no tokenizer (synthetic lm, vocab 16), an empty prompt, two
  devices.
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import torch_peer as tp  # noqa: E402  (the transformer LM in torch, trainer's parameter names)

D, H, L, T = 32, 4, 2, 32
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def gen(trainer, cfg, ckpt, *args, stdin=None):
    """(exit status, stdout bytes, stderr text) of trainer generate."""
    p = subprocess.run([trainer, "generate", cfg, "--checkpoint", ckpt, *args], input=stdin, capture_output=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def write_text(path):
    """The same line again and again: within a few dozen steps the model learns which byte
    follows which, so its greedy chains are long runs of distinct bytes, not one byte repeated."""
    open(path, "w").write(("abcdefghijklmnopqrstuvwxyz0123456789 " * 3 + "\n") * 2000)


def logits_of(params, ids):
    """torch's next-token logits after the last T of ids."""
    ctx = torch.tensor([ids[-T:]], dtype=torch.long)
    with torch.no_grad():
        return tp.transformer(params, ctx, 0.0, False, True)[-1].double()


def check_greedy(params, prompt, out, n_new, what):
    """out (stdout) must be prompt + n_new bytes, each torch's argmax on trainer's context."""
    check(out[:len(prompt)] == prompt and len(out) == len(prompt) + n_new,
          f"{what}: stdout is the prompt and {n_new} new bytes ({len(out)} bytes)")
    ids, ties, bad = list(prompt), 0, []
    for i, b in enumerate(out[len(prompt):]):
        l = logits_of(params, ids)
        best = int(l.argmax())
        if b != best:
            if float(l[best] - l[b]) < 1e-4:  # float rounding between the two may pick either of a near tie
                ties += 1
            else:
                bad.append((i, b, best, float(l[best] - l[b])))
        ids.append(b)
    chain = list(prompt)  # torch's own greedy chain, to show it is the same text
    for _ in range(n_new):
        chain.append(int(logits_of(params, chain).argmax()))
    check(not bad, f"{what}: each of the {n_new} bytes is torch's argmax on its context" +
          (f" (first differing: {bad[0]})" if bad else f" ({ties} near ties)"))
    check(ties > 0 or bytes(chain) == out, f"{what}: equals torch's greedy chain {bytes(chain[len(prompt):])!r}")
    check(len(set(out[len(prompt):])) >= min(8, n_new // 2), f"{what}: the continuation is not a few bytes repeated ({out[len(prompt):]!r})")


def check_refused(trainer, what, want, cfg, ckpt, *args, stdin=None):
    rc, out, err = gen(trainer, cfg, ckpt, *args, stdin=stdin)
    said = [line for line in err.splitlines() if line.startswith("trainer generate:")][:1]
    check(rc != 0 and want in err and out == b"", f"refused: {what} (exit {rc}): {said}")


def main():
    trainer = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="trainer-generate-")
    try:
        text = os.path.join(tmp, "text.txt")
        write_text(text)
        cfg = os.path.join(ROOT, "configs", "shakespeare_lm.yaml")
        train = [f"run.output_dir={tmp}/runs", f"data.params.path={text}", f"data.params.seq_len={T}",
                 f"model.params.d_model={D}", f"model.params.n_head={H}", f"model.params.n_layer={L}",
                 "data.batch_size=16", "trainer.max_steps=60", "optimizer.lr=1e-2", "scheduler.warmup_steps=10", "trainer.progress=lines"]
        p = subprocess.run([trainer, "run", cfg, *train], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            sys.exit(f"FAIL: trainer run exited {p.returncode}\n{p.stdout}{p.stderr}")
        run = os.path.join(tmp, "runs", "shakespeare_lm", "0")
        cfg = os.path.join(run, "config.yaml")  # the resolved config: the model as trained
        step = sorted(os.listdir(os.path.join(run, "checkpoints")))[-1]
        ckpt = os.path.join(run, "checkpoints", step)
        tp.D, tp.H, tp.L = D, H, L
        params, _ = tp.weights(os.path.join(ckpt, "model.safetensors"))

        short = b"abc"
        rc, out, err = gen(trainer, cfg, run, "--prompt", short.decode(), "--temperature", "0", "--max-new-tokens", "48")
        check(rc == 0 and "generate: 48 tokens after a prompt of 3" in err, f"greedy from the run folder: {err.strip()}")
        check_greedy(params, short, out, 48, "greedy, short prompt")
        greedy = out
        long = b"hello world, this is a prompt longer than the model's 32 positions: m"
        rc, out, err = gen(trainer, cfg, ckpt, "--prompt", long.decode(), "--temperature", "0", "--max-new-tokens", "48")
        check(rc == 0 and len(long) > T, f"greedy, a prompt of {len(long)} bytes > {T} positions")
        check_greedy(params, long, out, 48, "greedy, long prompt")
        if len(sys.argv) > 2:  # the CUDA emulator: slow (a second per few tokens), so a short text
            env = dict(os.environ, TRAINER_PLUGIN_PATH=sys.argv[2], TRAINER_CUDA_EMU_GPUS="2")
            auto = os.path.join(tmp, "auto.yaml")  # the run's config names the strategy it chose: cpu
            open(auto, "w").write(open(cfg).read().replace("strategy: cpu", "strategy: auto"))
            p = subprocess.run([trainer, "generate", auto, "--checkpoint", run, "--prompt", short.decode(),
                                "--temperature", "0", "--max-new-tokens", "12"], capture_output=True, timeout=120, env=env)
            err = p.stderr.decode("utf-8", "replace")
            check(p.returncode == 0 and "single-gpu (cuda_emu:0" in err, f"2 emulated GPUs: single-gpu: {err.strip()}")
            check_greedy(params, short, p.stdout, 12, "greedy on single-gpu (emulated)")
        for where in (ckpt, os.path.join(ckpt, "model.safetensors")):
            rc, out, _ = gen(trainer, cfg, where, "--prompt", short.decode(), "--temperature", "0", "--max-new-tokens", "48")
            check(rc == 0 and out == greedy, f"--checkpoint {os.path.relpath(where, run)}: the same text")
        pf = os.path.join(tmp, "prompt.txt")
        open(pf, "wb").write(short)
        rc, out, _ = gen(trainer, cfg, run, "--prompt-file", pf, "--temperature", "0", "--max-new-tokens", "48")
        check(rc == 0 and out == greedy, "--prompt-file FILE: the same text")
        rc, out, _ = gen(trainer, cfg, run, "--prompt-file", "-", "--temperature", "0", "--max-new-tokens", "48",
                         stdin=short)
        check(rc == 0 and out == greedy, "--prompt-file - (standard input): the same text")

        def sample(*args):
            rc, out, err = gen(trainer, cfg, run, "--prompt", short.decode(), "--max-new-tokens", "64", *args)
            check(rc == 0 and out.startswith(short) and len(out) == len(short) + 64, f"sample {args}: {err.strip()}")
            return out

        a, b, c = sample("--seed", "7"), sample("--seed", "7"), sample("--seed", "8")
        check(a == b, "the same seed gives the same text")
        check(a != c, "another seed gives another text")
        check(sample() == sample("--seed", "1"), "no --seed: the config's run.seed (1)")
        greedy64 = sample("--temperature", "0")
        check(greedy64.startswith(greedy), "greedy for 64 bytes starts with greedy for 48")
        check(a != greedy64, "temperature 1 does not give the greedy text")
        for args in (("--top-k", "1", "--temperature", "1.5"), ("--top-p", "1e-6", "--temperature", "2")):
            check(sample(*args, "--seed", "3") == greedy64, f"{' '.join(args)}: the greedy text")
        out = sample("--top-k", "3", "--temperature", "1.2", "--seed", "9")
        ids, outside = list(short), []
        for i, tok in enumerate(out[len(short):]):
            l = logits_of(params, ids)
            third = float(l.topk(3).values[-1])
            if float(l[tok]) < third - 1e-4:
                outside.append((i, tok))
            ids.append(tok)
        check(not outside, f"--top-k 3: every token is among torch's 3 most likely ({outside[:3]})")

        # refusals
        p = ("--prompt", "abc")
        for args, want in ((("--temperature", "-1"), "temperature -1: expected a finite number >= 0"),
                           (("--temperature", "abc"), "--temperature: expected a number, got 'abc'"),
                           (("--top-p", "0"), "top_p 0: expected a number in (0, 1]"),
                           (("--top-p", "1.5"), "top_p 1.5: expected a number in (0, 1]"),
                           (("--top-k", "-1"), "--top-k: expected an integer >= 0, got '-1'"),
                           (("--top-k", "2.5"), "--top-k: expected an integer >= 0, got '2.5'"),
                           (("--max-new-tokens", "-3"), "--max-new-tokens: expected an integer >= 0, got '-3'"),
                           (("--seed",), "--seed needs a value"),
                           (("--top-q", "1"), "unknown option '--top-q'")):
            check_refused(trainer, " ".join(args), want, cfg, run, *p, *args)
        check_refused(trainer, "no prompt", "give the prompt with --prompt TEXT or --prompt-file FILE", cfg, run)
        check_refused(trainer, "two prompts", "(one of them)", cfg, run, *p, "--prompt-file", pf)
        check_refused(trainer, "a prompt file that is missing", os.path.join(tmp, "nope.txt"), cfg, run,
                      "--prompt-file", os.path.join(tmp, "nope.txt"))
        check_refused(trainer, "an empty prompt", "the prompt is empty", cfg, run, "--prompt", "")
        check_refused(trainer, "a missing checkpoint", os.path.join(tmp, "none"), cfg, os.path.join(tmp, "none"), *p)
        r = subprocess.run([trainer, "generate", cfg, *p], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "--checkpoint PATH is required" in r.stderr and not r.stdout,
              "no --checkpoint: refused with the usage (exit 2)")
        check_refused(trainer, "mode classify", "model transformer (mode classify) is not a language model", cfg, run,
                      *p, "model.params.mode=classify")
        check_refused(trainer, "two devices", "generate runs in one process on one device", cfg, run, *p,
                      "trainer.strategy=dataparallel", "trainer.devices=2")
        other = os.path.join(tmp, "other.yaml")
        open(other, "w").write("model: {name: mlp}\ndata: {name: synthetic}\n")
        check_refused(trainer, "an mlp classifier", "model mlp on data synthetic (task classify) is not a language model",
                      other, run, *p)
        open(other, "w").write("model: {name: transformer, params: {mode: lm}}\n"
                               "data: {name: synthetic, params: {task: lm, vocab: 16, seq_len: 8}}\n")
        check_refused(trainer, "a 16-token vocabulary without a tokenizer", "has a vocabulary of 16", other, run, *p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'all passed' if not FAILS else f'{len(FAILS)} failed'}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
