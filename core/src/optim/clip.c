/* Gradient norm and clipping of trainer/optim.h: the loops are the kernels layer's
 * (kernels/clip.c), which a device's table and the CPU's share. */
#include "kernels/update.h"
#include "trainer/optim.h"

double tr_grad_sumsq(const float *g, size_t n) { return optim_sumsq(g, n); }

double tr_clip_coef(double max_norm, double sumsq) { return optim_clip_coef(max_norm, sumsq); }

double tr_clip_grad_norm(float *g, size_t n, double max_norm, double sumsq) {
    return optim_clip(g, n, max_norm, sumsq);
}
