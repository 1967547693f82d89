/* Adam's update fused with the product that gives the gradient: dW = A^T B, a linear layer's
 * weight gradient at a small batch (A = dy, K x rows; B = x, K x cols; K <= 32), which
 * backward deferred (ops/linear.c) and tr_optim_step_tn applies.
 *
 * The tiled update (tr_optim_step_tiles) computes a 16 KiB tile of dW, then updates it: the
 * multiply-adds of the product and the update's divide, square root and streams of p, m and v
 * take turns, each leaving the other's units idle. Here a block of 4 rows x 16 columns of dW
 * is summed in registers and updated while still there, the next block's sums placed ahead
 * of this block's update (block, below) so that the multiply-add pipes and the divide unit
 * work at once. Both are near full: on a Zen 4 core the square root and division of 16 lanes
 * take 10 + 6 cycles of the divide unit, and at batch 8 the product's and the update's
 * multiplies are 16 operations per 16 elements, 1 cycle per element each; the fused update
 * runs at 1.4 (docs/benchmarks-history.md, issue 12's twelfth round).
 *
 * The same bits as the stored path: each element of dW is the fused multiply-add chain over
 * k from 0 that tr_gemm_small's tn kernel computes, times scale when scale is not 1 (the
 * tiles' order), then adam_elem's operations one for one (adam.h). AVX-512 hosts only;
 * optim/optim.c sends the others through the tiles. */
#include "kernels/adam.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>

#define TN_ROWS 4 /* rows of dW per block: each load of B feeds 4 multiply-adds */

/* In a register from here on: gcc otherwise folds the load of b into each of the 4
 * multiply-adds that use it (4 loads where 1 does; Zen 4 takes one 512-bit load a cycle). */
#define KEEP(v) __asm__("" : "+v"(v))

/* adam_elem (adam.h) on 16 lanes, operation for operation. */
static inline __attribute__((always_inline)) void adam_vec(float *p, float *m, float *v, __m512 d, __mmask16 lanes,
                                                           const optim_coef *k, const int wd_mode) {
    __m512 pi = _mm512_maskz_loadu_ps(lanes, p);
    if (wd_mode == ADAM_WD_DECOUPLED) pi = _mm512_mul_ps(pi, _mm512_set1_ps(k->decay));
    if (wd_mode == ADAM_WD_L2) d = _mm512_fmadd_ps(pi, _mm512_set1_ps(k->wd), d);
    __m512 mi = _mm512_fmadd_ps(d, _mm512_set1_ps(k->b1c), _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, m), _mm512_set1_ps(k->b1)));
    __m512 vi = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(k->b2c), d), d,
                                _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, v), _mm512_set1_ps(k->b2)));
    _mm512_mask_storeu_ps(m, lanes, mi);
    _mm512_mask_storeu_ps(v, lanes, vi);
    __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), _mm512_set1_ps(k->inv_bc2_sqrt)), _mm512_set1_ps(k->eps));
    __m512 step = _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(k->neg_step), mi), denom);
    _mm512_mask_storeu_ps(p, lanes, _mm512_add_ps(pi, step));
}

static inline __mmask16 tail_lanes(size_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* Rows [r, r + R) of dW at columns [c, c + 16) (lanes masks the last piece), summed in s. */
static inline __attribute__((always_inline)) void
sums(__m512 *s, size_t r, const int R, size_t c, __mmask16 lanes, size_t cols, size_t K, const float *A,
     size_t rows, const float *B) {
    for (int q = 0; q < R; q++) s[q] = _mm512_setzero_ps();
    for (size_t kk = 0; kk < K; kk++) {
        __m512 b = _mm512_maskz_loadu_ps(lanes, B + kk * cols + c);
        KEEP(b);
        for (int q = 0; q < R; q++) s[q] = _mm512_fmadd_ps(_mm512_set1_ps(A[kk * rows + r + (size_t)q]), b, s[q]);
    }
}

/* Adam on rows [r, r + R) of dW at columns [c, c + 16), summed in s. */
static inline __attribute__((always_inline)) void
update(const __m512 *s, size_t r, const int R, size_t c, size_t cols, float scale, float *p, float *m, float *v,
       const optim_coef *k, const int wd_mode) {
    for (int q = 0; q < R; q++) {
        __m512 d = scale != 1.0f ? _mm512_mul_ps(s[q], _mm512_set1_ps(scale)) : s[q];
        size_t at = (r + (size_t)q) * cols + c;
        adam_vec(p + at, m + at, v + at, d, tail_lanes(cols - c), k, wd_mode);
    }
}

/* Rows [r, r + R) of dW, all columns, 16 at a time. p, m and v point at element (0, 0) of the
 * block's matrix. Software-pipelined: the next 16 columns are summed before this piece is
 * updated, so in program order the multiply-adds sit ahead of the divisions that wait on the
 * divide unit, and the core keeps both busy (MLP 784-512 at batch 8, 1 thread, on a Zen 4
 * core: 167 -> 156 us for the layer's fused update timed by itself, 1.5% on the whole step). */
static inline __attribute__((always_inline)) void
block(size_t r, const int R, size_t cols, size_t K, const float *A, size_t rows, const float *B, float scale,
      float *p, float *m, float *v, const optim_coef *k, const int wd_mode) {
    __m512 s[TN_ROWS], next[TN_ROWS];
    size_t c = 0;
    sums(s, r, R, 0, tail_lanes(cols), cols, K, A, rows, B);
    for (; c + 16 < cols; c += 16) {
        sums(next, r, R, c + 16, tail_lanes(cols - c - 16), cols, K, A, rows, B);
        update(s, r, R, c, cols, scale, p, m, v, k, wd_mode);
        for (int q = 0; q < R; q++) s[q] = next[q];
    }
    update(s, r, R, c, cols, scale, p, m, v, k, wd_mode);
}

/* Blocks [i0, i1) of TN_ROWS rows (the last may be short). */
static inline __attribute__((always_inline)) void
blocks(const optim_coef *k, float *p, float *m, float *v, size_t rows, size_t cols, size_t K, const float *A,
       const float *B, float scale, size_t i0, size_t i1, const int wd_mode) {
    for (size_t i = i0; i < i1; i++) {
        size_t r = i * TN_ROWS;
        if (rows - r >= TN_ROWS) {
            block(r, TN_ROWS, cols, K, A, rows, B, scale, p, m, v, k, wd_mode);
        } else {
            for (; r < rows; r++) block(r, 1, cols, K, A, rows, B, scale, p, m, v, k, wd_mode);
        }
    }
}

/* On threads above OPTIM_PAR_MIN elements (each block on one thread: the same bits for any
 * count), else in a plain loop that opens no parallel region. */
static inline __attribute__((always_inline)) void
run(const optim_coef *k, float *p, float *m, float *v, size_t rows, size_t cols, size_t K, const float *A,
    const float *B, float scale, const int wd_mode) {
    size_t n = (rows + TN_ROWS - 1) / TN_ROWS;
    if (rows * cols <= OPTIM_PAR_MIN) {
        blocks(k, p, m, v, rows, cols, K, A, B, scale, 0, n, wd_mode);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) blocks(k, p, m, v, rows, cols, K, A, B, scale, i, i + 1, wd_mode);
}

int optim_adam_tn_fused(void) { return 1; }

int optim_adam_apply_tn(const optim_coef *k, float *param, float *m, float *v, size_t rows, size_t cols, size_t K,
                        const float *A, const float *B, float scale) {
    if (k->mode == ADAM_WD_DECOUPLED)
        run(k, param, m, v, rows, cols, K, A, B, scale, ADAM_WD_DECOUPLED);
    else if (k->mode == ADAM_WD_L2)
        run(k, param, m, v, rows, cols, K, A, B, scale, ADAM_WD_L2);
    else
        run(k, param, m, v, rows, cols, K, A, B, scale, ADAM_WD_NONE);
    return 1;
}

#else

int optim_adam_tn_fused(void) { return 0; }

int optim_adam_apply_tn(const optim_coef *k, float *param, float *m, float *v, size_t rows, size_t cols, size_t K,
                        const float *A, const float *B, float scale) {
    (void)k, (void)param, (void)m, (void)v, (void)rows, (void)cols, (void)K, (void)A, (void)B, (void)scale;
    return 0;
}

#endif
