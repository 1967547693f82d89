/* The gradient-synchronisation engine of the rank strategies (ddp, sharded), and the
 * communication hooks that change what it sends (torch's register_comm_hook).
 *
 *   tr_grad_sync_config c = {.size = sizeof c, .comm = comm, .accel = accel, .replica = r,
 *                            .reduce = TR_GRAD_ALL_REDUCE, .first_mb = 1, .bucket_mb = 25};
 *   TR_CHECK(tr_grad_sync_create(&e, &c));          // buckets; the graph's grad-ready hook
 *   per micro-batch: tr_grad_sync_begin(e, mb->last); tr_backward(...);
 *   after the last:  TR_CHECK(tr_grad_sync_end(e));  // the rest issued, a hook's failure
 *                    TR_CHECK(tr_grad_sync_step(e, opt, lr, max_norm, &grad_norm));
 *   tr_grad_sync_destroy(e);                          // before the communicator
 *
 * Buckets are ranges of whole parameters in the flat gradient buffer, kept in buffer order;
 * backward readies them from the last down, and each is reduced (all-reduce, or
 * reduce-scatter: rank r keeps slice r) as soon as its last gradient is final, overlapping
 * the rest of backward. The algorithm and the contracts: docs/strategies.md, "The gradient
 * synchronisation engine"; writing a hook: docs/writing-a-strategy.md, "Communication hooks". */
#ifndef TRAINER_GRAD_SYNC_H
#define TRAINER_GRAD_SYNC_H

#include "trainer/export.h"

#include <stddef.h>

#include "trainer/accel.h"
#include "trainer/comm.h"
#include "trainer/optim.h"
#include "trainer/plugin.h"
#include "trainer/replica.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- communication hooks: plugins of kind TR_PLUGIN_COMM_HOOK (ABI 0.17) ---- */

typedef enum tr_grad_reduce {
    TR_GRAD_ALL_REDUCE = 0,     /* every rank gets the bucket's sum */
    TR_GRAD_REDUCE_SCATTER = 1  /* rank r gets the sum of slice r (numel / world floats at r * that) */
} tr_grad_reduce;

/* A bucket whose gradients are final on this rank, as a hook sees it. */
typedef struct tr_grad_bucket {
    int index, count;           /* this bucket of count, in flat-buffer order */
    tr_grad_reduce reduce;
    float *grad;                /* numel floats, this rank's; the reduced gradient goes here */
    size_t numel;               /* a multiple of world with TR_GRAD_REDUCE_SCATTER */
    size_t offset;              /* where grad starts in the flat gradient buffer (floats) */
    int device;                 /* 1: grad is GPU memory of a device backend (nccl); 0: host */
    int rank, world;
    tr_comm *comm;
} tr_grad_bucket;

/* What a hook's create sees. */
typedef struct tr_comm_hook_env {
    tr_comm *comm;
    size_t numel;               /* floats of the flat gradient buffer: no bucket reaches past it */
    int device;                 /* 1: buckets are in device memory (see tr_grad_bucket.device) */
    tr_grad_reduce reduce;      /* what every bucket asks for */
} tr_comm_hook_env;

/* A comm hook plugin's ops table (tr_plugin_desc.ops). reduce starts the reduction of b and
 * sets *work to the collective the engine waits for (NULL: done already); when finish
 * returns, b->grad must hold the reduced gradient (all of it, or slice rank). Every rank
 * calls the hooks in the same order. Both run on the thread of the strategy's
 * train_micro / optim_step (reduce inside backward, from the graph's grad-ready hook). A
 * failure is a status with its message (tr_error_set); the engine reports it after backward
 * or in the step, naming nothing else, and breaks the communicator everywhere. */
typedef struct tr_comm_hook_ops {
    tr_status (*create)(void **state, const tr_options *opts, const tr_comm_hook_env *env);
    void (*destroy)(void *state);
    tr_status (*reduce)(void *state, const tr_grad_bucket *b, tr_comm_work **work);
    tr_status (*finish)(void *state, const tr_grad_bucket *b); /* NULL: nothing to do */
} tr_comm_hook_ops;

/* The `comm_hook` option of ddp and sharded, for their option tables. */
#define TR_COMM_HOOK_OPTION                                                                                  \
    {.key = "comm_hook", .type = TR_OPTION_STRING, .default_value = "none",                                 \
     .doc = "comm hook plugin reducing each gradient bucket (e.g. bf16_compress from docs/examples); none: "  \
            "fp32 sums"}

/* ---- the engine (ABI 0.17) ---- */

typedef struct tr_grad_sync tr_grad_sync;

typedef enum tr_grad_layout {
    TR_GRAD_BUCKETS = 0,        /* ddp: from the last parameter down, first_mb then bucket_mb each */
    TR_GRAD_UNITS = 1           /* sharded: from the first parameter up, bucket_mb each at most
                                 * (a unit of one larger parameter holds it alone); never more
                                 * than TR_GRAD_MAX_UNITS: tr_grad_sync_units doubles the size
                                 * until they fit */
} tr_grad_layout;

enum { TR_GRAD_MAX_UNITS = 128 };

typedef struct tr_grad_sync_config {
    size_t size;                  /* sizeof(tr_grad_sync_config) as the caller was built: at
                                   * least 0.17's (up to `reduced`; smaller is refused); the
                                   * struct only grows at its end, fields added later and past
                                   * size read as 0 */
    const char *name;             /* the strategy's, for messages and profile regions ("ddp") */
    tr_comm *comm;                /* borrowed, all of it, for the engine's life */
    tr_accel *accel;              /* the replica's device, NULL on the CPU */
    tr_replica *replica;
    tr_grad_reduce reduce;
    tr_grad_layout layout;
    double first_mb, bucket_mb;
    int pad;                      /* buckets take the alignment padding after them (reduce-scatter) */
    int skip_nonfinite;           /* tr_strategy_env's: no bucket updated before the norm is known */
    /* On a device over a host backend: host buffers as long as the flat buffers through which
     * the gradients and parameters go to the collectives (NULL: the replica's host
     * parameters' buffers, as they are when used). */
    float *grad_stage, *param_stage;
    /* Reduce-scatter: the optimizer's state covers the whole flat buffer (ddp's shard_update;
     * tr_grad_sync_gather_state makes it whole) instead of this rank's shard. */
    int full_state;
    int gather_params;            /* the step all-gathers each updated bucket's parameters */
    int wait_gathers;             /* ... and waits for them (else tr_grad_sync_wait_gather) */
    int eager;                    /* the grad-ready hook finishes reductions already done */
    const tr_registry *registry;  /* where comm_hook is found */
    const char *comm_hook;        /* a TR_PLUGIN_COMM_HOOK plugin's name; NULL or "none": fp32 sums */
    /* For a strategy that moves gradients (sharded stages 2-3), each may be NULL, with the
     * bucket's index: before its reduction is issued, after, and once it finished. */
    void *user;
    tr_status (*prepare)(void *user, int bucket);
    tr_status (*issued)(void *user, int bucket);
    tr_status (*reduced)(void *user, int bucket);
} tr_grad_sync_config;

/* A bucket's place: floats [lo, hi) of the flat buffers, parameters [p0, p0 + np); with
 * reduce-scatter len = (hi - lo) / world and this rank's slice at soff of the shard. */
typedef struct tr_grad_sync_range {
    size_t lo, hi, len, soff;
    int p0, np;
} tr_grad_sync_range;

/* Builds the buckets over the replica's host parameters (aligned as the caller made them)
 * and sets the replica graph's grad-ready hook; the comm hook's plugin is created. */
TR_API tr_status tr_grad_sync_create(tr_grad_sync **out, const tr_grad_sync_config *c);
/* Waits for what is in flight, destroys the comm hook, frees; before the replica and the
 * communicator go. NULL does nothing. */
TR_API void tr_grad_sync_destroy(tr_grad_sync *e);
TR_API int tr_grad_sync_count(const tr_grad_sync *e);
TR_API const tr_grad_sync_range *tr_grad_sync_at(const tr_grad_sync *e, int bucket);
TR_API int tr_grad_sync_bucket_of(const tr_grad_sync *e, int param);
/* ABI 0.19: sharded's units over np parameters of len[p] floats each (with their padding):
 * greedy from the first parameter up, a unit closed where the next parameter would take it
 * past unit_mb (at least 1/127 of the total), the size doubled until there are at most
 * TR_GRAD_MAX_UNITS. Sets unit_of[p]; returns the count. What TR_GRAD_UNITS builds, for a
 * plan that has sizes only. */
TR_API int tr_grad_sync_units(const size_t *len, int np, double unit_mb, int *unit_of);
/* Shard length (floats): the sum of the buckets' len. */
TR_API size_t tr_grad_sync_shard(const tr_grad_sync *e);
/* Reduce-scatter: where this rank's slices live between steps, bucket i's at its soff of
 * each shard (NULL, the default: slice rank of the flat buffers). */
TR_API void tr_grad_sync_set_shards(tr_grad_sync *e, float *param_shard, float *grad_shard);
/* Where bucket i's full gradients / gathered parameters are for now (NULL, the default: the
 * flat buffers). */
TR_API void tr_grad_sync_set_grads(tr_grad_sync *e, int bucket, float *grads);
TR_API void tr_grad_sync_set_params(tr_grad_sync *e, int bucket, float *params);
TR_API float *tr_grad_sync_grads(tr_grad_sync *e, int bucket);
TR_API float *tr_grad_sync_params(tr_grad_sync *e, int bucket);
/* This rank's slice of bucket i: its parameters, its summed gradients. */
TR_API float *tr_grad_sync_param_slice(tr_grad_sync *e, int bucket);
TR_API float *tr_grad_sync_grad_slice(tr_grad_sync *e, int bucket);

/* Before backward: sync 1 makes this backward reduce each bucket once final. */
TR_API void tr_grad_sync_begin(tr_grad_sync *e, int sync);
/* After it: buckets not yet issued go now, in order; a failure inside the grad-ready hook
 * is returned with its message. */
TR_API tr_status tr_grad_sync_end(tr_grad_sync *e);
/* Finishes the issued reductions from the oldest down to bucket down_to, in order: all of
 * them (block) or while they are done. */
TR_API tr_status tr_grad_sync_finish(tr_grad_sync *e, int down_to, int block);
/* The oldest bucket whose issued reduction is not finished yet; -1: none. */
TR_API int tr_grad_sync_in_flight(const tr_grad_sync *e);
/* The step: every reduction finished, the global norm, clipping, the update (per bucket as
 * its sum arrives when nothing needs the norm first), with gather_params the all-gathers.
 * On failure the communicator is broken everywhere and what is in flight drained. */
TR_API tr_status tr_grad_sync_step(tr_grad_sync *e, tr_optim *opt, double lr, double max_norm, double *grad_norm);
/* All-gather of bucket i's parameter slices into its full parameters, and its wait. */
TR_API tr_status tr_grad_sync_gather(tr_grad_sync *e, int bucket);
TR_API tr_status tr_grad_sync_wait_gather(tr_grad_sync *e, int bucket);
/* full_state: every rank's slices of the optimizer state everywhere when an update left
 * them stale (collective, a no-op on every rank otherwise); tr_grad_sync_fresh_state says
 * they are whole (a checkpoint loaded the whole state). */
TR_API tr_status tr_grad_sync_gather_state(tr_grad_sync *e, tr_optim *opt);
TR_API void tr_grad_sync_fresh_state(tr_grad_sync *e);
/* Waits for everything in flight; the first failure. */
TR_API tr_status tr_grad_sync_drain(tr_grad_sync *e);
/* A failure (st, with the thread's message) after which peers may wait for collectives this
 * rank left out: breaks the communicator everywhere, drains, returns st with its message;
 * when a reduction failed during this backward (which broke the communicator at once), that
 * failure with its message instead: what followed (an ABORTED collective) came from it. */
TR_API tr_status tr_grad_sync_broke(tr_grad_sync *e, tr_status st);
/* For TRAINER_DDP_TRACE: buckets the grad-ready hook issued in the last synchronising
 * backward, and of the issued ones those whose reduction has finished by now. */
TR_API void tr_grad_sync_trace(const tr_grad_sync *e, int *in_backward, int *finished);
/* "" or ", comm hook NAME" for a strategy's description. */
TR_API const char *tr_grad_sync_hook_name(const tr_grad_sync *e);

#ifdef __cplusplus
}
#endif
#endif
