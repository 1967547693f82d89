"""The core's counter-based random numbers (core/src/base/rng.c, trainer/rng.h) in plain
Python, so that reference cases can rebuild a dropout mask the C side draws: Philox4x32-10,
tr_rng_stream, and tr_dropout's keep rule. Pure integer arithmetic; fast enough for the few
thousand elements a reference case holds."""
import math

import torch

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF
STREAM_DROPOUT = 2  # TR_RNG_STREAM_DROPOUT


def philox4x32(key, hi, lo):
    """The four 32-bit words of block (hi, lo) under a 64-bit key (tr_philox4x32)."""
    c0, c1, c2, c3 = lo & M32, (lo >> 32) & M32, hi & M32, (hi >> 32) & M32
    k0, k1 = key & M32, (key >> 32) & M32
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


def _mix64(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rng_stream(stream, a, b):
    """tr_rng_stream(stream, a, b)."""
    return _mix64(_mix64(_mix64(stream) ^ a) ^ ((b + 0x9E3779B97F4A7C15) & M64))


def dropout_keep(p, n, seed, step, call, first):
    """tr_dropout's mask of n elements: element i is kept (1) when its 24-bit uniform, element
    first + i of stream rng_stream(DROPOUT, step, call) under seed, is >= p. A uint8 tensor."""
    stream = rng_stream(STREAM_DROPOUT, step, call)
    thr = math.ceil(p * 16777216.0)  # as ops_dropout_threshold, in the same double
    keep = []
    block, words = None, None
    for i in range(n):
        idx = first + i
        if idx >> 2 != block:
            block = idx >> 2
            words = philox4x32(seed, stream, block)
        keep.append(1 if (words[idx & 3] >> 8) >= thr else 0)
    return torch.tensor(keep, dtype=torch.uint8)
