/* Strategy `ddp`: distributed data parallel, one process per rank (torch DDP's design). The
 * one idea: a whole replica per rank whose gradients the core's synchronisation engine
 * (trainer/grad_sync.h) all-reduces in buckets during backward; with shard_update the
 * engine's reduce-scatter and sliced update (ZeRO stage 1) with the whole state kept. The
 * algorithm, its GPU paths and options: docs/strategies.md, "ddp". */
#include <stdio.h>
#include <stdlib.h>

#include "trainer/grad_sync.h"
#include "trainer/memory.h"
#include "trainer/profile.h"
#include "trainer/rank.h"
#include "trainer/runtime.h"
#include "trainer/strategy.h"

typedef struct ddp {
    tr_replica *r;
    tr_optim *opt;
    tr_comm *comm;
    tr_grad_sync *sync;      /* buckets over the flat gradient buffer, their all-reduces or reduce-scatters */
    int rank, world;
    int broadcast_buffers;
    int trace;               /* TRAINER_DDP_TRACE: print the overlap of the first steps */
    int gpu_shared;          /* GPU ranks: another rank shares this one's GPU (the testing mode) */
    int64_t steps;
    tr_accel *accel;         /* GPUs: this rank's device, else NULL */
    int direct;              /* GPUs over a device backend (nccl): collectives on device memory */
    int shard;               /* sharded update: each rank updates its slice of every bucket */
} ddp;

static void destroy(void *ctx) {
    ddp *d = ctx;
    if (!d) return;
    /* The engine, then the communicator: its thread must stop before the memory it owns (the
     * gradients or their staging, and with the sharded update the parameters) goes; the
     * replica never touches either when it is destroyed. */
    tr_grad_sync_destroy(d->sync);
    tr_comm_destroy(d->comm);
    tr_optim_destroy(d->opt);
    tr_replica_destroy(d->r);
    tr_accel_close(d->accel); /* after what holds its memory */
    tr_free(d);
}

static tr_status all_sum(void *ctx, double *v, int n) { return tr_rank_all_sum(((ddp *)ctx)->comm, v, n); }

/* Rank 0's parameters and buffers everywhere. After a checkpoint was loaded into state()'s
 * host copies (loaded), those go up to the device first, and so does the optimizer state
 * loaded on every rank. */
static tr_status sync_from(ddp *d, int loaded) {
    tr_params *P = tr_replica_host_params(d->r);
    if (loaded) TR_CHECK(tr_replica_upload(d->r)); /* replica calls: nothing to do on the CPU */
    TR_CHECK(tr_rank_broadcast(d->comm, d->accel, tr_params_data(tr_replica_params(d->r)), tr_params_data(P),
                               tr_params_numel(P), 0));
    TR_CHECK(tr_rank_broadcast_buffers(d->comm, d->accel, d->r));
    if (loaded) TR_CHECK(tr_optim_upload(d->opt));
    return TR_OK;
}

static tr_status sync(void *ctx) {
    ddp *d = ctx;
    tr_grad_sync_fresh_state(d->sync); /* every rank loaded the whole optimizer state */
    return sync_from(d, 1);
}

/* Sharded: every rank's slices of the optimizer state everywhere (before validation and
 * checkpoints; rank 0 saves the whole state). Collective; a no-op when nothing is stale, the
 * same on every rank. */
static tr_status settle(void *ctx) {
    ddp *d = ctx;
    return tr_grad_sync_gather_state(d->sync, d->opt);
}

static tr_status create(void **ctx, const tr_options *o, const tr_strategy_env *env, tr_strategy_info *info) {
    *ctx = NULL;
    ddp *d = tr_calloc(1, sizeof *d);
    if (!d) return tr_error_set(TR_ERR_NOMEM, "ddp: out of memory");
    tr_status st;
    TR_CHECK_GOTO(tr_rank_open(o, env, &d->comm, &d->accel, &d->gpu_shared), fail);
    const char *bname = tr_comm_backend_name(d->comm);
    d->rank = tr_comm_rank(d->comm);
    d->world = tr_comm_size(d->comm);
    d->broadcast_buffers = tr_options_bool(o, "broadcast_buffers");
    d->trace = getenv("TRAINER_DDP_TRACE") != NULL;
    if (d->accel) {
        d->direct = tr_comm_device_memory(d->comm);
        TR_CHECK_GOTO(tr_replica_create_on(env->models, d->accel, &d->r), fail);
    } else {
        /* The sharded update needs more than one rank and buckets of world equal slices. */
        d->shard = d->world > 1 && tr_options_bool(o, "shard_update");
        TR_CHECK_GOTO(tr_replica_create_aligned(env->models, d->shard ? 16 * (size_t)d->world : 0, &d->r), fail);
    }
    TR_CHECK_GOTO(tr_optim_create(&d->opt, &env->optim, tr_params_numel(tr_replica_host_params(d->r))), fail);
    /* What the all-reduces sum (the gradients, or on GPUs over a host backend their host
     * staging) lives in the communicator's memory: shm then reads and writes the peers'
     * buffers in place instead of copying through its staging slots. Freed with the
     * communicator. Over a device backend the device's own gradient buffer is summed. */
    void *sums = NULL;
    if (!d->direct) TR_CHECK_GOTO(tr_comm_alloc(d->comm, (tr_params_numel(tr_replica_host_params(d->r)) + 1) * sizeof(float), &sums), fail);
    if (d->accel) {
        TR_CHECK_GOTO(tr_optim_place(d->opt, d->accel), fail);
    } else {
        TR_CHECK_GOTO(tr_params_set_grad_buffer(tr_replica_host_params(d->r), sums), fail);
    }
    void *params = NULL;
    if (d->shard) { /* the parameters too: the all-gathers read the peers' in place */
        TR_CHECK_GOTO(tr_comm_alloc(d->comm, (tr_params_numel(tr_replica_host_params(d->r)) + 1) * sizeof(float), &params), fail);
        TR_CHECK_GOTO(tr_params_set_data_buffer(tr_replica_host_params(d->r), params), fail);
    }
    /* Buckets from the last parameter down; the sharded update is the engine's reduce-scatter
     * with the whole optimizer state kept (settle gathers it). */
    tr_grad_sync_config sc = {.size = sizeof sc, .name = "ddp", .comm = d->comm, .accel = d->accel, .replica = d->r,
                              .reduce = d->shard ? TR_GRAD_REDUCE_SCATTER : TR_GRAD_ALL_REDUCE,
                              .layout = TR_GRAD_BUCKETS, .first_mb = tr_options_float(o, "first_bucket_mb"),
                              .bucket_mb = tr_options_float(o, "bucket_mb"), .pad = d->shard,
                              .skip_nonfinite = env->skip_nonfinite, .grad_stage = d->accel ? sums : NULL,
                              .full_state = 1, .gather_params = 1, .wait_gathers = 1, .registry = env->registry,
                              .comm_hook = tr_options_string(o, "comm_hook")};
    TR_CHECK_GOTO(tr_grad_sync_create(&d->sync, &sc), fail);
    if (tr_options_bool(o, "sync_batchnorm")) tr_graph_set_stat_reducer(tr_replica_graph(d->r), tr_rank_all_sum, d->comm);
    TR_CHECK_GOTO(sync_from(d, 0), fail); /* rank 0's initial weights everywhere */
    *info = (tr_strategy_info){.rank = d->rank, .world = d->world, .data_rank = d->rank, .data_world = d->world};
    if (d->accel)
        snprintf(info->description, sizeof info->description, "ddp (%d ranks over %s, %s: this rank %s, %d buckets "
                 "%s%s)", d->world, bname,
                 d->gpu_shared ? "ranks sharing GPUs (a testing mode)" : "one GPU each", tr_accel_name(d->accel),
                 tr_grad_sync_count(d->sync), d->direct ? "all-reduced in device memory" : "staged through host memory",
                 tr_grad_sync_hook_name(d->sync));
    else
        snprintf(info->description, sizeof info->description, "ddp (%d ranks over %s, %d threads each, %d buckets%s%s%s)",
                 d->world, bname, tr_get_num_threads(), tr_grad_sync_count(d->sync), d->shard ? ", sharded update" : "",
                 !tr_comm_is_shared(d->comm, sums)                  ? ""
                 : d->shard && tr_comm_is_shared(d->comm, params) ? ", parameters and gradients in shared memory"
                                                                   : ", gradients in shared memory",
                 tr_grad_sync_hook_name(d->sync));
    *ctx = d;
    return TR_OK;
fail:
    destroy(d);
    return st;
}

static tr_status micro(ddp *d, const tr_micro_batch *mb, double *loss) {
    if (mb->first && d->broadcast_buffers) TR_CHECK(tr_rank_broadcast_buffers(d->comm, d->accel, d->r));
    tr_model_out out;
    TR_CHECK(tr_replica_forward(d->r, mb->hb, 0, mb->hb->size, mb->normaliser, mb->step, 1, 1, &out));
    if (mb->first) TR_CHECK(tr_graph_write_param_grads(tr_replica_graph(d->r))); /* no zero-fill pass */
    tr_grad_sync_begin(d->sync, mb->last); /* the last micro-batch's backward all-reduces */
    TR_CHECK(tr_backward(tr_replica_graph(d->r), out.loss, NULL));
    float v;
    TR_CHECK(tr_accel_download(d->accel, &v, out.loss->data, sizeof v));
    *loss = v;
    return TR_OK;
}

/* A micro-batch; one that fails breaks the communicator everywhere (its peers would wait in
 * the buckets this rank never issues until their deadline) and drains what is in flight; the
 * message stays this one's, a failed reduction's before the abort it caused
 * (tr_grad_sync_broke). */
static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    ddp *d = ctx;
    tr_status st = micro(d, mb, loss);
    return st == TR_OK ? TR_OK : tr_grad_sync_broke(d->sync, st);
}

static tr_status step(ddp *d, double lr, double max_norm, double *grad_norm) {
    if (d->trace && d->steps < 5) {
        int issued, done;
        tr_grad_sync_trace(d->sync, &issued, &done);
        fprintf(stderr, "ddp trace rank %d step %lld: %d of %d bucket %s started during backward, %d already "
                        "finished when it returned\n", d->rank, (long long)d->steps, issued, tr_grad_sync_count(d->sync),
                d->shard ? "reduce-scatters" : "all-reduces", done);
    }
    d->steps++;
    tr_status st = tr_grad_sync_end(d->sync); /* buckets whose parameters never reported (none should) */
    if (st != TR_OK) return tr_grad_sync_broke(d->sync, st);
    return tr_grad_sync_step(d->sync, d->opt, lr, max_norm, grad_norm);
}

/* The step; under trainer.profile the device's update is waited for, so that it counts in the
 * step's regions (else the next step's first region would wait for it). */
static tr_status optim_step(void *ctx, double lr, double max_norm, double *grad_norm) {
    ddp *d = ctx;
    tr_status st = step(d, lr, max_norm, grad_norm);
    if (st == TR_OK && d->accel && tr_profile_current()) st = tr_accel_sync(d->accel);
    return st;
}

static tr_status nonfinite(void *ctx, double *flags, int n, char *activation, size_t size) {
    ddp *d = ctx;
    (void)n;
    tr_replica_find_nonfinite(d->r, flags, activation, size);
    return TR_OK;
}

static tr_status forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    ddp *d = ctx;
    TR_CHECK(tr_replica_forward(d->r, hb, 0, hb->size, 1.0, 0, 0, with_y, out));
    return tr_replica_outputs_to_host(d->r, out);
}

static tr_status state(void *ctx, tr_params **P, tr_optim **opt) {
    ddp *d = ctx;
    TR_CHECK(tr_replica_download(d->r)); /* on GPUs: the host copies made current */
    TR_CHECK(tr_optim_download(d->opt));
    *P = tr_replica_host_params(d->r);
    *opt = d->opt;
    return TR_OK;
}

static tr_status memory(void *ctx, tr_strategy_memory *m) {
    ddp *d = ctx;
    *m = (tr_strategy_memory){0};
    tr_replica_memory(d->r, d->opt, m);
    return TR_OK;
}

/* `trainer plan`: every rank holds a whole replica and computes its share of each batch. */
static tr_status estimate(const tr_options *o, const tr_strategy_estimate_env *env, tr_strategy_estimate *out) {
    out->world = tr_rank_processes(o, env->devices);
    out->rank_batch = (env->global_batch + out->world - 1) / out->world;
    /* The sharded update pads every parameter to 16 x world floats (GPU ranks do not shard,
     * but the padding is at most 16 x world floats a parameter either way). */
    size_t align = out->world > 1 && tr_options_bool(o, "shard_update") ? 16 * (size_t)out->world : 0;
    return tr_estimate_replica(env, align, out->rank_batch, &out->memory);
}

static const tr_option_spec opts[] = {
    TR_RANK_STRATEGY_OPTIONS,
    {.key = "bucket_mb", .type = TR_OPTION_FLOAT, .default_value = "25", .min = 0.001, .max = 65536,
     .doc = "gradient bucket size in MiB (all-reduced as soon as backward has filled it)"},
    {.key = "first_bucket_mb", .type = TR_OPTION_FLOAT, .default_value = "1", .min = 0.001, .max = 65536,
     .doc = "size of the first bucket (the last layers' gradients), small so communication starts early"},
    TR_COMM_HOOK_OPTION,
    {.key = "shard_update", .type = TR_OPTION_BOOL, .default_value = "true",
     .doc = "CPU ranks: reduce-scatter each bucket, update this rank's slice, all-gather the parameters (ZeRO-1's "
            "update: the same math up to rounding, 1/world of the optimizer's work per rank, the whole state kept); "
            "false: all-reduce, every rank updates all"},
};

static const tr_strategy_ops ops = {
    .create = create,
    .destroy = destroy,
    .train_micro = train_micro,
    .optim_step = optim_step,
    .forward = forward,
    .state = state,
    .sync = sync,
    .all_sum = all_sum,
    .processes = tr_rank_processes,
    .memory = memory,
    .probe = tr_rank_probe, /* wherever its backend was found, on CPU ranks or GPU ranks */
    .estimate = estimate,
    .nonfinite = nonfinite,
    .settle = settle,
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_STRATEGY,
    .name = "ddp",
    .version = "0.1.0",
    .description = "distributed data parallel: one process per rank, bucketed all-reduce overlapping backward",
    .options = opts,
    .n_options = sizeof opts / sizeof opts[0],
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
