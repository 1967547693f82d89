/* Optimizers, learning-rate schedules and gradient clipping on flat buffers.
 *
 *   tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
 *   oc.lr = 3e-4; oc.weight_decay = 0.01;
 *   tr_optim *opt;
 *   TR_CHECK(tr_optim_create(&opt, &oc, tr_params_numel(P)));   // or just a shard's length
 *   float norm = tr_clip_grad_norm(grad, n, 1.0, tr_grad_sumsq(grad, n));
 *   double lr = tr_sched_lr(&sched, oc.lr, step);
 *   TR_CHECK(tr_optim_step(opt, param, grad, n, lr));
 *
 * An optimizer updates one contiguous slice of n floats (the whole flat buffer, or the shard
 * a sharded strategy owns) and keeps its state (momentum, Adam moments) in flat buffers of
 * the same length, so state checkpoints and shards are plain ranges too. Updates follow
 * PyTorch's torch.optim formulas exactly (fp32). Schedules are pure functions of the step,
 * so resuming needs only the step number. */
#ifndef TRAINER_OPTIM_H
#define TRAINER_OPTIM_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/optim_config.h"
#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's defaults for the kind (AdamW: lr 1e-3, betas 0.9/0.999, eps 1e-8, wd 0.01). */
TR_API tr_optim_config tr_optim_defaults(tr_optim_kind kind);
/* Checks ranges; the message names the field. */
TR_API tr_status tr_optim_config_validate(const tr_optim_config *cfg);

typedef struct tr_optim tr_optim;

TR_API tr_status tr_optim_create(tr_optim **out, const tr_optim_config *cfg, size_t n);
TR_API void tr_optim_destroy(tr_optim *opt);
/* One update of param[0..n) from grad[0..n) with learning rate lr; n must equal create's. */
TR_API tr_status tr_optim_step(tr_optim *opt, float *param, const float *grad, size_t n, double lr);
/* The same update restricted to elements [lo, hi) of the slice (param and grad still point at
 * the slice's start), as part of the step being taken: a strategy can update each gradient
 * bucket as soon as it is synchronised. Once every element has been covered exactly once,
 * tr_optim_step_done counts the step. Elements never covered (alignment padding, zero) stay
 * as a full step would leave them only when their gradient, parameter and state are zero. */
TR_API tr_status tr_optim_step_part(tr_optim *opt, float *param, const float *grad, size_t lo, size_t hi,
                             double lr);
TR_API void tr_optim_step_done(tr_optim *opt);
/* As tr_optim_step_part, but param and grad point at element lo itself (param[0] is element
 * lo): the values may live anywhere, e.g. a rank's slice of one layer inside the full flat
 * buffer while the state covers only the slices the rank owns (ZeRO). */
TR_API tr_status tr_optim_step_at(tr_optim *opt, float *param, const float *grad, size_t lo, size_t hi, double lr);
/* Computes rows [r0, r1) x columns [c0, c1) of a gradient into out, row-major with c1 - c0
 * floats a row. */
typedef void (*tr_grad_tile_fn)(const void *ctx, size_t r0, size_t r1, size_t c0, size_t c1, float *out);
/* As tr_optim_step_at for the rows x cols elements from lo (param points at element lo), whose
 * gradient is never stored: tile computes it a small tile at a time, each tile is multiplied
 * by scale (gradient clipping's coefficient; 1 for none) and applied while it is in cache.
 * Tiles may run on several threads at once. The same bits as tr_optim_step_at on the stored
 * gradient times scale, when tile gives the values that gradient would hold. Host only. */
TR_API tr_status tr_optim_step_tiles(tr_optim *opt, float *param, size_t lo, size_t rows, size_t cols, tr_grad_tile_fn tile,
                              const void *ctx, float scale, double lr);
/* tr_optim_step_tiles for the gradient scale * A^T B: A is K x rows, B is K x cols (both
 * row-major and contiguous; a linear layer's dW = dy^T x at a batch of K, 1 to 32), each
 * element summed as tr_linear's backward sums it at such a batch (a chain of fused
 * multiply-adds over k from 0, where the build has FMA), so the same bits as
 * tr_optim_step_at on that stored product times scale. Adam and AdamW in builds for AVX-512
 * (-march) update each 4 x 16 block of the product while it is in registers; other optimizers
 * and builds go through tiles. Host only. */
TR_API tr_status tr_optim_step_tn(tr_optim *opt, float *param, size_t lo, size_t rows, size_t cols, size_t K,
                           const float *A, const float *B, float scale, double lr);
/* Moves the updates onto device a (trainer/accel.h): state buffers are allocated there (the
 * host ones uploaded), and tr_optim_step / _part / _at then take device pointers and run the
 * device's optim_update kernel. The host buffers (tr_optim_state) stay as the checkpoint
 * copy: tr_optim_download refreshes them, tr_optim_upload pushes them back (no-ops when not
 * placed). */
struct tr_accel;
TR_API tr_status tr_optim_place(tr_optim *opt, struct tr_accel *a);
TR_API tr_status tr_optim_download(tr_optim *opt);
TR_API tr_status tr_optim_upload(tr_optim *opt);
/* Length of the slice the optimizer updates (and of each state buffer). */
TR_API size_t tr_optim_size(const tr_optim *opt);
/* Bytes of optimizer state (every state buffer). */
TR_API size_t tr_optim_state_bytes(const tr_optim *opt);
/* Number of steps taken (Adam's bias correction uses it). */
TR_API int64_t tr_optim_steps(const tr_optim *opt);
TR_API void tr_optim_set_steps(tr_optim *opt, int64_t steps);
/* State buffers for checkpoints: count, and each one's name ("exp_avg", "exp_avg_sq",
 * "momentum_buffer") and data of n floats (owned by opt). */
TR_API int tr_optim_state_count(const tr_optim *opt);
TR_API const char *tr_optim_state_name(const tr_optim *opt, int i);
TR_API float *tr_optim_state(tr_optim *opt, int i);

typedef enum tr_sched_kind {
    TR_SCHED_CONSTANT = 0,
    TR_SCHED_STEP = 1,    /* lr * gamma^(floor(step / step_size)) */
    TR_SCHED_COSINE = 2   /* cosine from lr to min_lr over total_steps */
} tr_sched_kind;

typedef struct tr_sched_config {
    tr_sched_kind kind;
    int64_t warmup_steps;   /* linear warm-up from 0 (before the schedule proper); 0 = none */
    int64_t step_size;      /* STEP */
    double gamma;           /* STEP */
    int64_t total_steps;    /* COSINE: steps after warm-up over which lr decays */
    double min_lr;          /* COSINE */
} tr_sched_config;

/* Learning rate for optimizer step `step` (0-based). Warm-up: base_lr * (step+1)/warmup. */
TR_API double tr_sched_lr(const tr_sched_config *s, double base_lr, int64_t step);

/* Sum of squares of g[0..n), accumulated in double (per shard, then summed across ranks). */
TR_API double tr_grad_sumsq(const float *g, size_t n);
/* Scales g[0..n) so the global norm sqrt(sumsq) is at most max_norm (PyTorch's
 * clip_grad_norm_: coefficient max_norm / (norm + 1e-6), applied when < 1). Returns the norm
 * before clipping. */
TR_API double tr_clip_grad_norm(float *g, size_t n, double max_norm, double sumsq);
/* The factor tr_clip_grad_norm scales by: max_norm / (norm + 1e-6) when that is below 1 and
 * the norm is finite, else 1 (no clipping). */
TR_API double tr_clip_coef(double max_norm, double sumsq);

#ifdef __cplusplus
}
#endif
#endif
