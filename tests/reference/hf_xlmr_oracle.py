#!/usr/bin/env python3
"""hf_encoder's XLM-R path against `transformers` (the oracle): forward and fine-tuning.

  hf_xlmr_oracle.py TRAINER [--keep DIR]

A tiny random XLMRobertaForSequenceClassification (3 layers, hidden 32, initializer_range 0.2
so that the layers' outputs differ, dropout 0, gelu) saved with save_pretrained (safetensors:
`roberta.` prefix, RobertaClassificationHead's classifier.dense and classifier.out_proj), and
an XLM-R-like tokenizer made here with the `tokenizers` library: Unigram trained on the
reviews of tests/data/tokdata, NFKC, Metaspace, the template <s> X </s>, <pad> id 1 (XLM-R's
pad_token_id, from which RoBERTa's positions count), saved as tokenizer.json in the folder,
which is also the run's tokenizer. `trainer run` (hf_encoder task classify, batches in file
order, padding longest) against the model in torch on the same batches:

- forward: the logits of the first 32 reviews (one batch, texts of 5 to 40 tokens), and every
  hidden state at the real positions (TR_HF_ENCODER_DUMP): max abs <= 1e-5;
- fine-tuning: 10 AdamW steps (lr 1e-3, weight decay 0.01, eps 1e-5) of 8 reviews: each
  step's loss within 1e-4 relative, the logits of the 10th batch (after 9 updates) and every
  weight after the 10th (the checkpoint, Hugging Face's names) within 1e-5. Adam's eps: the
  attention key biases have a zero gradient in exact arithmetic (softmax ignores a constant
  added to every key); what they get is rounding noise (1.6e-9 here, against 1e-2 for the
  query biases), which differs between any two implementations, and Adam divides it by
  |noise| + eps: with eps 1e-8 each step moves them by about 0.14 lr in directions the noise
  picks (2.5e-3 apart after 10 steps, every other weight within 6e-6), with 1e-6 by 3.4e-5,
  with 1e-5 by 4e-6.

Exit 0 pass, 1 fail, 77 (skip): no PyPI for the oracle's venv, no torch.
"""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
import oracle_venv  # noqa: E402

TOL = 1e-5
REVIEWS = os.path.join(ROOT, "tests", "data", "tokdata", "reviews.csv")
MAX_LEN = 64
STEPS, BATCH, LR, WD, EPS = 10, 8, 1e-3, 0.01, 1e-5


def reviews():
    with open(REVIEWS, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def make_tokenizer(path, texts):
    """An XLM-R-shaped Unigram tokenizer: <s> 0, <pad> 1, </s> 2, <unk> 3."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                      unk_token="<unk>")
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    assert [tok.token_to_id(t) for t in ("<s>", "<pad>", "</s>", "<unk>")] == [0, 1, 2, 3]
    tok.save(path)
    return tok


def write_config(d, name, folder, batch, steps):
    path = os.path.join(d, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"""run: {{name: {name}, output_dir: {d}/runs, seed: 1}}
model:
  name: hf_encoder
  params: {{pretrained: {folder}, task: classify}}
data:
  name: csv
  params: {{path: {REVIEWS}, tokenizer: {folder}, text_column: text, label_column: label,
           max_length: {MAX_LEN}, padding: longest}}
  val_fraction: 0
  batch_size: {batch}
  shuffle: false
optimizer: {{name: adamw, lr: {LR}, weight_decay: {WD}, eps: {EPS}}}
trainer: {{strategy: cpu, max_steps: {steps}, log_every: 1, grad_clip: 0}}
""")
    return path


def trainer_run(trainer, cfg, dump):
    os.makedirs(dump, exist_ok=True)
    p = subprocess.run([trainer, "run", cfg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, TR_HF_ENCODER_DUMP=dump), timeout=300)
    if p.returncode != 0:
        print(p.stdout[-3000:])
        sys.exit(f"FAIL: trainer run {cfg} exited {p.returncode}")
    return p.stdout


def batch(tok, rows, classes):
    """ids (pad 1), attention mask and labels of rows, as the csv dataset pads them."""
    import torch
    enc = [e.ids for e in tok.encode_batch([r["text"] for r in rows])]
    T = max(len(e) for e in enc)
    ids = torch.ones(len(enc), T, dtype=torch.long)
    mask = torch.zeros(len(enc), T, dtype=torch.long)
    for i, e in enumerate(enc):
        ids[i, :len(e)] = torch.tensor(e)
        mask[i, :len(e)] = 1
    return ids, mask, torch.tensor([classes.index(r["label"]) for r in rows]), [len(e) for e in enc]


def report(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return ok


def inner(argv):
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    trainer = os.path.abspath(argv[0])
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    d = keep or tempfile.mkdtemp(prefix="hf_xlmr_oracle.")
    os.makedirs(d, exist_ok=True)
    torch.set_num_threads(2)
    rows = reviews()
    classes = sorted({r["label"] for r in rows})
    folder = os.path.join(d, "tiny_xlmr_cls")
    os.makedirs(folder, exist_ok=True)
    tok = make_tokenizer(os.path.join(folder, "tokenizer.json"), [r["text"] for r in rows])
    tok.enable_truncation(MAX_LEN)
    cfg = XLMRobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=MAX_LEN + 2, type_vocab_size=1,
                           pad_token_id=1, bos_token_id=0, eos_token_id=2, hidden_act="gelu", initializer_range=0.2,
                           layer_norm_eps=1e-5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           classifier_dropout=0.0, num_labels=len(classes))
    torch.manual_seed(0)
    XLMRobertaForSequenceClassification(cfg).save_pretrained(folder, safe_serialization=True)
    hf = XLMRobertaForSequenceClassification.from_pretrained(folder)
    ok = True

    # --- forward: 32 reviews in one batch, every hidden state and the logits ---
    dump = os.path.join(d, "dump_forward")
    trainer_run(trainer, write_config(d, "forward", folder, 32, 1), dump)
    ids, mask, _, lens = batch(tok, rows[:32], classes)
    with torch.no_grad():
        out = hf.eval()(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    real = mask.numpy().astype(bool)
    for i, h in enumerate(out.hidden_states):
        got = np.load(os.path.join(dump, f"hidden_{i}.npy"))
        err = float(np.abs(got[real] - h.numpy()[real]).max()) if got.shape == tuple(h.shape) else float("inf")
        ok &= report(err <= TOL, f"hidden state {i} of 32 reviews ({min(lens)} to {max(lens)} tokens, "
                                  f"{int(real.sum())} real positions): max abs {err:.3g} (|h| max "
                                  f"{float(h.abs().max()):.3g})")
    got = np.load(os.path.join(dump, "logits.npy"))
    err = float(np.abs(got - out.logits.numpy()).max()) if got.shape == tuple(out.logits.shape) else float("inf")
    ok &= report(err <= TOL, f"logits of 32 reviews {tuple(got.shape)}: max abs {err:.3g} (|logit| max "
                             f"{float(out.logits.abs().max()):.3g})")

    # --- fine-tuning: 10 AdamW steps of 8 reviews in file order ---
    dump = os.path.join(d, "dump_train")
    trainer_run(trainer, write_config(d, "finetune", folder, BATCH, STEPS), dump)
    run_dir = sorted(glob.glob(os.path.join(d, "runs", "finetune", "*")))[-1]
    ours = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "step" in r and "loss" in r and "lr" in r:
                ours[r["step"]] = r["loss"]
    hf.train()
    opt = torch.optim.AdamW(hf.parameters(), lr=LR, betas=(0.9, 0.999), eps=EPS, weight_decay=WD)
    theirs, logits = [], None
    for step in range(STEPS):
        ids, mask, y, _ = batch(tok, rows[BATCH * step:BATCH * step + BATCH], classes)
        out = hf(input_ids=ids, attention_mask=mask, labels=y)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        theirs.append(out.loss.item())
        logits = out.logits.detach().numpy()
    worst = max(abs(ours.get(s + 1, float("inf")) - want) / abs(want) for s, want in enumerate(theirs))
    ok &= report(worst <= 1e-4, f"{STEPS} AdamW steps: losses {theirs[0]:.5f} -> {theirs[-1]:.5f}, max relative "
                                f"difference {worst:.3g} (tol 1e-4)")
    got = np.load(os.path.join(dump, "logits.npy"))
    err = float(np.abs(got - logits).max()) if got.shape == logits.shape else float("inf")
    ok &= report(err <= TOL, f"logits of batch {STEPS} (after {STEPS - 1} updates): max abs {err:.3g}")
    ck = load_file(os.path.join(sorted(glob.glob(os.path.join(run_dir, "checkpoints", "*")))[-1], "model.safetensors"))
    sd = {k[8:] if k.startswith("roberta.") else k: v.detach().numpy() for k, v in hf.state_dict().items()
          if not k.endswith(("position_ids", "token_type_ids"))}
    differ = sorted(set(sd) ^ set(ck))
    errs = {k: float(np.abs(ck[k] - sd[k]).max()) for k in sd if k in ck}
    name = max(errs, key=errs.get)
    start = {k[8:] if k.startswith("roberta.") else k: v for k, v in
             load_file(os.path.join(folder, "model.safetensors")).items()}
    moved = max(float(np.abs(sd[k] - start[k]).max()) for k in sd if k in start)
    others = max(e for k, e in errs.items() if not k.endswith("key.bias"))
    ok &= report(not differ and errs[name] <= TOL,
                 f"weights after {STEPS} steps ({len(ck)} tensors, Hugging Face's names"
                 f"{'; differing names ' + str(differ[:4]) if differ else ''}): max abs {errs[name]:.3g} ({name}; "
                 f"all but the key biases {others:.3g}; training moved them up to {moved:.3g})")
    if ok and not keep:
        shutil.rmtree(d)
    print("PASS" if ok else f"FAIL (files in {d})")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {__doc__.splitlines()[2].strip()}")
    if os.environ.get("TRAINER_ORACLE_INNER"):
        sys.exit(inner(sys.argv[1:]))
    oracle_venv.exec_inner(__file__, sys.argv[1:], lambda: "1")
