/* Layer normalisation over the last dim, as PyTorch's LayerNorm(C): biased variance, eps
 * inside the square root. gamma and beta (C) may be NULL (no scale, no shift). */
#include <omp.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "ops/layer_norm.h"
#include "trainer/ops.h"

#define LN_LANES(type) ((int)(64 / sizeof(type))) /* one 64-byte vector */
#define LN_BLOCK 512

#define TR_GENERIC "ops/layer_norm.inc"
#include "ops/generic.h"

/* The table's entries (trainer/kernels.h): the backward on one thread, its partial sums in
 * `work`. */
static size_t ln_work(int64_t R, int64_t C) {
    (void)R;
    return (size_t)(2 * C) * sizeof(float);
}

static void ln_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                        const float *mean, const float *rstd, const float *gamma, void *work, int64_t R, int64_t C,
                        int acc) {
    layer_norm_backward_f32(dinp, dgamma, dbeta, dout, inp, mean, rstd, gamma, work, 1, R, C, acc);
}

void ops_layer_norm_row_f32(float *y, float *mean, float *rstd, const float *x, const float *gamma, const float *beta,
                            double eps, int64_t C) {
    ln_row_f32(y, mean, rstd, x, gamma, beta, eps, C);
}

void ops_kernels_layer_norm(tr_kernels *k) {
    k->layer_norm_forward = layer_norm_forward_f32;
    k->layer_norm_work = ln_work;
    k->layer_norm_backward = ln_backward;
}

static void layer_norm_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int acc;
    void *dx = op_grad_write(g, x, &acc), *dgamma = op_grad(g, gamma), *dbeta = op_grad(g, beta);
    if (!dx && !dgamma && !dbeta) return;
    int64_t R = n->i[0], C = n->i[1];
    const tr_kernels *k = op_kernels(g);
    if (k) { /* a device's kernels, with the scratch they ask for */
        void *work;
        if (op_work(g, k->layer_norm_work(R, C), &work))
            k->layer_norm_backward(dx, dgamma, dbeta, n->out->grad, x->data, n->saved[0], n->saved[1],
                                   gamma ? gamma->data : NULL, work, R, C, acc);
        return;
    }
    int nthr = R * C > TR_PAR_MIN ? omp_get_max_threads() : 1;
    void *part = op_data(g, (size_t)(nthr * 2 * C) * tr_dtype_size(x->dtype));
    if (!part) return;
    TR_DISPATCH(x->dtype, layer_norm_backward, dx, dgamma, dbeta, n->out->grad, x->data,
                n->saved[0], n->saved[1], gamma ? gamma->data : NULL, part, nthr, R, C, acc);
}

tr_tensor *tr_layer_norm(tr_graph *g, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
                         double eps) {
    if (!op_check(g, "layer_norm", 1 + (gamma != NULL) + (beta != NULL), x,
                  gamma ? gamma : beta, gamma ? beta : NULL))
        return NULL;
    if (!OP_DEVICE(g, "layer_norm", layer_norm_forward, layer_norm_work, layer_norm_backward)) return NULL;
    if (x->ndim < 1)
        return op_fail(g, TR_ERR_INVALID, "layer_norm: input %s has no last dim", op_shape(x));
    int64_t C = x->shape[x->ndim - 1], R = tr_tensor_dims(x, 0, x->ndim - 1);
    if ((gamma && (gamma->ndim != 1 || gamma->shape[0] != C)) ||
        (beta && (beta->ndim != 1 || beta->shape[0] != C)))
        return op_fail(g, TR_ERR_INVALID,
                       "layer_norm: gamma %s and beta %s must be (%lld), the last dim of input "
                       "%s",
                       op_shape(gamma), op_shape(beta), (long long)C, op_shape(x));
    if (C < 1 || !(eps >= 0))
        return op_fail(g, TR_ERR_INVALID,
                       "layer_norm: input %s needs a non-empty last dim and eps %g >= 0",
                       op_shape(x), eps);
    size_t es = tr_dtype_size(x->dtype);
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    void *mean = op_data(g, (size_t)R * es + 1), *rstd = op_data(g, (size_t)R * es + 1);
    if (!y || !mean || !rstd) return NULL;
    OP_RUN(g, x->dtype, layer_norm_forward, y->data, mean, rstd, x->data,
                gamma ? gamma->data : NULL, beta ? beta->data : NULL, eps, R, C);
    if (op_needs_grad(g, 3, x, gamma, beta)) {
        tr_node *n = op_record(g, "layer_norm", layer_norm_backward, y, 3, x, gamma, beta);
        if (!n) return NULL;
        n->i[0] = R;
        n->i[1] = C;
        n->saved[0] = mean;
        n->saved[1] = rstd;
    }
    return y;
}
