/* Private: GELU's f32 kernels for the ops that apply it as part of another (linear_fused.c),
 * the very loops tr_gelu runs, so that they give its bits. */
#ifndef TRAINER_OPS_GELU_H
#define TRAINER_OPS_GELU_H

#include <stdint.h>

/* out = gelu(x) on n elements, on the calling thread (approx: tr_gelu_approx). */
void ops_gelu_span_f32(float *out, const float *x, int64_t n, int approx);
/* dx = dout gelu'(x) (acc 0) or dx += it (acc 1), over the threads. */
void ops_gelu_backward_f32(float *dx, const float *dout, const float *x, int64_t n, int approx, int acc);

#endif
