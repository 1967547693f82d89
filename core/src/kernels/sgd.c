/* SGD with momentum, dampening, Nesterov and L2 weight decay: torch.optim.SGD (1.13)
 * operation by operation, in fp32 with the hyper-parameters rounded to float as torch does:
 *
 *   d = g + wd * p                                     (when wd != 0)
 *   buf = d  on the first step, else  buf = buf * momentum + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf            (when momentum != 0)
 *   p = p + (-lr) * d
 *
 * Each combination of options is its own loop (the flags are compile-time constants after
 * inlining), so every loop is branch-free and vectorised; elements are independent, so a
 * slice updates bitwise the same as the same range of a whole-buffer update. */
#include "kernels/update.h"

enum { MOM_NONE = 0, MOM_INIT = 1, MOM_UPDATE = 2 };

static inline __attribute__((always_inline)) void
sgd_elem(float *restrict p, const float *restrict g, float *restrict buf, size_t i, const optim_coef k,
         const int has_wd, const int mode, const int nesterov) {
    float d = g[i];
    if (has_wd) d = d + k.wd * p[i];
    if (mode != MOM_NONE) {
        float b = mode == MOM_INIT ? d : buf[i] * k.mom + k.damp1 * d;
        buf[i] = b;
        d = nesterov ? d + k.mom * b : b;
    }
    p[i] = p[i] + k.neg_lr * d;
}

static inline __attribute__((always_inline)) void
sgd_run(float *restrict p, const float *restrict g, float *restrict buf, size_t n, const optim_coef k,
        const int has_wd, const int mode, const int nesterov) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) sgd_elem(p, g, buf, i, k, has_wd, mode, nesterov);
}

static inline __attribute__((always_inline)) void
sgd_kernel(float *restrict p, const float *restrict g, float *restrict buf, size_t n, const optim_coef *kk,
           const int has_wd, const int mode, const int nesterov) {
    const optim_coef k = *kk;
#define SGD_RUN(off, len) sgd_run(p + (off), g + (off), buf ? buf + (off) : NULL, len, k, has_wd, mode, nesterov)
    OPTIM_PIECES(n, SGD_RUN);
#undef SGD_RUN
}

#define SGD_CALL(W, M, N) sgd_kernel(p, g, buf, n, k, W, M, N)

static void sgd_nowd(float *p, const float *g, float *buf, size_t n, const optim_coef *k, int nesterov) {
    if (k->mode == MOM_NONE) SGD_CALL(0, MOM_NONE, 0);
    else if (k->mode == MOM_INIT && nesterov) SGD_CALL(0, MOM_INIT, 1);
    else if (k->mode == MOM_INIT) SGD_CALL(0, MOM_INIT, 0);
    else if (nesterov) SGD_CALL(0, MOM_UPDATE, 1);
    else SGD_CALL(0, MOM_UPDATE, 0);
}

static void sgd_wd(float *p, const float *g, float *buf, size_t n, const optim_coef *k, int nesterov) {
    if (k->mode == MOM_NONE) SGD_CALL(1, MOM_NONE, 0);
    else if (k->mode == MOM_INIT && nesterov) SGD_CALL(1, MOM_INIT, 1);
    else if (k->mode == MOM_INIT) SGD_CALL(1, MOM_INIT, 0);
    else if (nesterov) SGD_CALL(1, MOM_UPDATE, 1);
    else SGD_CALL(1, MOM_UPDATE, 0);
}

void optim_sgd_coef(const tr_optim_config *c, int64_t steps, double lr, optim_coef *k) {
    /* torch passes the scalars as Python floats, cast to the tensor's float type. */
    *k = (optim_coef){
        .neg_lr = (float)-lr,
        .wd = (float)c->weight_decay,
        .mom = (float)c->momentum,
        .damp1 = (float)(1.0 - c->dampening),
        .mode = c->momentum == 0.0 ? MOM_NONE : steps == 0 ? MOM_INIT : MOM_UPDATE,
    };
}

void optim_sgd_apply(const tr_optim_config *cfg, const optim_coef *k, float *param, const float *grad, float *buf,
                     size_t n) {
    if (k->mode == MOM_NONE) buf = NULL;
    if (cfg->weight_decay != 0.0)
        sgd_wd(param, grad, buf, n, k, cfg->nesterov);
    else
        sgd_nowd(param, grad, buf, n, k, cfg->nesterov);
}
