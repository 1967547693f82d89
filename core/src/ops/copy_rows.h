/* Private: strided row copies, what slice and concat are made of in both directions (and the
 * copy_rows entry of trainer/kernels.h). */
#ifndef TR_OPS_COPY_ROWS_H
#define TR_OPS_COPY_ROWS_H

#include <stdint.h>

/* dst[r * dld + j] (=, or += with acc) src[r * sld + j] for r < R, j < W. */
void copy_rows_f32(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t W, int acc);
void copy_rows_f64(double *dst, int64_t dld, const double *src, int64_t sld, int64_t R, int64_t W, int acc);

#endif
