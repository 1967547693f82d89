/* 2-D max and average pooling, NCHW, square window, one stride and padding for both dims,
 * no ceil mode or dilation. As in PyTorch, padding is at most kernel/2; max pooling treats
 * padding as -inf (it never wins) and remembers each output's winning pixel for backward;
 * average pooling counts padding as zeros in a k*k divisor (count_include_pad=True). */
#include <string.h>

#include "autograd/node.h"
#include "ops/pool.h"

/* The 2x2 stride-2 max-pool of one output row, forward and backward, on AVX-512: rows of
 * small CNNs are 6 to 14 outputs, shorter than a compiler's vector loop, so a row is a few
 * masked vectors (masked-off lanes are neither read nor written). Each returns 0 where it
 * does not apply (double, or no AVX-512), and the template's loops run instead. The same
 * winner as the scalar loop: a larger value or a NaN replaces the current one, in scan order. */
#define POOL2_NO_ROWS(type, sfx)                                                              \
    static int pool2_forward_row_##sfx(type *y, int32_t *am, const type *r0, const type *r1,  \
                                       int32_t base, int32_t W, int64_t OW) {                 \
        (void)y, (void)am, (void)r0, (void)r1, (void)base, (void)W, (void)OW;                 \
        return 0;                                                                             \
    }                                                                                         \
    static int pool2_backward_row_##sfx(type *d0, type *d1, const type *dy, const int32_t *am, \
                                        int32_t base, int32_t W, int64_t OW, int acc) {       \
        (void)d0, (void)d1, (void)dy, (void)am, (void)base, (void)W, (void)OW, (void)acc;     \
        return 0;                                                                             \
    }
POOL2_NO_ROWS(double, f64)

#if defined(__AVX512F__)
#include <immintrin.h>

static inline __mmask16 pool_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* a larger value or a NaN (cmp with itself unordered) takes the place */
static inline __mmask16 pool_takes(__m512 v, __m512 m) {
    return _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}

static int pool2_forward_row_f32(float *y, int32_t *am, const float *r0, const float *r1,
                                 int32_t base, int32_t W, int64_t OW) {
    const __m512i lane2 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i lane2p1 = _mm512_add_epi32(lane2, _mm512_set1_epi32(1));
    for (int64_t o = 0; o < OW; o += 16) {
        int64_t n = OW - o;
        __mmask16 m = pool_mask(n), lo = pool_mask(2 * n), hi = pool_mask(2 * n - 16);
        __m512 t0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * o), t1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * o + 16);
        __m512 u0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * o), u1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * o + 16);
        __m512 a = _mm512_permutex2var_ps(t0, lane2, t1), b = _mm512_permutex2var_ps(t0, lane2p1, t1);
        __m512 c = _mm512_permutex2var_ps(u0, lane2, u1), e = _mm512_permutex2var_ps(u0, lane2p1, u1);
        __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * (int32_t)o), lane2);
        __m512 mx = a;
        __m512i best = idx;
        __mmask16 t = pool_takes(b, mx);
        mx = _mm512_mask_mov_ps(mx, t, b);
        best = _mm512_mask_mov_epi32(best, t, _mm512_add_epi32(idx, _mm512_set1_epi32(1)));
        t = pool_takes(c, mx);
        mx = _mm512_mask_mov_ps(mx, t, c);
        best = _mm512_mask_mov_epi32(best, t, _mm512_add_epi32(idx, _mm512_set1_epi32(W)));
        t = pool_takes(e, mx);
        mx = _mm512_mask_mov_ps(mx, t, e);
        best = _mm512_mask_mov_epi32(best, t, _mm512_add_epi32(idx, _mm512_set1_epi32(W + 1)));
        _mm512_mask_storeu_ps(y + o, m, mx);
        _mm512_mask_storeu_epi32(am + o, m, best);
    }
    return 1;
}

/* The two input rows of output row oh: each pixel gets dy of the output whose winner it is, 0
 * otherwise (set, or added when acc). */
static int pool2_backward_row_f32(float *d0, float *d1, const float *dy, const int32_t *am,
                                  int32_t base, int32_t W, int64_t OW, int acc) {
    const __m512i lane2 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    /* interleave: even lanes from the first vector, odd from the second (low and high halves) */
    const __m512i ilo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ihi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (int64_t o = 0; o < OW; o += 16) {
        int64_t n = OW - o;
        __mmask16 m = pool_mask(n), lo = pool_mask(2 * n), hi = pool_mask(2 * n - 16);
        __m512 g = _mm512_maskz_loadu_ps(m, dy + o);
        __m512i w = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, am + o),
                                     _mm512_add_epi32(_mm512_set1_epi32(base + 2 * (int32_t)o), lane2));
        __m512 v00 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(0)), g);
        __m512 v01 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(1)), g);
        __m512 v10 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(W)), g);
        __m512 v11 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(W + 1)), g);
        __m512 p0 = _mm512_permutex2var_ps(v00, ilo, v01), p1 = _mm512_permutex2var_ps(v00, ihi, v01);
        __m512 q0 = _mm512_permutex2var_ps(v10, ilo, v11), q1 = _mm512_permutex2var_ps(v10, ihi, v11);
        float *a = d0 + 2 * o, *b = d1 + 2 * o;
        if (acc) {
            p0 = _mm512_add_ps(p0, _mm512_maskz_loadu_ps(lo, a));
            p1 = _mm512_add_ps(p1, _mm512_maskz_loadu_ps(hi, a + 16));
            q0 = _mm512_add_ps(q0, _mm512_maskz_loadu_ps(lo, b));
            q1 = _mm512_add_ps(q1, _mm512_maskz_loadu_ps(hi, b + 16));
        }
        _mm512_mask_storeu_ps(a, lo, p0);
        _mm512_mask_storeu_ps(a + 16, hi, p1);
        _mm512_mask_storeu_ps(b, lo, q0);
        _mm512_mask_storeu_ps(b + 16, hi, q1);
    }
    return 1;
}
#else
POOL2_NO_ROWS(float, f32)
#endif

#define TR_GENERIC "ops/pool.inc"
#include "ops/generic.h"

static pool_dims pool_dims_of(const tr_tensor *x, int64_t k, int64_t S, int64_t P) {
    pool_dims d = {.H = x->shape[2], .W = x->shape[3], .k = k, .S = S, .P = P};
    d.OH = (d.H + 2 * P - k) / S + 1;
    d.OW = (d.W + 2 * P - k) / S + 1;
    return d;
}

/* Checks the input and window; returns 0 having recorded the error. */
static int pool_check(tr_graph *g, const char *op, tr_tensor *x, int kernel, int stride,
                      int padding) {
    if (!op_check(g, op, 1, x)) return 0;
    if (!OP_HOST_ONLY(g, op)) return 0;
    if (x->ndim != 4) {
        op_fail(g, TR_ERR_INVALID, "%s: input %s must be (N, C, H, W)", op, op_shape(x));
        return 0;
    }
    if (kernel < 1 || stride < 1 || padding < 0 || padding > kernel / 2) {
        op_fail(g, TR_ERR_INVALID,
                "%s: kernel %d and stride %d must be >= 1, padding %d in [0, kernel/2]", op,
                kernel, stride, padding);
        return 0;
    }
    if (x->shape[2] + 2 * padding < kernel || x->shape[3] + 2 * padding < kernel) {
        op_fail(g, TR_ERR_INVALID, "%s: kernel %d does not fit input %s with padding %d", op,
                kernel, op_shape(x), padding);
        return 0;
    }
    if (x->shape[2] * x->shape[3] > INT32_MAX) {
        op_fail(g, TR_ERR_UNSUPPORTED, "%s: input %s has more than 2^31 pixels per plane", op,
                op_shape(x));
        return 0;
    }
    return 1;
}

static void max_pool2d_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0];
    int acc;
    void *dx = op_grad_write(g, x, &acc);
    if (!dx) return;
    pool_dims d = pool_dims_of(x, n->i[0], n->i[1], n->i[2]);
    TR_DISPATCH(x->dtype, max_pool_backward, dx, n->out->grad, n->saved[0],
                x->shape[0] * x->shape[1], &d, acc);
}

tr_tensor *tr_max_pool2d(tr_graph *g, tr_tensor *x, int kernel, int stride, int padding) {
    if (!pool_check(g, "max_pool2d", x, kernel, stride, padding)) return NULL;
    pool_dims d = pool_dims_of(x, kernel, stride, padding);
    int64_t NC = x->shape[0] * x->shape[1];
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){x->shape[0], x->shape[1], d.OH, d.OW});
    if (!y) return NULL;
    int32_t *argmax = op_data(g, (size_t)(NC * d.OH * d.OW) * sizeof(int32_t) + 1);
    if (!argmax) return NULL;
    TR_DISPATCH(x->dtype, max_pool_forward, y->data, argmax, x->data, NC, &d);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, "max_pool2d", max_pool2d_backward, y, 1, x);
        if (!n) return NULL;
        n->i[0] = kernel;
        n->i[1] = stride;
        n->i[2] = padding;
        n->saved[0] = argmax;
    }
    return y;
}

static void avg_pool2d_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0];
    void *dx = op_grad(g, x);
    if (!dx) return;
    pool_dims d = pool_dims_of(x, n->i[0], n->i[1], n->i[2]);
    TR_DISPATCH(x->dtype, avg_pool_backward, dx, n->out->grad, x->shape[0] * x->shape[1], &d);
}

tr_tensor *tr_avg_pool2d(tr_graph *g, tr_tensor *x, int kernel, int stride, int padding) {
    if (!pool_check(g, "avg_pool2d", x, kernel, stride, padding)) return NULL;
    pool_dims d = pool_dims_of(x, kernel, stride, padding);
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){x->shape[0], x->shape[1], d.OH, d.OW});
    if (!y) return NULL;
    TR_DISPATCH(x->dtype, avg_pool_forward, y->data, x->data, x->shape[0] * x->shape[1], &d);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, "avg_pool2d", avg_pool2d_backward, y, 1, x);
        if (!n) return NULL;
        n->i[0] = kernel;
        n->i[1] = stride;
        n->i[2] = padding;
    }
    return y;
}
