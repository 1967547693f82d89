/* Counter-based random numbers (Philox4x32-10).
 *
 *   // the same 1000 numbers whatever thread, rank or batch split asks for them:
 *   tr_rng_fill_uniform(buf, 1000, seed, TR_RNG_STREAM_INIT, first_index, -0.1f, 0.1f);
 *   float u = tr_rng_uniform(seed, stream, 12345);   // element 12345 of that stream
 *
 * A number is a pure function of (seed, stream, index): no hidden state, so results do not
 * depend on thread count, rank layout or call order. Streams separate uses (init, dropout,
 * shuffling, data); callers derive sub-streams with tr_rng_stream(). */
#ifndef TRAINER_RNG_H
#define TRAINER_RNG_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TR_RNG_STREAM_INIT = 1,
    TR_RNG_STREAM_DROPOUT = 2,
    TR_RNG_STREAM_SHUFFLE = 3,
    TR_RNG_STREAM_DATA = 4,
    TR_RNG_STREAM_USER = 1000
};

/* One Philox4x32-10 block: four 32-bit words for 128-bit counter (hi, lo) under a 64-bit key. */
TR_API void tr_philox4x32(uint32_t out[4], uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

/* nblocks consecutive blocks, counters (hi, lo), (hi, lo + 1), ...: out[4 * b + i] is word i of
 * block b, as tr_philox4x32 gives it; 16 blocks at a time in vector registers. The low
 * counter wraps modulo 2^64 without carrying into hi. */
TR_API void tr_philox4x32_blocks(uint32_t *out, size_t nblocks, uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

/* A sub-stream id from a stream and two integers (e.g. step and call index). */
TR_API uint64_t tr_rng_stream(uint64_t stream, uint64_t a, uint64_t b);

/* 32 random bits for element `index` of (seed, stream). */
TR_API uint32_t tr_rng_u32(uint64_t seed, uint64_t stream, uint64_t index);
/* Uniform in [0, 1) with 24 random bits. */
TR_API float tr_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* Elements first..first+n-1 of the stream, uniform in [lo, hi). */
TR_API void tr_rng_fill_uniform(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
                         float lo, float hi);
/* Elements first..first+n-1 of the stream, normal(mean, std) by Box-Muller on element pairs. */
TR_API void tr_rng_fill_normal(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
                        float mean, float std);

#ifdef __cplusplus
}
#endif
#endif
