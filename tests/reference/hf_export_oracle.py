#!/usr/bin/env python3
"""`trainer export --format hf` loaded by `transformers` 4.47.1 (the oracle).

  hf_export_oracle.py TRAINER [--keep DIR]

- A tiny random BERT (2 layers, width 32, gelu) and a tiny random XLM-R (3 layers, width 24,
  relu), fine-tuned as classifiers 8 AdamW steps with `trainer run` (task classify on
  tests/data/tokdata/reviews.csv), exported from their run folders:
  AutoModelForSequenceClassification loads each (BertForSequenceClassification,
  XLMRobertaForSequenceClassification) with no missing, unexpected or mismatched key, and its
  softmax over the 240 reviews gives what `trainer predict` wrote: the top class (by the
  exported id2label's names) and its probability within 1e-5. The BERT's texts are encoded by
  the exported tokenizer (AutoTokenizer on OUTDIR); the XLM-R's by the exported tokenizer.json
  alone (its WordPiece vocabulary has none of the special tokens XLM-R's tokenizer class adds).
- The real all-MiniLM-L6-v2 with its weights moved (a checkpoint of task embed, in a run
  folder made here as `trainer run` writes one: embedding models do not train yet), exported:
  AutoModel loads it with no missing or unexpected key, the export's tensors are the
  checkpoint's, and AutoModel with the pooling and normalisation read from the exported
  sentence-transformers files (1_Pooling/config.json, modules.json) gives the embeddings of
  `trainer embed --checkpoint` of 64 texts within 1e-5.
Exit 0 pass, 1 fail, 77 (skip): no PyPI, no torch.
"""
import csv
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import oracle_venv  # noqa: E402
import hf_encoder_load as hl  # noqa: E402  (the run configs on the reviews)

TOL = 1e-5
REVIEWS = hl.REVIEWS
TOKFILE = hl.TOKENIZER
MAX_LEN = 32


def run(trainer, *args):
    p = subprocess.run([trainer, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stdout[-3000:])
        sys.exit(f"FAIL: trainer {args[0]} exited {p.returncode}")
    return p.stdout


def report(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    return ok


def texts():
    with open(REVIEWS, newline="") as f:
        return [r["text"] for r in csv.DictReader(f)]


def classify_run(trainer, d, name, folder, tokenizer):
    """8 AdamW steps of task classify on the reviews; the run folder."""
    run(trainer, "run", hl.embed_cfg(d, folder, name, tokenizer, MAX_LEN), "model.params.task=classify",
        "data.params.padding=longest", "data.val_fraction=0", "data.batch_size=8", "run.seed=3", "optimizer.name=adamw",
        "optimizer.lr=3e-3", "trainer.max_steps=8")
    return os.path.join(d, "runs", name, "0")


def predictions(trainer, run_dir):
    out = os.path.join(run_dir, "predictions.csv")
    run(trainer, "predict", os.path.join(run_dir, "config.yaml"), "--checkpoint", run_dir, "--split", "train",
        "--output", out)
    with open(out, newline="") as f:
        return list(csv.DictReader(f))


def loaded(what, info, model, cls):
    bad = {k: v for k, v in info.items() if v}
    return report(not bad and type(model).__name__ == cls,
                  f"{what}: {type(model).__name__} loads with no missing, unexpected or mismatched key {bad or ''}")


def compare_logits(what, logits, rows, id2label):
    """logits (N, C) against trainer predict's rows: the top class by name and its probability."""
    import numpy as np
    p = np.exp(logits.astype(np.float64) - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    conf = np.array([float(r["confidence"]) for r in rows])
    err = float(np.abs(p.max(1) - conf).max())
    clear = np.abs(p.max(1) - 0.5) > TOL  # two classes: an almost-tie may go either way
    wrong = [i for i in range(len(rows)) if clear[i] and id2label[int(p[i].argmax())] != rows[i]["prediction"]]
    return report(len(rows) == len(p) and err <= TOL and not wrong,
                  f"{what}: {len(rows)} reviews, top class as trainer predict's ({len(wrong)} differ), its probability "
                  f"max abs {err:.3g} (tol {TOL:g}; probabilities {p.max(1).min():.3f}..{p.max(1).max():.3f})")


def bert(trainer, d):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertModel

    folder = os.path.join(d, "tiny_bert")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=149, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=64, initializer_range=0.2)
    BertModel(cfg).save_pretrained(folder, safe_serialization=True)
    shutil.copy(TOKFILE, folder)
    run_dir = classify_run(trainer, d, "bert", folder, folder)
    out = os.path.join(d, "bert_hf")
    print(run(trainer, "export", run_dir, out).strip().splitlines()[-1])
    hf, info = AutoModelForSequenceClassification.from_pretrained(out, output_loading_info=True)
    ok = loaded("bert classifier", info, hf, "BertForSequenceClassification")
    tok = AutoTokenizer.from_pretrained(out)
    b = tok(texts(), padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
    with torch.no_grad():
        logits = hf.eval()(**b).logits.numpy()
    return compare_logits("bert classifier", logits, predictions(trainer, run_dir), hf.config.id2label) and ok


def xlmr(trainer, d):
    import torch
    from transformers import (AutoModelForSequenceClassification, PreTrainedTokenizerFast, XLMRobertaConfig,
                              XLMRobertaModel)

    folder = os.path.join(d, "tiny_xlmr")
    torch.manual_seed(1)
    # 3 layers of width 24, relu: other shapes and activation than the BERT's
    cfg = XLMRobertaConfig(vocab_size=149, hidden_size=24, num_hidden_layers=3, num_attention_heads=3, intermediate_size=48,
                           max_position_embeddings=36, type_vocab_size=1, pad_token_id=0, hidden_act="relu",
                           initializer_range=0.2, layer_norm_eps=1e-5)
    XLMRobertaModel(cfg).save_pretrained(folder, safe_serialization=True)
    run_dir = classify_run(trainer, d, "xlmr", folder, TOKFILE)
    out = os.path.join(d, "xlmr_hf")
    print(run(trainer, "export", run_dir, out).strip().splitlines()[-1])
    hf, info = AutoModelForSequenceClassification.from_pretrained(out, output_loading_info=True)
    ok = loaded("xlm-r classifier", info, hf, "XLMRobertaForSequenceClassification")
    # the exported tokenizer.json as it is, padded with its [PAD] (0, the config's pad_token_id)
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(out, "tokenizer.json"), pad_token="[PAD]")
    b = tok(texts(), padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
    with torch.no_grad():
        logits = hf.eval()(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits.numpy()
    return compare_logits("xlm-r classifier", logits, predictions(trainer, run_dir), hf.config.id2label) and ok


def minilm(trainer, d, model):
    import numpy as np
    import torch
    from safetensors.numpy import load_file, save_file
    from transformers import AutoModel, AutoTokenizer

    run_dir = os.path.join(d, "runs", "minilm", "0")
    ck = os.path.join(run_dir, "checkpoints", "step-00000001")
    os.makedirs(ck)
    cfg = os.path.join(run_dir, "config.yaml")
    shutil.copy(hl.embed_cfg(d, model, "minilm", model, 128), cfg)
    rng = np.random.default_rng(46)
    w = {k: (v + rng.normal(0, 0.05 * (float(v.std()) or 1.0), v.shape)).astype(np.float32)
         for k, v in load_file(os.path.join(model, "model.safetensors")).items() if not k.endswith("position_ids")}
    save_file(w, os.path.join(ck, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(ck, "state.json"), "w") as f:
        json.dump({"epoch": 0, "step": 1, "batch_in_epoch": 1, "seed": "1", "config_hash": "0", "model": "hf_encoder"}, f)
    out = os.path.join(d, "minilm_hf")
    print(run(trainer, "export", run_dir, out).strip().splitlines()[-1])
    hf, info = AutoModel.from_pretrained(out, output_loading_info=True)
    ok = loaded("all-MiniLM-L6-v2 (moved)", info, hf, "BertModel")
    got = load_file(os.path.join(out, "model.safetensors"))
    ok &= report(sorted(got) == sorted(w) and all(np.array_equal(got[k], w[k]) for k in w),
                 f"all-MiniLM-L6-v2: the export's {len(got)} tensors are the checkpoint's")
    with open(os.path.join(out, "1_Pooling", "config.json")) as f:
        mean = json.load(f)["pooling_mode_mean_tokens"]
    with open(os.path.join(out, "modules.json")) as f:
        normalize = any(m["type"].endswith("Normalize") for m in json.load(f))
    one = [t.replace("\n", " ") for t in texts()]  # one text per line
    xs = one[::4][:48] + [" ".join(one[i:i + 12]) for i in range(0, 192, 12)]  # 64, some truncated
    inp = os.path.join(d, "texts.txt")
    with open(inp, "w") as f:
        f.write("".join(t + "\n" for t in xs))
    emb = os.path.join(d, "minilm.npy")
    run(trainer, "embed", cfg, "--checkpoint", run_dir, "--input", inp, "--output", emb, "data.batch_size=16")
    tok = AutoTokenizer.from_pretrained(out)
    hf.eval()
    refs = []
    with torch.no_grad():
        for i in range(0, len(xs), 16):
            b = tok(xs[i:i + 16], padding=True, truncation=True, max_length=128, return_tensors="pt")
            h = hf(**b).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9) if mean else h[:, 0]
            refs.append((torch.nn.functional.normalize(e, p=2, dim=1) if normalize else e).numpy())
    ref, ours = np.concatenate(refs), np.load(emb)
    err = float(np.abs(ours - ref).max()) if ours.shape == ref.shape else float("inf")
    return report(err <= TOL, f"all-MiniLM-L6-v2 (moved): AutoModel + the exported pooling "
                              f"({'mean' if mean else 'cls'}{', normalised' if normalize else ''}) on {len(xs)} texts "
                              f"against trainer embed --checkpoint: max abs {err:.3g} (tol {TOL:g})") and ok


def inner(argv):
    trainer, keep, d, model = oracle_venv.scratch(argv, "hf_export_oracle.")
    ok = bert(trainer, d)
    ok &= xlmr(trainer, d)
    ok &= minilm(trainer, d, model)
    return oracle_venv.verdict(ok, keep, d)


if __name__ == "__main__":
    oracle_venv.oracle_main(__file__, __doc__.splitlines()[2].strip(), inner)
