"""The PyTorch peer of bench_comm: torch.distributed with the gloo backend, all-reduce
(sum, float32) of 4 KiB to MAX_MIB MiB across N local processes, the same columns as
bench_comm (time per call of the slowest rank, algbw, busbw = algbw x 2(n-1)/n).

usage: PY gloo_allreduce.py [NPROC] [MAX_MIB]

PY is the peer's python: `$(tools/bench/peer_venv.py python)` for the current PyTorch from
PyPI (what docs/benchmarks.md compares with), /usr/bin/python3 for Debian's.

With RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment, this process is that
one rank (one per host: tools/bench/multihost_allreduce.sh), rank 0 printing the table;
GLOO_SOCKET_IFNAME picks the interface.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, max_bytes, out):
    if port:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    size = 4096
    while size <= max_bytes:
        t = torch.ones(size // 4, dtype=torch.float32)
        iters = 200 if size <= 1 << 20 else 20 if size <= 16 << 20 else 5
        for _ in range(2):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        dt = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if out is not None:
            alg = size / dt.item() / 1e9
            out.put((size, dt.item() * 1e6, alg, alg * 2 * (world - 1) / world))
        size *= 4
    dist.destroy_process_group()


class Printer:
    """The queue's place for a rank started by someone else: rank 0 prints as it goes."""

    def put(self, row):
        s, us, alg, bus = row
        print(f"{'gloo_all_reduce':<15} {s:>12} {us:>11.1f} {alg:>11.2f} {bus:>11.2f}", flush=True)


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    max_bytes = (int(sys.argv[2]) if len(sys.argv) > 2 else 256) << 20
    if "RANK" in os.environ:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if rank == 0:
            print(f"# gloo (torch {torch.__version__}), {world} ranks, f32 sum")
            print(f"{'op':<15} {'bytes':>12} {'time_us':>11} {'algbw_GB/s':>11} {'busbw_GB/s':>11}")
        worker(rank, world, 0, max_bytes, Printer() if rank == 0 else None)
        return
    port = 29000 + os.getpid() % 1000
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, max_bytes, q if r == 0 else None)) for r in range(world)]
    for p in procs:
        p.start()
    print(f"# gloo (torch {torch.__version__}), {world} ranks, f32 sum")
    print(f"{'op':<15} {'bytes':>12} {'time_us':>11} {'algbw_GB/s':>11} {'busbw_GB/s':>11}")
    size = 4096
    while size <= max_bytes:
        s, us, alg, bus = q.get(timeout=600)
        print(f"{'gloo_all_reduce':<15} {s:>12} {us:>11.1f} {alg:>11.2f} {bus:>11.2f}", flush=True)
        size *= 4
    for p in procs:
        p.join(timeout=60)


if __name__ == "__main__":
    main()
