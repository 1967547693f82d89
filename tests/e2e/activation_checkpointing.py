#!/usr/bin/env python3
"""trainer.activation_checkpointing end to end (Python's standard library, and numpy for
compare_runs.py).

  activation_checkpointing.py TRAINER            the CPU
  activation_checkpointing.py TRAINER --device cuda_emu

- The transformer LM (dropout 0.1 after the attention and the MLP), a tiny random BERT
  through hf_encoder (hidden and attention-probability dropout 0.1) and the CNN (batch-norm
  in every block, dropout 0.25 in the head), each under cpu, ddp x2 and sharded stage 3 x2
  (small units: gathered again by the recomputation in backward), 6 steps with and without
  checkpointing every block: the same weights, loss at every step and validation metrics,
  bit for bit (compare_runs.py --tol 0); the transformer also under dataparallel x2 and
  sharded stages 1 and 2 x2, and with every 2nd block (cpu).
  The CNN's batch-norm running statistics are among the weights compared: the recomputation
  does not update them again.
- The activation peak the runs record (metrics.jsonl's memory) is lower with it.
- `trainer plan` reports one rank's activations with and without it (--json and text).
- Bad values (0, -1, sometimes, a list) are refused naming the key and the config file.
- --device cuda_emu: the transformer and the CNN under single-gpu on the CPU emulator of CUDA,
  with and without (the same weights within 1e-6), skipped (77) when it sees no GPU.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_encoder_load as tiny  # noqa: E402  (the tiny BERT folder; check and FAILS)
from hf_encoder_strategies import STRATEGIES as ALL  # noqa: E402

COMPARE = os.path.join(HERE, "compare_runs.py")
check, FAILS = tiny.check, tiny.FAILS
# sharded stage 3 with small units: gathered again by the recomputation in backward
STRATEGIES = {k: ALL[k] for k in ("cpu", "ddp2", "sharded3x2")}

# the transformer also under these
EXTRA = {
    "dataparallel2": ALL["dataparallel2"],
    "sharded1x2": ["trainer.strategy=sharded", "strategy.stage=1", "trainer.devices=2"],
    "sharded2x2": ["trainer.strategy=sharded", "strategy.stage=2", "strategy.unit_mb=0.002", "trainer.devices=2"],
}


def write(base, name, text):
    p = os.path.join(base, name + ".yaml")
    with open(p, "w") as f:
        f.write(text)
    return p


def configs(base):
    common = "trainer: {max_steps: 6, log_every: 1, progress: lines, threads: 1, val_every_n_steps: 3}\n"
    lm = write(base, "lm", f"""run: {{name: lm, seed: 5}}
model: {{name: transformer, params: {{mode: lm, d_model: 32, n_head: 2, n_layer: 3, dropout: 0.1}}}}
data: {{name: synthetic, params: {{task: lm, samples: 300, val_samples: 40, seq_len: 16, vocab: 24}}, batch_size: 12}}
optimizer: {{name: adamw, lr: 0.002, eps: 1.0e-6}}
{common}""")
    cnn = write(base, "cnn", f"""run: {{name: cnn, seed: 7}}
model: {{name: cnn, params: {{channels: [4, 8], fc: [32, 16], dropout: 0.25}}}}
data: {{name: synthetic, params: {{samples: 300, val_samples: 40, shape: [1, 12, 12], classes: 4, noise: 2.0}}, batch_size: 16}}
optimizer: {{name: sgd, lr: 0.05, momentum: 0.9}}
{common}""")
    bert = tiny.folder(base, "bert", tiny.tensors(random.Random(11)),
                       cfg=tiny.config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))
    hf = write(base, "hf", f"""run: {{name: hf, seed: 5}}
model: {{name: hf_encoder, params: {{pretrained: {bert}, task: classify}}}}
data:
  name: csv
  params: {{path: {tiny.REVIEWS}, tokenizer: {tiny.TOKENIZER}, text_column: text, label_column: label,
           max_length: 32, padding: longest}}
  batch_size: 10
  val_fraction: 0.2
optimizer: {{name: adamw, lr: 0.003, weight_decay: 0.01, eps: 1.0e-6}}
{common}""")
    return {"transformer": lm, "hf_encoder": hf, "cnn": cnn}


def trainer(bin_, *args, env=None):
    p = subprocess.run([bin_, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, env=env)
    return p.returncode, p.stdout


def compare(a, b, tol="0"):
    p = subprocess.run([sys.executable, COMPARE, a, b, "--tol", tol], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return p.returncode == 0, p.stdout.strip()


def activations(run):
    mem = [json.loads(ln)["memory"] for ln in open(os.path.join(run, "metrics.jsonl")) if '"memory"' in ln]
    return mem[-1]["activations"] if mem else None


def run_pair(bin_, base, model, cfg, where, opts, with_opt="trainer.activation_checkpointing=true", tol="0", env=None):
    """One run without and one with checkpointing; True when both ran and compare within tol."""
    runs = {}
    for tag, extra in (("off", []), ("on", [with_opt])):
        out = os.path.join(base, "runs", where, tag)
        rc, log = trainer(bin_, "run", cfg, f"run.output_dir={out}", *opts, *extra, env=env)
        if rc != 0:
            check(False, f"{model} {where} {tag}: trainer run exited {rc}: {log.strip()[-800:]}")
            return
        runs[tag] = os.path.join(out, os.path.basename(cfg)[:-5], "0")
    same, msg = compare(runs["off"], runs["on"], tol)
    check(same, f"{model} {where}: with {with_opt.split('=')[1]} vs without: {msg}")
    a_off, a_on = activations(runs["off"]), activations(runs["on"])
    check(a_off and a_on and a_on < a_off, f"{model} {where}: activation peak {a_on} with, {a_off} without")


def bad_values(bin_, base, cfg):
    text = open(cfg).read()
    for v in ("0", "-1", "sometimes", "[1, 2]"):
        bad = write(base, "bad", text.replace("threads: 1,", f"threads: 1, activation_checkpointing: {v},"))
        rc, log = trainer(bin_, "run", bad, f"run.output_dir={os.path.join(base, 'bad')}")
        check(rc != 0 and "trainer.activation_checkpointing" in log and "bad.yaml:" in log and "every N-th block" in log,
              f"activation_checkpointing {v} refused (rc {rc}): {log.strip()[-300:]}")


def plan(bin_, cfg):
    rc, out = trainer(bin_, "plan", cfg, "--json", "trainer.activation_checkpointing=true")
    try:
        a = json.loads(out)["activation_checkpointing"] if rc == 0 else None
    except ValueError:
        a = None
    check(a and a["every"] == 1 and 0 < a["with"] < a["without"], f"plan --json: {a or out.strip()[-300:]}")
    rc, out = trainer(bin_, "plan", cfg)
    check(rc == 0 and "with trainer.activation_checkpointing true" in out, f"plan: {out.strip()[-300:]}")


def main():
    bin_ = sys.argv[1]
    dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else None
    base = tempfile.mkdtemp(prefix="trainer-actckpt-")
    os.environ.setdefault("TRAINER_COMM_TIMEOUT", "120")
    try:
        cfgs = configs(base)
        if dev:
            rc, out = trainer(bin_, "devices")
            if not any(ln.startswith("gpu") and f"(device plugin {dev}, id" in ln for ln in out.splitlines()):
                print(f"SKIPPED: the {dev} device plugin sees no GPU here")
                return 77
            for model in ("transformer", "cnn"):
                run_pair(bin_, base, model, cfgs[model], f"single-gpu-{model}",
                         ["trainer.strategy=single-gpu", "trainer.devices=1", f"trainer.gpu_backend={dev}"], tol="1e-6")
        else:
            for model, cfg in cfgs.items():
                for s, opts in STRATEGIES.items():
                    run_pair(bin_, base, model, cfg, f"{s}-{model}", opts)
            for s, opts in EXTRA.items():
                run_pair(bin_, base, "transformer", cfgs["transformer"], f"{s}-transformer", opts)
            run_pair(bin_, base, "transformer", cfgs["transformer"], "cpu-every2", STRATEGIES["cpu"],
                     with_opt="trainer.activation_checkpointing=2")
            bad_values(bin_, base, cfgs["transformer"])
            plan(bin_, cfgs["transformer"])
    finally:
        if not FAILS:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{len(FAILS)} failed" + (f" (kept {base})" if FAILS else ""))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
