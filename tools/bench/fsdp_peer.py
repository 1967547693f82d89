"""The PyTorch peer of tools/bench/scale.py (issue 51): the same GPT (byte vocabulary, tied
embeddings, GELU MLP of 4 x d_model, no dropout) trained on random tokens over gloo on the CPU
in RANKS processes of one thread each, global batch split between them, AdamW. Modes: ddp
(DistributedDataParallel), grad_op (FSDP2 fully_shard per block and at the root with
reshard_after_forward=False: parameters stay gathered between forward and backward, as FSDP1's
SHARD_GRAD_OP, ZeRO-2) and full (reshard_after_forward=True: FULL_SHARD, ZeRO-3); --ac wraps
each block in torch.utils.checkpoint. Prints one JSON line: per rank the process's VmHWM after
set-up (before the first step) and at the end, in bytes, and the median step time after WARMUP.

usage: fsdp_peer.py --layers L --d-model C --heads H [--seq 256] [--batch 8] [--ranks 2]
                    [--mode ddp|grad_op|full] [--ac] [--steps 6] [--warmup 2]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ddp import GPT, step  # noqa: E402  (the GPT of the ddp benchmark, same layout as trainer's)


def vm(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def params(L, C, T, V=256):
    """The GPT's parameter count: per block 12 C^2 + 13 C, tied embeddings, position table, ln_f."""
    return L * (12 * C * C + 13 * C) + V * C + T * C + 2 * C


def build(a):
    torch.manual_seed(1)
    net = GPT(V=256, T=a.seq, C=a.d_model, H=a.heads, L=a.layers)
    if a.ac:
        for b in net.blocks:
            b.forward = (lambda f: lambda x: checkpoint(f, x, use_reentrant=False))(b.forward)
    if a.mode == "ddp":
        return torch.nn.parallel.DistributedDataParallel(net)
    from torch.distributed.fsdp import fully_shard
    reshard = a.mode == "full"
    for b in net.blocks:
        fully_shard(b, reshard_after_forward=reshard)
    return fully_shard(net, reshard_after_forward=reshard)


def worker(rank, a, port, q):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    try:
        net = build(a)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        g = torch.Generator().manual_seed(rank)
        b = a.batch // a.ranks
        x = torch.randint(0, 256, (b, a.seq), generator=g)
        y = torch.randint(0, 256, (b, a.seq), generator=g)
        startup = vm("VmHWM")
        times = []
        for _ in range(a.steps):
            dist.barrier()
            t0 = time.perf_counter()
            step(net, opt, x, y)
            times.append(time.perf_counter() - t0)
        q.put({"rank": rank, "startup": startup, "peak": vm("VmHWM"), "times": times})
    except Exception as e:  # reported by the parent: FSDP on CPU/gloo may not run everywhere
        q.put({"rank": rank, "error": f"{type(e).__name__}: {e}"})
    finally:
        dist.destroy_process_group()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--mode", choices=("ddp", "grad_op", "full"), default="full")
    p.add_argument("--ac", action="store_true", help="activation checkpointing of every block")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args(argv)
    if a.d_model % a.heads or a.batch % a.ranks or a.ranks < 1 or a.steps <= a.warmup or a.warmup < 0:
        p.error("need d_model a multiple of heads, batch a multiple of ranks, steps > warmup >= 0")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29100 + os.getpid() % 800
    ps = [ctx.Process(target=worker, args=(r, a, port, q)) for r in range(a.ranks)]
    for pr in ps:
        pr.start()
    res = sorted((q.get(timeout=1800) for _ in ps), key=lambda r: r["rank"])
    for pr in ps:
        pr.join(timeout=60)
    errors = [r["error"] for r in res if "error" in r]
    out = {"mode": a.mode, "ac": a.ac, "ranks": a.ranks, "torch": torch.__version__}
    if errors:
        out["error"] = errors[0]
    else:
        # a step's time is the slowest rank's
        steps = [max(r["times"][i] for r in res) for i in range(a.steps)]
        out.update(startup=[r["startup"] for r in res], peak=[r["peak"] for r in res],
                   step_s=statistics.median(steps[a.warmup:]),
                   params=params(a.layers, a.d_model, a.seq))
    print(json.dumps(out))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
