#!/usr/bin/python3
"""trainer's GEMM beside MKL's on all-MiniLM-L6-v2's products, one thread (issue 46).

    tools/bench/gemm_vs_mkl.py [--build DIR] [--cpu K] [--tiles] [--peak GFLOPS]

Each product that tr_linear runs for a 32 x 128-token batch of all-MiniLM-L6-v2 (hidden 384,
FFN 1536): forward x W^T, the input gradient dY W and the weight gradient dY^T X, and the
fused q/k/v projection the plugin does not use yet. trainer's side is tr_gemm_linear_f32, the
function tr_linear calls (build/lib/libbench_gemm.so through ctypes: the core's GEMM is private
to libtrainer), MKL's is torch.mm of the PyTorch in
the benchmark peer's venv (tools/bench/peer_venv.py), both on one thread pinned to CPU K
(default: the last this process may use). Each figure is the median of 5 windows of 3 calls
after a warm-up call, timed in the thread's CPU time, so that other processes sharing the core
do not count; the two results must agree (relative 1e-5 of the largest value). Prints
GFLOP/s per CPU-second of each side and the ratio, beside the core's multiply-add peak
(bench_core --peak, wall time; --peak gives it instead). With --tiles, trainer's side is also
timed once per micro-kernel of the packed GEMM (forced with tr_gemm_packed_tile, interleaved
in each window: an A/B in one run); the ratio stays the CPU's own choice over MKL. Exit 77 when PyPI cannot be reached.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
H, F, ROWS = 384, 1536, 32 * 128
# name, op(A) transposed, op(B) transposed, M, N, K (row-major C = op(A) op(B), as tr_linear calls it)
PRODUCTS = [
    ("q, k, v, attention output: x W^T", 0, 1, ROWS, H, H),
    ("fused q/k/v: x W^T", 0, 1, ROWS, 3 * H, H),
    ("FFN in: x W^T", 0, 1, ROWS, F, H),
    ("FFN out: x W^T", 0, 1, ROWS, H, F),
    ("q, k, v, attention output: dY W", 0, 0, ROWS, H, H),
    ("FFN in: dY W", 0, 0, ROWS, H, F),
    ("FFN out: dY W", 0, 0, ROWS, F, H),
    ("q, k, v, attention output: dY^T X", 1, 0, H, H, ROWS),
    ("FFN in: dY^T X", 1, 0, F, H, ROWS),
    ("FFN out: dY^T X", 1, 0, H, F, ROWS),
]


def cpu_seconds(fns, calls=3, windows=5):
    """Median CPU seconds a call of each of fns, their windows interleaved."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(windows):
        for fn, t in zip(fns, times):
            t0 = time.thread_time()
            for _ in range(calls):
                fn()
            t.append((time.thread_time() - t0) / calls)
    return [sorted(t)[windows // 2] for t in times]


TILES = [(1, "16 x 16"), (2, "12 x 32")]  # kernels/gemm.h's TR_GEMM_TILE_16X16, TR_GEMM_TILE_WIDE


def inner(args):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    lib = ctypes.CDLL(os.path.join(args.build, "lib", "libbench_gemm.so"))  # tools/bench/bench_gemm_lib.c
    gemm = lib.bench_gemm_linear_f32
    gemm.restype = None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    gemm.argtypes = [ctypes.c_int, ctypes.c_int, i64, i64, i64, ctypes.c_float, ptr, i64, ptr, i64, ctypes.c_float,
                     ptr, i64]
    peak = args.peak or float(subprocess.run([os.path.join(args.build, "bin", "bench_core"), "--threads", "1",
                                              "--peak"], stdout=subprocess.PIPE, text=True, check=True).stdout)
    print(f"torch {torch.__version__} (MKL) vs trainer ({args.build}), CPU {args.cpu}, 1 thread; "
          f"multiply-add peak {peak:.1f} GFLOP/s\n")
    tiles = TILES if args.tiles else []
    if tiles:
        lib.bench_gemm_packed_tile.argtypes = [ctypes.c_int]
        lib.bench_gemm_packed_tile.restype = ctypes.c_int
    cols = "".join(f" trainer {name} GFLOP/s |" for _, name in tiles)
    print(f"| product | M x N x K |{cols} trainer GFLOP/s (% of peak) | MKL GFLOP/s (% of peak) | trainer / MKL |")
    print("|---|---|" + "---|" * (len(tiles) + 3))
    rng = np.random.default_rng(46)
    for name, ta, tb, M, N, K in PRODUCTS:
        A = rng.standard_normal((K, M) if ta else (M, K), dtype=np.float32)
        B = rng.standard_normal((N, K) if tb else (K, N), dtype=np.float32)
        C = np.zeros((M, N), np.float32)

        def ours():
            gemm(ta, tb, M, N, K, 1.0, A.ctypes.data, A.shape[1], B.ctypes.data, B.shape[1], 0.0, C.ctypes.data, N)

        a, b = torch.from_numpy(A), torch.from_numpy(B)
        a, b = (a.t() if ta else a), (b.t() if tb else b)
        out = torch.empty(M, N)

        def theirs():
            torch.mm(a, b, out=out)

        def forced(tile):
            def run():
                lib.bench_gemm_packed_tile(tile)
                ours()
            return run

        t = cpu_seconds([forced(tile) for tile, _ in tiles] + [forced(0) if tiles else ours, theirs])
        err = float(np.abs(C - out.numpy()).max() / np.abs(out.numpy()).max())
        if not err <= 1e-5:
            sys.exit(f"gemm_vs_mkl: {name}: the products differ (relative {err:.2e})")
        g = [2 * M * N * K / x / 1e9 for x in t]
        each = "".join(f" {x:.1f} ({100 * x / peak:.0f}%) |" for x in g[:-2])
        print(f"| {name} | {M} x {N} x {K} |{each} {g[-2]:.1f} ({100 * g[-2] / peak:.0f}%) | {g[-1]:.1f} "
              f"({100 * g[-1] / peak:.0f}%) | {g[-2] / g[-1]:.2f}x |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--tiles", action="store_true", help="also time each packed-GEMM micro-kernel, forced")
    ap.add_argument("--peak", type=float, default=0.0,
                    help="the core's multiply-add peak in GFLOP/s, not measured (bench_core --peak times in wall "
                         "time, which other processes on a busy host lower)")
    args = ap.parse_args()
    if os.environ.get("TRAINER_PEER_INNER") == "1":
        inner(args)
        return
    sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
    import oracle_venv
    import peer_venv
    try:
        py = peer_venv.ensure(sys.executable)
    except oracle_venv.Unreachable as e:
        print(f"SKIPPED: {e}")
        sys.exit(oracle_venv.SKIP)
    except oracle_venv.Failed as e:
        sys.exit(str(e))
    env = oracle_venv.env()
    env.update(TRAINER_PEER_INNER="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    os.sched_setaffinity(0, {args.cpu})
    sys.stdout.flush()
    os.execve(py, [py, os.path.abspath(__file__), "--build", os.path.abspath(args.build), "--cpu", str(args.cpu)]
              + (["--tiles"] if args.tiles else []) + (["--peak", str(args.peak)] if args.peak else []), env)


if __name__ == "__main__":
    main()
