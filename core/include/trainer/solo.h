/* One replica trained by this process, on the CPU or on one device: the whole step of the
 * strategies `cpu` and `single-gpu`, for any strategy plugin that places one replica.
 *
 *   static tr_status create(void **ctx, const tr_options *o, const tr_strategy_env *env,
 *                           tr_strategy_info *info) {
 *       tr_solo *s;
 *       TR_CHECK(tr_solo_create(env, NULL, &s));      // or an opened tr_accel (owned)
 *       *info = (tr_strategy_info){.world = 1, .data_world = 1};
 *       *ctx = s;
 *       return TR_OK;
 *   }
 *   static const tr_strategy_ops ops = {.create = create, TR_SOLO_OPS};   // + .probe etc.
 *
 * The step: micro-batches accumulate into the replica's flat gradient buffer (the first one
 * writes it: no zero-fill pass); in the last micro-batch's backward each parameter's
 * gradient sum of squares is taken from the gradient-ready hook, while the gradient is fresh
 * (in cache, or without a pass over the buffer on a device); the step clips by the global
 * norm and runs one fused optimizer update over the flat buffer (with tr_solo_set_defer, the
 * weight gradients of small-batch linear layers are recomputed inside it instead of stored).
 * A non-finite norm leaves the
 * step out. On a device the replica, its optimizer state and its activations live there
 * (tr_replica_create_on, tr_optim_place); state() refreshes the host copies checkpoints read,
 * sync() pushes them back, forward() copies its outputs to the host. There a micro-batch
 * waits for the device once (its loss; in the last one every parameter's gradient sum with
 * it, queued by the hook into device memory) and optim_step queues the update without
 * waiting: a kernel error surfaces at the next train_micro, forward or state. Each entry below has the
 * signature of the tr_strategy_ops entry of that name; ctx is the tr_solo. */
#ifndef TRAINER_SOLO_H
#define TRAINER_SOLO_H

#include "trainer/export.h"
#include "trainer/accel.h"
#include "trainer/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_solo tr_solo;

/* The replica (on accel when not NULL; the solo then owns and closes it, also on failure)
 * and its optimizer. */
TR_API tr_status tr_solo_create(const tr_strategy_env *env, tr_accel *accel, tr_solo **out);
TR_API tr_replica *tr_solo_replica(tr_solo *s);
/* Deferred weight gradients (off by default; the cpu strategy turns them on): in a step of
 * one micro-batch on the host, a small-batch linear layer's weight gradient is not written in
 * backward but recomputed inside the update (docs/architecture.md). It reads the batch again
 * in optim_step, so the micro-batch's host batch must stay valid until optim_step returns
 * (the trainer's loop keeps it until it takes the next batch), and train_micro must be
 * followed by the solo's own optim_step. */
TR_API void tr_solo_set_defer(tr_solo *s, int on);

TR_API void tr_solo_destroy(void *ctx);
TR_API tr_status tr_solo_train_micro(void *ctx, const tr_micro_batch *mb, double *loss);
TR_API tr_status tr_solo_optim_step(void *ctx, double lr, double max_norm, double *grad_norm);
TR_API tr_status tr_solo_forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out);
TR_API tr_status tr_solo_state(void *ctx, tr_params **P, tr_optim **opt);
TR_API tr_status tr_solo_sync(void *ctx);
TR_API tr_status tr_solo_memory(void *ctx, tr_strategy_memory *m);
TR_API tr_status tr_solo_nonfinite(void *ctx, double *flags, int n, char *activation, size_t size);
/* `trainer plan`: one replica on the whole global batch. */
TR_API tr_status tr_solo_estimate(const tr_options *o, const tr_strategy_estimate_env *env, tr_strategy_estimate *out);

/* Every entry above, for a strategy's ops table after its own .create. */
#define TR_SOLO_OPS                                                                           \
    .destroy = tr_solo_destroy, .train_micro = tr_solo_train_micro,                           \
    .optim_step = tr_solo_optim_step, .forward = tr_solo_forward, .state = tr_solo_state,     \
    .sync = tr_solo_sync, .memory = tr_solo_memory, .estimate = tr_solo_estimate,             \
    .nonfinite = tr_solo_nonfinite

#ifdef __cplusplus
}
#endif
#endif
