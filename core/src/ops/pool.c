/* 2-D max and average pooling, NCHW, square window, one stride and padding for both dims,
 * no ceil mode or dilation. As in PyTorch, padding is at most kernel/2; max pooling treats
 * padding as -inf (it never wins) and remembers each output's winning pixel for backward;
 * average pooling counts padding as zeros in a k*k divisor (count_include_pad=True). */
#include <string.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "ops/pool.h"
#include "trainer/ops.h"

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
static int pool2_forward_row_f32(float *y, int32_t *am, const float *r0, const float *r1,
                                 int32_t base, int32_t W, int64_t OW) {
    for (int64_t o = 0; o < OW; o += 16) {
        __mmask16 m = pool2_mask(OW - o);
        __m512i best;
        __m512 mx = pool2_max(pool2_load(r0 + 2 * o, r1 + 2 * o, OW - o), pool2_index(base + 2 * (int32_t)o), W,
                              &best, NULL, NULL);
        _mm512_mask_storeu_ps(y + o, m, mx);
        _mm512_mask_storeu_epi32(am + o, m, best);
    }
    return 1;
}

/* The two input rows of output row oh: each pixel gets dy of the output whose winner it is, 0
 * otherwise (set, or added when acc). */
static int pool2_backward_row_f32(float *d0, float *d1, const float *dy, const int32_t *am,
                                  int32_t base, int32_t W, int64_t OW, int acc) {
    for (int64_t o = 0; o < OW; o += 16) {
        int64_t n = OW - o;
        __mmask16 m = pool2_mask(n), ms[4] = {pool2_mask(2 * n), pool2_mask(2 * n - 16), pool2_mask(2 * n),
                                              pool2_mask(2 * n - 16)};
        __m512 v[4];
        pool2_spread(_mm512_maskz_loadu_ps(m, dy + o), am + o, base + 2 * (int32_t)o, W, m, v);
        float *dst[4] = {d0 + 2 * o, d0 + 2 * o + 16, d1 + 2 * o, d1 + 2 * o + 16};
        for (int k = 0; k < 4; k++) {
            if (acc) v[k] = _mm512_add_ps(v[k], _mm512_maskz_loadu_ps(ms[k], dst[k]));
            _mm512_mask_storeu_ps(dst[k], ms[k], v[k]);
        }
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
    OP_RUN(g, x->dtype, max_pool_backward, dx, n->out->grad, n->saved[0], x->shape[0] * x->shape[1], &d, acc);
}

tr_tensor *tr_max_pool2d(tr_graph *g, tr_tensor *x, int kernel, int stride, int padding) {
    if (!pool_check(g, "max_pool2d", x, kernel, stride, padding) ||
        !OP_DEVICE(g, "max_pool2d", max_pool_forward, max_pool_backward))
        return NULL;
    pool_dims d = pool_dims_of(x, kernel, stride, padding);
    int64_t NC = x->shape[0] * x->shape[1];
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){x->shape[0], x->shape[1], d.OH, d.OW});
    if (!y) return NULL;
    int32_t *argmax = op_data(g, (size_t)(NC * d.OH * d.OW) * sizeof(int32_t) + 1);
    if (!argmax) return NULL;
    OP_RUN(g, x->dtype, max_pool_forward, y->data, argmax, x->data, NC, &d);
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
    OP_RUN(g, x->dtype, avg_pool_backward, dx, n->out->grad, x->shape[0] * x->shape[1], &d);
}

tr_tensor *tr_avg_pool2d(tr_graph *g, tr_tensor *x, int kernel, int stride, int padding) {
    if (!pool_check(g, "avg_pool2d", x, kernel, stride, padding) ||
        !OP_DEVICE(g, "avg_pool2d", avg_pool_forward, avg_pool_backward))
        return NULL;
    pool_dims d = pool_dims_of(x, kernel, stride, padding);
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){x->shape[0], x->shape[1], d.OH, d.OW});
    if (!y) return NULL;
    OP_RUN(g, x->dtype, avg_pool_forward, y->data, x->data, x->shape[0] * x->shape[1], &d);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, "avg_pool2d", avg_pool2d_backward, y, 1, x);
        if (!n) return NULL;
        n->i[0] = kernel;
        n->i[1] = stride;
        n->i[2] = padding;
    }
    return y;
}

void ops_kernels_pool(tr_kernels *k) {
    k->max_pool_forward = max_pool_forward_f32;
    k->max_pool_backward = max_pool_backward_f32;
    k->avg_pool_forward = avg_pool_forward_f32;
    k->avg_pool_backward = avg_pool_backward_f32;
}
