/* The CUDA plugin's batch-norm and layer-norm: the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- batch-norm ---- */

/* A block per plane, or for planes shorter than a warp a thread per plane. */
static void batch_norm_planes(double *ps, const float *inp, int64_t NC, int64_t S) {
    if (S < 32) LAUNCH("batch_norm (plane statistics)", k_bn_planes_short, blocks_for(NC), &ps, &inp, &NC, &S);
    else LAUNCH("batch_norm (plane statistics)", k_bn_planes, blocks_rows(NC), &ps, &inp, &NC, &S);
}

static void batch_norm_plane_sums(double *s, const double *ps, int64_t N, int64_t C) {
    LAUNCH("batch_norm (sums)", k_bn_plane_sums, blocks_for(C), &s, &ps, &N, &C);
}

static void batch_norm_plane_sqdevs(double *q, const double *ps, const float *mean, int64_t N, int64_t C, int64_t S) {
    LAUNCH("batch_norm (squared deviations)", k_bn_plane_sqdevs, blocks_for(C), &q, &ps, &mean, &N, &C, &S);
}

static void batch_norm_divide(float *out, const double *s, double M, int64_t C) {
    LAUNCH("batch_norm (divide)", k_bn_divide, blocks_for(C), &out, &s, &M, &C);
}

static void batch_norm_finish(float *invstd, float *running_mean, float *running_var, const float *mean, int64_t C,
                              double momentum, int64_t M, double eps) {
    double unbias = running_mean ? (double)M / (double)(M - 1) : 0;
    LAUNCH("batch_norm (running statistics)", k_bn_finish, blocks_for(C), &invstd, &running_mean, &running_var, &mean,
           &C, &momentum, &unbias, &eps);
}

static void batch_norm_forward(float *out, const float *inp, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, int64_t N, int64_t C, int64_t S) {
    LAUNCH("batch_norm", k_bn_fwd, blocks_for(N * C * S), &out, &inp, &mean, &invstd, &gamma, &beta, &N, &C, &S);
}

static void batch_norm_dsums_all(double *sdy, double *sdyx, const float *dout, const float *inp, const float *mean,
                                 const float *invstd, int64_t N, int64_t C, int64_t S) {
    LAUNCH("batch_norm backward (sums)", k_bn_dsums, blocks_rows(C), &sdy, &sdyx, &dout, &inp, &mean, &invstd, &N, &C,
           &S);
}

/* The sums into scratch of the caching allocator (freed in stream order: a later kernel may
 * reuse it only after these ran). */
static void batch_norm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                const float *mean, const float *invstd, const float *gamma, int batch, int64_t N,
                                int64_t C, int64_t S, int acc) {
    cuda_device *d = cuda_current();
    if (!d) return;
    double *sums = cuda_scratch(d, (size_t)(2 * C) * sizeof(double), "batch_norm backward (scratch)");
    if (!sums) return;
    const double *sdy = sums, *sdyx = sums + C;
    batch_norm_dsums_all(sums, sums + C, dout, inp, mean, invstd, N, C, S);
    if (dgamma || dbeta) LAUNCH("batch_norm backward", k_bn_param_grads, blocks_for(C), &dgamma, &dbeta, &sdy, &sdyx, &C);
    double M = (double)(N * S);
    if (dinp)
        LAUNCH("batch_norm backward", k_bn_dx, blocks_for(N * C * S), &dinp, &dout, &inp, &mean, &invstd, &gamma, &sdy,
               &sdyx, &batch, &M, &N, &C, &S, &acc);
    cuda_free(d, sums);
}

static void batch_norm_sync_grads(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                  const float *mean, const float *invstd, const float *gamma, const double *lsdy,
                                  const double *lsdyx, const double *gsdy, const double *gsdyx, double M, int64_t N,
                                  int64_t C, int64_t S) {
    if (dgamma || dbeta)
        LAUNCH("batch_norm backward", k_bn_param_grads, blocks_for(C), &dgamma, &dbeta, &lsdy, &lsdyx, &C);
    int batch = 1, acc = 1;
    if (dinp)
        LAUNCH("batch_norm backward", k_bn_dx, blocks_for(N * C * S), &dinp, &dout, &inp, &mean, &invstd, &gamma, &gsdy,
               &gsdyx, &batch, &M, &N, &C, &S, &acc);
}

/* ---- layer-norm ---- */

static void layer_norm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gamma,
                               const float *beta, double eps, int64_t R, int64_t C) {
    LAUNCH("layer_norm", k_ln_fwd, blocks_rows(R), &out, &mean, &rstd, &inp, &gamma, &beta, &eps, &R, &C);
}

static size_t layer_norm_work(int64_t R, int64_t C) {
    (void)R, (void)C;
    return 0;
}

static void layer_norm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                const float *mean, const float *rstd, const float *gamma, void *work, int64_t R,
                                int64_t C, int acc) {
    (void)work;
    if (dgamma || dbeta)
        LAUNCH("layer_norm backward (gamma, beta)", k_ln_params, blocks_rows((C + 31) / 32), &dgamma, &dbeta, &dout,
               &inp, &mean, &rstd, &R, &C);
    if (dinp)
        LAUNCH("layer_norm backward", k_ln_dx, blocks_rows(R), &dinp, &dout, &inp, &mean, &rstd, &gamma, &R, &C, &acc);
}

void cuda_fill_norm(tr_kernels *t) {
    t->batch_norm_planes = batch_norm_planes;
    t->batch_norm_plane_sums = batch_norm_plane_sums;
    t->batch_norm_plane_sqdevs = batch_norm_plane_sqdevs;
    t->batch_norm_divide = batch_norm_divide;
    t->batch_norm_finish = batch_norm_finish;
    t->batch_norm_forward = batch_norm_forward;
    t->batch_norm_backward = batch_norm_backward;
    t->batch_norm_dsums_all = batch_norm_dsums_all;
    t->batch_norm_sync_grads = batch_norm_sync_grads;
    t->layer_norm_forward = layer_norm_forward;
    t->layer_norm_work = layer_norm_work;
    t->layer_norm_backward = layer_norm_backward;
}
