/* Adam and AdamW: torch.optim.Adam / AdamW (1.13, amsgrad off, the single-tensor path)
 * operation by operation in fp32; the bias corrections are computed in double as torch does
 * in Python, then rounded to float where torch passes them to a tensor op:
 *
 *   AdamW: p = p * (1 - lr * wd)                    Adam: d = g + wd * p  (when wd != 0)
 *   m = m * beta1 + (1 - beta1) * d
 *   v = v * beta2 + (1 - beta2) * d * d
 *   t = steps + 1;  bc1 = 1 - beta1^t;  bc2 = 1 - beta2^t
 *   denom = sqrt(v) * (1 / sqrt(bc2)) + eps
 *   p = p + (-lr / bc1) * m / denom
 *
 * One departure from torch's order: torch divides sqrt(v) by sqrt(bc2); here it is multiplied
 * by the reciprocal (at most an ulp apart). The loop is bound by the divide/sqrt unit, which a
 * second division per element kept busy for a third of the step time of a small model.
 *
 * Elements are independent, so a slice updates bitwise the same as the same range of a
 * whole-buffer update, and one loop does the whole step (one pass over p, g, m, v). gcc
 * vectorises it only under -fno-math-errno: with errno semantics sqrtf keeps a branch to the
 * libm call for negative inputs, which blocks the vectoriser (the results are identical
 * either way: sqrt is correctly rounded). */
#include <math.h>

#include "optim/optim_impl.h"

enum { WD_NONE = 0, WD_L2 = 1, WD_DECOUPLED = 2 };

static inline __attribute__((always_inline)) void
adam_kernel(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
            size_t n, float decay, float wd, float b1, float b1c, float b2, float b2c,
            float inv_bc2_sqrt, float eps, float neg_step, const int wd_mode) {
#pragma omp parallel for simd if (parallel : n > OPTIM_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float pi = p[i];
        float d = g[i];
        if (wd_mode == WD_DECOUPLED) pi = pi * decay;
        if (wd_mode == WD_L2) d = d + wd * pi;
        float mi = m[i] * b1 + b1c * d;
        float vi = v[i] * b2 + b2c * d * d;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) * inv_bc2_sqrt + eps;
        p[i] = pi + neg_step * mi / denom;
    }
}

void optim_adam_update(tr_optim *opt, float *param, const float *grad, double lr, size_t lo, size_t hi) {
    const tr_optim_config *c = &opt->cfg;
    double t = (double)(opt->steps + 1);
    double bc1 = 1.0 - pow(c->beta1, t);
    double bc2 = 1.0 - pow(c->beta2, t);
    float neg_step = (float)-(lr / bc1);
    float inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
    float decay = (float)(1.0 - lr * c->weight_decay);
    float wd = (float)c->weight_decay;
    float b1 = (float)c->beta1, b1c = (float)(1.0 - c->beta1);
    float b2 = (float)c->beta2, b2c = (float)(1.0 - c->beta2);
    float eps = (float)c->eps;
    float *m = opt->state[0] + lo, *v = opt->state[1] + lo;
    size_t n = hi - lo;
    /* AdamW multiplies by (1 - lr*wd) even when wd is 0 (exactly 1), as torch does. */
    if (c->kind == TR_OPTIM_ADAMW)
        adam_kernel(param, grad, m, v, n, decay, wd, b1, b1c, b2, b2c, inv_bc2_sqrt, eps, neg_step,
                    WD_DECOUPLED);
    else if (c->weight_decay != 0.0)
        adam_kernel(param, grad, m, v, n, decay, wd, b1, b1c, b2, b2c, inv_bc2_sqrt, eps, neg_step,
                    WD_L2);
    else
        adam_kernel(param, grad, m, v, n, decay, wd, b1, b1c, b2, b2c, inv_bc2_sqrt, eps, neg_step,
                    WD_NONE);
}
