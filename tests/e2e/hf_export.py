#!/usr/bin/env python3
"""`trainer export CHECKPOINT OUTDIR --format hf` on tiny BERT and RoBERTa folders made with
hf_encoder_load.py's helpers (Python's standard library only: no torch, no PyPI).

  hf_export.py TRAINER [OLD_MODEL_DIR]

- A BERT classifier trained a few steps (`trainer run`, task classify on
  tests/data/tokdata/reviews.csv), exported from its run folder: config.json
  (BertForSequenceClassification, num_labels, id2label/label2id by the classes' names,
  torch_dtype float32, the pretrained config's other keys), model.safetensors with every
  tensor under transformers' names (`bert.` prefix, classifier.* without), the shapes and the
  very bytes of the checkpoint's tensors, metadata format pt; tokenizer.json the run's
  data.params.tokenizer file.
- The same trained under `sharded` stage 3 over 2 ranks: the export of its sharded checkpoint
  equals `trainer checkpoint consolidate`'s file.
- A RoBERTa classifier (checkpoint folder given, OUTDIR an empty folder, written with a
  trailing slash): `roberta.` prefix, classifier.dense / classifier.out_proj, no pooler, the
  folder's tokenizer files copied (data.params.tokenizer names the folder).
- An embedding model (task embed cannot train: its run folder and checkpoint are made here as
  `trainer run` writes them): AutoModel's names, pooler included, sentence-transformers'
  files copied; with another pooling than theirs they are left out.
- Refusals, each with its message and nothing written: OUTDIR not empty (its file untouched),
  OUTDIR a file, a stray argument or none (usage, exit 2), a model without export (mlp; and OLD_MODEL_DIR's old_model, built for ABI
  0.10, which trains first), --format onnx, a missing checkpoint, a
  checkpoint outside its run folder; a failure after the temporary folder was made (the
  pretrained folder's config.json is not JSON) leaves neither OUTDIR nor the temporary folder.
"""
import glob
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import hf_encoder_load as hl  # noqa: E402  (tiny folders, configs, safetensors writer)

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(trainer, *args):
    p = subprocess.run([trainer, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return p.returncode, p.stdout


def last_line(out):
    return out.strip().splitlines()[-1] if out.strip() else "(no output)"


def read_st(path):
    """{name: (dtype, shape, raw bytes)} and the metadata of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    base = 8 + n
    return {k: (v["dtype"], v["shape"], data[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in hdr.items()}, meta


def newest_checkpoint(run_dir):
    return sorted(glob.glob(os.path.join(run_dir, "checkpoints", "step-*")))[-1]


def same_tensors(exported, ckpt_file, rename):
    """Every checkpoint tensor is in the export under rename(name), same shape and bytes, and
    the export holds nothing else."""
    ck, _ = read_st(ckpt_file)
    want = {rename(k): v for k, v in ck.items()}
    bad = [k for k in want if k not in exported or exported[k][1] != want[k][1] or exported[k][2] != want[k][2]]
    extra = sorted(set(exported) - set(want))
    return not bad and not extra, f"{len(want)} tensors; differing {bad[:3]}, extra {extra[:3]}"


def train(trainer, cfg, name, *over):
    rc, out = run(trainer, "run", cfg, f"run.name={name}", "model.params.task=classify", "trainer.max_steps=3",
                  "data.val_fraction=0", "optimizer.lr=0.01", *over)
    check(rc == 0, f"{name}: trains 3 steps (rc {rc}) {out.strip()[-300:] if rc else ''}")
    return os.path.join(os.path.dirname(cfg), "runs", name, "0")


def bert_classify(trainer, base, cfg, bert_folder):
    run_dir = train(trainer, cfg, "bert_cls")
    out_dir = os.path.join(base, "export_bert")
    rc, out = run(trainer, "export", run_dir, out_dir)
    check(rc == 0 and "export: " in out and "-> " + out_dir in out,
          f"bert classify: export of the run folder (rc {rc}): {last_line(out)}")
    if rc:
        return
    files = sorted(os.listdir(out_dir))
    check(files == ["config.json", "model.safetensors", "tokenizer.json"], f"bert classify: files {files}")
    with open(os.path.join(out_dir, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(bert_folder, "config.json")) as f:
        src = json.load(f)
    kept = all(c.get(k) == v for k, v in src.items())
    check(c.get("architectures") == ["BertForSequenceClassification"] and c.get("num_labels") == 2 and
          c.get("id2label") == {"0": "negative", "1": "positive"} and c.get("label2id") == {"negative": 0, "positive": 1}
          and c.get("torch_dtype") == "float32" and kept,
          f"bert classify: config.json {{architectures {c.get('architectures')}, id2label {c.get('id2label')}, "
          f"torch_dtype {c.get('torch_dtype')}}}, the pretrained keys kept: {kept}")
    st, meta = read_st(os.path.join(out_dir, "model.safetensors"))
    ok, why = same_tensors(st, os.path.join(newest_checkpoint(run_dir), "model.safetensors"),
                           lambda k: k if k.startswith("classifier.") else "bert." + k)
    check(ok and meta.get("format") == "pt", f"bert classify: the checkpoint's tensors under bert., bytes equal, "
                                             f"metadata format {meta.get('format')} ({why})")
    shapes = {k: st[k][1] for k in ("classifier.weight", "classifier.bias", "bert.pooler.dense.weight",
                                    "bert.embeddings.word_embeddings.weight") if k in st}
    check(shapes == {"classifier.weight": [2, hl.H], "classifier.bias": [2], "bert.pooler.dense.weight": [hl.H, hl.H],
                     "bert.embeddings.word_embeddings.weight": [hl.V, hl.H]}
          and all(v[0] == "F32" for v in st.values()), f"bert classify: F32, shapes {shapes}")
    with open(os.path.join(out_dir, "tokenizer.json"), "rb") as f, open(hl.TOKENIZER, "rb") as g:
        check(f.read() == g.read(), "bert classify: tokenizer.json is the run's data.params.tokenizer")


def sharded(trainer, base, cfg):
    run_dir = train(trainer, cfg, "bert_sharded", "trainer.strategy=sharded", "trainer.devices=2", "strategy.stage=3")
    ck = newest_checkpoint(run_dir) if os.path.isdir(os.path.join(run_dir, "checkpoints")) else ""
    check(os.path.exists(os.path.join(ck, "index.json")), f"sharded: the checkpoint is sharded ({ck})")
    out_dir = os.path.join(base, "export_sharded")
    rc, out = run(trainer, "export", ck, out_dir)
    check(rc == 0, f"sharded: export of the sharded checkpoint (rc {rc}): {last_line(out)}")
    whole = os.path.join(base, "consolidated.safetensors")
    rc2, out2 = run(trainer, "checkpoint", "consolidate", ck, whole)
    if rc or rc2:
        check(False, f"sharded: consolidate (rc {rc2}) {last_line(out2)}")
        return
    st, _ = read_st(os.path.join(out_dir, "model.safetensors"))
    ok, why = same_tensors(st, whole, lambda k: k if k.startswith("classifier.") else "bert." + k)
    check(ok, f"sharded: the export equals trainer checkpoint consolidate's tensors ({why})")


def roberta_folder(base):
    rng = random.Random(11)
    w = hl.tensors(rng)
    S = hl.S + 2  # RoBERTa's positions start at pad_token_id + 1
    w["embeddings.position_embeddings.weight"] = ([S, hl.H], [rng.gauss(0, 0.2) for _ in range(S * hl.H)])
    w["embeddings.token_type_embeddings.weight"] = ([1, hl.H], [rng.gauss(0, 0.2) for _ in range(hl.H)])
    d = hl.folder(base, "roberta", w, cfg=hl.config(model_type="roberta", type_vocab_size=1, pad_token_id=1,
                                                   max_position_embeddings=S, layer_norm_eps=1e-5))
    for name, obj in (("tokenizer_config.json", {"model_max_length": 32}),
                      ("special_tokens_map.json", {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]"})):
        with open(os.path.join(d, name), "w") as f:
            json.dump(obj, f)
    return d


def roberta_classify(trainer, base):
    d = roberta_folder(base)
    cfg = hl.embed_cfg(base, d, "roberta")
    run_dir = train(trainer, cfg, "roberta_cls", f"data.params.tokenizer={d}")
    ck = newest_checkpoint(run_dir)
    out_dir = os.path.join(base, "export_roberta")
    os.makedirs(out_dir)  # an empty folder is taken
    rc, out = run(trainer, "export", ck, out_dir + "/", "--format", "hf")
    check(rc == 0, f"roberta classify: export of a checkpoint folder into an empty OUTDIR/ (rc {rc}): {last_line(out)}")
    if rc:
        return
    files = sorted(os.listdir(out_dir))
    check(files == ["config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json",
                    "tokenizer_config.json"], f"roberta classify: the folder's tokenizer files copied: {files}")
    with open(os.path.join(out_dir, "config.json")) as f:
        c = json.load(f)
    check(c.get("architectures") == ["RobertaForSequenceClassification"] and c.get("model_type") == "roberta" and
          c.get("layer_norm_eps") == 1e-5, f"roberta classify: config.json architectures {c.get('architectures')}")
    st, _ = read_st(os.path.join(out_dir, "model.safetensors"))
    ok, why = same_tensors(st, os.path.join(ck, "model.safetensors"),
                           lambda k: k if k.startswith("classifier.") else "roberta." + k)
    heads = {k: st[k][1] for k in st if k.startswith("classifier.")}
    check(ok and heads == {"classifier.dense.weight": [hl.H, hl.H], "classifier.dense.bias": [hl.H],
                           "classifier.out_proj.weight": [2, hl.H], "classifier.out_proj.bias": [2]}
          and not any("pooler" in k for k in st),
          f"roberta classify: roberta. prefix, head {sorted(heads)}, no pooler ({why})")


def embed_run(base, model, name, w):
    """A run folder as `trainer run` writes one (config.yaml, checkpoints/step-N/ with
    model.safetensors and state.json), holding an embedding model's weights w."""
    run_dir = os.path.join(base, "runs", name, "0")
    ck = os.path.join(run_dir, "checkpoints", "step-00000001")
    os.makedirs(ck)
    shutil.copy(hl.embed_cfg(base, model, name), os.path.join(run_dir, "config.yaml"))
    hl.write_st(os.path.join(ck, "model.safetensors"), w)
    with open(os.path.join(ck, "state.json"), "w") as f:
        json.dump({"epoch": 0, "step": 1, "batch_in_epoch": 1, "seed": "1", "config_hash": "0", "model": "hf_encoder"}, f)
    return run_dir


def embed(trainer, base):
    rng = random.Random(5)
    w = hl.tensors(rng)
    d = hl.folder(base, "bert_st", w)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    os.makedirs(os.path.join(d, "1_Pooling"))
    for name, obj in (("modules.json", modules), ("sentence_bert_config.json", {"max_seq_length": 32}),
                      ("1_Pooling/config.json", {"word_embedding_dimension": hl.H, "pooling_mode_mean_tokens": True})):
        with open(os.path.join(d, name), "w") as f:
            json.dump(obj, f)
    tuned = {k: (s, [x + rng.gauss(0, 0.01) for x in v]) for k, (s, v) in w.items()}  # "fine-tuned" weights
    run_dir = embed_run(base, d, "embed_st", tuned)
    out_dir = os.path.join(base, "export_embed")
    rc, out = run(trainer, "export", run_dir, out_dir)
    check(rc == 0, f"embed: export of a task embed run (rc {rc}): {last_line(out)}")
    if rc:
        return
    found = sorted(os.path.relpath(os.path.join(r, f), out_dir) for r, _, fs in os.walk(out_dir) for f in fs)
    check(found == ["1_Pooling/config.json", "config.json", "model.safetensors", "modules.json",
                    "sentence_bert_config.json", "tokenizer.json"] and os.path.isdir(os.path.join(out_dir, "2_Normalize")),
          f"embed: sentence-transformers' files copied (and 2_Normalize/): {found}")
    with open(os.path.join(out_dir, "config.json")) as f:
        c = json.load(f)
    check(c.get("architectures") == ["BertModel"] and "id2label" not in c, f"embed: architectures {c.get('architectures')}")
    st, _ = read_st(os.path.join(out_dir, "model.safetensors"))
    ok, why = same_tensors(st, os.path.join(newest_checkpoint(run_dir), "model.safetensors"), lambda k: k)
    check(ok and "pooler.dense.weight" in st, f"embed: AutoModel's names (no prefix, the pooler), bytes equal ({why})")
    out_cls = os.path.join(base, "export_embed_cls")
    rc, out = run(trainer, "export", run_dir, out_cls, "model.params.pooling=cls")
    check(rc == 0 and not os.path.exists(os.path.join(out_cls, "modules.json")) and
          "sentence-transformers' files" in out and "not copied" in out,
          f"embed: with pooling cls (theirs: mean) their files are left out, and said so (rc {rc})")


def refusals(trainer, base, cfg, bert_folder, old_model):
    run_dir = os.path.join(base, "runs", "bert_cls", "0")
    full = os.path.join(base, "full")
    os.makedirs(full)
    with open(os.path.join(full, "keep.txt"), "w") as f:
        f.write("mine")
    rc, out = run(trainer, "export", run_dir, full)
    with open(os.path.join(full, "keep.txt")) as f:
        kept = f.read() == "mine" and os.listdir(full) == ["keep.txt"]
    check(rc == 1 and f"{full} exists and is not empty (it holds keep.txt): refusing to overwrite" in out and kept,
          f"refused: a non-empty OUTDIR, its file untouched: {last_line(out)}")
    rc, out = run(trainer, "export", run_dir, os.path.join(full, "keep.txt"))
    check(rc == 1 and "keep.txt exists and is not a folder" in out, f"refused: OUTDIR a file: {last_line(out)}")
    rc, out = run(trainer, "export", run_dir, os.path.join(base, "x_onnx"), "--format", "onnx")
    check(rc == 1 and "--format: 'onnx' is not a format trainer export writes (hf" in out,
          f"refused: --format onnx: {last_line(out)}")
    rc, out = run(trainer, "export", run_dir, os.path.join(base, "x_args"), "extra")
    check(rc == 2 and "unexpected argument 'extra'" in out and "usage: trainer export CHECKPOINT OUTDIR" in out,
          f"refused: a third argument that is no key=value (exit 2): {out.strip().splitlines()[0]}")
    rc, out = run(trainer, "export", run_dir)
    check(rc == 2 and "CHECKPOINT and OUTDIR are required" in out, "refused: no OUTDIR (exit 2)")
    rc, out = run(trainer, "--help")
    check(rc == 0 and "export CHECKPOINT OUTDIR [--format hf]" in out, "trainer --help lists export")
    missing = os.path.join(base, "runs", "nothing")
    rc, out = run(trainer, "export", missing, os.path.join(base, "x_missing"))
    check(rc == 1 and f"{missing}: no checkpoint there" in out, f"refused: a missing checkpoint: {last_line(out)}")
    loose = os.path.join(base, "loose", "step-00000003")
    shutil.copytree(newest_checkpoint(run_dir), loose)
    rc, out = run(trainer, "export", loose, os.path.join(base, "x_loose"))
    check(rc == 1 and "config.yaml cannot be read" in out and "run folder that holds the checkpoint" in out,
          f"refused: a checkpoint outside its run folder: {last_line(out)}")
    rc, out = run(trainer, "run", os.path.join(ROOT, "configs", "quickstart.yaml"), f"run.output_dir={base}/runs",
                  "run.name=mlp", "trainer.max_steps=2", "trainer.strategy=cpu", "data.params.samples=512",
                  "data.params.val_samples=128")
    check(rc == 0, f"mlp trains 2 steps (rc {rc})")
    rc, out = run(trainer, "export", os.path.join(base, "runs", "mlp", "0"), os.path.join(base, "x_mlp"))
    check(rc == 1 and "model 'mlp' cannot export --format hf" in out, f"refused: a model without export: {last_line(out)}")
    if old_model:  # built for ABI 0.10: its table ends before export_to (an abort() lies past it)
        cfg_old = os.path.join(base, "old.yaml")
        with open(cfg_old, "w") as f:
            f.write(f"""run: {{name: old, output_dir: {base}/runs}}
model: {{name: old_model}}
data: {{name: synthetic, params: {{task: classify, samples: 64, val_samples: 16, features: 4, classes: 2}}, batch_size: 8}}
trainer: {{strategy: cpu, max_steps: 2}}
plugins: [{old_model}]
""")
        rc, out = run(trainer, "run", cfg_old)
        check(rc == 0, f"a model built for ABI 0.10 trains (rc {rc}) {out.strip()[-300:] if rc else ''}")
        rc, out = run(trainer, "export", os.path.join(base, "runs", "old", "0"), os.path.join(base, "x_old"))
        check(rc == 1 and "model 'old_model' cannot export --format hf" in out,
              f"refused: a model built for ABI 0.10 (no export_to in its table): {last_line(out)}")
    # a failure once the temporary folder exists: nothing is left
    # (the model is built from the checkpoint's config.json; the export's is the folder's)
    cfg_json = os.path.join(bert_folder, "config.json")
    os.rename(cfg_json, cfg_json + ".away")
    with open(cfg_json, "w") as f:
        f.write("{not json")
    target = os.path.join(base, "x_fail")
    rc, out = run(trainer, "export", run_dir, target)
    os.replace(cfg_json + ".away", cfg_json)
    left = glob.glob(target + "*")
    check(rc == 1 and "config.json" in out and not left,
          f"a failed export leaves nothing ({left}): {last_line(out)}")
    leftovers = [p for p in os.listdir(base) if p.startswith("x_")]
    check(not leftovers, f"no refused export wrote anything ({leftovers})")


def main(trainer, old_model):
    base = tempfile.mkdtemp(prefix="hf_export.")
    w = hl.tensors(random.Random(7))
    bert = hl.folder(base, "bert", w)
    cfg = hl.embed_cfg(base, bert, "bert")
    bert_classify(trainer, base, cfg, bert)
    sharded(trainer, base, cfg)
    roberta_classify(trainer, base)
    embed(trainer, base)
    refusals(trainer, base, cfg, bert, old_model)
    if not FAILS:
        shutil.rmtree(base)
    print("PASS" if not FAILS else f"FAIL: {len(FAILS)} checks (files in {base})")
    return 1 if FAILS else 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.splitlines()[3].strip())
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]) if len(sys.argv) == 3 else None))
