/* The CUDA plugin's optimizer updates, sums of squares and gradient scaling: the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- optimizer and clipping ---- */

/* The scalars exactly as core/src/kernels/sgd.c and adam.c round them. */
static void optim_update(const tr_optim_config *cfg, int64_t steps, float *param, const float *grad,
                         float *const *state, size_t n, double lr) {
    int64_t nn = (int64_t)n;
    if (cfg->kind == TR_OPTIM_SGD) {
        int mode = cfg->momentum == 0.0 ? 0 : steps == 0 ? 1 : 2;
        float *buf = mode == 0 ? NULL : state[0];
        float neg_lr = (float)-lr, wd = (float)cfg->weight_decay, mom = (float)cfg->momentum;
        float damp1 = (float)(1.0 - cfg->dampening);
        int has_wd = cfg->weight_decay != 0.0, nesterov = cfg->nesterov;
        LAUNCH("optimizer update (sgd)", k_sgd, blocks_for(nn), &param, &grad, &buf, &nn, &neg_lr, &wd, &mom, &damp1,
               &has_wd, &mode, &nesterov);
        return;
    }
    double t = (double)(steps + 1), bc1 = 1.0 - pow(cfg->beta1, t), bc2 = 1.0 - pow(cfg->beta2, t);
    float neg_step = (float)-(lr / bc1), inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
    float decay = (float)(1.0 - lr * cfg->weight_decay), wd = (float)cfg->weight_decay;
    float b1 = (float)cfg->beta1, b1c = (float)(1.0 - cfg->beta1), b2 = (float)cfg->beta2;
    float b2c = (float)(1.0 - cfg->beta2), eps = (float)cfg->eps;
    int wd_mode = cfg->kind == TR_OPTIM_ADAMW ? 2 : cfg->weight_decay != 0.0 ? 1 : 0;
    float *m = state[0], *v = state[1];
    LAUNCH("optimizer update (adam)", k_adam, blocks_for(nn), &param, &grad, &m, &v, &nn, &decay, &wd, &b1, &b1c,
           &b2, &b2c, &inv_bc2_sqrt, &eps, &neg_step, &wd_mode);
}

/* A sum's first pass (k_dsum_part: mode 0 x, 1 x^2, 2 (x - y)^2) into the device's scratch:
 * one block per 2048 values, at most CUDA_SUMSQ_PARTS (a small tensor is one block); the
 * partial sums, *parts of them. */
double *cuda_dsum_parts(cuda_device *d, const char *what, const float *x, const float *y, int64_t n, int mode,
                        int *parts) {
    int64_t want = (n + CUDA_BLOCK * 8 - 1) / (CUDA_BLOCK * 8);
    *parts = want < 1 ? 1 : want > CUDA_SUMSQ_PARTS ? CUDA_SUMSQ_PARTS : (int)want;
    double *part = d->scratch;
    LAUNCH(what, k_dsum_part, (unsigned)*parts, &part, &x, &y, &n, &mode);
    return part;
}

static void sumsq_to(double *out, const float *g, size_t n) {
    cuda_device *d = cuda_current();
    if (!d) return;
    int parts;
    double *part = cuda_dsum_parts(d, "gradient sum of squares", g, NULL, (int64_t)n, 1, &parts);
    LAUNCH("gradient sum of squares", k_sumsq_final, 1, &out, &part, &parts);
}

/* sumsq_to into the device's scratch, then waited for and downloaded. */
static double sumsq(const float *g, size_t n) {
    cuda_device *d = cuda_current();
    if (!d) return NAN;
    double *out = d->scratch + CUDA_SUMSQ_PARTS;
    sumsq_to(out, g, n);
    tr_status st = cu_download(d->rt, d->scratch_host, out, sizeof(double));
    if (st != TR_OK) cuda_fail(d, st, "gradient sum of squares");
    /* after any failed call the result would be a previous one: not a number instead */
    return d->err == TR_OK ? d->scratch_host[0] : NAN;
}

static void scale_inplace(float *g, size_t n, float s) {
    int64_t nn = (int64_t)n;
    LAUNCH("gradient scaling", k_scale_inplace, blocks_for(nn), &g, &nn, &s);
}

void cuda_fill_optim(tr_kernels *t) {
    t->optim_update = optim_update;
    t->sumsq = sumsq;
    t->scale_inplace = scale_inplace;
    t->sumsq_to = sumsq_to;
}
