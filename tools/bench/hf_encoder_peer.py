"""The PyTorch side of tools/bench/hf_encoder_vs_torch.py: all-MiniLM-L6-v2 run as a user of
`transformers` runs it (BertModel / BertForSequenceClassification, attn_implementation "sdpa",
float32), on the current torch from PyPI (tools/bench/peer_venv.py). Run with the peer venv's
python; HF_HUB_OFFLINE=1 (nothing is downloaded).

    hf_encoder_peer.py data MODEL SHAKESPEARE DIR N_EMBED N_CLASSIFY
        DIR/texts.txt (N_EMBED lines) and DIR/classify.tsv (N_CLASSIFY "label<TAB>text" lines,
        labels 0-3): runs of Tiny Shakespeare lines, each longer than SEQ tokens with MODEL's
        tokenizer, so every text is exactly SEQ tokens once truncated: no padding either side
    hf_encoder_peer.py head MODEL DIR
        DIR/cls: MODEL with BertForSequenceClassification's head (4 labels, the head as
        transformers initialises it under seed 1) saved as safetensors, with the tokenizer
        files; DIR/cls_check, for the loss check: every dropout 0 and the head drawn with
        initializer_range 1.0 instead of 0.02, so that the logits are of order 1 and the loss
        depends on the encoder's output (at 0.02 it stays within 1% of ln 4 whatever it is);
        DIR/cls_noattn: DIR/cls without the dropout on the attention probabilities (with it,
        SDPA runs its math path: its CPU flash kernel has no dropout)
    hf_encoder_peer.py embed MODEL TEXTS THREADS BATCH [OUT.npy]
        mean-pooled, L2-normalised embeddings under torch.inference_mode(), batches of BATCH;
        prints texts/s over every batch, the first included, as `trainer embed` times its
        loop (model loaded and texts tokenized before); OUT.npy: the embeddings
    hf_encoder_peer.py check FOLDER TSV BATCH STEPS
        STEPS AdamW steps on the first STEPS x BATCH lines in file order (the folder's dropout);
        prints one loss per line
    hf_encoder_peer.py train FOLDER TSV THREADS BATCH WINDOWS PER_WINDOW
        AdamW (lr 2e-5, weight decay 0.01) in shuffled order with the folder's dropout; prints
        the samples/s of WINDOWS windows of PER_WINDOW steps after one warm-up window
"""
import os
import random
import sys
import time

import numpy as np
import torch
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

SEQ = 128
N_LABELS = 4
LR, WEIGHT_DECAY = 2e-5, 0.01  # the fine-tuning recipe of configs/minilm_finetune.yaml


def encode(tok, texts):
    """input_ids (N, SEQ): each text truncated to SEQ tokens; refused when one is shorter."""
    enc = tok(texts, truncation=True, max_length=SEQ)["input_ids"]
    short = [i for i, e in enumerate(enc) if len(e) != SEQ]
    if short:
        sys.exit(f"hf_encoder_peer: text {short[0]} has {len(enc[short[0]])} tokens, not {SEQ}")
    return torch.tensor(enc, dtype=torch.long)


def write_data(model, shakespeare, d, n_embed, n_classify):
    tok = AutoTokenizer.from_pretrained(model)
    with open(shakespeare, encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    rng = random.Random(46)
    texts = []
    while len(texts) < n_embed + n_classify:
        i = rng.randrange(len(lines) - 40)
        t = " ".join(lines[i:i + 30]).replace("\t", " ")  # a TAB would make trainer embed read pairs
        if len(tok(t)["input_ids"]) > SEQ:
            texts.append(t)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "texts.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in texts[:n_embed]))
    with open(os.path.join(d, "classify.tsv"), "w", encoding="utf-8") as f:
        f.write("".join(f"{rng.randrange(N_LABELS)}\t{t}\n" for t in texts[n_embed:]))


def write_head(model, d):
    for name, extra in (("cls", {}), ("cls_noattn", dict(attention_probs_dropout_prob=0.0)),
                        ("cls_check", dict(initializer_range=1.0, hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0, classifier_dropout=0.0))):
        torch.manual_seed(1)
        m = AutoModelForSequenceClassification.from_pretrained(model, num_labels=N_LABELS, **extra)
        m.save_pretrained(os.path.join(d, name), safe_serialization=True)
        AutoTokenizer.from_pretrained(model).save_pretrained(os.path.join(d, name))


def embed(model, texts, threads, batch, out):
    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(model)
    with open(texts, encoding="utf-8") as f:
        ids = encode(tok, f.read().split("\n")[:-1])
    m = AutoModel.from_pretrained(model, torch_dtype=torch.float32, attn_implementation="sdpa").eval()
    embs = []
    with torch.inference_mode():
        t0 = time.perf_counter()
        for i in range(0, ids.shape[0], batch):
            x = ids[i:i + batch]
            mask = torch.ones_like(x)
            h = m(input_ids=x, attention_mask=mask, token_type_ids=torch.zeros_like(x)).last_hidden_state
            e = (h * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
            embs.append(torch.nn.functional.normalize(e, p=2, dim=1))
        dt = time.perf_counter() - t0
    if out:
        np.save(out, torch.cat(embs).numpy())
    print(f"{ids.shape[0] / dt:.3f}")


def read_tsv(tok, tsv):
    with open(tsv, encoding="utf-8") as f:
        rows = [ln.split("\t", 1) for ln in f.read().split("\n")[:-1]]
    return encode(tok, [t for _, t in rows]), torch.tensor([int(y) for y, _ in rows])


def trainable(folder, threads=None):
    if threads:
        torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(folder)
    m = AutoModelForSequenceClassification.from_pretrained(folder, torch_dtype=torch.float32,
                                                           attn_implementation="sdpa").train()
    opt = torch.optim.AdamW(m.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WEIGHT_DECAY)
    return tok, m, opt


def step(m, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = m(input_ids=x, attention_mask=torch.ones_like(x), token_type_ids=torch.zeros_like(x), labels=y).loss
    loss.backward()
    opt.step()
    return loss


def check(folder, tsv, batch, steps):
    tok, m, opt = trainable(folder)
    x, y = read_tsv(tok, tsv)
    for s in range(steps):
        print(f"{step(m, opt, x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]).item():.9g}")


def train(folder, tsv, threads, batch, windows, per_window):
    torch.manual_seed(0)
    tok, m, opt = trainable(folder, threads)
    x, y = read_tsv(tok, tsv)
    n = x.shape[0] // batch  # batches per epoch (the last partial one dropped)
    order, pos, rates = torch.randperm(x.shape[0]), 0, []
    for w in range(windows + 1):
        t0 = time.perf_counter()
        for _ in range(per_window):
            if pos == n:
                order, pos = torch.randperm(x.shape[0]), 0
            idx = order[pos * batch:(pos + 1) * batch]
            pos += 1
            loss = step(m, opt, x[idx], y[idx])
        if w:
            rates.append(per_window * batch / (time.perf_counter() - t0))
    if not torch.isfinite(loss):
        sys.exit(f"hf_encoder_peer: loss {loss.item()}")
    print(" ".join(f"{r:.2f}" for r in rates))


def main():
    # As tools/bench/torch_peer.py: trainer flushes denormals to zero; torch at its best does too.
    torch.set_flush_denormal(True)
    cmd, a = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "data" and len(a) == 5:
        write_data(a[0], a[1], a[2], int(a[3]), int(a[4]))
    elif cmd == "head" and len(a) == 2:
        write_head(a[0], a[1])
    elif cmd == "embed" and len(a) in (4, 5):
        embed(a[0], a[1], int(a[2]), int(a[3]), a[4] if len(a) == 5 else None)
    elif cmd == "check" and len(a) == 4:
        check(a[0], a[1], int(a[2]), int(a[3]))
    elif cmd == "train" and len(a) == 6:
        train(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]))
    elif cmd == "version":
        print(torch.__version__, torch.backends.mkldnn.is_available(), torch.backends.mkl.is_available())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
