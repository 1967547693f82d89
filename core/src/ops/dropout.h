/* Private: dropout's mask and scaling, shared by tr_dropout (dropout.c) and the dropout on
 * attention probabilities (attention.c). The mask is the counter-based one of ops.h's
 * tr_dropout: element i of a tensor is element first + i of (seed, stream), kept when its
 * 24-bit uniform is >= p. */
#ifndef TR_OPS_DROPOUT_H
#define TR_OPS_DROPOUT_H

#include <stdint.h>

#include "trainer/tensor.h"

/* The integer threshold of p: a 24-bit uniform u = (r >> 8) / 2^24 is >= p exactly when
 * (r >> 8) >= ceil(p * 2^24). */
uint32_t ops_dropout_threshold(double p);
/* mask[i] = 1 if element first + i of (seed, stream) is kept, for i < n; one thread. */
void ops_dropout_mask(uint8_t *mask, int64_t n, uint64_t seed, uint64_t stream, uint64_t first, uint32_t thr);
/* out[i] (= or, with accumulate, +=) inp[i] * (mask[i] ? scale : 0), i < n, dtype dt (f32 or
 * f64); out may be inp. One thread. */
void ops_dropout_apply(void *out, const void *inp, const uint8_t *mask, double scale, tr_dtype dt, int64_t n,
                       int accumulate);

#endif
