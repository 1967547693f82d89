/* Private: the max-pool kernels of one plane, shared by max_pool2d (pool.c) and the fused batch-norm,
 * max-pool and ReLU (batch_norm_pool.c). */
#ifndef TR_OPS_POOL_H
#define TR_OPS_POOL_H

#include <stdint.h>

/* Input planes H x W, output OH x OW, square window k, stride S, padding P. */
typedef struct pool_dims {
    int64_t H, W, OH, OW, k, S, P;
} pool_dims;

/* One plane: y (OH x OW) = the window maxima of x (H x W); am gets each output's winning
 * pixel, ih * W + iw (the first in scan order; a NaN wins). Single-threaded. */
void max_pool_plane_forward_f32(float *y, int32_t *am, const float *x, const pool_dims *d);
void max_pool_plane_forward_f64(double *y, int32_t *am, const double *x, const pool_dims *d);
/* One plane: dx (H x W) gets dy at each output's winner, 0 elsewhere: set (acc 0, the whole
 * plane written) or added (acc 1). Single-threaded. */
void max_pool_plane_backward_f32(float *dx, const float *dy, const int32_t *am, const pool_dims *d,
                                 int acc);
void max_pool_plane_backward_f64(double *dx, const double *dy, const int32_t *am,
                                 const pool_dims *d, int acc);

#endif
