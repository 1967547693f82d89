/* Strategy `ddp`: distributed data parallel, one process per rank (torch DDP's design). The
 * one idea: gradient buckets in backward's order, each all-reduced as soon as its last
 * gradient is ready, so communication overlaps the rest of backward; optionally the update
 * sharded as ZeRO stage 1. The algorithm, its GPU paths and options: docs/strategies.md,
 * "ddp". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/memory.h"
#include "trainer/profile.h"
#include "trainer/rank.h"
#include "trainer/runtime.h"
#include "trainer/strategy.h"

enum { MAX_BUCKETS = 4096 };

typedef struct bucket {
    size_t lo, hi;        /* float range of the flat gradient buffer */
    size_t len;           /* sharded update: each rank's slice, (hi - lo) / world */
    int params;           /* parameters in it */
    int pending;          /* not yet final in this backward */
    tr_comm_work *work;   /* its all-reduce, or sharded: its reduce-scatter */
    tr_comm_work *gather; /* sharded: the all-gather of its updated parameters */
} bucket;

typedef struct ddp {
    tr_replica *r;
    tr_optim *opt;
    tr_comm *comm;
    int rank, world;
    bucket *buckets;
    int n_buckets;
    int *bucket_of;        /* parameter -> bucket */
    int next_issue;        /* buckets issued so far in this step (in index order) */
    int syncing;           /* this backward is the step's last micro-batch */
    int broadcast_buffers;
    tr_status hook_status; /* an issue failure inside the hook, reported after backward */
    char hook_msg[512];
    int issued_in_backward;  /* buckets whose all-reduce (reduce-scatter) started before backward returned */
    int issued_total;
    int trace;               /* TRAINER_DDP_TRACE: print the overlap of the first steps */
    int gpu_shared;          /* GPU ranks: another rank shares this one's GPU (the testing mode) */
    int skip_nonfinite;      /* trainer.on_nan skip: no bucket is updated before the norm is known */
    int64_t steps;
    tr_accel *accel;         /* GPUs: this rank's device, else NULL */
    int direct;              /* GPUs over a device backend (nccl): collectives on device memory */
    float *stage;            /* GPUs over a host backend: host staging of the flat gradient buffer (the communicator's memory) */
    int shard;               /* sharded update: each rank updates its slice of every bucket */
    int state_stale;         /* sharded: the others' slices of the optimizer state are old here */
} ddp;

/* Sharded update: where this rank's slice of bucket b starts in the flat buffers. */
static size_t slice_at(const ddp *d, const bucket *b) { return b->lo + (size_t)d->rank * b->len; }

static void destroy(void *ctx) {
    ddp *d = ctx;
    if (!d) return;
    /* The communicator first: its thread must stop before the memory it owns (the gradients
     * or their staging, and with the sharded update the parameters) goes; the replica never
     * touches either when it is destroyed. */
    tr_comm_destroy(d->comm);
    tr_optim_destroy(d->opt);
    tr_replica_destroy(d->r);
    tr_accel_close(d->accel); /* after what holds its memory */
    tr_free(d->buckets);
    tr_free(d->bucket_of);
    tr_free(d);
}

static int processes(const tr_options *opts, int devices) {
    (void)opts;
    return devices > 1 ? devices : 1;
}

/* Issues every ready bucket from next_issue on, in index order. */
static void issue_ready(ddp *d) {
    /* On a device over a host backend the sums are made in host staging; else in place (the
     * device's gradients, or the CPU's). */
    int staged = d->accel && !d->direct;
    float *g = staged ? d->stage : tr_params_grad(tr_replica_params(d->r));
    while (d->next_issue < d->n_buckets && d->buckets[d->next_issue].pending == 0) {
        bucket *b = &d->buckets[d->next_issue];
        if (d->hook_status == TR_OK) {
            tr_status st = staged ? tr_accel_download(d->accel, g + b->lo, tr_params_grad(tr_replica_params(d->r)) + b->lo,
                                                      (b->hi - b->lo) * sizeof *g)
                                    : TR_OK;
            if (st == TR_OK && d->shard)
                st = tr_comm_ireduce_scatter(d->comm, g + b->lo, g + slice_at(d, b), b->len, TR_F32,
                                             TR_RED_SUM, &b->work);
            else if (st == TR_OK)
                st = tr_comm_iall_reduce(d->comm, g + b->lo, g + b->lo, b->hi - b->lo, TR_F32, TR_RED_SUM, &b->work);
            if (st != TR_OK) {
                d->hook_status = st;
                snprintf(d->hook_msg, sizeof d->hook_msg, "%s", tr_error_msg());
                b->work = NULL;
            }
        }
        d->next_issue++;
        d->issued_total++;
    }
}

static void grad_ready(void *user, int param) {
    ddp *d = user;
    if (!d->syncing || param < 0) return;
    bucket *b = &d->buckets[d->bucket_of[param]];
    if (b->pending > 0 && --b->pending == 0) {
        int before = d->issued_total;
        issue_ready(d);
        d->issued_in_backward += d->issued_total - before;
    }
}

/* Buckets over parameters in reverse registration order: the first holds up to first_mb,
 * the others up to bucket_mb; each is one contiguous range of the flat buffer. Sharded, a
 * bucket ends where the next parameter's aligned start would be (zero padding), so its
 * length is a multiple of 16 x world. */
static tr_status make_buckets(ddp *d, double first_mb, double bucket_mb) {
    tr_params *P = tr_replica_host_params(d->r);
    int np = tr_params_count(P);
    d->bucket_of = tr_calloc((size_t)(np ? np : 1), sizeof *d->bucket_of);
    d->buckets = tr_calloc(MAX_BUCKETS, sizeof *d->buckets);
    if (!d->bucket_of || !d->buckets) return tr_error_set(TR_ERR_NOMEM, "ddp: out of memory for buckets");
    size_t cap = (size_t)(first_mb * 1048576.0 / 4), used = 0, align = tr_params_align(P);
    int nb = 0;
    for (int p = np - 1; p >= 0; p--) {
        size_t lo = tr_params_offset(P, p), hi = lo + (size_t)tr_tensor_numel(tr_params_get(P, p));
        bucket *b = &d->buckets[nb];
        if (b->params > 0 && used + (hi - lo) > cap && nb + 1 < MAX_BUCKETS) {
            nb++;
            b = &d->buckets[nb];
            used = 0;
            cap = (size_t)(bucket_mb * 1048576.0 / 4);
        }
        if (b->params == 0) b->hi = d->shard ? (hi + align - 1) / align * align : hi;
        b->lo = lo; /* going down the buffer: the bucket grows toward lower offsets */
        b->params++;
        used += hi - lo;
        d->bucket_of[p] = nb;
    }
    d->n_buckets = np ? nb + 1 : 0; /* the all-reduce skips the padding between buckets (zero) */
    for (int i = 0; i < d->n_buckets; i++) d->buckets[i].len = (d->buckets[i].hi - d->buckets[i].lo) / (size_t)d->world;
    return TR_OK;
}

static tr_status all_sum(void *ctx, double *v, int n) {
    ddp *d = ctx;
    return tr_comm_all_reduce(d->comm, v, v, (size_t)n, TR_F64, TR_RED_SUM);
}

/* Rank 0's buffers (batch-norm running statistics) everywhere (on GPUs over a host backend
 * through their host copies). */
static tr_status broadcast_buffers(ddp *d) {
    tr_params *P = tr_replica_host_params(d->r);
    return tr_rank_broadcast(d->comm, d->accel, tr_params_buffers_data(tr_replica_params(d->r)),
                             tr_params_buffers_data(P), tr_params_buffers_numel(P), 0);
}

/* Rank 0's parameters and buffers everywhere. After a checkpoint was loaded into state()'s
 * host copies (loaded), those go up to the device first, and so does the optimizer state
 * loaded on every rank. */
static tr_status sync_from(ddp *d, int loaded) {
    tr_params *P = tr_replica_host_params(d->r);
    if (loaded) TR_CHECK(tr_replica_upload(d->r)); /* replica calls: nothing to do on the CPU */
    TR_CHECK(tr_rank_broadcast(d->comm, d->accel, tr_params_data(tr_replica_params(d->r)), tr_params_data(P),
                               tr_params_numel(P), 0));
    TR_CHECK(broadcast_buffers(d));
    if (loaded) TR_CHECK(tr_optim_upload(d->opt));
    return TR_OK;
}

static tr_status sync(void *ctx) {
    ddp *d = ctx;
    d->state_stale = 0; /* every rank loaded the whole optimizer state */
    return sync_from(d, 1);
}

/* Sharded: every rank's slices of the optimizer state everywhere (before validation and
 * checkpoints; rank 0 saves the whole state). Collective; a no-op when nothing is stale, the
 * same on every rank. */
static tr_status settle(void *ctx) {
    ddp *d = ctx;
    if (!d->state_stale) return TR_OK;
    for (int k = 0; k < tr_optim_state_count(d->opt); k++) {
        float *m = tr_optim_state(d->opt, k);
        for (int i = 0; i < d->n_buckets; i++) {
            const bucket *b = &d->buckets[i];
            TR_CHECK(tr_comm_all_gather(d->comm, m + slice_at(d, b), m + b->lo, b->len, TR_F32));
        }
    }
    d->state_stale = 0;
    return TR_OK;
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
    d->skip_nonfinite = env->skip_nonfinite;
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
        d->stage = sums;
    } else {
        TR_CHECK_GOTO(tr_params_set_grad_buffer(tr_replica_host_params(d->r), sums), fail);
    }
    void *params = NULL;
    if (d->shard) { /* the parameters too: the all-gathers read the peers' in place */
        TR_CHECK_GOTO(tr_comm_alloc(d->comm, (tr_params_numel(tr_replica_host_params(d->r)) + 1) * sizeof(float), &params), fail);
        TR_CHECK_GOTO(tr_params_set_data_buffer(tr_replica_host_params(d->r), params), fail);
    }
    TR_CHECK_GOTO(make_buckets(d, tr_options_float(o, "first_bucket_mb"), tr_options_float(o, "bucket_mb")), fail);
    tr_graph_set_grad_hook(tr_replica_graph(d->r), grad_ready, d);
    if (tr_options_bool(o, "sync_batchnorm")) tr_graph_set_stat_reducer(tr_replica_graph(d->r), all_sum, d);
    TR_CHECK_GOTO(sync_from(d, 0), fail); /* rank 0's initial weights everywhere */
    *info = (tr_strategy_info){.rank = d->rank, .world = d->world, .data_rank = d->rank, .data_world = d->world};
    if (d->accel)
        snprintf(info->description, sizeof info->description, "ddp (%d ranks over %s, %s: this rank %s, %d buckets "
                 "%s)", d->world, bname,
                 d->gpu_shared ? "ranks sharing GPUs (a testing mode)" : "one GPU each", tr_accel_name(d->accel),
                 d->n_buckets, d->direct ? "all-reduced in device memory" : "staged through host memory");
    else
        snprintf(info->description, sizeof info->description, "ddp (%d ranks over %s, %d threads each, %d buckets%s%s)",
                 d->world, bname, tr_get_num_threads(), d->n_buckets, d->shard ? ", sharded update" : "",
                 !tr_comm_is_shared(d->comm, sums)                  ? ""
                 : d->shard && tr_comm_is_shared(d->comm, params) ? ", parameters and gradients in shared memory"
                                                                   : ", gradients in shared memory");
    *ctx = d;
    return TR_OK;
fail:
    destroy(d);
    return st;
}

static tr_status micro(ddp *d, const tr_micro_batch *mb, double *loss) {
    if (mb->first && d->broadcast_buffers) TR_CHECK(broadcast_buffers(d));
    tr_model_out out;
    TR_CHECK(tr_replica_forward(d->r, mb->hb, 0, mb->hb->size, mb->normaliser, mb->step, 1, 1, &out));
    if (mb->first) TR_CHECK(tr_graph_write_param_grads(tr_replica_graph(d->r))); /* no zero-fill pass */
    d->syncing = mb->last;
    if (mb->last) {
        for (int i = 0; i < d->n_buckets; i++) d->buckets[i].pending = d->buckets[i].params;
        d->next_issue = 0;
        d->hook_status = TR_OK;
        d->issued_in_backward = d->issued_total = 0;
    }
    tr_status st = tr_backward(tr_replica_graph(d->r), out.loss, NULL);
    d->syncing = 0;
    TR_CHECK(st);
    float v;
    TR_CHECK(tr_accel_download(d->accel, &v, out.loss->data, sizeof v));
    *loss = v;
    return TR_OK;
}

/* A micro-batch; one that fails breaks the communicator everywhere (its peers would wait in
 * the buckets this rank never issues until their deadline; the message stays this one's). */
static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    ddp *d = ctx;
    tr_status st = micro(d, mb, loss);
    if (st != TR_OK) tr_comm_abort(d->comm);
    return st;
}

/* Sharded update of bucket b: this rank's slice updated (unless apply is 0: a non-finite
 * slice), then the bucket's parameters all-gathered, which every rank issues for every bucket
 * in the same order whatever its slice held. */
static tr_status update_slice(ddp *d, bucket *b, float *p, const float *g, int apply, double lr) {
    size_t s0 = slice_at(d, b);
    if (apply) TR_CHECK(tr_optim_step_part(d->opt, p, g, s0, s0 + b->len, lr));
    return tr_comm_iall_gather(d->comm, p + s0, p + b->lo, b->len, TR_F32, &b->gather);
}

/* Waits out *w when one is in flight (a collective is always finished, even after an
 * error) and clears it: st, or the wait's status when st was TR_OK. */
static tr_status wait_work(tr_comm_work **w, tr_status st) {
    if (!*w) return st;
    tr_status r = tr_comm_wait(*w);
    *w = NULL;
    return st == TR_OK ? r : st;
}

/* Sharded update: this rank's slice of each bucket, as the full step would update it, then the
 * bucket's parameters all-gathered. Without clipping (and without on_nan skip) a slice is
 * updated and its bucket's gather issued as soon as its reduce-scatter is done; else once the
 * global norm is known. A non-finite slice is never applied; a non-finite global norm leaves
 * the step out (with clipping or skip nothing was applied: no gathers are needed). The
 * gradients nonfinite() then reads are summed only in each rank's own slices: a value that
 * made a sum non-finite shows in its owner's slice, and the trainer adds every rank's flags. */
static tr_status step_sharded(ddp *d, tr_status st, double lr, double max_norm, double *grad_norm) {
    float *p = tr_params_data(tr_replica_host_params(d->r)), *g = tr_params_grad(tr_replica_host_params(d->r));
    int overlap = max_norm <= 0 && !d->skip_nonfinite, gathers = 0;
    double sumsq = 0;
    for (int i = 0; i < d->n_buckets; i++) {
        bucket *b = &d->buckets[i];
        tr_profile_enter("strategy", "ddp: waiting for reduce-scatters");
        st = wait_work(&b->work, st);
        if (st != TR_OK) continue;
        tr_profile_enter("strategy", "ddp: update");
        double s = tr_grad_sumsq(g + slice_at(d, b), b->len);
        sumsq += s;
        if (overlap) st = update_slice(d, b, p, g, isfinite(s), lr);
        gathers |= overlap;
    }
    if (st == TR_OK) st = tr_comm_all_reduce(d->comm, &sumsq, &sumsq, 1, TR_F64, TR_RED_SUM);
    if (st == TR_OK && !overlap && isfinite(sumsq)) {
        for (int i = 0; i < d->n_buckets && st == TR_OK; i++) {
            bucket *b = &d->buckets[i];
            if (max_norm > 0) tr_clip_grad_norm(g + slice_at(d, b), b->len, max_norm, sumsq);
            st = update_slice(d, b, p, g, 1, lr);
        }
        gathers = 1;
    }
    tr_profile_enter("strategy", "ddp: waiting for all-gathers");
    for (int i = 0; i < d->n_buckets; i++) {
        bucket *b = &d->buckets[i];
        st = wait_work(&b->gather, st);
    }
    d->state_stale |= gathers;
    if (st != TR_OK) {
        /* This rank may have left out collectives its peers issued (a failed update): break
         * the communicator everywhere rather than leave them waiting for the deadline (the
         * error message stays st's). */
        tr_comm_abort(d->comm);
        return st;
    }
    if (isfinite(sumsq)) tr_optim_step_done(d->opt);
    *grad_norm = sqrt(sumsq);
    return TR_OK;
}

static tr_status step(ddp *d, double lr, double max_norm, double *grad_norm) {
    if (d->trace && d->steps < 5) {
        int done = 0;
        for (int i = 0; i < d->n_buckets; i++) {
            int f = 0;
            if (d->buckets[i].work) tr_comm_test(d->buckets[i].work, &f);
            done += f;
        }
        fprintf(stderr, "ddp trace rank %d step %lld: %d of %d bucket %s started during backward, %d already "
                        "finished when it returned\n", d->rank, (long long)d->steps, d->issued_in_backward, d->n_buckets,
                d->shard ? "reduce-scatters" : "all-reduces", done);
    }
    d->steps++;
    /* Buckets whose parameters never reported (none should) go now, in order. */
    for (int i = d->next_issue; i < d->n_buckets; i++) d->buckets[i].pending = 0;
    issue_ready(d);
    tr_status st = d->hook_status == TR_OK ? TR_OK : tr_error_set(d->hook_status, "%s", d->hook_msg);
    if (d->shard) return step_sharded(d, st, lr, max_norm, grad_norm);
    tr_params *P = tr_replica_params(d->r); /* where the replica's buffers live */
    float *p = tr_params_data(P), *g = tr_params_grad(P);
    size_t n = tr_params_numel(tr_replica_host_params(d->r));
    /* Without clipping each bucket is updated as soon as its sum arrives, overlapping the
     * optimizer with the all-reduces still running; with clipping the norm needs them all,
     * and so does on_nan skip (a step is left out whole). A non-finite bucket is never
     * applied. */
    int overlap = max_norm <= 0 && !d->skip_nonfinite;
    double sumsq = 0;
    for (int i = 0; i < d->n_buckets; i++) {
        bucket *b = &d->buckets[i];
        if (b->work) {
            tr_profile_enter("strategy", "ddp: waiting for all-reduces");
            st = wait_work(&b->work, st);
            if (st == TR_OK && d->accel && !d->direct) /* the sum, back onto the device */
                st = tr_accel_upload(d->accel, g + b->lo, d->stage + b->lo, (b->hi - b->lo) * sizeof *g);
        }
        if (overlap && st == TR_OK) {
            tr_profile_enter("strategy", "ddp: update");
            double s = tr_accel_grad_sumsq(d->accel, g + b->lo, b->hi - b->lo);
            sumsq += s;
            if (isfinite(s)) st = tr_optim_step_part(d->opt, p, g, b->lo, b->hi, lr);
        }
    }
    TR_CHECK(st);
    if (overlap) {
        if (isfinite(sumsq)) tr_optim_step_done(d->opt);
        *grad_norm = sqrt(sumsq);
        return TR_OK;
    }
    tr_profile_enter("strategy", "ddp: update");
    sumsq = tr_accel_grad_sumsq(d->accel, g, n);
    *grad_norm = sqrt(sumsq);
    if (!isfinite(sumsq)) return TR_OK; /* left out: the trainer stops or skips the step */
    if (max_norm > 0) tr_accel_clip_grad_norm(d->accel, g, n, max_norm, sumsq);
    return tr_optim_step(d->opt, p, g, n, lr);
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
    out->world = processes(o, env->devices);
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
    .processes = processes,
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
