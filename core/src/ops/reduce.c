/* Reductions: sum and mean of all elements (a scalar of shape (1)), and sum and mean over
 * one dim, which is removed (a negative dim counts from the end; reducing a 1-D tensor gives
 * shape (1), the project's scalar). Sums accumulate in double in an order that does not
 * depend on the thread count. The mean of zero elements is NaN, as in PyTorch. */
#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/reduce.inc"
#include "ops/generic.h"

void ops_kernels_reduce(tr_kernels *k) {
    k->sum_all_forward = sum_all_forward_f32;
    k->sum_all_backward = sum_all_backward_f32;
    k->sum_dim_forward = sum_dim_forward_f32;
    k->sum_dim_backward = sum_dim_backward_f32;
}

/* f[0] scale (1 or 1/N) */
static void sum_all_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx) OP_RUN(g, n->out->dtype, sum_all_backward, dx, n->out->grad, n->f[0], tr_tensor_numel(n->in[0]));
}

static tr_tensor *sum_all(tr_graph *g, tr_tensor *x, int mean) {
    const char *name = mean ? "mean" : "sum";
    if (!op_check(g, name, 1, x)) return NULL;
    if (!OP_DEVICE(g, name, sum_all_forward, sum_all_backward)) return NULL;
    int64_t N = tr_tensor_numel(x);
    tr_tensor *y = op_out(g, x->dtype, 1, (int64_t[]){1});
    if (!y) return NULL;
    double scale = mean ? 1.0 / (double)N : 1.0;
    OP_RUN(g, x->dtype, sum_all_forward, y->data, x->data, N, mean ? (double)N : 1.0);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, name, sum_all_backward, y, 1, x);
        if (!n) return NULL;
        n->f[0] = scale;
    }
    return y;
}

tr_tensor *tr_sum(tr_graph *g, tr_tensor *x) { return sum_all(g, x, 0); }
tr_tensor *tr_mean(tr_graph *g, tr_tensor *x) { return sum_all(g, x, 1); }

/* i: O, D, I; f[0] scale (1 or 1/D) */
static void sum_dim_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx) OP_RUN(g, n->out->dtype, sum_dim_backward, dx, n->out->grad, n->f[0], n->i[0], n->i[1], n->i[2]);
}

static tr_tensor *sum_dim(tr_graph *g, tr_tensor *x, int dim, int mean) {
    const char *name = mean ? "mean_dim" : "sum_dim";
    if (!op_check(g, name, 1, x)) return NULL;
    if (!OP_DEVICE(g, name, sum_dim_forward, sum_dim_backward)) return NULL;
    int d = dim < 0 ? dim + x->ndim : dim;
    if (d < 0 || d >= x->ndim)
        return op_fail(g, TR_ERR_INVALID, "%s: dim %d is out of range for input %s", name, dim,
                       op_shape(x));
    int64_t O = tr_tensor_dims(x, 0, d), D = x->shape[d], I = tr_tensor_dims(x, d + 1, x->ndim);
    int64_t shape[TR_MAX_DIMS] = {1};
    int nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != d) shape[nd++] = x->shape[i];
    tr_tensor *y = op_out(g, x->dtype, nd ? nd : 1, shape);
    if (!y) return NULL;
    /* 0 / 0 gives NaN for an empty mean, as PyTorch does. */
    double scale = mean ? (D ? 1.0 / (double)D : NAN) : 1.0;
    OP_RUN(g, x->dtype, sum_dim_forward, y->data, x->data, scale, O, D, I);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, name, sum_dim_backward, y, 1, x);
        if (!n) return NULL;
        n->i[0] = O;
        n->i[1] = D;
        n->i[2] = I;
        n->f[0] = scale;
    }
    return y;
}

tr_tensor *tr_sum_dim(tr_graph *g, tr_tensor *x, int dim) { return sum_dim(g, x, dim, 0); }
tr_tensor *tr_mean_dim(tr_graph *g, tr_tensor *x, int dim) { return sum_dim(g, x, dim, 1); }
