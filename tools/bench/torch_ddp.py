"""The PyTorch peer of tools/bench/ddp_scaling.sh: the same three workloads (MLP 784-512-256-10,
FashionCNN, byte-level GPT d128 x 2 layers x 64 tokens) trained on random data in one process
with one thread, and with DistributedDataParallel over gloo in 2 processes of one thread each
(global batch split in two, as trainer's ddp). Prints samples/s of the timed steps.

usage: torch_ddp.py MODEL single|ddp [STEPS]        MODEL: mlp | cnn | transformer
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

BATCH = {"mlp": 64, "cnn": 128, "transformer": 32}


class FashionCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.l2 = nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Sequential(nn.Linear(64 * 7 * 7, 600), nn.Dropout(0.25), nn.Linear(600, 120), nn.Linear(120, 10))

    def forward(self, x):
        return self.fc(self.l2(self.l1(x)).flatten(1))


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc, self.out = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.h = h

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (C // self.h) ** 0.5
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V=256, T=64, C=128, H=4, L=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.t()


def make(model):
    if model == "mlp":
        net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, 256), nn.ReLU(),
                            nn.Dropout(0.1), nn.Linear(256, 10))
        return net, lambda b: (torch.randn(b, 784), torch.randint(0, 10, (b,)))
    if model == "cnn":
        return FashionCNN(), lambda b: (torch.randn(b, 1, 28, 28), torch.randint(0, 10, (b,)))
    return GPT(), lambda b: (torch.randint(0, 256, (b, 64)), torch.randint(0, 256, (b, 64)))


def step(net, opt, x, y):
    """One training step: forward, cross-entropy over every position, backward, update."""
    out = net(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def train(model, steps, rank=0, world=1):
    torch.manual_seed(1)
    torch.set_num_threads(1)
    net, data = make(model)
    if world > 1:
        net = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    b = BATCH[model] // world
    x, y = data(b)
    t0 = 0
    for i in range(steps + 5):
        if i == 5:
            if world > 1:
                dist.barrier()
            t0 = time.perf_counter()
        step(net, opt, x, y)
    dt = time.perf_counter() - t0
    return steps * BATCH[model] / dt


def worker(rank, world, model, steps, port, q):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    sps = train(model, steps, rank, world)
    if rank == 0:
        q.put(sps)
    dist.destroy_process_group()


def main():
    model, mode = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else {"mlp": 600, "cnn": 120, "transformer": 120}[model]
    if mode == "single":
        sps = train(model, steps)
    else:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        port = 29100 + os.getpid() % 800
        ps = [ctx.Process(target=worker, args=(r, 2, model, steps, port, q)) for r in range(2)]
        for p in ps:
            p.start()
        sps = q.get(timeout=900)
        for p in ps:
            p.join(timeout=60)
    print(f"torch {mode} {model}: {sps:.1f} samples/s")


if __name__ == "__main__":
    main()
