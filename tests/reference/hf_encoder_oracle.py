#!/usr/bin/env python3
"""`trainer embed` with the hf_encoder plugin against `transformers` (the oracle).

  hf_encoder_oracle.py TRAINER [--keep DIR]

The real all-MiniLM-L6-v2 (its PyPI wheel, tools/oracle/assets.txt): sentence embeddings (mean
pooling over the real tokens, L2-normalised, as sentence-transformers computes them) of 330
texts of mixed lengths (Tiny Shakespeare lines, single and run together up to past the 256-token
truncation, and every line of tests/data/tokenizer_stress.txt), in padded batches of 16, from
`trainer embed` under cpu and under dataparallel x2, against AutoModel (float32, torch on the
CPU) on the same batches: max abs difference <= 1e-5; 40 of them as text<TAB>pair lines, with
the pairs' cosine scores. Then the hidden states of every layer
(TR_HF_ENCODER_DUMP) of a few texts at their real positions, texts "a [SEP] b" among them,
which the oracle encodes as the pair (a, b) with token types 0 then 1 (the plugin's rule).
And a tiny random XLM-R (saved as XLMRobertaForMaskedLM: roberta. prefix, lm_head.*): every
hidden state of padded texts of mixed lengths (positions from pad_token_id + 1). And
fine-tuning: all-MiniLM-L6-v2 with BertForSequenceClassification's head (transformers' initial
head saved into the folder, dropout off), 30 AdamW steps (lr 2e-5) on tests/data/tokdata
reviews with `trainer run`: each step's loss within 1e-4 relative, the weights within 1e-5.
Exit 0 pass, 1 fail, 77 (skip): no PyPI, no torch, no ../shared/data.
"""
import os
import glob
import json
import random
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
import oracle_venv  # noqa: E402

SKIP = 77
TOL = 1e-5
BATCH = 16
MAX_LEN = 256
STRESS = os.path.join(ROOT, "tests", "data", "tokenizer_stress.txt")
SHAKESPEARE = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")


def skip(msg):
    print(f"SKIPPED: {msg}")
    sys.exit(SKIP)


def outer(argv):
    if not os.path.exists(SHAKESPEARE):
        skip(f"{os.path.normpath(SHAKESPEARE)} is absent (../shared/data)")
    oracle_venv.exec_inner(__file__, argv, oracle_venv.minilm_folder)


def texts():
    """330 texts: no '\\n' or '\\r' inside, so one per line both sides."""
    with open(SHAKESPEARE, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]
    rng = random.Random(46)
    out = []
    for _ in range(150):  # single lines
        out.append(rng.choice(lines))
    for _ in range(40):  # runs of lines, some past the truncation
        i = rng.randrange(len(lines) - 60)
        out.append(" ".join(lines[i:i + rng.choice([3, 8, 20, 60])]))
    with open(STRESS, "rb") as f:
        for raw in f.read().split(b"\n"):
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            try:
                t = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if "\r" not in t and "\t" not in t:
                out.append(t)
    out = out[:330]
    rng.shuffle(out)
    return out


def write_config(d, model, strategy):
    path = os.path.join(d, f"embed_{strategy}.yaml")
    with open(path, "w") as f:
        f.write(f"""run:
  name: oracle
  output_dir: {d}/runs
model:
  name: hf_encoder
  params:
    pretrained: {model}
    task: embed
data:
  name: text
  params:
    path: {STRESS}
    mode: classify
    tokenizer: {model}
    max_length: {MAX_LEN}
  batch_size: {BATCH}
trainer:
  strategy: {strategy}
  devices: {2 if strategy == 'dataparallel' else 1}
""")
    return path


def embed(trainer, cfg, inp, out, env=None):
    p = subprocess.run([trainer, "embed", cfg, "--input", inp, "--output", out], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != 0:
        print(p.stdout)
        sys.exit(f"FAIL: trainer embed exited {p.returncode}")


def inner(argv):
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    trainer, keep, d, model = oracle_venv.scratch(argv, "hf_encoder_oracle.")
    tok = AutoTokenizer.from_pretrained(model)
    hf = AutoModel.from_pretrained(model, torch_dtype=torch.float32).eval()
    ok = True

    # --- embeddings of 330 texts, batch by batch as trainer embed batches them ---
    xs = texts()
    inp = os.path.join(d, "texts.txt")
    with open(inp, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in xs))
    refs = []
    with torch.no_grad():
        for i in range(0, len(xs), BATCH):
            b = tok(xs[i:i + BATCH], padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
            h = hf(**b).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            refs.append(torch.nn.functional.normalize(e, p=2, dim=1).numpy())
    ref = np.concatenate(refs)
    lens = [len(tok(t, truncation=True, max_length=MAX_LEN)["input_ids"]) for t in xs]
    print(f"{len(xs)} texts, {min(lens)}..{max(lens)} tokens ({sum(n == MAX_LEN for n in lens)} truncated), "
          f"batches of {BATCH}")
    for strategy in ("cpu", "dataparallel"):
        out = os.path.join(d, f"emb_{strategy}.npy")
        embed(trainer, write_config(d, model, strategy), inp, out)
        got = np.load(out)
        if got.shape != ref.shape:
            print(f"FAIL {strategy}: shape {got.shape}, oracle {ref.shape}")
            ok = False
            continue
        err = float(np.abs(got - ref).max())
        worst = int(np.abs(got - ref).max(1).argmax())
        good = err <= TOL
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} embeddings ({strategy}): max abs {err:.3g} (tol {TOL:g}; worst text "
              f"{worst}, {lens[worst]} tokens)")

    # --- text<TAB>pair lines: both embedded alone, the pair's cosine similarity ---
    pairs = [(xs[i], xs[i + 1]) for i in range(0, 80, 2)]
    inp_p = os.path.join(d, "pairs.txt")
    with open(inp_p, "w", encoding="utf-8") as f:
        f.write("".join(f"{a}\t{b}\n" for a, b in pairs))
    out_p = os.path.join(d, "pairs.npy")
    embed(trainer, write_config(d, model, "cpu"), inp_p, out_p)
    got = np.load(out_p)
    want = np.stack([ref[:80:2], ref[1:80:2]], axis=1)
    scores = np.loadtxt(os.path.join(d, "pairs.csv"), delimiter=",", skiprows=1)[:, 1]
    want_s = (want[:, 0] * want[:, 1]).sum(1)
    if got.shape != want.shape:
        print(f"FAIL pairs: shape {got.shape}, oracle {want.shape}")
        ok = False
    else:
        err, err_s = float(np.abs(got - want).max()), float(np.abs(scores - want_s).max())
        good = err <= TOL and err_s <= TOL
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {len(pairs)} text<TAB>pair lines: embeddings max abs {err:.3g}, "
              f"cosine scores max abs {err_s:.3g}")

    # --- hidden states of every layer, a few texts, pairs by [SEP] ---
    few = [xs[0], "O Romeo, Romeo!", "To be, or not to be [SEP] that is the question",
           "First Citizen: Before we proceed any further, hear me speak. [SEP] Speak, speak.", ""]
    inp2 = os.path.join(d, "few.txt")
    with open(inp2, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in few))
    dump = os.path.join(d, "hidden")
    os.makedirs(dump, exist_ok=True)
    env = dict(os.environ, TR_HF_ENCODER_DUMP=dump)
    embed(trainer, write_config(d, model, "cpu"), inp2, os.path.join(d, "few.npy"), env)
    firsts = [t.split(" [SEP] ")[0] for t in few]
    seconds = [t.split(" [SEP] ")[1] if " [SEP] " in t else None for t in few]
    enc = [tok(a, b, truncation=True, max_length=MAX_LEN) for a, b in zip(firsts, seconds)]
    T = max(len(e["input_ids"]) for e in enc)
    ids = torch.zeros(len(few), T, dtype=torch.long)
    types = torch.zeros(len(few), T, dtype=torch.long)
    mask = torch.zeros(len(few), T, dtype=torch.long)
    for i, e in enumerate(enc):
        n = len(e["input_ids"])
        ids[i, :n] = torch.tensor(e["input_ids"])
        types[i, :n] = torch.tensor(e["token_type_ids"])
        mask[i, :n] = 1
    with torch.no_grad():
        hs = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True).hidden_states
    real = mask.numpy().astype(bool)
    for i, h in enumerate(hs):
        got = np.load(os.path.join(dump, f"hidden_{i}.npy"))
        if got.shape != tuple(h.shape):
            print(f"FAIL hidden state {i}: shape {got.shape}, oracle {tuple(h.shape)}")
            ok = False
            continue
        err = float(np.abs(got[real] - h.numpy()[real]).max())
        good = err <= TOL
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} hidden state {i} ({'embeddings' if i == 0 else f'layer {i}'}), "
              f"{int(real.sum())} real positions: max abs {err:.3g}")
    ok &= xlmr(trainer, d)
    ok &= finetune(trainer, d, model)
    return oracle_venv.verdict(ok, keep, d)  # on a pass, 350 MB less: the model saved with its head


def xlmr(trainer, d):
    """A tiny random XLM-R (gelu_new, initializer_range 0.2 so that layers differ), saved as
    transformers saves XLMRobertaForMaskedLM (roberta. prefix, lm_head.*), the tiny WordPiece
    tokenizer's ids: every hidden state at the real positions of texts of mixed lengths."""
    import numpy as np
    import torch
    from tokenizers import Tokenizer
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM, XLMRobertaModel

    tokfile = os.path.join(ROOT, "tests", "data", "tokdata", "tokenizer.json")
    folder = os.path.join(d, "tiny_xlmr")
    torch.manual_seed(0)
    cfg = XLMRobertaConfig(vocab_size=149, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=40, type_vocab_size=1, pad_token_id=0,
                           hidden_act="gelu_new", initializer_range=0.2, layer_norm_eps=1e-5)
    XLMRobertaForMaskedLM(cfg).save_pretrained(folder, safe_serialization=True)
    hf = XLMRobertaModel.from_pretrained(folder).eval()
    few = ["the movie was great", "terrible plot and bad acting, I did not like it at all", "", "fine",
           "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h"]
    inp = os.path.join(d, "xlmr.txt")
    with open(inp, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in few))
    cfgfile = os.path.join(d, "xlmr.yaml")
    with open(cfgfile, "w") as f:
        f.write(f"""run:
  name: xlmr
  output_dir: {d}/runs
model:
  name: hf_encoder
  params:
    pretrained: {folder}
    pooling: cls
    normalize: "false"
data:
  name: text
  params:
    path: {inp}
    mode: classify
    tokenizer: {tokfile}
    max_length: 32
  batch_size: 8
trainer:
  strategy: cpu
""")
    dump = os.path.join(d, "hidden_xlmr")
    os.makedirs(dump, exist_ok=True)
    embed(trainer, cfgfile, inp, os.path.join(d, "xlmr.npy"), dict(os.environ, TR_HF_ENCODER_DUMP=dump))
    tok = Tokenizer.from_file(tokfile)
    tok.enable_truncation(32)
    enc = [tok.encode(t).ids for t in few]
    T = max(len(e) for e in enc)
    ids = torch.zeros(len(few), T, dtype=torch.long)  # pad_token_id 0
    mask = torch.zeros(len(few), T, dtype=torch.long)
    for i, e in enumerate(enc):
        ids[i, :len(e)] = torch.tensor(e)
        mask[i, :len(e)] = 1
    with torch.no_grad():
        hs = hf(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    real = mask.numpy().astype(bool)
    ok = True
    for i, h in enumerate(hs):
        got = np.load(os.path.join(dump, f"hidden_{i}.npy"))
        if got.shape != tuple(h.shape):
            print(f"FAIL xlm-r hidden state {i}: shape {got.shape}, oracle {tuple(h.shape)}")
            ok = False
            continue
        err = float(np.abs(got[real] - h.numpy()[real]).max())
        good = err <= TOL
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} xlm-r hidden state {i}, {int(real.sum())} real positions of "
              f"{real.shape[0]}x{real.shape[1]}: max abs {err:.3g} (|h| max {float(h.abs().max()):.3g})")
    return ok


def train(trainer, d, name, folder, task, data, steps, batch):
    """`trainer run` of hf_encoder's `task` on `folder` as the oracles train it: on the cpu, AdamW
    lr 2e-5 weight decay 0.01, no clipping, `steps` batches of `batch` in file order, every
    step's loss logged; `data`: the config's data section's name and params lines. Returns
    ({step: loss}, the last checkpoint's folder), or (None, None) after printing the output."""
    yaml = os.path.join(d, name + ".yaml")
    with open(yaml, "w") as f:
        f.write(f"""run:
  name: {name}
  output_dir: {d}/runs
  seed: 1
model:
  name: hf_encoder
  params:
    pretrained: {folder}
    task: {task}
data:
{data}
  val_fraction: 0
  batch_size: {batch}
  shuffle: false
optimizer:
  name: adamw
  lr: 2.0e-5
  weight_decay: 0.01
trainer:
  strategy: cpu
  max_steps: {steps}
  log_every: 1
  grad_clip: 0
""")
    p = subprocess.run([trainer, "run", yaml], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(p.stdout[-2000:])
        return None, None
    run_dir = os.path.join(d, "runs", name)
    run_dir = os.path.join(run_dir, sorted(os.listdir(run_dir))[-1])
    losses = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "step" in r and "loss" in r and "lr" in r:  # a step record (log_every 1: that step's loss)
                losses[r["step"]] = r["loss"]
    return losses, sorted(glob.glob(os.path.join(run_dir, "checkpoints", "*")))[-1]


def loss_gap(ours, theirs):
    """The largest relative difference of step k's loss, ours[k] against theirs[k - 1] (inf
    when a step is missing from ours)."""
    return max((abs(ours[k] - want) / abs(want) if k in ours else float("inf")
                for k, want in enumerate(theirs, 1)), default=0.0)


def finetune(trainer, d, model):
    """all-MiniLM-L6-v2 with a BertForSequenceClassification head (transformers' initial head,
    saved into the folder so both sides start equal), dropout off, AdamW lr 2e-5 weight decay
    0.01, 30 steps of 8 reviews in file order: each step's loss within 1e-4 relative, the
    weights after them within 1e-5."""
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from transformers import AutoConfig, AutoTokenizer, BertForSequenceClassification

    folder = os.path.join(d, "minilm_cls")
    cfg = AutoConfig.from_pretrained(model, num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     classifier_dropout=0.0)
    torch.manual_seed(1)
    hf = BertForSequenceClassification.from_pretrained(model, config=cfg)
    hf.save_pretrained(folder, safe_serialization=True)
    for f in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(model, f)):
            shutil.copy(os.path.join(model, f), folder)
    reviews = os.path.join(ROOT, "tests", "data", "tokdata", "reviews.csv")
    ours, ck = train(trainer, d, "finetune", folder, "classify", f"""  name: csv
  params:
    path: {reviews}
    tokenizer: {folder}
    text_column: text
    label_column: label
    max_length: 64
    padding: longest""", steps=30, batch=8)
    if ours is None:
        print("FAIL fine-tuning: trainer run failed")
        return False

    import csv
    with open(reviews, newline="") as f:
        rows = list(csv.DictReader(f))
    classes = sorted({r["label"] for r in rows})
    tok = AutoTokenizer.from_pretrained(folder)
    hf = BertForSequenceClassification.from_pretrained(folder).train()
    opt = torch.optim.AdamW(hf.parameters(), lr=2e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    theirs = []
    for step in range(30):
        batch = rows[8 * step:8 * step + 8]
        b = tok([r["text"] for r in batch], padding=True, truncation=True, max_length=64, return_tensors="pt")
        y = torch.tensor([classes.index(r["label"]) for r in batch])
        out = hf(**b, labels=y)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        theirs.append(out.loss.item())
    ok = True
    worst = loss_gap(ours, theirs)
    good = worst <= 1e-4
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} fine-tuning: 30 AdamW steps, losses {theirs[0]:.5f} -> {theirs[-1]:.5f}, "
          f"max relative difference {worst:.3g} (tol 1e-4)")
    w = load_file(os.path.join(ck, "model.safetensors"))
    sd = {k[5:] if k.startswith("bert.") else k: v.detach().numpy() for k, v in hf.state_dict().items()
          if not k.endswith("position_ids")}
    missing = sorted(set(sd) ^ set(w))
    err = max(float(np.abs(w[k] - sd[k]).max()) for k in sd if k in w)
    good = not missing and err <= 1e-5
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} fine-tuned weights ({os.path.basename(ck)}, {len(w)} tensors, Hugging "
          f"Face's names{'; differing names ' + str(missing[:4]) if missing else ''}): max abs {err:.3g} (tol 1e-5)")
    return ok


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {__doc__.splitlines()[2].strip()}")
    if os.environ.get("TRAINER_ORACLE_INNER"):
        sys.exit(inner(sys.argv[1:]))
    outer(sys.argv[1:])
