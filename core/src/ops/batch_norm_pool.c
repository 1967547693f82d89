/* batch_norm, then a 2x2 stride-2 max-pool, then ReLU, as one op: the tail of a conv block
 * (FashionCNN's conv, BN, ReLU, pool: max-pooling and ReLU are both monotone, so pooling
 * first gives the same values and sends the gradient to the same pixel).
 *
 * Separately the three ops write the normalised tensor, read it back to pool it, and in
 * backward write its full-size gradient (zero but at the winners) and read it twice more for
 * batch-norm's sums and input gradient. Here each thread normalises one plane into scratch
 * that stays in cache and pools it from there, and backward rebuilds a plane's gradient in
 * cache from the pooled one and the winners: the passes over full-size memory are batch-norm's
 * statistics, reading x once to pool it, and reading x and writing dx in backward. The
 * statistics, the running-statistics update and sync_batchnorm's reductions are batch_norm's
 * own (bn_statistics), and the results equal the three ops' bit for bit. */
#include <omp.h>

#include "autograd/node.h"
#include "ops/batch_norm.h"
#include "ops/pool.h"

#define TR_GENERIC "ops/batch_norm_pool.inc"
#include "ops/generic.h"

static pool_dims bnp_dims(const tr_tensor *x) {
    pool_dims d = {.H = x->shape[2], .W = x->shape[3], .k = 2, .S = 2, .P = 0};
    d.OH = d.H / 2;
    d.OW = d.W / 2;
    return d;
}

/* Reals of scratch per thread: the pooled gradient (padded to 16) and one plane. */
static int64_t bnp_per_thread(const pool_dims *d) {
    return (d->OH * d->OW + 15) / 16 * 16 + (d->H * d->W + 15) / 16 * 16;
}

static void *bnp_scratch(tr_graph *g, const tr_tensor *x, const pool_dims *d) {
    size_t threads = (size_t)omp_get_max_threads();
    return op_data(g, threads * (size_t)bnp_per_thread(d) * tr_dtype_size(x->dtype));
}

static void batch_norm_pool_relu_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    void *dgamma = op_grad(g, gamma), *dbeta = op_grad(g, beta);
    int acc = 0, sync = (int)n->i[2];
    void *dx = op_grad_write(g, x, &acc);
    /* A synchronised layer takes part in the replicas' reduction, gradients or not. */
    if (!dx && !dgamma && !dbeta && !sync) return;
    int64_t N = x->shape[0], C = x->shape[1];
    pool_dims d = bnp_dims(x);
    void *scratch = bnp_scratch(g, x, &d);
    double *sums = op_alloc(g, (size_t)(4 * C) * sizeof(double)); /* host: the reducer reads it */
    if (!scratch || !sums) return;
    const void *gm = gamma ? gamma->data : NULL;
    int64_t per = bnp_per_thread(&d);
    /* This replica's sums, and unless synchronised dx from them in the same pass per channel. */
    TR_DISPATCH(x->dtype, bnp_backward, sync ? NULL : dx, sums, sums + C, NULL, NULL,
                (double)(N * d.H * d.W), n->out->grad, n->out->data, n->saved[0], x->data,
                n->saved[1], n->saved[2], gm, (int)n->i[0], scratch, per, N, C, &d, acc);
    if (sync) {
        if (!bn_reduce_dsums(g, sums + 2 * C, sums, C)) return;
        if (dx)
            TR_DISPATCH(x->dtype, bnp_backward, dx, NULL, NULL, sums + 2 * C, sums + 3 * C,
                        (double)n->i[1], n->out->grad, n->out->data, n->saved[0], x->data,
                        n->saved[1], n->saved[2], gm, (int)n->i[0], scratch, per, N, C, &d, acc);
    }
    TR_DISPATCH(x->dtype, bnp_param_grads, dgamma, dbeta, sums, sums + C, C);
}

tr_tensor *tr_batch_norm_pool_relu(tr_graph *g, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
                                   tr_tensor *running_mean, tr_tensor *running_var,
                                   double momentum, double eps) {
    const char *op = "batch_norm_pool_relu";
    if (x && x->ndim != 4)
        return op_fail(g, TR_ERR_INVALID, "%s: input %s must be (N, C, H, W)", op, op_shape(x));
    if (x && (x->shape[2] < 2 || x->shape[3] < 2 || x->shape[2] * x->shape[3] > INT32_MAX))
        return op_fail(g, TR_ERR_INVALID,
                       "%s: input %s: the 2x2 pool needs planes of at least 2x2 and at most "
                       "2^31 pixels",
                       op, op_shape(x));
    bn_stats s;
    if (!bn_statistics(g, op, x, gamma, beta, running_mean, running_var, momentum, eps, &s))
        return NULL;
    pool_dims d = bnp_dims(x);
    int64_t NC = s.N * s.C;
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){s.N, s.C, d.OH, d.OW});
    int32_t *argmax = op_data(g, (size_t)(NC * d.OH * d.OW) * sizeof(int32_t) + 1);
    void *scratch = bnp_scratch(g, x, &d);
    if (!y || !argmax || !scratch) return NULL;
    TR_DISPATCH(x->dtype, bnp_forward, y->data, argmax, x->data, s.mean, s.invstd,
                gamma ? gamma->data : NULL, beta ? beta->data : NULL, scratch,
                bnp_per_thread(&d), s.N, s.C, &d);
    if (op_needs_grad(g, 3, x, gamma, beta) || (s.sync && tr_graph_grad_enabled(g))) {
        tr_node *n = op_record(g, op, batch_norm_pool_relu_backward, y, 3, x, gamma, beta);
        if (!n) return NULL;
        n->i[0] = s.batch;
        n->i[1] = s.M;
        n->i[2] = s.sync;
        n->saved[0] = argmax;
        n->saved[1] = s.mean;
        n->saved[2] = s.invstd;
    }
    return y;
}
