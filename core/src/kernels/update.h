/* Private: the optimizer updates on raw pointers (sgd.c, adam.c, adam_tn.c), the gradient's
 * sum of squares and scaling (clip.c), a gradient slice's sum (add.c), and the kernel table's
 * update entry (update.c).
 * optim/ owns the optimizer object and calls these; a device's table runs the same entry.
 *
 * SGD's momentum buffer is filled from the first step's gradient (torch's `buf is None`
 * case): the step taken after `steps` == 0 updates, so a resumed optimizer (restored buffers,
 * steps > 0) carries on exactly. */
#ifndef TRAINER_KERNELS_UPDATE_H
#define TRAINER_KERNELS_UPDATE_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/optim_config.h"

/* Elementwise loops use threads above this many elements. The loops say
 * `parallel for simd if (parallel : n > OPTIM_PAR_MIN)`: a bare if() on the combined construct
 * also applies to its simd part (OpenMP 5), and gcc then runs small slices unvectorised. */
#define OPTIM_PAR_MIN 32768

#define OPTIM_MAX_STATE 2

/* Calls RUN(off, len) over [0, n) in one piece, or above OPTIM_PAR_MIN in pieces of 4096 on
 * OpenMP threads: the update's loop body is one function (an `omp simd` loop) for a whole
 * buffer and for a tile of tr_optim_step_tiles alike, so the two cannot be compiled apart
 * (fused multiply-adds formed differently), and a small range opens no parallel region. */
#define OPTIM_PIECES(n, RUN)                                              \
    do {                                                                  \
        size_t n_ = (n);                                                  \
        if (n_ > OPTIM_PAR_MIN) {                                         \
            _Pragma("omp parallel for schedule(static)")                  \
            for (size_t off = 0; off < n_; off += 4096)                   \
                RUN(off, (n_ - off < 4096 ? n_ - off : 4096));            \
        } else {                                                          \
            RUN((size_t)0, n_);                                           \
        }                                                                 \
    } while (0)

/* The scalars of one step, worked out once for any number of its ranges (Adam's bias
 * corrections take two pow calls, which a step in many small tiles would repeat). */
typedef struct optim_coef {
    float neg_step, inv_bc2_sqrt, decay, wd, b1, b1c, b2, b2c, eps; /* Adam; wd also SGD's */
    float neg_lr, mom, damp1;                                        /* SGD */
    int mode;                                                        /* per kind */
} optim_coef;

/* The coefficients of the step taken after `steps` updates with learning rate lr, and one
 * update of n elements with them: param, grad and the state buffers (SGD's momentum buffer,
 * NULL without momentum; Adam's m and v) point at the range's first element. A range above
 * OPTIM_PAR_MIN elements runs on threads; a smaller one opens no parallel region. Elements
 * are independent: a range updates bitwise as the same range of a whole-buffer update. */
void optim_sgd_coef(const tr_optim_config *cfg, int64_t steps, double lr, optim_coef *k);
void optim_sgd_apply(const tr_optim_config *cfg, const optim_coef *k, float *param, const float *grad, float *buf,
                     size_t n);
void optim_adam_coef(const tr_optim_config *cfg, int64_t steps, double lr, optim_coef *k);
void optim_adam_apply(const optim_coef *k, float *param, const float *grad, float *m, float *v, size_t n);
/* The coefficients and the update by cfg's kind; state[k] as optim_update's. */
void optim_coef_of(const tr_optim_config *cfg, int64_t steps, double lr, optim_coef *k);
void optim_apply(const tr_optim_config *cfg, const optim_coef *k, float *param, const float *grad,
                 float *const *state, size_t n);

/* Adam's update of rows x cols elements with the gradient scale * A^T B fused in (adam_tn.c;
 * A is K x rows, B K x cols, K <= TR_GEMM_SMALL_MAX): 1 when done, 0 when this build has no
 * fused kernel (no AVX-512). param, m and v point at the block's first element. */
int optim_adam_apply_tn(const optim_coef *k, float *param, float *m, float *v, size_t rows, size_t cols, size_t K,
                        const float *A, const float *B, float scale);
/* Whether this build has the fused kernel (1) or sends tr_optim_step_tn through tiles (0). */
int optim_adam_tn_fused(void);

/* The kernel table's entries (trainer/kernels.h), which the optimizer and the gradient
 * clipping of trainer/optim.h call too: one update of n elements with state buffers given
 * (state[k] points at element 0 of tr_optim_state(k)'s range; NULL when there is no state),
 * as tr_optim_step after `steps` updates; g's sum of squares in double (tr_grad_sumsq's
 * rule); g *= s. */
void optim_update(const tr_optim_config *cfg, int64_t steps, float *param, const float *grad,
                  float *const *state, size_t n, double lr);
double optim_sumsq(const float *g, size_t n);
void optim_scale(float *g, size_t n, float s);
/* dst[i] += src[i] for i < n (add.c). */
void optim_add(float *dst, const float *src, size_t n);
/* Clipping's coefficient and the clip itself (tr_clip_coef, tr_clip_grad_norm). */
double optim_clip_coef(double max_norm, double sumsq);
double optim_clip(float *g, size_t n, double max_norm, double sumsq);

#endif
