/* The CUDA plugin's row ops (softmax, log-softmax, cross-entropy) and the whole-tensor reductions and losses: the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- rows ---- */

static void softmax_forward(float *out, const float *x, int64_t R, int64_t C) {
    int64_t one = 1;
    int causal = 0;
    LAUNCH("softmax", k_softmax_fwd, blocks_rows(R), &out, &x, &R, &one, &C, &causal);
}

static void softmax_backward(float *dx, const float *dout, const float *out, int64_t R, int64_t C) {
    int acc = 1;
    LAUNCH("softmax backward", k_softmax_bwd, blocks_rows(R), &dx, &dout, &out, &R, &C, &acc);
}

static void log_softmax_forward(float *out, const float *x, int64_t R, int64_t C) {
    LAUNCH("log_softmax", k_log_softmax_fwd, blocks_rows(R), &out, &x, &R, &C);
}

static void log_softmax_backward(float *dx, const float *dout, const float *out, int64_t R, int64_t C) {
    LAUNCH("log_softmax backward", k_log_softmax_bwd, blocks_rows(R), &dx, &dout, &out, &R, &C);
}

static void cross_entropy_forward(double *loss, float *stats, const float *x, const int32_t *targets, int64_t N,
                                  int64_t C, int ignore_index, double smoothing) {
    float e = (float)smoothing, invC = (float)(1.0 / (double)C);
    LAUNCH("cross_entropy", k_ce_fwd, blocks_rows(N), &loss, &stats, &x, &targets, &N, &C, &ignore_index, &e, &invC);
}

static void cross_entropy_backward(float *dx, const float *x, const float *stats, const int32_t *targets,
                                   double dscale, int64_t N, int64_t C, int ignore_index, double smoothing) {
    float gs = (float)dscale, ge = (float)(dscale * smoothing / (double)C), gt = (float)(dscale * (1 - smoothing));
    LAUNCH("cross_entropy backward", k_ce_bwd, blocks_for(N * C), &dx, &x, &stats, &targets, &N, &C, &ignore_index,
           &gs, &ge, &gt);
}

static void loss_total(float *out, const double *loss, int64_t n, double normaliser) {
    LAUNCH("loss total", k_loss_total, 1, &out, &loss, &n, &normaliser);
}

/* ---- reductions and losses: whole-tensor sums into the device's scratch partials, added in
 * order by one thread into the float result ---- */

static void sum_to(const char *what, float *out, const float *x, const float *y, int64_t n, int mode,
                   double normaliser) {
    cuda_device *d = cuda_current();
    if (!d) return;
    int parts;
    double *part = cuda_dsum_parts(d, what, x, y, n, mode, &parts);
    int64_t np = parts;
    LAUNCH(what, k_loss_total, 1, &out, &part, &np, &normaliser);
}

static void sum_all_forward(float *out, const float *x, int64_t N, double normaliser) {
    sum_to("sum", out, x, NULL, N, 0, normaliser);
}

static void sum_all_backward(float *dx, const float *dout, double scale, int64_t N) {
    LAUNCH("sum backward", k_sum_all_bwd, blocks_for(N), &dx, &dout, &scale, &N);
}

static void sum_dim_forward(float *out, const float *x, double scale, int64_t O, int64_t D, int64_t I) {
    LAUNCH("sum_dim", k_sum_dim_fwd, blocks_for(O * I), &out, &x, &scale, &O, &D, &I);
}

static void sum_dim_backward(float *dx, const float *dout, double scale, int64_t O, int64_t D, int64_t I) {
    float s = (float)scale;
    LAUNCH("sum_dim backward", k_sum_dim_bwd, blocks_for(O * D * I), &dx, &dout, &s, &O, &D, &I);
}

static void mse_forward(float *out, const float *pred, const float *target, int64_t N, double normaliser) {
    sum_to("mse", out, pred, target, N, 2, normaliser);
}

static void mse_backward(float *dpred, const float *dout, const float *pred, const float *target, double normaliser,
                         int64_t N) {
    LAUNCH("mse backward", k_mse_bwd, blocks_for(N), &dpred, &dout, &pred, &target, &normaliser, &N);
}

static void cosine_forward(float *out, const float *a, const float *b, int64_t N, int64_t E, double eps) {
    LAUNCH("cosine_similarity", k_cos_fwd, blocks_rows(N), &out, &a, &b, &N, &E, &eps);
}

static void cosine_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t N,
                            int64_t E, double eps) {
    LAUNCH("cosine_similarity backward", k_cos_bwd, blocks_rows(N), &da, &db, &dout, &a, &b, &N, &E, &eps);
}

void cuda_fill_rows(tr_kernels *t) {
    t->softmax_forward = softmax_forward;
    t->softmax_backward = softmax_backward;
    t->log_softmax_forward = log_softmax_forward;
    t->log_softmax_backward = log_softmax_backward;
    t->cross_entropy_forward = cross_entropy_forward;
    t->cross_entropy_backward = cross_entropy_backward;
    t->loss_total = loss_total;
    t->sum_all_forward = sum_all_forward;
    t->sum_all_backward = sum_all_backward;
    t->sum_dim_forward = sum_dim_forward;
    t->sum_dim_backward = sum_dim_backward;
    t->mse_forward = mse_forward;
    t->mse_backward = mse_backward;
    t->cosine_forward = cosine_forward;
    t->cosine_backward = cosine_backward;
}
