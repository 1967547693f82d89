/* Private: one element of Adam's update (adam.c has the formula and torch's order), shared by
 * the update loop (adam.c) and the update fused with a weight gradient's product (adam_tn.c). */
#ifndef TRAINER_OPTIM_ADAM_H
#define TRAINER_OPTIM_ADAM_H

#include <math.h>

#include "optim/optim_impl.h"

/* optim_coef.mode for Adam: how weight decay enters. */
enum { ADAM_WD_NONE = 0, ADAM_WD_L2 = 1, ADAM_WD_DECOUPLED = 2 };

/* a * b + c rounded once where the machine has fused multiply-add (fmaf is then one
 * instruction, and vectorises), else twice: fixed either way, never the compiler's choice. */
#if defined(__FMA__)
#define ADAM_FMA(a, b, c) fmaf(a, b, c)
#else
#define ADAM_FMA(a, b, c) ((a) * (b) + (c))
#endif

static inline __attribute__((always_inline)) void
adam_elem(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t i,
          const optim_coef k, const int wd_mode) {
    float pi = p[i];
    float d = g[i];
    if (wd_mode == ADAM_WD_DECOUPLED) pi = pi * k.decay;
    if (wd_mode == ADAM_WD_L2) d = ADAM_FMA(k.wd, pi, d);
    float mi = ADAM_FMA(m[i], k.b1, k.b1c * d);
    float vi = ADAM_FMA(v[i], k.b2, (k.b2c * d) * d);
    m[i] = mi;
    v[i] = vi;
    float denom = ADAM_FMA(sqrtf(vi), k.inv_bc2_sqrt, k.eps);
    p[i] = ADAM_FMA(k.neg_step, mi / denom, pi);
}

#endif
