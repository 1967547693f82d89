/* Private: the optimizer object and the per-kind update kernels optim.c dispatches to.
 *
 * State buffers are zero-filled at create; SGD's momentum buffer is filled from the first
 * step's gradient (torch's `buf is None` case), which is the step with opt->steps == 0, so
 * a resumed optimizer (tr_optim_set_steps > 0 with restored buffers) carries on exactly. */
#ifndef TRAINER_OPTIM_IMPL_H
#define TRAINER_OPTIM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/optim.h"

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

struct tr_optim {
    tr_optim_config cfg;
    size_t n;                            /* elements of the slice this optimizer updates */
    int64_t steps;                       /* updates taken so far */
    int nstate;
    float *state[OPTIM_MAX_STATE];       /* (n) each, owned */
    struct tr_accel *accel;              /* tr_optim_place: updates run there, on dstate */
    float *dstate[OPTIM_MAX_STATE];      /* (n) each, device memory, owned */
    const char *names[OPTIM_MAX_STATE];  /* torch's state keys */
};

/* The scalars of one step, worked out once for any number of its ranges (Adam's bias
 * corrections take two pow calls, which a step in many small tiles would repeat). */
typedef struct optim_coef {
    float neg_step, inv_bc2_sqrt, decay, wd, b1, b1c, b2, b2c, eps; /* Adam; wd also SGD's */
    float neg_lr, mom, damp1;                                        /* SGD */
    int mode;                                                        /* per kind */
} optim_coef;

/* The coefficients of the step opt is taking (opt->steps is the count before it), and one
 * update of elements [lo, hi) of the optimizer's slice with them: param and grad point at
 * element lo (param[0] is element lo), the state buffers are indexed from lo. A range above
 * OPTIM_PAR_MIN elements runs on threads; a smaller one opens no parallel region. */
void optim_sgd_coef(const tr_optim *opt, double lr, optim_coef *k);
void optim_sgd_apply(tr_optim *opt, const optim_coef *k, float *param, const float *grad, size_t lo, size_t hi);
void optim_adam_coef(const tr_optim *opt, double lr, optim_coef *k);
void optim_adam_apply(tr_optim *opt, const optim_coef *k, float *param, const float *grad, size_t lo, size_t hi);

/* Adam's update of rows x cols elements from lo with the gradient scale * A^T B fused in
 * (adam_tn.c): 1 when done, 0 when this build has no fused kernel (no AVX-512). */
int optim_adam_apply_tn(tr_optim *opt, const optim_coef *k, float *param, size_t lo, size_t rows, size_t cols,
                        size_t K, const float *A, const float *B, float scale);
/* Whether this build has the fused kernel (1) or sends tr_optim_step_tn through tiles (0). */
int optim_adam_tn_fused(void);

/* The kernel table's entries (trainer/kernels.h): g *= s; one update of n elements with state
 * buffers given, as tr_optim_step after `steps` updates. */
void optim_scale(float *g, size_t n, float s);
void optim_update(const tr_optim_config *cfg, int64_t steps, float *param, const float *grad,
                  float *const *state, size_t n, double lr);

#endif
