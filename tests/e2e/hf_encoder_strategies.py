#!/usr/bin/env python3
"""hf_encoder fine-tuning under every strategy, and its exact resume (Python's standard
library, and numpy for compare_runs.py: no torch, no PyPI).

  hf_encoder_strategies.py TRAINER [--keep DIR]

A tiny random BERT and a tiny random RoBERTa (positions from pad_token_id + 1, its own head)
are made here (hf_encoder_load.py's folders); task classify fine-tunes them with AdamW on
tests/data/tokdata/reviews.csv, BERT on pairs of reviews ([CLS] a [SEP] b [SEP]: token types 0
and 1, derived from the ids), RoBERTa on single reviews: texts of different lengths, batches
padded to their longest, a global batch of 11 (6 + 5 over 2 ranks), a validation split.

- Strategy invariance (docs/design.md "Strategy invariance"): cpu, dataparallel x2, ddp x2
  and sharded stage 3 x2 (small units: gathered and released several times a step) end with the same weights
  (relative L2 <= 1e-5), the same loss at every step and the same validation metrics
  (compare_runs.py), with dropout off and on (hidden and attention probabilities), padded
  to each batch's longest text and to max_length. A mask is keyed by the element's index
  within its sample (ops/dropout.c), so every rank cuts its share of a batch to the longest
  text of the whole global batch (data/loader.c): with 6 + 5 texts of different lengths the
  shares' own longest differ, and the masks would too.
- The classifier head is newly initialised (it is not in the folders): the same on every rank
  and strategy (it is part of the weights compared).
- Exact resume: a run killed right after its step-4 checkpoint and run again resumes from it
  and ends with the uninterrupted run's checkpoint byte for byte (cpu; sharded x2, whose
  checkpoint is sharded), although before the resume the pretrained folder was corrupted
  (garbage config.json, model.safetensors and tokenizer.json: bert) or moved away (roberta):
  a resume reads the config.json its checkpoint keeps, never the folder (and a checkpoint
  without it, an older trainer's, resumes with the folder's config.json). Task pairs likewise
  under ddp x2, its folder moved away: the pooling and normalising that modules.json chose at
  the start, and a pooler the folder has but mean pooling does not use, come from the
  checkpoint's config.json.

  hf_encoder_strategies.py TRAINER --device cuda|cuda_emu [--keep DIR]

On the GPUs of a CUDA device plugin (cuda_emu: the CPU emulator of CUDA, 2 GPUs, in every
build; cuda: this machine's, skipped (77) without): single-gpu, ddp x2 and sharded stage 3 x2
(a rank per GPU over nccl or nccl_emu; with 2 GPUs or more) against cpu, 3 steps, within 1e-5 on the emulator and
1e-4 on a GPU (as gpu_train.sh): BERT on pairs (the token types, made on the host from the
ids, are an input of the device's graph) and RoBERTa with dropout (its positions likewise); and `trainer embed` under single-gpu
and ddp x2 (run as 2 dataparallel replicas, a GPU each) against cpu's embeddings.
"""
import csv
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_encoder_load as tiny  # noqa: E402  (the tiny folders)

COMPARE = os.path.join(HERE, "compare_runs.py")
FAILS = []
STRATEGIES = {
    "cpu": ["trainer.strategy=cpu"],
    "dataparallel2": ["trainer.strategy=dataparallel", "trainer.devices=2"],
    "ddp2": ["trainer.strategy=ddp", "trainer.devices=2"],
    # small units, so that stage 3 gathers and releases several times per step
    "sharded3x2": ["trainer.strategy=sharded", "strategy.stage=3", "strategy.unit_mb=0.002", "trainer.devices=2"],
}


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def roberta_weights(rng):
    """hf_encoder_load's BERT tensors with RoBERTa's shapes: one token type, positions for
    pad_token_id + 1 + S (the first pad_token_id + 1 rows are never used)."""
    w = tiny.tensors(rng)
    w["embeddings.token_type_embeddings.weight"] = ([1, tiny.H], w["embeddings.token_type_embeddings.weight"][1][:tiny.H])
    return w


def make_folders(base, dropout):
    rng = random.Random(11)
    bert = tiny.folder(base, f"bert_d{dropout}", tiny.tensors(rng),
                       cfg=tiny.config(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))
    # RoBERTa: pad_token_id 1, positions 2 .. S + 1 of max_position_embeddings S (the 32
    # tokens of the longest text fit); a pooler in the file is not used by its head.
    rcfg = tiny.config(model_type="roberta", type_vocab_size=1, pad_token_id=1, hidden_dropout_prob=dropout,
                       attention_probs_dropout_prob=dropout)
    roberta = tiny.folder(base, f"roberta_d{dropout}", roberta_weights(rng), cfg=rcfg)
    return {"bert": bert, "roberta": roberta}


def write_pairs(base):
    """Review i and review i + 1 as a pair, labelled as review i: [CLS] a [SEP] b [SEP], token
    types 0 then 1 (the plugin derives them from the ids)."""
    with open(tiny.REVIEWS, newline="") as f:
        rows = list(csv.DictReader(f))
    path = os.path.join(base, "pairs.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "pair", "label"])
        for a, b in zip(rows, rows[1:]):
            w.writerow([a["text"], b["text"], a["label"]])
    return path


def write_config(base, name, model, padding, pairs=None):
    """AdamW's eps is 1e-6, as in strategy_invariance.sh: the attention key biases have a zero
    gradient in exact arithmetic, and with 1e-8 Adam turns their rounding noise, which depends
    on how the batch is split, into full-size steps (7.0e-6 of the weights after 8 steps here,
    nearly all of it in those biases)."""
    p = os.path.join(base, name + ".yaml")
    data = f"path: {pairs}, text_pair_column: pair" if pairs else f"path: {tiny.REVIEWS}"
    with open(p, "w") as f:
        f.write(f"""run: {{name: {name}, seed: 5}}
model:
  name: hf_encoder
  params: {{pretrained: {model}, task: classify}}
data:
  name: csv
  params: {{{data}, tokenizer: {tiny.TOKENIZER}, text_column: text, label_column: label,
           max_length: 32, padding: {padding}}}
  batch_size: 11
  val_fraction: 0.1
optimizer: {{name: adamw, lr: 0.003, weight_decay: 0.01, eps: 1.0e-6}}
trainer: {{max_steps: 8, log_every: 1, progress: lines, threads: 1}}
checkpoint: {{every_n_steps: 4}}
""")
    return p


def trainer_run(trainer, cfg, out, opts, env=None):
    p = subprocess.run([trainer, "run", cfg, f"run.output_dir={out}", *opts], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600, env=env)
    return p.returncode, p.stdout


def run_dir(out, name):
    return os.path.join(out, name, "0")


def compare(a, b):
    p = subprocess.run([sys.executable, COMPARE, a, b], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, p.stdout.strip()


def invariance(trainer, base, models, pairs):
    # BERT on text pairs (token types 0 and 1), RoBERTa on single texts (type 0, positions
    # from pad_token_id + 1 over the real tokens)
    for model_name, dropout, padding in (("bert", 0.0, "longest"), ("roberta", 0.0, "longest"),
                                         ("bert", 0.1, "longest"), ("roberta", 0.1, "longest"),
                                         ("bert", 0.1, "max_length"), ("roberta", 0.1, "max_length")):
        model = models[dropout][model_name]
        name = f"{model_name}_d{dropout}_{padding}"
        cfg = write_config(base, name, model, padding, pairs if model_name == "bert" else None)
        ref = None
        for s, opts in STRATEGIES.items():
            out = os.path.join(base, "inv", s)
            rc, log = trainer_run(trainer, cfg, out, opts)
            if rc != 0:
                check(False, f"{name} under {s}: trainer run exited {rc}: {log.strip()[-600:]}")
                continue
            if s == "cpu":
                ref = run_dir(out, name)
                check("newly initialised" in log and "classifier" in log, f"{name}: the head is newly initialised")
                continue
            if ref:
                same, msg = compare(ref, run_dir(out, name))
                check(same, f"{name}, {s} vs cpu: {msg}")


def on_devices(trainer, base, models, pairs, dev):
    """Every strategy on dev's GPUs against cpu (docstring)."""
    p = subprocess.run([trainer, "devices"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    gpus = sum(1 for ln in p.stdout.splitlines() if ln.startswith("gpu") and f"(device plugin {dev}, id" in ln)
    if gpus < 1:
        print(f"SKIPPED: the {dev} device plugin sees no GPU here")
        return 77
    nccl = "nccl_emu" if dev == "cuda_emu" else "nccl"
    tol = "1e-5" if dev == "cuda_emu" else "1e-4"
    on = [f"trainer.gpu_backend={dev}", "trainer.max_steps=3"]
    runs = {"single-gpu": ["trainer.strategy=single-gpu", "trainer.devices=1"],
            "ddp2": ["trainer.strategy=ddp", "trainer.devices=2", f"strategy.backend={nccl}"],
            "sharded3x2": ["trainer.strategy=sharded", "strategy.stage=3", "strategy.unit_mb=0.002",
                           "trainer.devices=2", f"strategy.backend={nccl}"]}
    for model_name, dropout, padding in (("bert", 0.0, "longest"), ("roberta", 0.1, "max_length")):
        name = f"{model_name}_d{dropout}_{padding}"
        cfg = write_config(base, name, models[dropout][model_name], padding, pairs if model_name == "bert" else None)
        ref = os.path.join(base, "dev", "cpu")
        rc, log = trainer_run(trainer, cfg, ref, ["trainer.accelerator=cpu", *on[1:]])
        check(rc == 0, f"{name} under cpu (rc {rc}) {log.strip()[-600:] if rc else ''}")
        for s, opts in runs.items():
            if model_name == "roberta" and s == "ddp2":
                continue  # its positions are the same path as single-gpu's and sharded's
            if s != "single-gpu" and gpus < 2:
                print(f"(not run: {s}, the {dev} device plugin sees one GPU)")
                continue
            out = os.path.join(base, "dev", s)
            rc, log = trainer_run(trainer, cfg, out, [*on, *opts])
            if rc != 0:
                check(False, f"{name} under {s} on {dev}: trainer run exited {rc}: {log.strip()[-600:]}")
                continue
            p = subprocess.run([sys.executable, COMPARE, run_dir(ref, name), run_dir(out, name), "--tol", tol],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            check(p.returncode == 0, f"{name}, {s} on {dev} vs cpu: {p.stdout.strip()}")
    embed_on_devices(trainer, base, models, dev, gpus, float(tol))
    return 0


def embed_on_devices(trainer, base, models, dev, gpus, tol):
    """trainer embed on dev's GPUs against cpu: single-gpu, and ddp x2 (which embed runs as 2
    dataparallel replicas, a GPU each, in one process)."""
    cfg = tiny.embed_cfg(base, models[0.0]["bert"], "embed_dev")
    texts = os.path.join(base, "embed_dev.txt")
    with open(texts, "w") as f:
        f.write("".join(f"review {i}: " + "a fine movie " * (i % 7) + "\n" for i in range(11)))

    def embed(name, opts):
        out = os.path.join(base, f"embed_{name.replace(' ', '_')}.npy")
        p = subprocess.run([trainer, "embed", cfg, "--input", texts, "--output", out, *opts], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        check(p.returncode == 0, f"embed under {name} (rc {p.returncode}) {p.stdout.strip()[-400:] if p.returncode else ''}")
        return tiny.npy_floats(out) if p.returncode == 0 else None

    ref = embed("cpu", ["trainer.strategy=cpu"])
    on = [f"trainer.gpu_backend={dev}", "trainer.accelerator=gpu"]
    runs = {"single-gpu": ["trainer.strategy=single-gpu", "trainer.devices=1"]}
    if gpus >= 2:
        runs["ddp2"] = ["trainer.strategy=ddp", "trainer.devices=2"]
    for s, opts in runs.items():
        got = embed(f"{s} on {dev}", [*on, *opts])
        if ref and got:
            err = max(abs(a - b) for a, b in zip(ref[1], got[1])) if ref[0] == got[0] else float("inf")
            check(err <= tol, f"embed, {s} on {dev} vs cpu: shape {got[0]}, max abs {err:.3g} (tol {tol:g})")


def pairs_task(trainer, base, models):
    """Task pairs resumed under ddp x2 with its folder moved away: the folder's choices, mean
    pooling and normalising from sentence-transformers' modules.json and a pooler the folder has
    but mean pooling does not use, are the checkpoint's to keep (its config.json)."""
    model = os.path.join(base, "resume_pairs")
    shutil.copytree(models[0.1]["bert"], model)
    os.makedirs(os.path.join(model, "1_Pooling"))
    with open(os.path.join(model, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], f)
    with open(os.path.join(model, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": tiny.H, "pooling_mode_mean_tokens": True}, f)
    tsv = tiny.scored_pairs(os.path.join(base, "scored.tsv"), 60)
    cfg = os.path.join(base, "resume_pairs.yaml")
    with open(cfg, "w") as f:
        f.write(f"""run: {{name: resume_pairs, seed: 5}}
model: {{name: hf_encoder, params: {{pretrained: {model}, task: pairs}}}}
data: {{name: text, params: {{path: {tsv}, mode: pairs, tokenizer: {tiny.TOKENIZER}, max_length: 16}},
       batch_size: 10, val_fraction: 0.2}}
optimizer: {{name: adamw, lr: 0.003, eps: 1.0e-6}}
trainer: {{max_steps: 8, log_every: 1, progress: lines, threads: 1}}
checkpoint: {{every_n_steps: 4}}
""")
    s = "ddp2"
    out = os.path.join(base, "resume", "pairs")
    rc, log = trainer_run(trainer, cfg, os.path.join(out, "straight"), STRATEGIES[s])
    check(rc == 0, f"task pairs {s}: the straight run (rc {rc}) {log.strip()[-600:] if rc else ''}")
    env = dict(os.environ, TRAINER_FAULT_KILL_AT_STEP="4")
    rc, log = trainer_run(trainer, cfg, os.path.join(out, "killed"), STRATEGIES[s], env)
    check(rc != 0 and "fault injection" in log, f"task pairs {s}: the run is killed after step 4 (rc {rc})")
    os.rename(model, model + ".moved")
    rc, log = trainer_run(trainer, cfg, os.path.join(out, "killed"), STRATEGIES[s])
    check(rc == 0 and "step-00000004" in log and "is not read" in log,
          f"task pairs {s}: resumed from step 4 with the folder moved away (rc {rc}) {log.strip()[-800:] if rc else ''}")
    if rc != 0:
        return
    a, fa = checkpoint_files(run_dir(os.path.join(out, "straight"), "resume_pairs"))
    b, fb = checkpoint_files(run_dir(os.path.join(out, "killed"), "resume_pairs"))
    with open(os.path.join(b, "config.json")) as f:
        kept = json.load(f).get("trainer_hf_encoder")
    check(os.path.basename(a) == os.path.basename(b) and fa == fb and
          kept == {"pooling": "mean", "normalize": True, "pooler": True},
          f"task pairs {s}: the uninterrupted run's checkpoint byte for byte; config.json keeps {kept}")


def checkpoint_files(run):
    ck = sorted(glob.glob(os.path.join(run, "checkpoints", "step-*")))[-1]
    return ck, {os.path.basename(f): open(f, "rb").read() for f in glob.glob(os.path.join(ck, "*.safetensors"))}


def resume(trainer, base, models, pairs):
    # bert under cpu: its folder corrupted before resuming; roberta under sharded x2 (a
    # sharded checkpoint, read by 2 ranks): its folder moved away
    for model_name, s in (("bert", "cpu"), ("roberta", "sharded3x2")):
        src = models[0.1][model_name]
        model = os.path.join(base, f"resume_{model_name}")
        shutil.copytree(src, model)
        name = f"resume_{model_name}"
        cfg = write_config(base, name, model, "longest", pairs if model_name == "bert" else None)
        out = os.path.join(base, "resume", s)
        rc, log = trainer_run(trainer, cfg, os.path.join(out, "straight"), STRATEGIES[s])
        check(rc == 0, f"{name} {s}: the straight run (rc {rc}) {log.strip()[-600:] if rc else ''}")
        env = dict(os.environ, TRAINER_FAULT_KILL_AT_STEP="4")
        rc, log = trainer_run(trainer, cfg, os.path.join(out, "killed"), STRATEGIES[s], env)
        check(rc != 0 and "fault injection" in log, f"{name} {s}: the run is killed after step 4 (rc {rc})")
        if model_name == "bert":
            # an older trainer's checkpoint, without config.json: the folder's, and no weights
            old = os.path.join(out, "older")
            shutil.copytree(os.path.join(out, "killed"), old)
            os.remove(os.path.join(run_dir(old, name), "checkpoints", "step-00000004", "config.json"))
            rc, log = trainer_run(trainer, cfg, old, STRATEGIES[s])
            same = rc == 0 and checkpoint_files(run_dir(old, name))[1] == \
                checkpoint_files(run_dir(os.path.join(out, "straight"), name))[1]
            check(same and "keeps no config.json" in log,
                  f"{name} {s}: a checkpoint without config.json (an older trainer's) resumes from the folder's and "
                  f"ends equal (rc {rc}) {log.strip()[-600:] if rc else ''}")
        if model_name == "bert":  # a resume must read none of these
            for f in ("config.json", "model.safetensors", "tokenizer.json"):
                with open(os.path.join(model, f), "wb") as fh:
                    fh.write(b"\x00garbage")
            how = "corrupted"
        else:
            os.rename(model, model + ".moved")
            how = "moved away"
        rc, log = trainer_run(trainer, cfg, os.path.join(out, "killed"), STRATEGIES[s])
        check(rc == 0 and "resuming from" in log and "step-00000004" in log and "is not read" in log,
              f"{name} {s}: resumed from step 4 with the pretrained folder {how} (rc {rc}) "
              f"{log.strip()[-800:] if rc else ''}")
        if rc != 0:
            continue
        a, fa = checkpoint_files(run_dir(os.path.join(out, "straight"), name))
        b, fb = checkpoint_files(run_dir(os.path.join(out, "killed"), name))
        same = os.path.basename(a) == os.path.basename(b) and fa == fb
        check(same, f"{name} {s}: after kill + resume, {os.path.basename(b)}'s {len(fb)} safetensors files equal the "
                    f"uninterrupted run's byte for byte")
        # the model is rebuilt from the checkpoint's config.json, which every checkpoint keeps
        check(os.path.exists(os.path.join(b, "config.json")), f"{name} {s}: the checkpoint holds config.json")


def main(argv):
    trainer = os.path.abspath(argv[0])
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    base = keep or tempfile.mkdtemp(prefix="hf_encoder_strategies.")
    os.makedirs(base, exist_ok=True)
    os.environ.setdefault("TRAINER_COMM_TIMEOUT", "120")
    models = {d: make_folders(base, d) for d in (0.0, 0.1)}
    pairs = write_pairs(base)
    if "--device" in argv:
        if on_devices(trainer, base, models, pairs, argv[argv.index("--device") + 1]) == 77:
            if not keep:
                shutil.rmtree(base)
            return 77
    else:
        invariance(trainer, base, models, pairs)
        resume(trainer, base, models, pairs)
        pairs_task(trainer, base, models)
    if not FAILS and not keep:
        shutil.rmtree(base)
    print("PASS" if not FAILS else f"FAIL: {len(FAILS)} checks (files in {base})")
    return 1 if FAILS else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.splitlines()[2].strip())
    sys.exit(main(sys.argv[1:]))
