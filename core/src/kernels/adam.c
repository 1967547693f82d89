/* Adam and AdamW: torch.optim.Adam / AdamW (1.13, amsgrad off, the single-tensor path)
 * operation by operation in fp32; the bias corrections are computed in double as torch does
 * in Python, then rounded to float where torch passes them to a tensor op:
 *
 *   AdamW: p = p * (1 - lr * wd)                    Adam: d = g + wd * p  (when wd != 0)
 *   m = m * beta1 + (1 - beta1) * d
 *   v = v * beta2 + (1 - beta2) * d * d
 *   t = steps + 1;  bc1 = 1 - beta1^t;  bc2 = 1 - beta2^t
 *   denom = sqrt(v) * (1 / sqrt(bc2)) + eps
 *   p = p + ((-lr / bc1) * m) / denom
 *
 * Rounded as torch's CPU kernels round them (kernels/adam.h; compared bit for bit with torch
 * 1.13's AdamW on 200,000 elements over 3 steps: m, v and, with torch's division, p equal):
 * its add-with-alpha (d and m) and addcmul_ (v) end in one fused multiply-add, its mul_,
 * sqrt and addcdiv_ round every operation. This file and
 * adam_tn.c are compiled with -ffp-contract=off, so the compiler fuses nothing else, and the
 * loop here and the fused update there give the same bits. One departure from torch's order:
 * torch divides sqrt(v) by sqrt(bc2); here it is multiplied by the reciprocal (at most an ulp
 * apart). The loop is bound by the divide/sqrt unit, which a second division per element kept
 * busy for a third of the step time of a small model.
 *
 * Elements are independent, so a slice updates bitwise the same as the same range of a
 * whole-buffer update, and one loop does the whole step (one pass over p, g, m, v). gcc
 * vectorises it only under -fno-math-errno: with errno semantics sqrtf keeps a branch to the
 * libm call for negative inputs, which blocks the vectoriser (the results are identical
 * either way: sqrt is correctly rounded). */
#include <math.h>

#include "kernels/adam.h"

/* 256-bit vectors for this loop whatever the host prefers: it is bound by the divide/sqrt
 * unit and the 7 streams, not by the width. On Zen 4 (gcc 12's -march=native there prefers
 * 512) the 512-bit loop is slower: 669,706 elements out of L3, 1 thread, 253 -> 207 us.
 * gcc's tunings for Intel's AVX-512 cores already prefer 256 for vectorised loops. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=256")
#endif

static inline __attribute__((always_inline)) void
adam_run(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t n,
         const optim_coef k, const int wd_mode) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) adam_elem(p, g, m, v, i, k, wd_mode);
}

static inline __attribute__((always_inline)) void
adam_kernel(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
            size_t n, const optim_coef *kk, const int wd_mode) {
    const optim_coef k = *kk; /* by value: the scalars stay in registers */
#define ADAM_RUN(off, len) adam_run(p + (off), g + (off), m + (off), v + (off), len, k, wd_mode)
    OPTIM_PIECES(n, ADAM_RUN);
#undef ADAM_RUN
}

void optim_adam_coef(const tr_optim_config *c, int64_t steps, double lr, optim_coef *k) {
    double t = (double)(steps + 1);
    double bc1 = 1.0 - pow(c->beta1, t);
    double bc2 = 1.0 - pow(c->beta2, t);
    *k = (optim_coef){
        .neg_step = (float)-(lr / bc1),
        .inv_bc2_sqrt = (float)(1.0 / sqrt(bc2)),
        .decay = (float)(1.0 - lr * c->weight_decay),
        .wd = (float)c->weight_decay,
        .b1 = (float)c->beta1,
        .b1c = (float)(1.0 - c->beta1),
        .b2 = (float)c->beta2,
        .b2c = (float)(1.0 - c->beta2),
        .eps = (float)c->eps,
        /* AdamW multiplies by (1 - lr*wd) even when wd is 0 (exactly 1), as torch does. */
        .mode = c->kind == TR_OPTIM_ADAMW ? ADAM_WD_DECOUPLED : c->weight_decay != 0.0 ? ADAM_WD_L2 : ADAM_WD_NONE,
    };
}

void optim_adam_apply(const optim_coef *k, float *param, const float *grad, float *m, float *v, size_t n) {
    if (k->mode == ADAM_WD_DECOUPLED)
        adam_kernel(param, grad, m, v, n, k, ADAM_WD_DECOUPLED);
    else if (k->mode == ADAM_WD_L2)
        adam_kernel(param, grad, m, v, n, k, ADAM_WD_L2);
    else
        adam_kernel(param, grad, m, v, n, k, ADAM_WD_NONE);
}
