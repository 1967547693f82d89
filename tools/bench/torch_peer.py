"""The PyTorch side of tools/bench/cpu_vs_torch.py: the five workloads of issue 12 written with
torch's own ops (torch.nn.functional, torch.optim.AdamW), on the same data files and, for the
loss check, from the same initial weights as trainer's run.

    torch_peer.py data DIR
        writes the shared data: DIR/images (IDX, 28x28 uint8), DIR/labels (IDX), DIR/lm.txt
        (random bytes), DIR/classify.tsv ("label<TAB>128 bytes" lines)
    torch_peer.py check WORKLOAD DIR MODEL_SAFETENSORS STEPS
        trains STEPS steps from those weights with dropout off, batches in file order, and
        prints one loss per line (trainer's run with data.shuffle=false does the same)
    torch_peer.py time WORKLOAD DIR MODEL_SAFETENSORS THREADS WINDOWS STEPS_PER_WINDOW
        trains with dropout on, a shuffled order per epoch, torch.set_num_threads(THREADS),
        and prints the samples/s of each timed window after two warm-up windows
    torch_peer.py flops WORKLOAD
    --bf16 (after check's or time's arguments): the forward and the loss under
        torch.autocast("cpu", dtype=torch.bfloat16), beside trainer.precision bf16-mixed
        prints the GEMM-shaped FLOPs of one training sample (forward 2 per multiply-add,
        backward 4, the first layer's input gradient left out; causal attention counts the
        scores it needs)

The models mirror trainer's plugins parameter for parameter (plugins/models/*): the names of
trainer's model.safetensors are the keys here.
"""
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

N_IMAGES = 8192            # images in the IDX files (MLP, CNN)
SEQ = 128                  # tokens per sample (transformers)
N_LINES = 2048             # classify lines
N_CLASSES_TEXT = 4
LM_BYTES = 4096 * SEQ + 1  # 4096 LM samples
MEAN, STD = 0.1307, 0.3081 # trainer's idx plugin defaults

# name: (batch, model, dropout)
WORKLOADS = {
    "mlp128": (128, "mlp", 0.0),
    "mlp8": (8, "mlp", 0.0),
    "cnn": (128, "cnn", 0.25),
    "encoder": (32, "encoder", 0.1),
    "gpt": (16, "gpt", 0.1),
}
D, H, L, FF = 256, 4, 4, 1024  # transformer width, heads, layers, FFN (gpu_vs_torch.py sets its own)


# ---- data -------------------------------------------------------------------------------

def write_data(d):
    rng = np.random.default_rng(12)
    os.makedirs(d, exist_ok=True)
    img = rng.integers(0, 256, size=(N_IMAGES, 28, 28), dtype=np.uint8)
    lab = rng.integers(0, 10, size=N_IMAGES, dtype=np.uint8)
    with open(os.path.join(d, "images"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, N_IMAGES, 28, 28) + img.tobytes())
    with open(os.path.join(d, "labels"), "wb") as f:
        f.write(struct.pack(">II", 0x801, N_IMAGES) + lab.tobytes())
    with open(os.path.join(d, "lm.txt"), "wb") as f:
        f.write(rng.integers(0, 256, size=LM_BYTES, dtype=np.uint8).tobytes())
    # printable bytes only: no TAB, CR or LF inside a line, no zero padding needed
    text = rng.integers(32, 127, size=(N_LINES, SEQ), dtype=np.uint8)
    labels = rng.integers(0, N_CLASSES_TEXT, size=N_LINES)
    with open(os.path.join(d, "classify.tsv"), "wb") as f:
        for k, row in zip(labels, text):
            f.write(b"%d\t" % k + row.tobytes() + b"\n")


def load_data(model, d):
    """The whole train split in memory, as trainer's dataset plugins deliver it."""
    if model in ("mlp", "cnn"):
        img = np.fromfile(os.path.join(d, "images"), dtype=np.uint8, offset=16)
        lab = np.fromfile(os.path.join(d, "labels"), dtype=np.uint8, offset=8)
        x = (torch.from_numpy(img.astype(np.float32)) / 255.0 - MEAN) / STD
        x = x.reshape(-1, 784) if model == "mlp" else x.reshape(-1, 1, 28, 28)
        return x, torch.from_numpy(lab.astype(np.int64))
    if model == "encoder":
        rows = [l.split(b"\t", 1) for l in open(os.path.join(d, "classify.tsv"), "rb").read().split(b"\n") if l]
        names = sorted({r[0] for r in rows})
        x = torch.tensor(np.stack([np.frombuffer(r[1], dtype=np.uint8) for r in rows]).astype(np.int64))
        y = torch.tensor([names.index(r[0]) for r in rows])
        return x, y
    b = np.fromfile(os.path.join(d, "lm.txt"), dtype=np.uint8).astype(np.int64)
    n = (len(b) - (SEQ + 1)) // SEQ + 1
    idx = np.arange(n)[:, None] * SEQ + np.arange(SEQ)[None, :]
    return torch.from_numpy(b[idx]), torch.from_numpy(b[idx + 1])


# ---- models: functional, keyed by trainer's parameter names --------------------------------

def mlp(p, x, drop, train):
    h = F.relu(F.linear(x, p["fc1.weight"], p["fc1.bias"]))
    h = F.dropout(h, drop, train)
    h = F.relu(F.linear(h, p["fc2.weight"], p["fc2.bias"]))
    h = F.dropout(h, drop, train)
    return F.linear(h, p["fc3.weight"], p["fc3.bias"])


def cnn(p, x, drop, train, bufs):
    h = x
    for i, pad in ((1, 1), (2, 0)):
        h = F.conv2d(h, p[f"conv{i}.weight"], p[f"conv{i}.bias"], padding=pad)
        h = F.batch_norm(h, bufs[f"bn{i}.running_mean"], bufs[f"bn{i}.running_var"],
                         p[f"bn{i}.weight"], p[f"bn{i}.bias"], train, 0.1, 1e-5)
        h = F.max_pool2d(F.relu(h), 2)
    h = F.linear(h.flatten(1), p["fc1.weight"], p["fc1.bias"])
    h = F.dropout(h, drop, train)
    h = F.linear(h, p["fc2.weight"], p["fc2.bias"])
    return F.linear(h, p["fc3.weight"], p["fc3.bias"])


def transformer(p, ids, drop, train, causal, sdpa=False):
    """sdpa: attention by F.scaled_dot_product_attention (torch's fused kernels, same math)
    instead of the scores written out, as trainer's attention op does."""
    B, T = ids.shape
    hd = D // H
    x = F.dropout(F.embedding(ids, p["wte.weight"]) + p["wpe.weight"][:T], drop, train)
    mask = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1) if causal else None
    for i in range(L):
        k = f"h.{i}."
        h = F.layer_norm(x, (D,), p[k + "ln1.weight"], p[k + "ln1.bias"], 1e-5)
        q, kk, v = F.linear(h, p[k + "attn.qkv.weight"], p[k + "attn.qkv.bias"]).split(D, dim=2)
        q, kk, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, kk, v))
        if sdpa:
            a = F.scaled_dot_product_attention(q, kk, v, is_causal=causal).transpose(1, 2).reshape(B, T, D)
        else:
            att = (q @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            if causal:
                att = att.masked_fill(mask, float("-inf"))
            a = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + F.dropout(F.linear(a, p[k + "attn.proj.weight"], p[k + "attn.proj.bias"]), drop, train)
        h = F.layer_norm(x, (D,), p[k + "ln2.weight"], p[k + "ln2.bias"], 1e-5)
        h = F.gelu(F.linear(h, p[k + "mlp.fc.weight"], p[k + "mlp.fc.bias"]), approximate="tanh")
        x = x + F.dropout(F.linear(h, p[k + "mlp.proj.weight"], p[k + "mlp.proj.bias"]), drop, train)
    x = F.layer_norm(x, (D,), p["lnf.weight"], p["lnf.bias"], 1e-5)
    if causal:
        return F.linear(x, p["wte.weight"]).reshape(B * T, -1)
    return F.linear(x.mean(1), p["head.weight"], p["head.bias"])


AUTOCAST = False  # --bf16: torch.autocast("cpu", dtype=torch.bfloat16) around the forward


def loss_fn(model, p, bufs, x, y, drop, train=True):
    if AUTOCAST:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return forward_loss(model, p, bufs, x, y, drop, train).float()
    return forward_loss(model, p, bufs, x, y, drop, train)


def forward_loss(model, p, bufs, x, y, drop, train):
    if model == "mlp":
        out = mlp(p, x, drop, train)
    elif model == "cnn":
        out = cnn(p, x, drop, train, bufs)
    else:
        out = transformer(p, x, drop, train, model == "gpt")
        y = y.reshape(-1)
    return F.cross_entropy(out, y)


# ---- weights ---------------------------------------------------------------------------

def read_safetensors(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", f"{path}: {name} is {e['dtype']}"
        b, f = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:f]), dtype=torch.float32).reshape(e["shape"])
    return out


def weights(path):
    t = read_safetensors(path)
    bufs = {k: v.clone() for k, v in t.items() if "running_" in k}
    params = {k: v.clone().requires_grad_(True) for k, v in t.items() if k not in bufs}
    return params, bufs


def optimizer(params):
    # trainer's configs: adamw, lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
    return torch.optim.AdamW(list(params.values()), lr=1e-3, weight_decay=0.01)


# ---- commands ----------------------------------------------------------------------------

def check(name, d, path, steps):
    batch, model, _ = WORKLOADS[name]
    torch.manual_seed(0)
    x, y = load_data(model, d)
    params, bufs = weights(path)
    opt = optimizer(params)
    for s in range(steps):
        xb, yb = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, params, bufs, xb, yb, 0.0)
        loss.backward()
        opt.step()
        print(f"{loss.item():.9g}")


def time_windows(name, d, path, threads, windows, per_window):
    batch, model, drop = WORKLOADS[name]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x, y = load_data(model, d)
    params, bufs = weights(path)
    opt = optimizer(params)
    n = x.shape[0] // batch  # batches per epoch (the last partial one dropped)
    order, pos = torch.randperm(x.shape[0]), 0
    rates = []
    for w in range(windows + 2):
        t0 = time.perf_counter()
        for _ in range(per_window):
            if pos == n:
                order, pos = torch.randperm(x.shape[0]), 0
            idx = order[pos * batch:(pos + 1) * batch]
            pos += 1
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model, params, bufs, xb, yb, drop)
            loss.backward()
            opt.step()
        dt = time.perf_counter() - t0
        if w >= 2:
            rates.append(per_window * batch / dt)
    if not math.isfinite(loss.item()):
        sys.exit(f"torch_peer: {name}: loss {loss.item()}")
    print(" ".join(f"{r:.1f}" for r in rates))


def flops(name):
    _, model, _ = WORKLOADS[name]
    if model == "mlp":
        macs = [784 * 512, 512 * 512, 512 * 10]
        return 6 * sum(macs) - 2 * macs[0]
    if model == "cnn":
        macs = [28 * 28 * 32 * 9, 12 * 12 * 64 * 32 * 9, 2304 * 600, 600 * 120, 120 * 10]
        return 6 * sum(macs) - 2 * macs[0]
    return transformer_flops(model, SEQ)


def transformer_flops(model, T):
    """GEMM-shaped FLOPs of one training sample of T tokens at the module's D, L, FF."""
    scores = T * T if model == "encoder" else T * (T + 1) // 2
    per_layer = T * D * 3 * D + T * D * D + 2 * T * D * FF + 2 * scores * D
    head = T * D * 256 if model == "gpt" else D * N_CLASSES_TEXT
    return 6 * (L * per_layer + head)


def main():
    # trainer flushes denormal floats to zero (trainer.flush_denormals, default true); torch's
    # default keeps them, and its AdamW then slows down 5x or more once the moments of
    # parameters whose gradient stays 0 decay below FLT_MIN. Compare against torch at its best.
    torch.set_flush_denormal(True)
    global AUTOCAST
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    a = sys.argv[2:]
    if cmd in ("check", "time") and a and a[-1] == "--bf16":
        AUTOCAST, a = True, a[:-1]
    if cmd == "data" and len(a) == 1:
        write_data(a[0])
    elif cmd == "check" and len(a) == 4:
        check(a[0], a[1], a[2], int(a[3]))
    elif cmd == "time" and len(a) == 6:
        time_windows(a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
    elif cmd == "flops" and len(a) == 1:
        print(flops(a[0]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
