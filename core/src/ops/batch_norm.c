/* Batch normalisation over dim 1 of (N, C) or (N, C, H, W) input, as PyTorch's BatchNorm1d/2d.
 * Training mode normalises with the batch mean and biased variance and updates the running
 * statistics in place: running = (1 - momentum) * running + momentum * batch, with the
 * unbiased variance for running_var (every training forward does this, also under no-grad).
 * Eval mode normalises with the running statistics. gamma and beta may be NULL (no affine);
 * running_mean and running_var may both be NULL (no tracking: batch statistics in both
 * modes). The running statistics never get a gradient. PyTorch's momentum=None (a cumulative
 * average) and its num_batches_tracked counter are not offered.
 *
 * With a stat reducer on the graph (tr_graph_set_stat_reducer: ddp's sync_batchnorm),
 * training mode uses the statistics of the whole global batch, as torch's SyncBatchNorm: the
 * per-channel sums and count are reduced over replicas in forward (then the squared
 * deviations from the global mean), and the sums of dy and dy * xhat in backward. */
#include <math.h>
#include <string.h>

#include "autograd/node.h"
#include "ops/batch_norm.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define BN_BLOCK 512

/* A plane's statistics (bn_plane_stats) in AVX-512 vectors, f32: per block of BN_BLOCK values
 * four independent accumulators, a masked last vector, one horizontal add; the blocks added in
 * double. Returns 0 where it does not apply (double, or no AVX-512): the template's loops. */
#if defined(__AVX512F__)
#include <immintrin.h>

/* The sum of x[0..n) (sq 0) or of (x - m)^2 (sq 1), n <= BN_BLOCK, in float. */
static inline __attribute__((always_inline)) float bn_block_f32(const float *x, int64_t n, float m, int sq) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++) {
            __m512 v = _mm512_loadu_ps(x + i + 16 * k);
            a[k] = sq ? _mm512_fmadd_ps(_mm512_sub_ps(v, vm), _mm512_sub_ps(v, vm), a[k]) : _mm512_add_ps(a[k], v);
        }
    for (int k = 0; i < n; i += 16, k++) {
        __mmask16 msk = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_sub_ps(msk, _mm512_maskz_loadu_ps(msk, x + i), sq ? vm : _mm512_setzero_ps());
        a[k] = sq ? _mm512_fmadd_ps(v, v, a[k]) : _mm512_add_ps(a[k], v);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
}

static int bn_plane_stats_vec_f32(double *ps, const float *x, int64_t S) {
    double s = 0, q = 0;
    for (int64_t b = 0; b < S; b += BN_BLOCK) s += bn_block_f32(x + b, S - b < BN_BLOCK ? S - b : BN_BLOCK, 0, 0);
    float m = (float)(s / (double)S);
    for (int64_t b = 0; b < S; b += BN_BLOCK) q += bn_block_f32(x + b, S - b < BN_BLOCK ? S - b : BN_BLOCK, m, 1);
    ps[0] = s, ps[1] = q;
    return 1;
}
#else
static int bn_plane_stats_vec_f32(double *ps, const float *x, int64_t S) {
    (void)ps, (void)x, (void)S;
    return 0;
}
#endif
static int bn_plane_stats_vec_f64(double *ps, const double *x, int64_t S) {
    (void)ps, (void)x, (void)S;
    return 0;
}

#define TR_GENERIC "ops/batch_norm.inc"
#include "ops/generic.h"

static void batch_norm_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    void *dgamma = op_grad(g, gamma), *dbeta = op_grad(g, beta);
    if (n->i[4]) { /* synchronised: every replica reduces its sums here, gradients or not */
        void *dx = op_grad(g, x);
        int64_t C = n->i[2];
        /* the data's: this replica's sums (2C), the global ones (2C); host: what the reducer
         * reads on a device (2C) */
        double *sums = op_data(g, (size_t)(4 * C) * sizeof(double));
        double *host = op_kernels(g) ? op_alloc(g, (size_t)(2 * C) * sizeof(double)) : NULL;
        if (!sums || (op_kernels(g) && !host)) {
            op_fail(g, TR_ERR_NOMEM, "batch_norm backward: out of memory");
            return;
        }
        OP_RUN(g, x->dtype, batch_norm_dsums_all, sums, sums + C, n->out->grad, x->data, n->saved[0], n->saved[1],
               n->i[1], C, n->i[3]);
        op_copy(g, sums + 2 * C, sums, (size_t)(2 * C) * sizeof(double));
        if (!bn_reduce(g, sums + 2 * C, host, 2 * C, NULL)) return;
        OP_RUN(g, x->dtype, batch_norm_sync_grads, dx, dgamma, dbeta, n->out->grad, x->data, n->saved[0],
               n->saved[1], gamma ? gamma->data : NULL, sums, sums + C, sums + 2 * C, sums + 3 * C,
               (double)n->i[5], n->i[1], C, n->i[3]);
        return;
    }
    int acc;
    void *dx = op_grad_write(g, x, &acc);
    if (!dx && !dgamma && !dbeta) return;
    OP_RUN(g, x->dtype, batch_norm_backward, dx, dgamma, dbeta, n->out->grad, x->data, n->saved[0], n->saved[1],
           gamma ? gamma->data : NULL, (int)n->i[0], n->i[1], n->i[2], n->i[3], acc);
}

/* Whether the graph's device has batch-norm's kernels; records the error when not. */
static int bn_device_ok(tr_graph *g, const char *op) {
    return OP_DEVICE(g, op, batch_norm_planes, batch_norm_plane_sums, batch_norm_plane_sqdevs, batch_norm_divide,
                     batch_norm_finish, batch_norm_forward, batch_norm_backward, batch_norm_dsums_all,
                     batch_norm_sync_grads);
}

static int bn_param_ok(const tr_tensor *t, int64_t C) {
    return !t || (t->ndim == 1 && t->shape[0] == C);
}

int bn_check(tr_graph *g, const char *op, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
             tr_tensor *running_mean, tr_tensor *running_var, double momentum, double eps,
             bn_stats *s) {
    tr_tensor *ts[5] = {x, gamma, beta, running_mean, running_var};
    tr_tensor *present[5];
    int np = 0;
    for (int i = 0; i < 5; i++)
        if (i == 0 || ts[i]) present[np++] = ts[i];
    if (!op_check(g, op, np, present[0], np > 1 ? present[1] : NULL,
                  np > 2 ? present[2] : NULL, np > 3 ? present[3] : NULL,
                  np > 4 ? present[4] : NULL))
        return 0;
    if (!bn_device_ok(g, op)) return 0;
    if (x->ndim != 2 && x->ndim != 4) {
        op_fail(g, TR_ERR_INVALID, "%s: input %s must be (N, C) or (N, C, H, W)", op, op_shape(x));
        return 0;
    }
    int64_t N = x->shape[0], C = x->shape[1], S = x->ndim == 4 ? x->shape[2] * x->shape[3] : 1;
    if (!bn_param_ok(gamma, C) || !bn_param_ok(beta, C) || !bn_param_ok(running_mean, C) ||
        !bn_param_ok(running_var, C)) {
        op_fail(g, TR_ERR_INVALID,
                "%s: input %s has %lld channels; gamma %s, beta %s, "
                "running_mean %s and running_var %s must be (%lld) or NULL",
                op, op_shape(x), (long long)C, op_shape(gamma), op_shape(beta),
                op_shape(running_mean), op_shape(running_var), (long long)C);
        return 0;
    }
    if (!running_mean != !running_var) {
        op_fail(g, TR_ERR_INVALID, "%s: give both running_mean and running_var, or neither", op);
        return 0;
    }
    if (!(momentum >= 0 && momentum <= 1) || !(eps >= 0)) {
        op_fail(g, TR_ERR_INVALID, "%s: momentum %g must be in [0, 1] and eps %g >= 0", op,
                momentum, eps);
        return 0;
    }
    int batch = tr_graph_training(g) || !running_mean;
    if (batch && N * S < 2) {
        op_fail(g, TR_ERR_INVALID,
                "%s: input %s has one value per channel; batch statistics "
                "need more (use eval mode, or a larger batch)",
                op, op_shape(x));
        return 0;
    }
    *s = (bn_stats){.N = N, .C = C, .S = S, .M = N * S, .batch = batch,
                    .sync = batch && tr_graph_training(g) && tr_graph_syncs_stats_(g)};
    return 1;
}

int bn_reduce(tr_graph *g, double *p, double *host, int64_t n, int64_t *M) {
    double *h = op_kernels(g) ? host : p;
    if (h != p && !op_read(g, h, p, (size_t)n * sizeof(double))) return 0;
    if (M) h[n] = (double)*M;
    if (tr_graph_reduce_stats_(g, h, (int)n + !!M) < 0) return 0;
    if (M) *M = (int64_t)h[n];
    return h == p || op_write(g, p, h, (size_t)n * sizeof(double));
}

int bn_compute(tr_graph *g, tr_tensor *x, tr_tensor *running_mean, tr_tensor *running_var,
               double momentum, double eps, bn_stats *s) {
    int64_t N = s->N, C = s->C, S = s->S, M = s->M;
    size_t es = tr_dtype_size(x->dtype);
    const tr_kernels *k = op_kernels(g);
    void *mean = op_data(g, (size_t)C * es + 1), *invstd = op_data(g, (size_t)C * es + 1);
    if (!mean || !invstd) return 0;
    void *rm = NULL, *rv = NULL;
    if (s->batch) {
        /* the planes' sums and squared deviations: noted by the op that wrote x, or one read */
        const double *ps = k ? NULL : op_plane_stats(g, x);
        /* the channels' sums and the count, their squared deviations; the planes' */
        double *work = op_data(g, (size_t)(2 * N * C * !ps + 2 * C + 1) * sizeof(double));
        /* host: what the reducer reads on a device */
        double *host = k && s->sync ? op_alloc(g, (size_t)(C + 1) * sizeof(double)) : NULL;
        if (!work || (k && s->sync && !host)) return 0;
        if (!ps) {
            OP_RUN(g, x->dtype, batch_norm_planes, work + 2 * C + 1, x->data, N * C, S);
            ps = work + 2 * C + 1;
        }
        /* the sums and the count (over every replica when synchronised: sync_batchnorm), the
         * mean, then the squared deviations from the mean rounded to real (over every replica) */
        OP_RUN(g, x->dtype, batch_norm_plane_sums, work, ps, N, C);
        if (s->sync && !bn_reduce(g, work, host, C, &M)) return 0;
        OP_RUN(g, x->dtype, batch_norm_divide, mean, work, (double)M, C);
        OP_RUN(g, x->dtype, batch_norm_plane_sqdevs, work + C + 1, ps, mean, N, C, S);
        if (s->sync && !bn_reduce(g, work + C + 1, host, C, NULL)) return 0;
        OP_RUN(g, x->dtype, batch_norm_divide, invstd, work + C + 1, (double)M, C);
        /* a checkpointed block's second run (op_recomputing) updated them in forward */
        if (running_mean && tr_graph_training(g) && !op_recomputing(g)) rm = running_mean->data, rv = running_var->data;
    } else {
        op_copy(g, mean, running_mean->data, (size_t)C * es);
        op_copy(g, invstd, running_var->data, (size_t)C * es);
    }
    /* invstd holds the variance until here */
    OP_RUN(g, x->dtype, batch_norm_finish, invstd, rm, rv, mean, C, momentum, M, eps);
    s->mean = mean, s->invstd = invstd, s->M = M;
    return 1;
}


tr_tensor *tr_batch_norm(tr_graph *g, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
                         tr_tensor *running_mean, tr_tensor *running_var, double momentum,
                         double eps) {
    bn_stats s;
    if (!bn_check(g, "batch_norm", x, gamma, beta, running_mean, running_var, momentum, eps, &s))
        return NULL;
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y || !bn_compute(g, x, running_mean, running_var, momentum, eps, &s)) return NULL;
    OP_RUN(g, x->dtype, batch_norm_forward, y->data, x->data, s.mean, s.invstd,
                gamma ? gamma->data : NULL, beta ? beta->data : NULL, s.N, s.C, s.S);
    /* A synchronised layer is recorded even without gradients to compute here: its backward
     * takes part in the replicas' reductions, which must stay in step. */
    if (op_needs_grad(g, 3, x, gamma, beta) || (s.sync && tr_graph_grad_enabled(g))) {
        tr_node *n = op_record(g, "batch_norm", batch_norm_backward, y, 3, x, gamma, beta);
        if (!n) return NULL;
        n->i[0] = s.batch;
        n->i[1] = s.N;
        n->i[2] = s.C;
        n->i[3] = s.S;
        n->saved[0] = s.mean;
        n->saved[1] = s.invstd;
        n->i[4] = s.sync;
        n->i[5] = s.M;
    }
    return y;
}

void ops_kernels_batch_norm(tr_kernels *k) {
    k->batch_norm_planes = batch_norm_planes_f32;
    k->batch_norm_plane_sums = batch_norm_plane_sums_f32;
    k->batch_norm_plane_sqdevs = batch_norm_plane_sqdevs_f32;
    k->batch_norm_divide = batch_norm_divide_f32;
    k->batch_norm_finish = batch_norm_finish_f32;
    k->batch_norm_forward = batch_norm_forward_f32;
    k->batch_norm_backward = batch_norm_backward_f32;
    k->batch_norm_dsums_all = batch_norm_dsums_all_f32;
    k->batch_norm_sync_grads = batch_norm_sync_grads_f32;
}
