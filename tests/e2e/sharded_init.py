#!/usr/bin/env python3
"""Strategy `sharded` starts from its shard: each rank initialises, and reads from files, only
the slices of the parameters it keeps (docs/strategies.md, "sharded", Start-up).

  sharded_init.py TRAINER

- The initial weights are cpu's. Each run takes one SGD step at the smallest learning rate
  the trainer accepts (1e-12: no weight moves by 1e-9) and checkpoints it; every tensor then
  equals cpu's to rtol 1e-6 and atol 1e-9, where an element initialised wrongly is off by its
  own size (a run of another seed is, so the comparison can fail). Small units, so that the
  ranks' slices cut parameters at arbitrary elements:
  - a random-init transformer LM (normal, kaiming and fan-in uniform, zeros and ones) under
    sharded stage 3 at 2, 3 and 4 ranks, stage 1 at 3 and stage 2 at 4;
  - hf_encoder from a pretrained folder (F16 weights in two files with an index, its
    classifier head new, from the init rules) under stage 3 at 2, 3 and 4 ranks and stage 2
    at 3;
  - model.init_from a full checkpoint (cpu's) under stage 3 x3 and stage 1 x2, and a sharded
    one (stage 3 x4's) under stage 3 x3 and stage 2 x2.
- Start-up memory: the memory record's startup_peak (rank 0's peak resident set when set up,
  before any step) less the same run's with a tiny model, for models of B bytes of parameters
  (a transformer initialised from the seed, an hf_encoder read from a pretrained F32 file)
  under stage 3 x4 with plain SGD: at most 0.65 B (its parameter and gradient shards are 0.5
  B); a rank that initialised, or read, the model whole would need more than B. Stage 1 x4
  from the pretrained file: at most 1.25 B (the full parameters a stage-1 rank keeps, and no
  copy of the file beside them).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_runs  # noqa: E402  (the checkpoint reader, full or sharded)
import hf_encoder_load as tiny  # noqa: E402  (the tiny BERT folders)

FAILS = []
LM = """run: {{name: {name}, seed: {seed}}}
model: {{name: transformer, params: {{mode: lm, d_model: {C}, n_head: 2, n_layer: {L}, dropout: 0.0}}}}
data: {{name: synthetic, params: {{task: lm, samples: 24, val_samples: 4, seq_len: 16, vocab: 64}}, batch_size: 12}}
optimizer: {{name: sgd, lr: 1.0e-12}}
trainer: {{max_steps: 1, log_every: 1, progress: lines, threads: 1}}
checkpoint: {{every_n_steps: 1}}
"""
HF = """run: {{name: {name}, seed: 5}}
model:
  name: hf_encoder
  params: {{pretrained: {model}, task: classify}}
data:
  name: csv
  params: {{path: {reviews}, tokenizer: {tokenizer}, text_column: text, label_column: label, max_length: 32}}
  batch_size: 12
optimizer: {{name: sgd, lr: 1.0e-12}}
trainer: {{max_steps: 1, log_every: 1, progress: lines, threads: 1}}
checkpoint: {{every_n_steps: 1}}
"""


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def sharded(stage, ranks, unit_mb="0.002"):
    return ["trainer.strategy=sharded", f"strategy.stage={stage}", f"strategy.unit_mb={unit_mb}",
            f"trainer.devices={ranks}"]


def write(base, name, text):
    p = os.path.join(base, name + ".yaml")
    with open(p, "w") as f:
        f.write(text)
    return p


def train(trainer, cfg, out, *opts):
    """The run's folder (runs are named after their config), or None when it failed."""
    p = subprocess.run([trainer, "run", cfg, f"run.output_dir={out}", *opts], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    if p.returncode != 0:
        check(False, f"trainer run {os.path.basename(cfg)} {' '.join(opts)}: exit {p.returncode}: {p.stdout[-600:]}")
        return None
    return os.path.join(out, os.listdir(out)[0], "0")


def weights(run):
    return compare_runs.checkpoint_weights(compare_runs.last_checkpoint(run))


def same(ref, run):
    """Whether run's checkpoint has ref's tensors to rtol 1e-6, atol 1e-9; and the worst."""
    a, b = weights(ref), weights(run)
    if sorted(a) != sorted(b):
        return False, f"other tensors: {sorted(set(a) ^ set(b))}"
    worst, name = max((float(np.max(np.abs(a[k] - b[k]) / (1e-9 + 1e-6 * np.abs(a[k])))), k) for k in a)
    return worst <= 1.0, f"{len(a)} tensors, worst {name} at {worst:.2g} of the tolerance"


def against(ref, label, runs):
    for what, run in runs:
        if ref and run:
            ok, msg = same(ref, run)
            check(ok, f"{label}: {what} starts from cpu's weights ({msg})")


def transformer(trainer, base):
    cfg = write(base, "lm", LM.format(name="lm", seed=3, C=32, L=2))
    ref = train(trainer, cfg, f"{base}/lm/cpu", "trainer.strategy=cpu")
    other = train(trainer, write(base, "lm_seed4", LM.format(name="lm", seed=4, C=32, L=2)), f"{base}/lm/seed4",
                  "trainer.strategy=cpu")
    if ref and other:
        ok, msg = same(ref, other)
        check(not ok, f"transformer: another seed's weights differ ({msg})")
    runs = {(3, 2): None, (3, 3): None, (3, 4): None, (1, 3): None, (2, 4): None}
    for stage, ranks in runs:
        runs[(stage, ranks)] = train(trainer, cfg, f"{base}/lm/s{stage}x{ranks}", *sharded(stage, ranks))
    against(ref, "transformer", [(f"stage {s} x{n}", r) for (s, n), r in runs.items()])
    return ref, runs[(3, 4)]


def init_from(trainer, base, full, shards):
    """model.init_from a full checkpoint and a sharded one: the pieces each rank owns."""
    cfg = write(base, "lm_from", LM.format(name="lm_from", seed=9, C=32, L=2))
    for kind, src, runs in (("full", full, ((3, 3), (1, 2))), ("sharded", shards, ((3, 3), (2, 2)))):
        if not src:
            continue
        ck = compare_runs.last_checkpoint(src)
        ref = train(trainer, cfg, f"{base}/from_{kind}/cpu", "trainer.strategy=cpu", f"model.init_from={ck}")
        got = [(f"stage {s} x{n}", train(trainer, cfg, f"{base}/from_{kind}/s{s}x{n}", *sharded(s, n),
                                         f"model.init_from={ck}")) for s, n in runs]
        against(ref, f"init_from a {kind} checkpoint", got)
        if ref:
            ok, msg = same(src, ref)
            check(ok, f"init_from a {kind} checkpoint: cpu starts from its weights ({msg})")


def hf_encoder(trainer, base):
    model = tiny.folder(base, "bert", tiny.tensors(random.Random(11)), dtype="F16", shards=2)
    cfg = write(base, "hf", HF.format(name="hf", model=model, reviews=tiny.REVIEWS, tokenizer=tiny.TOKENIZER))
    ref = train(trainer, cfg, f"{base}/hf/cpu", "trainer.strategy=cpu")
    got = [(f"stage {s} x{n}", train(trainer, cfg, f"{base}/hf/s{s}x{n}", *sharded(s, n, "0.001")))
           for s, n in ((3, 2), (3, 3), (3, 4), (2, 3))]
    against(ref, "hf_encoder from a pretrained folder", got)


def startup_peak(run):
    recs = [json.loads(x) for x in open(os.path.join(run, "metrics.jsonl")) if x.strip()]
    return next((r["memory"]["startup_peak"] for r in recs if "memory" in r), 0)


def big_bert(base, name, V, H):
    """An F32 BERT folder of one layer with a V x H word embedding (numpy: fast to write)."""
    rng = np.random.default_rng(1)
    t = lambda *s: (list(s), (rng.standard_normal(int(np.prod(s))) * 0.02).astype(np.float32))
    w = {"embeddings.word_embeddings.weight": t(V, H), "embeddings.position_embeddings.weight": t(64, H),
         "embeddings.token_type_embeddings.weight": t(2, H), "embeddings.LayerNorm.weight": t(H),
         "embeddings.LayerNorm.bias": t(H)}
    p = "encoder.layer.0."
    for m, shape in (("attention.self.query", (H, H)), ("attention.self.key", (H, H)), ("attention.self.value", (H, H)),
                     ("attention.output.dense", (H, H)), ("intermediate.dense", (4 * H, H)), ("output.dense", (H, 4 * H))):
        w[p + m + ".weight"], w[p + m + ".bias"] = t(*shape), t(shape[0])
    for m in ("attention.output.LayerNorm", "output.LayerNorm"):
        w[p + m + ".weight"], w[p + m + ".bias"] = t(H), t(H)
    d = tiny.folder(base, name, cfg=tiny.config(vocab_size=V, hidden_size=H, num_hidden_layers=1,
                                                intermediate_size=4 * H, num_attention_heads=2))
    header, off = {}, 0
    for k, (shape, v) in w.items():
        header[k] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + v.nbytes]}
        off += v.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for _, v in w.values():
            f.write(v.tobytes())
    return d


def parameters(run):
    """The trainable parameter count the run's set-up line gives."""
    m = re.search(r"\((\d+) parameters\)", open(os.path.join(run, "log.txt")).read())
    return int(m.group(1)) if m else 0


def memory(trainer, base):
    for label, small, large in memory_models(base):
        for stage, most in ((3, 0.65), (1, 1.25)) if label.startswith("hf") else ((3, 0.65),):
            b = train(trainer, small, f"{base}/mem/{label}_s{stage}_small", *sharded(stage, 4, "4"))
            r = train(trainer, large, f"{base}/mem/{label}_s{stage}_large", *sharded(stage, 4, "4"))
            if not (b and r):
                continue
            nbytes = 4 * parameters(r)
            grew = startup_peak(r) - startup_peak(b)
            check(startup_peak(b) > 0 and grew <= most * nbytes,
                  f"start-up of stage {stage} x4, {label}: rank 0's peak resident set grew {grew / 2**20:.1f} MiB for "
                  f"{nbytes / 2**20:.1f} MiB of parameters ({grew / nbytes:.2f}x; at most {most}x)")


def memory_models(base):
    """(label, a tiny model's config, a config of some 6.4 M parameters)"""
    yield ("transformer", write(base, "lm_small", LM.format(name="m", seed=3, C=16, L=1)),
           write(base, "lm_large", LM.format(name="m", seed=3, C=512, L=2)))
    fmt = lambda m: HF.format(name="h", model=m, reviews=tiny.REVIEWS, tokenizer=tiny.TOKENIZER)
    yield ("hf_encoder pretrained", write(base, "hf_small", fmt(big_bert(base, "bert_small", 149, 8))),
           write(base, "hf_large", fmt(big_bert(base, "bert_large", 12000, 384))))


def main(trainer):
    base = tempfile.mkdtemp(prefix="sharded_init.")
    os.environ.setdefault("TRAINER_COMM_TIMEOUT", "120")
    ref, s3x4 = transformer(trainer, base)
    init_from(trainer, base, ref, s3x4)
    hf_encoder(trainer, base)
    memory(trainer, base)
    if not FAILS:
        shutil.rmtree(base)
    print("PASS" if not FAILS else f"FAIL: {len(FAILS)} checks (files in {base})")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
