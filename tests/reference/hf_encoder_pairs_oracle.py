#!/usr/bin/env python3
"""hf_encoder's task pairs against `transformers` + torch (the oracle): fine-tuning on scored
query/passage pairs as sentence-transformers' CosineSimilarityLoss does.

  hf_encoder_pairs_oracle.py TRAINER [--keep DIR]

The real all-MiniLM-L6-v2 (its PyPI wheel, tools/oracle/assets.txt; pooling and normalize
from its own modules.json, as configs/minilm_embed_pairs.yaml reads them), dropout off,
`trainer run` 10 AdamW steps (lr 2e-5, weight decay 0.01) on 80 pairs of
tests/data/tokdata/reviews.csv (review 2i against review 2i + 1, score 0.9 when their labels
agree, else 0.1), batches of 8 pairs padded to their longest text, against AutoModel + mean
pooling + F.normalize + torch.cosine_similarity + MSELoss and torch.optim.AdamW on the same
batches: each step's loss within 1e-4 relative, the weights after within 1e-5. The pooler,
which mean pooling leaves out, is reported apart: torch's AdamW skips a parameter without a
gradient, the trainer's decays it (weight decay) like every other.
Exit 0 pass, 1 fail, 77 (skip): no PyPI, no torch.
"""
import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
import oracle_venv  # noqa: E402
import hf_encoder_oracle  # noqa: E402  (train(), loss_gap(): one mechanism)

REVIEWS = os.path.join(ROOT, "tests", "data", "tokdata", "reviews.csv")
STEPS, BATCH, MAX_LEN, LR, WD = 10, 8, 64, 2e-5, 0.01  # LR, WD: hf_encoder_oracle.train()'s


def pairs():
    with open(REVIEWS, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for i in range(STEPS * BATCH):
        a, b = rows[2 * i], rows[2 * i + 1]
        out.append((0.9 if a["label"] == b["label"] else 0.1, a["text"], b["text"]))
    return out


def model_folder(d, model):
    """The model with dropout off: its files linked, config.json rewritten."""
    folder = os.path.join(d, "minilm_nodrop")
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(model):
        if name != "config.json" and not os.path.exists(os.path.join(folder, name)):
            os.symlink(os.path.join(model, name), os.path.join(folder, name))
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    cfg["hidden_dropout_prob"] = 0.0
    cfg["attention_probs_dropout_prob"] = 0.0
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return folder


def inner(argv):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from safetensors.numpy import load_file
    from transformers import AutoModel, AutoTokenizer

    trainer, keep, d, model = oracle_venv.scratch(argv, "hf_encoder_pairs_oracle.")
    folder = model_folder(d, model)
    data = pairs()
    path = os.path.join(d, "pairs.jsonl")  # JSON Lines: some reviews hold quotes and line breaks
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps({"label": s, "text": a, "text_pair": b}) + "\n" for s, a, b in data))
    got, ck = hf_encoder_oracle.train(trainer, d, "pairs", folder, "pairs", f"""  name: text
  params:
    path: {path}
    mode: pairs
    tokenizer: {folder}
    max_length: {MAX_LEN}
    padding: longest""", steps=STEPS, batch=BATCH)
    if got is None:
        print("FAIL: trainer run failed")
        return 1

    tok = AutoTokenizer.from_pretrained(folder)
    hf = AutoModel.from_pretrained(folder, torch_dtype=torch.float32).train()
    opt = torch.optim.AdamW(hf.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)

    def embed(texts):
        b = tok(texts, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
        h = hf(**b).last_hidden_state
        m = b["attention_mask"].unsqueeze(-1).to(h.dtype)
        return F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), p=2, dim=1)

    theirs = []
    for step in range(STEPS):
        batch = data[BATCH * step:BATCH * step + BATCH]
        q, p = embed([a for _, a, _ in batch]), embed([b for _, _, b in batch])
        score = torch.cosine_similarity(q, p)
        loss = torch.nn.MSELoss()(score, torch.tensor([s for s, _, _ in batch], dtype=torch.float32))
        opt.zero_grad()
        loss.backward()
        opt.step()
        theirs.append(loss.item())
    ok = True
    worst = hf_encoder_oracle.loss_gap(got, theirs)
    good = worst <= 1e-4
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} task pairs: {STEPS} AdamW steps on {len(data)} pairs, losses {theirs[0]:.6f} -> "
          f"{theirs[-1]:.6f}, max relative difference {worst:.3g} (tol 1e-4)")
    w = load_file(os.path.join(ck, "model.safetensors"))
    sd = {k: v.detach().numpy() for k, v in hf.state_dict().items() if not k.endswith("position_ids")}
    differ = sorted(set(sd) ^ set(w))
    body = [k for k in sd if k in w and not k.startswith("pooler.")]
    err, worst_k = max((float(np.abs(w[k] - sd[k]).max()), k) for k in body)
    if keep:
        np.savez(os.path.join(d, "torch_after.npz"), **sd)
    start = load_file(os.path.join(model, "model.safetensors"))
    moved = max(float(np.abs(sd[k] - start[k]).max()) for k in body if k in start)
    good = not differ and err <= 1e-5
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} fine-tuned weights ({os.path.basename(ck)}, {len(body)} tensors besides the "
          f"pooler{'; differing names ' + str(differ[:4]) if differ else ''}): max abs {err:.3g} in {worst_k} (tol 1e-5; "
          f"training moved them up to {moved:.3g})")
    pooler = [k for k in sd if k.startswith("pooler.") and k in w]
    if pooler:
        perr = max(float(np.abs(w[k] - sd[k]).max()) for k in pooler)
        print(f"info pooler (not used by mean pooling; decayed by weight decay here, left by torch): max abs {perr:.3g}")
    return oracle_venv.verdict(ok, keep, d)


if __name__ == "__main__":
    oracle_venv.oracle_main(__file__, __doc__.splitlines()[3].strip(), inner)
