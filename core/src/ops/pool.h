/* Private: the max-pool kernels of one plane and the AVX-512 pieces of 2x2 windows, shared by
 * max_pool2d (pool.c) and the fused batch-norm, max-pool and ReLU (batch_norm_pool.c). */
#ifndef TR_OPS_POOL_H
#define TR_OPS_POOL_H

#include <stdint.h>

#include "trainer/kernels.h"

/* Input planes H x W, output OH x OW, square window k, stride S, padding P. */
typedef tr_pool2d_dims pool_dims;

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

#if defined(__AVX512F__)
#include <immintrin.h>

/* The 2x2 stride-2 windows of a row of outputs on AVX-512, 16 at a time, as max_pool2d's row
 * kernels (pool.c) and the fused batch-norm, max-pool and ReLU (batch_norm_pool.c) use them.
 * Masked-off lanes are neither read nor written. */

/* The first n of 16 lanes. */
static inline __mmask16 pool2_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* Pixel indices first + 2 l of lane l: the top-left pixels of 16 windows. */
static inline __m512i pool2_index(int32_t first) {
    return _mm512_add_epi32(_mm512_set1_epi32(first),
                            _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0));
}

/* The four pixels of 16 windows from rows r0, r1 (window o's are r0[2o], r0[2o+1], r1[2o],
 * r1[2o+1]), in scan order; n windows valid, the others' lanes 0. */
typedef struct pool2_quad {
    __m512 a, b, c, e;
} pool2_quad;

static inline pool2_quad pool2_load(const float *r0, const float *r1, int64_t n) {
    const __m512i even = pool2_index(0), odd = pool2_index(1);
    __mmask16 lo = pool2_mask(2 * n), hi = pool2_mask(2 * n - 16);
    __m512 t0 = _mm512_maskz_loadu_ps(lo, r0), t1 = _mm512_maskz_loadu_ps(hi, r0 + 16);
    __m512 u0 = _mm512_maskz_loadu_ps(lo, r1), u1 = _mm512_maskz_loadu_ps(hi, r1 + 16);
    return (pool2_quad){_mm512_permutex2var_ps(t0, even, t1), _mm512_permutex2var_ps(t0, odd, t1),
                        _mm512_permutex2var_ps(u0, even, u1), _mm512_permutex2var_ps(u0, odd, u1)};
}

/* The windows' maxima of z in scan order, a larger value or a NaN taking the place (max_pool2d's
 * rule); *best the winners' pixels (idx, idx + 1, idx + W, idx + W + 1) and, when v is given,
 * *vw v's values at the winners. */
static inline __m512 pool2_max(pool2_quad z, __m512i idx, int32_t W, __m512i *best, const pool2_quad *v,
                               __m512 *vw) {
    const __m512 zs[4] = {z.a, z.b, z.c, z.e};
    const __m512 vs[4] = {v ? v->a : z.a, v ? v->b : z.b, v ? v->c : z.c, v ? v->e : z.e};
    const int32_t off[4] = {0, 1, W, W + 1};
    __m512 mx = zs[0], win = vs[0];
    *best = idx;
    for (int k = 1; k < 4; k++) {
        __mmask16 t = _mm512_cmp_ps_mask(zs[k], mx, _CMP_GT_OQ) | _mm512_cmp_ps_mask(zs[k], zs[k], _CMP_UNORD_Q);
        mx = _mm512_mask_mov_ps(mx, t, zs[k]);
        win = _mm512_mask_mov_ps(win, t, vs[k]);
        *best = _mm512_mask_mov_epi32(*best, t, _mm512_add_epi32(idx, _mm512_set1_epi32(off[k])));
    }
    if (vw) *vw = win;
    return mx;
}

/* The gradients g of 16 outputs spread over their windows' pixels (each output's at its
 * winner am, 0 at the others): out[0], out[1] the windows' two rows' first 16 pixels of the
 * top row and the next 16, out[2], out[3] the bottom row's. first: the first window's top-left
 * pixel; m the valid outputs. */
static inline void pool2_spread(__m512 g, const int32_t *am, int32_t first, int32_t W, __mmask16 m, __m512 out[4]) {
    /* interleave: even lanes from the first vector, odd from the second (low, high halves) */
    const __m512i ilo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ihi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    __m512i w = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, am), pool2_index(first)); /* 0, 1, W or W + 1 */
    __m512 v00 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(0)), g);
    __m512 v01 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(1)), g);
    __m512 v10 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(W)), g);
    __m512 v11 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(W + 1)), g);
    out[0] = _mm512_permutex2var_ps(v00, ilo, v01);
    out[1] = _mm512_permutex2var_ps(v00, ihi, v01);
    out[2] = _mm512_permutex2var_ps(v10, ilo, v11);
    out[3] = _mm512_permutex2var_ps(v10, ihi, v11);
}
#endif

#endif
