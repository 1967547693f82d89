#!/usr/bin/env python3
"""hf_encoder's loading rules through `trainer embed` and `trainer run`, on tiny BERT folders
made here (Python's standard library only: no torch, no PyPI).

  hf_encoder_load.py TRAINER

- The same weights in every accepted form give byte-identical embeddings: F32, F16, BF16,
  sharded with model.safetensors.index.json, and the legacy form (`bert.` prefix,
  LayerNorm.gamma/.beta, cls.* and position_ids, which are listed once as not used).
- Each refusal, with its message: a missing tensor, an unexpected one, a shape mismatch (both
  shapes), pytorch_model.bin only (the conversion command), model_type gpt2 and distilbert,
  position_embedding_type relative_key, is_decoder, hidden_act swish.
- Pooling and normalize options: normalize gives unit rows; cls, mean and pooler differ.
- text<TAB>pair lines: (N, 2, E) embeddings and one score per pair; a line without its TAB
  in such a file is refused with file:line.
- task classify trains (`trainer run`, a few steps on tests/data/tokdata/reviews.csv), logs the
  head as newly initialised, and its checkpoint keeps Hugging Face's names.
- attention_probs_dropout_prob: out of range or not a number is refused naming it (and
  hidden_dropout_prob); embeddings (eval mode) do not depend on it; in training it is applied
  (hidden and classifier dropout 0: the losses of 0.5 differ from those of 0), reproducibly
  (two runs give the same losses), and `dataparallel` over 2 replicas draws the masks `cpu`
  draws (the same losses to 1e-5).
- task pairs trains on scored pairs (the text dataset's mode pairs: the validation loss falls),
  `trainer predict` writes index,score,similarity, dataparallel x3 trains with cpu's dropout
  masks (the same losses), and training it on single texts is refused.
"""
import glob
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKENIZER = os.path.join(ROOT, "tests", "data", "tokdata", "tokenizer.json")
REVIEWS = os.path.join(ROOT, "tests", "data", "tokdata", "reviews.csv")
V, H, L, F, S = 149, 8, 2, 16, 64
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)
    return cond


def bf16(x):
    """x rounded to a bf16 value (also exact in f16 and f32 for the magnitudes used)."""
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    v = struct.unpack("<f", struct.pack("<I", b))[0]
    return v if abs(v) > 1e-3 else 0.0


def tensors(rng):
    def t(*shape, mean=0.0, std=0.2):
        n = 1
        for d in shape:
            n *= d
        return (list(shape), [bf16(mean + rng.gauss(0, std)) for _ in range(n)])
    w = {"embeddings.word_embeddings.weight": t(V, H), "embeddings.position_embeddings.weight": t(S, H),
         "embeddings.token_type_embeddings.weight": t(2, H),
         "embeddings.LayerNorm.weight": t(H, mean=1.0, std=0.1), "embeddings.LayerNorm.bias": t(H)}
    for i in range(L):
        p = f"encoder.layer.{i}."
        for m in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            w[p + m + ".weight"] = t(H, H)
            w[p + m + ".bias"] = t(H)
        w[p + "attention.output.LayerNorm.weight"] = t(H, mean=1.0, std=0.1)
        w[p + "attention.output.LayerNorm.bias"] = t(H)
        w[p + "intermediate.dense.weight"] = t(F, H)
        w[p + "intermediate.dense.bias"] = t(F)
        w[p + "output.dense.weight"] = t(H, F)
        w[p + "output.dense.bias"] = t(H)
        w[p + "output.LayerNorm.weight"] = t(H, mean=1.0, std=0.1)
        w[p + "output.LayerNorm.bias"] = t(H)
    w["pooler.dense.weight"] = t(H, H)
    w["pooler.dense.bias"] = t(H)
    return w


def pack(dtype, values):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    if dtype == "BF16":
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in values)
    if dtype == "I64":
        return struct.pack(f"<{len(values)}q", *[int(v) for v in values])
    raise ValueError(dtype)


def write_st(path, w, dtype="F32"):
    header, blobs, off = {}, [], 0
    for name, (shape, values) in w.items():
        dt = "I64" if name.endswith("position_ids") else dtype
        b = pack(dt, values)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def config(**over):
    c = {"model_type": "bert", "vocab_size": V, "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": 2,
         "intermediate_size": F, "max_position_embeddings": S, "type_vocab_size": 2, "hidden_act": "gelu",
         "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
         "initializer_range": 0.02, "pad_token_id": 0, "position_embedding_type": "absolute"}
    c.update(over)
    return c


def folder(base, name, w=None, dtype="F32", cfg=None, shards=0):
    d = os.path.join(base, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg or config(), f)
    shutil.copy(TOKENIZER, os.path.join(d, "tokenizer.json"))
    if w is not None and shards:
        names = list(w)
        half = len(names) // 2
        parts = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
        for fn, ns in parts.items():
            write_st(os.path.join(d, fn), {n: w[n] for n in ns}, dtype)
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": {n: fn for fn, ns in parts.items() for n in ns}}, f)
    elif w is not None:
        write_st(os.path.join(d, "model.safetensors"), w, dtype)
    return d


def scored_pairs(path, n):
    """n lines `score<TAB>text<TAB>pair` of random words (a third of the pairs equal), the same
    lines on every call (seeded): task pairs' training data."""
    rng = random.Random(3)
    words = "the movie was great terrible plot and bad acting I liked it fine".split()
    with open(path, "w") as f:
        for i in range(n):
            a = " ".join(rng.choice(words) for _ in range(rng.randint(2, 8)))
            b = a if i % 3 == 0 else " ".join(rng.choice(words) for _ in range(rng.randint(2, 8)))
            f.write(f"{rng.random():.3f}\t{a}\t{b}\n")
    return path


def embed_cfg(base, model, name="embed", tokenizer=TOKENIZER, max_length=32):
    p = os.path.join(base, name + ".yaml")
    with open(p, "w") as f:
        f.write(f"""run:
  name: {name}
  output_dir: {base}/runs
model:
  name: hf_encoder
  params:
    pretrained: {model}
data:
  name: csv
  params:
    path: {REVIEWS}
    tokenizer: {tokenizer}
    text_column: text
    label_column: label
    max_length: {max_length}
  batch_size: 4
trainer:
  strategy: cpu
""")
    return p


def run(trainer, *args):
    p = subprocess.run([trainer, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def npy_floats(path):
    """A float32 .npy's shape and its values, flat."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<H", data[8:10])[0]
    hdr = data[10:10 + n].decode()
    shape = tuple(int(x) for x in hdr.split("(")[1].split(")")[0].split(",") if x.strip())
    return shape, struct.unpack(f"<{(len(data) - 10 - n) // 4}f", data[10 + n:])


def load_npy(path):
    """A 2-D float32 .npy's shape and rows."""
    shape, vals = npy_floats(path)
    return shape, [vals[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]


def finish(base):
    """The verdict: removes the scratch folder `base` when every check passed."""
    if not FAILS:
        shutil.rmtree(base)
    print("PASS" if not FAILS else f"FAIL: {len(FAILS)} checks (files in {base})")
    return 1 if FAILS else 0


def main(trainer):
    base = tempfile.mkdtemp(prefix="hf_encoder_load.")
    texts = os.path.join(base, "texts.txt")
    with open(texts, "w") as f:
        f.write("the movie was great\nterrible plot and bad acting\n\nI liked it [SEP] it was fine\n" * 3)
    rng = random.Random(7)
    w = tensors(rng)

    def embed(model, out, *extra):
        return run(trainer, "embed", embed_cfg(base, model), "--input", texts, "--output", out, *extra)

    ref = os.path.join(base, "ref.npy")
    rc, out = embed(folder(base, "f32", w), ref)
    check(rc == 0, f"F32 folder embeds (rc {rc}) {out.strip()[-300:] if rc else ''}")
    refb = open(ref, "rb").read() if rc == 0 else b""
    legacy = {}
    for n, v in w.items():
        n2 = n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        legacy["bert." + n2] = v
    legacy["cls.predictions.bias"] = ([V], [0.0] * V)
    legacy["bert.embeddings.position_ids"] = ([1, S], list(range(S)))
    for name, kw in (("f16", {"dtype": "F16"}), ("bf16", {"dtype": "BF16"}), ("sharded", {"shards": 2}),
                     ("legacy", {"w": legacy})):
        o = os.path.join(base, name + ".npy")
        rc, out = embed(folder(base, name, kw.pop("w", w), **kw), o)
        same = rc == 0 and open(o, "rb").read() == refb
        check(same, f"{name} form gives the same embeddings as F32 (rc {rc}) {out.strip()[-300:] if rc else ''}")
        if name == "legacy":
            check("2 tensors" in out and "cls.predictions.bias" in out and out.count("not used") == 1,
                  "legacy: cls.* and position_ids listed once as not used")

    def refused(name, expect, **kw):
        rc, out = embed(folder(base, name, **kw), os.path.join(base, name + ".npy"))
        ok = rc != 0 and all(e in out for e in expect)
        check(ok, f"refused: {name}: {out.strip().splitlines()[-1] if out.strip() else '(no output)'}")

    miss = dict(w)
    del miss["encoder.layer.1.output.dense.bias"]
    refused("missing", ["missing tensor encoder.layer.1.output.dense.bias [8]"], w=miss)
    extra = dict(w)
    extra["encoder.layer.5.attention.self.query.weight"] = ([H, H], [0.0] * H * H)
    refused("unexpected", ["unexpected tensor encoder.layer.5.attention.self.query.weight [8, 8]"], w=extra)
    bad = dict(w)
    bad["embeddings.word_embeddings.weight"] = ([V + 1, H], [0.0] * (V + 1) * H)
    refused("shape", ["embeddings.word_embeddings.weight", "[150, 8]", "[149, 8]"], w=bad)
    d = folder(base, "bin_only")
    open(os.path.join(d, "pytorch_model.bin"), "wb").close()
    rc, out = embed(d, os.path.join(base, "bin.npy"))
    check(rc != 0 and "pytorch_model.bin only" in out and "python3 -c" in out and "save_file" in out,
          "refused: pytorch_model.bin only, with the conversion command")
    refused("gpt2", ["model_type 'gpt2'"], w=w, cfg=config(model_type="gpt2"))
    refused("distilbert", ["model_type 'distilbert'"], w=w, cfg=config(model_type="distilbert"))
    refused("relative", ["position_embedding_type 'relative_key'"], w=w,
            cfg=config(position_embedding_type="relative_key"))
    refused("decoder", ["is_decoder"], w=w, cfg=config(is_decoder=True))
    refused("swish", ["hidden_act 'swish'"], w=w, cfg=config(hidden_act="swish"))
    refused("attn_dropout_range", ["config.json: attention_probs_dropout_prob 1.5 is outside [0, 1)"], w=w,
            cfg=config(attention_probs_dropout_prob=1.5))
    refused("attn_dropout_string", ["config.json: attention_probs_dropout_prob must be a number in [0, 1)",
                                    "got a string"], w=w, cfg=config(attention_probs_dropout_prob="0.1"))
    refused("hidden_dropout_range", ["config.json: hidden_dropout_prob -0.1 is outside [0, 1)"], w=w,
            cfg=config(hidden_dropout_prob=-0.1))

    # attention_probs_dropout_prob: no effect on embeddings (eval mode)
    o = os.path.join(base, "attn0.npy")
    rc, out = embed(folder(base, "attn0", w, cfg=config(attention_probs_dropout_prob=0.0)), o)
    check(rc == 0 and open(o, "rb").read() == refb,
          f"embeddings with attention_probs_dropout_prob 0 and 0.1 are the same (rc {rc})")

    # pooling and normalize
    model = os.path.join(base, "f32")
    rows = {}
    for pool in ("cls", "mean", "pooler"):
        o = os.path.join(base, f"pool_{pool}.npy")
        rc, out = embed(model, o, f"model.params.pooling={pool}", "model.params.normalize=true")
        check(rc == 0, f"pooling {pool} embeds (rc {rc})")
        if rc == 0:
            shape, r = load_npy(o)
            rows[pool] = r
            norms = [sum(x * x for x in row) ** 0.5 for row in r]
            check(shape == (12, H) and all(abs(n - 1) < 1e-5 for n in norms),
                  f"pooling {pool}, normalize: {shape} rows of norm 1 (min {min(norms):.7f}, max {max(norms):.7f})")
    if len(rows) == 3:
        check(rows["cls"][0] != rows["mean"][0] and rows["cls"][0] != rows["pooler"][0], "cls, mean and pooler differ")

    # text<TAB>pair lines: (N, 2, E) and a score per pair; a line without its TAB is refused
    pairs = os.path.join(base, "pairs.txt")
    with open(pairs, "w") as f:
        f.write("the movie was great\tI liked it\nbad\tterrible plot\n")
    o = os.path.join(base, "pairs.npy")
    rc, out = run(trainer, "embed", embed_cfg(base, model), "--input", pairs, "--output", o,
                  "model.params.pooling=mean", "model.params.normalize=true")
    rows_ok = False
    if rc == 0:
        with open(o, "rb") as f:
            hdr = f.read(128).decode("latin-1")
        with open(os.path.join(base, "pairs.csv")) as f:
            lines = f.read().split()
        rows_ok = "'shape': (2, 2, 8, )" in hdr and lines[0] == "index,score" and len(lines) == 3
    check(rc == 0 and rows_ok, f"text<TAB>pair lines: (2, 2, 8) embeddings and 2 scores in pairs.csv (rc {rc})")
    with open(pairs, "a") as f:
        f.write("no tab here\n")
    rc, out = run(trainer, "embed", embed_cfg(base, model), "--input", pairs, "--output", o)
    check(rc != 0 and f"{pairs}:3: expected 'text<TAB>pair' (one TAB)" in out,
          f"refused: a pair file's line without a TAB: {out.strip().splitlines()[-1] if out.strip() else ''}")

    # task classify: trains, names the new head, checkpoints keep HF names
    cfg = embed_cfg(base, model, "classify")
    rc, out = run(trainer, "run", cfg, "model.params.task=classify", "trainer.max_steps=6", "data.val_fraction=0",
                  "optimizer.name=adamw", "optimizer.lr=0.001")
    check(rc == 0, f"task classify trains (rc {rc}) {out.strip()[-400:] if rc else ''}")
    check("newly initialised" in out and "classifier.weight" in out, "classify: the head is named as newly initialised")
    cks = sorted(glob.glob(os.path.join(base, "runs", "classify", "*", "checkpoints", "*", "*.safetensors")))
    names = ""
    for c in cks:
        with open(c, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            names += f.read(n).decode()
    check("encoder.layer.1.attention.self.query.weight" in names and '"classifier.weight"' in names,
          f"classify checkpoint keeps Hugging Face's names ({len(cks)} files)")
    # attention_probs_dropout_prob in training: applied, reproducible, the same masks on dataparallel
    def losses(name, p, *extra):
        m = folder(base, name, w, cfg=config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=p,
                                                 classifier_dropout=0.0))
        rc, out = run(trainer, "run", embed_cfg(base, m, name), "model.params.task=classify", "trainer.max_steps=4",
                      "trainer.log_every=1", "data.val_fraction=0", "optimizer.name=adamw", "optimizer.lr=0.001",
                      "data.shuffle=false", *extra)
        check(rc == 0, f"{name}: trains (rc {rc}) {out.strip()[-400:] if rc else ''}")
        got = []
        for f in glob.glob(os.path.join(base, "runs", name, "*", "metrics.jsonl")):
            with open(f) as fh:
                got += [json.loads(ln)["loss"] for ln in fh if '"lr"' in ln and '"loss"' in ln]
        return got
    l0, l5, l5b = losses("attn_p0", 0.0), losses("attn_p5", 0.5), losses("attn_p5b", 0.5)
    l5dp = losses("attn_p5dp", 0.5, "trainer.strategy=dataparallel", "trainer.devices=2")
    check(len(l0) == 4 and len(l5) == 4 and l0 != l5,
          f"attention_probs_dropout_prob 0.5 changes the training losses ({l0} vs {l5})")
    check(l5 == l5b, f"attention dropout is reproducible ({l5} vs {l5b})")
    worst = max((abs(a - b) / abs(b) for a, b in zip(l5dp, l5)), default=1.0)
    check(len(l5dp) == 4 and worst <= 1e-5,
          f"dataparallel x2 draws cpu's attention dropout masks: losses within {worst:.2g} (tol 1e-5)")
    # task pairs: trains on scored pairs (text mode pairs), predict scores them; single texts refused
    rng = random.Random(3)
    words = "the movie was great terrible plot and bad acting I liked it fine".split()
    pairs_tsv = os.path.join(base, "scored.tsv")
    with open(pairs_tsv, "w") as f:
        for i in range(40):
            a = " ".join(rng.choice(words) for _ in range(rng.randint(2, 8)))
            b = a if i % 2 else " ".join(rng.choice(words) for _ in range(rng.randint(2, 8)))
            f.write(f"{i % 2}\t{a}\t{b}\n")
    pcfg = os.path.join(base, "pairs_task.yaml")
    with open(pcfg, "w") as f:
        f.write(f"""run: {{name: pairs, output_dir: {base}/runs, seed: 1}}
model: {{name: hf_encoder, params: {{pretrained: {model}, task: pairs, pooling: mean, normalize: "true"}}}}
data: {{name: text, params: {{path: {pairs_tsv}, mode: pairs, tokenizer: {model}, max_length: 16, padding: longest}},
       batch_size: 8, val_fraction: 0.2}}
optimizer: {{name: adamw, lr: 0.003}}
trainer: {{max_epochs: 3, log_every: 4, progress: lines}}
""")
    rc, out = run(trainer, "run", pcfg)
    vl = [float(v) for v in re.findall(r"val loss ([0-9.]+)", out)]
    check(rc == 0 and len(vl) == 3 and vl[-1] < vl[0],
          f"task pairs trains on scored pairs: val loss {' -> '.join(f'{v:.4f}' for v in vl)} (rc {rc}) "
          f"{out.strip()[-300:] if rc else ''}")
    preds = os.path.join(base, "pairs_pred.csv")
    rc, out = run(trainer, "predict", pcfg, "--checkpoint", os.path.join(base, "runs", "pairs", "0"), "--output", preds)
    rows = open(preds).read().split() if rc == 0 else []
    check(rc == 0 and rows[0] == "index,score,similarity" and len(rows) == 9 and
          all(-1 <= float(r.split(",")[2]) <= 1 for r in rows[1:]),
          f"task pairs: predict writes index,score,similarity for the 8 validation pairs (rc {rc})")
    def pair_losses(name, *extra):  # hidden and attention dropout 0.1 (the folder's config.json)
        rc, out = run(trainer, "run", pcfg, f"run.name={name}", "trainer.max_steps=4", "trainer.log_every=1",
                      "data.shuffle=false", *extra)
        if rc != 0:
            return []
        with open(os.path.join(base, "runs", name, "0", "metrics.jsonl")) as fh:
            return [json.loads(ln)["loss"] for ln in fh if '"lr"' in ln and '"loss"' in ln]
    one, three = pair_losses("pairs_cpu"), pair_losses("pairs_dp3", "trainer.strategy=dataparallel", "trainer.devices=3")
    worst = max((abs(a - b) / abs(b) for a, b in zip(three, one)), default=1.0)
    check(len(one) == len(three) == 4 and worst <= 1e-5,
          f"task pairs with dropout: dataparallel x3 draws cpu's masks for each text (losses {one}, within {worst:.2g})")
    rc, out = run(trainer, "run", cfg, "model.params.task=pairs", "trainer.max_steps=1", "data.val_fraction=0")
    check(rc != 0 and "task pairs trains on scored text pairs" in out and "the dataset gives single texts" in out,
          f"refused: task pairs on single texts: {out.strip().splitlines()[-1] if out.strip() else ''}")
    return finish(base)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[2].strip())
    sys.exit(main(os.path.abspath(sys.argv[1])))
