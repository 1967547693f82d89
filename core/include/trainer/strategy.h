/* The strategy plugin interface: the strategy owns the step, the trainer owns the loop
 * (docs/design.md "Step and loop").
 *
 * The trainer reads the config, loads the dataset and runs epochs, validation, logging and
 * checkpoints. The strategy decides placement, replication, sharding, which share of each
 * global batch this process loads, gradient synchronisation and the optimizer step:
 *
 *   create(&ctx, opts, env, &info)      replicas (tr_replica_create), optimizer, communicator
 *   per optimizer step:
 *       train_micro(ctx, mb, &loss)     for each of the trainer.grad_accum micro-batches
 *       optim_step(ctx, lr, clip, &gn)  sync gradients, clip, update, make replicas equal
 *   forward(ctx, hb, with_y, &out)      validation, `trainer eval`, `trainer predict`
 *   settle(ctx)                         before validation and checkpoints: replicas equal
 *   state(ctx, &P, &opt)                what a checkpoint saves and loads, then sync(ctx)
 *   shards(ctx, &s)                     instead, for sharded state: this rank's pieces
 *   destroy(ctx)
 *
 * Before any of it, probe(opts, env) says whether the strategy can run here and
 * processes(opts, devices) how many ranks `trainer run` launches; `trainer plan` calls only
 * estimate(opts, env, &out), the memory it would hold. The whole contract, entry
 * by entry: docs/plugin-interfaces.md.
 *
 * A minimal strategy (the shipped `cpu` strategy is one, on the core's one-replica step of
 * trainer/solo.h; docs/examples/local_sgd/local_sgd.c writes every entry itself):
 *
 *   static const tr_strategy_ops ops = {.create = create, .destroy = destroy,
 *       .train_micro = train_micro, .optim_step = optim_step, .forward = forward,
 *       .state = state};
 *   static const tr_plugin_desc desc = {TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_STRATEGY,
 *       .name = "mine", .version = "0.1.0", .description = "...", .ops = &ops,
 *       .ops_size = sizeof ops};
 *   TR_PLUGIN_DEFINE(desc)
 *
 * Loss normalisation: a micro-batch's `normaliser` is the number of samples (times tokens
 * per sample for LMs) of the whole optimizer step across all ranks and micro-batches, so
 * summing gradients over ranks and micro-batches gives the exact mean gradient (decision 5).
 * Entries appended after `state` may be NULL (core default noted at each). */
#ifndef TRAINER_STRATEGY_H
#define TRAINER_STRATEGY_H

#include "trainer/export.h"

#include <stdint.h>

#include "trainer/data.h"
#include "trainer/devices.h"
#include "trainer/model.h"
#include "trainer/optim.h"
#include "trainer/params.h"
#include "trainer/plugin.h"
#include "trainer/replica.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the trainer hands a strategy at create; everything is borrowed for the strategy's
 * lifetime. */
typedef struct tr_strategy_env {
    const tr_model_factory *models;  /* tr_replica_create(models, ...) makes replicas */
    const tr_data_spec *spec;
    tr_optim_config optim;           /* the optimizer section */
    int64_t global_batch;            /* data.batch_size */
    int64_t grad_accum;              /* micro-batches per optimizer step */
    int threads;                     /* trainer.threads (0: all cores) */
    uint64_t seed;
    int devices;                     /* trainer.devices: replicas or ranks asked for */
    const tr_registry *registry;     /* the plugins found: communication backends etc. */
    /* ---- appended in ABI 0.3 ---- */
    /* trainer.on_nan is skip: when optim_step finds the global gradient norm not finite it
     * must leave the whole step out (see optim_step), so it may not update parts of the
     * model before it knows the norm. 0 (stop): the job stops after such a step. */
    int skip_nonfinite;
    /* ---- appended in ABI 0.5 ---- */
    int accelerator;                 /* tr_accelerator chosen: TR_ACCEL_CPU or TR_ACCEL_GPU */
    const tr_plugin *gpu_backend;    /* with TR_ACCEL_GPU: the device plugin of the GPUs
                                      * (tr_accel_open(gpu_backend, id, &a)); else NULL */
    const int *gpu_ids;              /* the GPU ids chosen, n_gpu_ids of them (one per replica
                                      * or rank; a rank takes the one at its local rank) */
    int n_gpu_ids;
} tr_strategy_env;

/* What a strategy's probe sees: the request and what this machine has. */
typedef struct tr_strategy_probe {
    int devices;                     /* trainer.devices: replicas or ranks asked for */
    int gpus;                        /* GPUs the device plugins found (0 without any) */
    const tr_registry *registry;     /* the plugins found */
    /* ---- appended in ABI 0.4 ---- */
    int accelerator;                 /* tr_accelerator chosen: TR_ACCEL_CPU or TR_ACCEL_GPU (devices.h);
                                      * a strategy that cannot run there refuses, saying so */
    /* ---- appended in ABI 0.5 ---- */
    const tr_plugin *gpu_backend;    /* with TR_ACCEL_GPU: the device plugin of the GPUs
                                      * (tr_accel_probe says whether it can run kernels) */
} tr_strategy_probe;

/* What a strategy tells the trainer at create. */
typedef struct tr_strategy_info {
    int rank, world;                 /* this process in the job; rank 0 logs and checkpoints */
    int data_rank, data_world;       /* which share of every global batch this process loads */
    char description[256];           /* one line for the log: "cpu (16 threads)" */
} tr_strategy_info;

/* One micro-batch of an optimizer step, as this process loaded it. */
typedef struct tr_micro_batch {
    const tr_host_batch *hb;         /* valid until the call returns */
    double normaliser;               /* divide summed losses by this (see above) */
    int64_t step;                    /* the optimizer step it belongs to (dropout keys) */
    int first;                       /* first micro-batch of the step: zero gradients first */
    int last;                        /* last one: gradients may be synchronised now */
} tr_micro_batch;

/* Bytes a strategy holds (tr_strategy_ops.memory): on its primary device (dataparallel:
 * replica 0; ddp: this rank) by kind, and over every device of this process together. */
typedef struct tr_strategy_memory {
    uint64_t params;        /* parameters and buffers */
    uint64_t grads;
    uint64_t optimizer;     /* optimizer state */
    uint64_t activations;   /* the activation arena's peak */
    uint64_t other;         /* gathered outputs, staging */
    uint64_t all_devices;   /* the same, summed over every replica of this process */
} tr_strategy_memory;

/* A piece of a parameter a strategy holds, with its optimizer state: what a sharded
 * checkpoint (<trainer/checkpoint.h>) saves and loads. */
#define TR_CKPT_MAX_STATE 4

typedef struct tr_ckpt_piece {
    int param;                        /* index in P */
    int64_t start, count;             /* the flattened parameter's elements [start, start + count) */
    float *data;                      /* count values */
    float *state[TR_CKPT_MAX_STATE];  /* the optimizer's state k for the same elements */
} tr_ckpt_piece;

/* What this rank of a sharded strategy holds (tr_strategy_ops.shards): pieces of parameters,
 * each with its optimizer state; a checkpoint saves and loads exactly these. */
typedef struct tr_state_shards {
    tr_params *P;                  /* names, shapes and the buffers (held whole on every rank) */
    tr_optim *opt;                 /* state names and the step count */
    const tr_ckpt_piece *pieces;   /* owned by the strategy, valid until the next call */
    int n_pieces;
} tr_state_shards;

/* What a strategy's estimate sees (`trainer plan`): the model and the batch, no replica. */
typedef struct tr_strategy_estimate_env {
    int devices;                     /* trainer.devices */
    int64_t global_batch;            /* data.batch_size */
    int64_t grad_accum;
    int n_params;                    /* parameters, in registration (flat buffer) order */
    const int64_t *param_numel;      /* each one's element count */
    size_t buffer_floats;            /* buffers (batch-norm statistics), not optimised */
    int optim_states;                /* optimizer state floats per parameter float (SGD 0 or 1, Adam 2) */
    /* The activation-arena peak of one training forward and backward of `samples` samples on
     * one replica (the core runs it once per size on the first samples; nothing is updated). */
    tr_status (*activations)(void *user, int64_t samples, uint64_t *bytes);
    void *user;
} tr_strategy_estimate_env;

/* What it estimates: per rank (or, for several replicas in one process, the primary one and
 * the process in all_devices), and how it would split the work. */
typedef struct tr_strategy_estimate {
    tr_strategy_memory memory;
    int world;                       /* ranks (or replicas) */
    int64_t rank_batch;              /* the largest share of a global batch one rank/replica computes */
} tr_strategy_estimate;

/* Floats of the flat parameter buffer when every parameter starts on a multiple of `align`
 * floats (tr_params_set_align; 16 by default). */
TR_API size_t tr_estimate_param_floats(const tr_strategy_estimate_env *env, size_t align);
/* One whole replica training on `samples` samples: parameters with buffers, gradients,
 * optimizer state over the whole buffer and the activation peak (all_devices their sum):
 * what cpu and each ddp rank hold. */
TR_API tr_status tr_estimate_replica(const tr_strategy_estimate_env *env, size_t align, int64_t samples,
                              tr_strategy_memory *out);

typedef struct tr_strategy_ops {
    /* Makes the strategy and fills info. opts are the `strategy:` section, resolved. */
    tr_status (*create)(void **ctx, const tr_options *opts, const tr_strategy_env *env,
                        tr_strategy_info *info);
    void (*destroy)(void *ctx);
    /* Forward and backward of this process's share of a micro-batch, accumulating
     * gradients. *loss: that share's loss as normalised (the trainer sums over ranks). */
    tr_status (*train_micro)(void *ctx, const tr_micro_batch *mb, double *loss);
    /* After the last micro-batch: synchronise gradients, clip to max_norm (0: no clipping)
     * by the global norm, update with learning rate lr, and leave every replica with equal
     * parameters (unless settle() makes them equal later). *grad_norm: the global gradient
     * norm before clipping.
     * Non-finite gradients (from ABI 0.3): a NaN or infinite gradient is never applied. When
     * the global norm is not finite the step is left out: parameters, optimizer state and its
     * step count unchanged, the synchronised gradients kept for nonfinite(), *grad_norm the
     * non-finite norm, TR_OK. Without env->skip_nonfinite (the job stops after this step) a
     * strategy that updates parts of the model as their gradients arrive may have updated the
     * parts whose gradients were finite. */
    tr_status (*optim_step)(void *ctx, double lr, double max_norm, double *grad_norm);
    /* Eval-mode forward of this process's share of a batch (no gradients). With with_y the
     * loss is the summed (normaliser 1) loss. Outputs cover hb's samples in order and live
     * until the next call. */
    tr_status (*forward)(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out);
    /* The full parameters (with buffers) and optimizer state a checkpoint saves and loads;
     * *opt may be set to NULL when the strategy has no optimizer state to save. */
    tr_status (*state)(void *ctx, tr_params **P, tr_optim **opt);
    /* After the trainer loaded a checkpoint into state(): make every replica/rank equal.
     * NULL: nothing to do (a single replica). */
    tr_status (*sync)(void *ctx);
    /* Sums n doubles over the job's ranks in place (metrics). NULL: a single process. */
    tr_status (*all_sum)(void *ctx, double *values, int n);
    /* Processes this host runs for these options and trainer.devices (called before
     * create). `trainer run` launches that many ranks itself when no launcher (its own,
     * torchrun, mpirun, srun) started it. NULL: 1. */
    int (*processes)(const tr_options *opts, int devices);
    /* What the strategy holds now (the trainer reports it after training). NULL: unknown. */
    tr_status (*memory)(void *ctx, tr_strategy_memory *out);
    /* A sharded strategy: this rank's pieces of the state. Checkpoints are then saved by every
     * rank (one shard file each, see checkpoint.h) and loaded piece by piece from a full or a
     * sharded checkpoint of any world size, followed by sync(). NULL: state() holds it all. */
    tr_status (*shards)(void *ctx, tr_state_shards *out);
    /* ---- appended in ABI 0.2 ---- */
    /* Called on every rank, collectively, where the trainer needs one model: before each
     * validation and before each checkpoint is saved (the trainer saves one after the last
     * step). A strategy whose replicas drift apart between synchronisations (local SGD)
     * makes them equal here. NULL: optim_step leaves replicas equal already. */
    tr_status (*settle)(void *ctx);
    /* Whether the strategy can run here with these options, asked before any process is
     * launched or create() is called: TR_OK, or an error whose message says what is missing
     * and what would work (e.g. "backend 'mpi' is not built; found: shm"). NULL: it can. */
    tr_status (*probe)(const tr_options *opts, const tr_strategy_probe *env);
    /* `trainer plan`: the memory this strategy would hold per rank with these options, from
     * the model's sizes, without creating anything (activations are measured through env).
     * Called on its own, never with a ctx. NULL: the plan shows no estimate for it. */
    tr_status (*estimate)(const tr_options *opts, const tr_strategy_estimate_env *env, tr_strategy_estimate *out);
    /* ---- appended in ABI 0.3 ---- */
    /* After a step whose loss or gradient norm was not finite, on every rank: which tensors
     * of state()'s parameters (shards()'s for a sharded strategy; n of them, in their order)
     * hold a NaN or an infinity in this rank's part: flags[k] = 1 for parameter k's values,
     * flags[n + k] = 1 for its gradient as optim_step left it (flags arrive zeroed; the
     * trainer sums them over ranks; tr_params_mark_nonfinite does the scan). activation: the
     * first non-finite op output of this rank's last training forward
     * (tr_graph_first_nonfinite of its replica), or left "". NULL: the trainer names no
     * parameter, gradient or activation. */
    tr_status (*nonfinite)(void *ctx, double *flags, int n, char *activation, size_t size);
} tr_strategy_ops;

/* The options of a strategy that runs one process per rank over a communicator (ddp,
 * sharded): backend, timeout_s, sync_batchnorm, broadcast_buffers. In its option table:
 *   static const tr_option_spec opts[] = {TR_RANK_STRATEGY_OPTIONS, {.key = "mine", ...}}; */
#define TR_RANK_STRATEGY_OPTIONS                                                                                 \
    {.key = "backend", .type = TR_OPTION_STRING, .default_value = "auto",                                      \
     .doc = "communication backend plugin: auto (nccl for ranks on CUDA GPUs of their own, shm on one host, "   \
            "mpi across hosts), shm, mpi (run under mpirun/srun), nccl (one GPU per rank)"},                    \
    {.key = "timeout_s", .type = TR_OPTION_FLOAT, .default_value = "300", .min = 1, .max = 1e7,                \
     .doc = "a collective waiting longer fails naming the ranks that did not arrive (TRAINER_COMM_TIMEOUT "     \
            "overrides)"},                                                                                      \
    {.key = "sync_batchnorm", .type = TR_OPTION_BOOL, .default_value = "false",                                 \
     .doc = "batch-norm statistics over the global batch (torch SyncBatchNorm) instead of each rank's share"},  \
    {.key = "broadcast_buffers", .type = TR_OPTION_BOOL, .default_value = "true",                               \
     .doc = "make buffers (batch-norm running statistics) rank 0's before every step, as PyTorch DDP"}

#ifdef __cplusplus
}
#endif
#endif
