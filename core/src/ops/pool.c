/* 2-D max and average pooling, NCHW, square window, one stride and padding for both dims,
 * no ceil mode or dilation. As in PyTorch, padding is at most kernel/2; max pooling treats
 * padding as -inf (it never wins) and remembers each output's winning pixel for backward;
 * average pooling counts padding as zeros in a k*k divisor (count_include_pad=True). */
#include <string.h>

#include "autograd/node.h"

typedef struct pool_dims {
    int64_t H, W, OH, OW, k, S, P;
} pool_dims;

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
    TR_DISPATCH(x->dtype, max_pool_backward, dx, n->out->grad, n->saved[0],
                x->shape[0] * x->shape[1], &d, acc);
}

tr_tensor *tr_max_pool2d(tr_graph *g, tr_tensor *x, int kernel, int stride, int padding) {
    if (!pool_check(g, "max_pool2d", x, kernel, stride, padding)) return NULL;
    pool_dims d = pool_dims_of(x, kernel, stride, padding);
    int64_t NC = x->shape[0] * x->shape[1];
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){x->shape[0], x->shape[1], d.OH, d.OW});
    if (!y) return NULL;
    int32_t *argmax = op_alloc(g, (size_t)(NC * d.OH * d.OW) * sizeof(int32_t) + 1);
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
