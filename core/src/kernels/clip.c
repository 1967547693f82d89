/* Gradient norm and clipping on a flat gradient buffer (torch.nn.utils.clip_grad_norm_ with
 * norm_type 2 over all parameters at once).
 *
 * The sum of squares is accumulated in double over 64 fixed parts of the range (each in 32
 * interleaved lanes), added in order, so the result does not depend on the number of
 * threads. A sharded strategy sums the per-shard values across ranks and passes the total
 * to tr_clip_grad_norm (trainer/optim.h, which calls these). Unlike torch
 * (which then multiplies every gradient by NaN or 0), a non-finite norm leaves g unchanged:
 * the caller gets the norm back and decides (skip the step, stop). */
#include <math.h>

#include "kernels/update.h"

#define SUMSQ_PARTS 64
#define SUMSQ_LANES 32 /* independent double accumulators: one chain would bind the loop to the FMA latency */

/* The float-to-double conversions bound the loop: on x86 let gcc use 512-bit vectors where
 * the target has them (it prefers 256 by default), which converts twice as many per step. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("prefer-vector-width=512")))
#endif
double optim_sumsq(const float *g, size_t n) {
    double part[SUMSQ_PARTS];
#pragma omp parallel for if (n > OPTIM_PAR_MIN) schedule(static)
    for (int k = 0; k < SUMSQ_PARTS; k++) {
        size_t lo = n / SUMSQ_PARTS * (size_t)k, hi = n / SUMSQ_PARTS * (size_t)(k + 1);
        if (k == SUMSQ_PARTS - 1) hi = n;
        double lane[SUMSQ_LANES] = {0};
        size_t i = lo;
        for (; i + SUMSQ_LANES <= hi; i += SUMSQ_LANES)
#pragma omp simd
            for (int j = 0; j < SUMSQ_LANES; j++) lane[j] += (double)g[i + (size_t)j] * (double)g[i + (size_t)j];
        for (; i < hi; i++) lane[0] += (double)g[i] * (double)g[i];
        double s = 0.0;
        for (int j = 0; j < SUMSQ_LANES; j++) s += lane[j];
        part[k] = s;
    }
    double s = 0.0;
    for (int k = 0; k < SUMSQ_PARTS; k++) s += part[k];
    return s;
}

void optim_scale(float *g, size_t n, float s) {
#pragma omp parallel for simd if (parallel : n > OPTIM_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) g[i] *= s;
}

double optim_clip_coef(double max_norm, double sumsq) {
    double norm = sqrt(sumsq), coef = max_norm / (norm + 1e-6);
    return isfinite(norm) && coef < 1.0 ? coef : 1.0;
}

double optim_clip(float *g, size_t n, double max_norm, double sumsq) {
    double coef = optim_clip_coef(max_norm, sumsq);
    if (coef < 1.0) optim_scale(g, n, (float)coef);
    return sqrt(sumsq);
}
