"""Reference cases: full training steps of three small models (MLP, CNN with batch-norm, a
pre-LN transformer block LM): loss and every parameter gradient of one step, and the losses of
10 AdamW steps on 10 batches. Built functionally on named tensors so that parameter names
match the C test one to one."""
import math

import torch
import torch.nn.functional as F

STEPS = 10


def _init(shapes, g):
    params = {}
    for name, shape in shapes:
        if name.endswith(".weight") and len(shape) >= 2:
            fan_in = math.prod(shape[1:])
            params[name] = (torch.rand(shape, generator=g) * 2 - 1) / math.sqrt(fan_in)
        elif name.startswith("ln") or name.startswith("bn"):
            params[name] = (1.0 if name.endswith(".weight") else 0.0) + 0.1 * torch.randn(shape, generator=g)
        else:
            params[name] = 0.1 * torch.randn(shape, generator=g)
    return params


def _run(prefix, seed, shapes, buffers, forward, batches):
    g = torch.Generator().manual_seed(seed)
    init = _init(shapes, g)
    out = {f"init.{k}": v.clone() for k, v in init.items()}
    for k, v in buffers.items():
        out[f"buf.{k}"] = v.clone()
    for i, b in enumerate(batches):
        for k, v in b.items():
            out[f"batch{i}.{k}"] = v
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    bufs = {k: v.clone() for k, v in buffers.items()}
    loss = forward(params, bufs, batches[0])
    loss.backward()
    out["step0.loss"] = loss.detach().reshape(1)
    for k, v in params.items():
        out[f"step0.grad.{k}"] = v.grad.clone()
    for k, v in bufs.items():
        out[f"step0.buf.{k}"] = v.clone()
    # 10 AdamW steps from the initial state, one batch each.
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    bufs = {k: v.clone() for k, v in buffers.items()}
    opt = torch.optim.AdamW(list(params.values()), lr=1e-2, weight_decay=0.01)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        loss = forward(params, bufs, batches[s])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["adamw.losses"] = torch.tensor(losses, dtype=torch.float64)
    for k, v in params.items():
        out[f"adamw.final.{k}"] = v.detach().clone()
    return prefix, out


def _mlp():
    B, D, H, K = 16, 20, 32, 5
    shapes = [("fc1.weight", (H, D)), ("fc1.bias", (H,)), ("fc2.weight", (H, H)),
              ("fc2.bias", (H,)), ("fc3.weight", (K, H)), ("fc3.bias", (K,))]
    g = torch.Generator().manual_seed(11)
    batches = [dict(x=torch.randn(B, D, generator=g),
                    y=torch.randint(0, K, (B,), generator=g, dtype=torch.int32)) for _ in range(STEPS)]

    def forward(p, bufs, b):
        h = torch.relu(F.linear(b["x"], p["fc1.weight"], p["fc1.bias"]))
        h = F.gelu(F.linear(h, p["fc2.weight"], p["fc2.bias"]))
        logits = F.linear(h, p["fc3.weight"], p["fc3.bias"])
        return F.cross_entropy(logits, b["y"].long(), reduction="sum") / B
    return _run("model_mlp", 101, shapes, {}, forward, batches)


def _cnn():
    B, K = 8, 5
    # Convolutions feeding batch-norm have no bias (its gradient is exactly zero; PyTorch's
    # is rounding noise), as in common practice.
    shapes = [("conv1.weight", (4, 1, 3, 3)), ("bn1.weight", (4,)),
              ("bn1.bias", (4,)), ("conv2.weight", (8, 4, 3, 3)),
              ("bn2.weight", (8,)), ("bn2.bias", (8,)), ("fc1.weight", (16, 32)),
              ("fc1.bias", (16,)), ("fc2.weight", (K, 16)), ("fc2.bias", (K,))]
    buffers = {"bn1.running_mean": torch.zeros(4), "bn1.running_var": torch.ones(4),
               "bn2.running_mean": torch.zeros(8), "bn2.running_var": torch.ones(8)}
    g = torch.Generator().manual_seed(12)
    batches = [dict(x=torch.randn(B, 1, 12, 12, generator=g),
                    y=torch.randint(0, K, (B,), generator=g, dtype=torch.int32)) for _ in range(STEPS)]

    def forward(p, bufs, b):
        h = F.conv2d(b["x"], p["conv1.weight"], padding=1)
        h = F.batch_norm(h, bufs["bn1.running_mean"], bufs["bn1.running_var"], p["bn1.weight"],
                         p["bn1.bias"], training=True, momentum=0.1, eps=1e-5)
        h = F.max_pool2d(torch.relu(h), 2)
        h = F.conv2d(h, p["conv2.weight"])
        h = F.batch_norm(h, bufs["bn2.running_mean"], bufs["bn2.running_var"], p["bn2.weight"],
                         p["bn2.bias"], training=True, momentum=0.1, eps=1e-5)
        h = F.max_pool2d(torch.relu(h), 2).flatten(1)
        h = torch.relu(F.linear(h, p["fc1.weight"], p["fc1.bias"]))
        logits = F.linear(h, p["fc2.weight"], p["fc2.bias"])
        return F.cross_entropy(logits, b["y"].long(), reduction="sum") / B
    return _run("model_cnn", 102, shapes, buffers, forward, batches)


def _transformer():
    B, T, V, C, NH = 4, 8, 11, 16, 4
    shapes = [("wte.weight", (V, C)), ("wpe", (T, C)), ("ln1.weight", (C,)), ("ln1.bias", (C,)),
              ("attn.qkv.weight", (3 * C, C)), ("attn.qkv.bias", (3 * C,)),
              ("attn.proj.weight", (C, C)), ("attn.proj.bias", (C,)), ("ln2.weight", (C,)),
              ("ln2.bias", (C,)), ("mlp.fc.weight", (4 * C, C)), ("mlp.fc.bias", (4 * C,)),
              ("mlp.proj.weight", (C, 4 * C)), ("mlp.proj.bias", (C,)), ("lnf.weight", (C,)),
              ("lnf.bias", (C,)), ("head.weight", (V, C))]
    g = torch.Generator().manual_seed(13)
    batches = []
    for _ in range(STEPS):
        seq = torch.randint(0, V, (B, T + 1), generator=g, dtype=torch.int32)
        batches.append(dict(ids=seq[:, :T].contiguous(), y=seq[:, 1:].contiguous()))

    def forward(p, bufs, b):
        x = F.embedding(b["ids"].long(), p["wte.weight"]) + p["wpe"]
        h = F.layer_norm(x, (C,), p["ln1.weight"], p["ln1.bias"], 1e-5)
        q, k, v = F.linear(h, p["attn.qkv.weight"], p["attn.qkv.bias"]).split(C, dim=2)
        D = C // NH
        q, k, v = (t.reshape(B, T, NH, D).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, p["attn.proj.weight"], p["attn.proj.bias"])
        h = F.layer_norm(x, (C,), p["ln2.weight"], p["ln2.bias"], 1e-5)
        h = F.gelu(F.linear(h, p["mlp.fc.weight"], p["mlp.fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p["mlp.proj.weight"], p["mlp.proj.bias"])
        x = F.layer_norm(x, (C,), p["lnf.weight"], p["lnf.bias"], 1e-5)
        logits = F.linear(x, p["head.weight"])
        return F.cross_entropy(logits.reshape(B * T, V), b["y"].reshape(-1).long(),
                               reduction="sum") / (B * T)
    return _run("model_transformer", 103, shapes, {}, forward, batches)


def cases():
    yield _mlp()
    yield _cnn()
    yield _transformer()
