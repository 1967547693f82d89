/* Private: one element of Adam's update (adam.c has the formula and torch's order), shared by
 * the update loop (adam.c) and the update fused with a weight gradient's product (adam_tn.c). */
#ifndef TRAINER_KERNELS_ADAM_H
#define TRAINER_KERNELS_ADAM_H

#include <math.h>

#include "kernels/update.h"

/* optim_coef.mode for Adam: how weight decay enters. */
enum { ADAM_WD_NONE = 0, ADAM_WD_L2 = 1, ADAM_WD_DECOUPLED = 2 };

/* a * b + c rounded once where the machine has fused multiply-add (fmaf is then one
 * instruction, and vectorises), else twice. adam.c is compiled with -ffp-contract=off, so no
 * other multiply and add fuse: the rounding is the source's, not the compiler's choice. */
#if defined(__FMA__) || defined(__FP_FAST_FMAF)
#define ADAM_FMA(a, b, c) fmaf(a, b, c)
#else
#define ADAM_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* torch's operations in its order and roundings (1.13's CPU kernels, checked bit for bit
 * against its AdamW: add with alpha and addcmul end in one fused multiply-add, mul_, the
 * square root, addcdiv round each step), bar the documented reciprocal. */
static inline __attribute__((always_inline)) void
adam_elem(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t i,
          const optim_coef k, const int wd_mode) {
    float pi = p[i];
    float d = g[i];
    if (wd_mode == ADAM_WD_DECOUPLED) pi = pi * k.decay;  /* p.mul_(1 - lr * wd) */
    if (wd_mode == ADAM_WD_L2) d = ADAM_FMA(pi, k.wd, d); /* grad.add(p, alpha=wd) */
    float mi = ADAM_FMA(d, k.b1c, m[i] * k.b1);           /* m.mul_(b1).add_(g, alpha=1-b1) */
    float vi = ADAM_FMA(k.b2c * d, d, v[i] * k.b2);       /* v.mul_(b2).addcmul_(g, g, value=1-b2) */
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) * k.inv_bc2_sqrt + k.eps;     /* (v.sqrt() / sqrt(bc2)).add_(eps) */
    p[i] = pi + (k.neg_step * mi) / denom;                /* p.addcdiv_(m, denom, value=-lr/bc1) */
}

#endif
