/* Strategy `sharded`: ZeRO stages 1, 2 and 3 (FSDP's SHARD_GRAD_OP and FULL_SHARD), one
 * process per rank. The one idea: the synchronisation engine's units (trainer/grad_sync.h),
 * whole parameters split into `world` equal slices in place, rank r owning slice r of each;
 * this file adds what the stages shard: gradient buffers (2-3) and gathered parameters (3).
 * The stages, the unit schedule and the GPU paths: docs/strategies.md, "sharded". */
#include <stdio.h>

#include "trainer/grad_sync.h"
#include "trainer/memory.h"
#include "trainer/rank.h"
#include "trainer/runtime.h"
#include "trainer/strategy.h"

#include "pool.h"

enum { RELEASED = 0, GATHERING = 1, GATHERED = 2 };

/* A unit is one of the engine's buckets (tr_grad_sync_at: its range, parameters and slice);
 * this is what the stages add to it. */
typedef struct unit {
    int state;             /* stage 3: RELEASED, GATHERING, GATHERED (stages 1-2: GATHERED) */
    int pslot, gslot;      /* stages 2-3: the pool buffers holding its parameters / gradients (-1: none) */
    uint64_t last_op;      /* stage 3: the last op that read it */
} unit;

typedef struct sharded {
    tr_replica *r;
    tr_optim *opt;             /* over the shard */
    tr_comm *comm;
    tr_grad_sync *sync;        /* the units, their reduce-scatters and gathers, the update */
    tr_accel *accel;           /* GPUs: this rank's device, else NULL */
    int staged;                /* GPUs over a host backend: collectives through the host P's buffers */
    int gpu_shared;            /* GPUs: another rank of this host has this one's (the testing mode) */
    int rank, world, stage, prefetch, broadcast_buffers;
    unit units[TR_GRAD_MAX_UNITS];
    int n_units;
    size_t S;                  /* shard length (floats) */
    float *ps;                 /* stage 3: the parameter shard */
    float *gs;                 /* stages 2-3: the gradient shard */
    pool params, grads;        /* stage 3 / stages 2-3 */
    int first_micro;           /* stages 2-3: the shard is set by this backward, not added to */
    int current;               /* stage 3: the unit the last op read (-1: none) */
    tr_ckpt_piece *pieces;     /* the shards op's answer */
    int n_pieces;
} sharded;

/* The full flat buffers the replica's ops use (on a device: NULL where the stage shards them,
 * F at stage 3 and G at stages 2-3; on the CPU their pages are given back instead). */
static float *F(sharded *z) { return tr_params_data(tr_replica_params(z->r)); }
static float *G(sharded *z) { return tr_params_grad(tr_replica_params(z->r)); }
static const tr_grad_sync_range *at(sharded *z, int i) { return tr_grad_sync_at(z->sync, i); }
static float *slice(sharded *z, float *base, int i) { return base + at(z, i)->lo + (size_t)z->rank * at(z, i)->len; }
/* The host P's flat buffers: on GPUs over a host backend the collectives' staging. */
static float *hostF(sharded *z) { return tr_params_data(tr_replica_host_params(z->r)); }
static float *hostG(sharded *z) { return tr_params_grad(tr_replica_host_params(z->r)); }
static size_t bytes(size_t floats) { return floats * sizeof(float); }

/* Points unit i's parameter tensors' data (or grad) at base + their offset in the unit
 * (base NULL: at nothing), and tells the engine where the unit is now (NULL: at home). */
static void point(sharded *z, int i, float *base, int grads) {
    tr_params *P = tr_replica_params(z->r);
    const tr_grad_sync_range *u = at(z, i);
    for (int p = u->p0; p < u->p0 + u->np; p++) {
        tr_tensor *t = tr_params_get(P, p);
        float *to = base ? base + (tr_params_offset(P, p) - u->lo) : NULL;
        if (grads) t->grad = to;
        else t->data = to;
    }
    if (grads) tr_grad_sync_set_grads(z->sync, i, z->units[i].gslot >= 0 ? base : NULL);
    else tr_grad_sync_set_params(z->sync, i, z->units[i].pslot >= 0 ? base : NULL);
}

/* Where a released unit's tensors point: the full buffer (base F or G), or nothing where
 * the device holds none. */
static float *home(sharded *z, int i, float *base) { return base ? base + at(z, i)->lo : NULL; }

/* ---- parameters (stage 3: gather and release; stages 1-2: wait for the step's gather) ---- */

static tr_status wait_gather(sharded *z, int i) {
    TR_CHECK(tr_grad_sync_wait_gather(z->sync, i));
    z->units[i].state = GATHERED;
    return TR_OK;
}

static tr_status issue_gather(sharded *z, int i) {
    unit *u = &z->units[i];
    int k;
    TR_CHECK(pool_get(&z->params, at(z, i)->hi - at(z, i)->lo, "a unit's gathered parameters", &k));
    u->pslot = k;
    u->state = GATHERING;
    point(z, i, z->params.buf[k], 0);
    return tr_grad_sync_gather(z->sync, i);
}

static tr_status release(sharded *z, int i) {
    unit *u = &z->units[i];
    if (u->state == RELEASED) return TR_OK;
    TR_CHECK(wait_gather(z, i));
    z->params.busy[u->pslot] = 0;
    u->pslot = -1;
    point(z, i, home(z, i, F(z)), 0); /* the flat buffer: never touched at stage 3 */
    u->state = RELEASED;
    return TR_OK;
}

static tr_status release_all(sharded *z) {
    for (int i = 0; i < z->n_units; i++) TR_CHECK(release(z, i));
    z->current = -1;
    return TR_OK;
}

/* Stage 3, the engine's `issued`: backward is done with the unit's parameters. */
static tr_status issued(void *user, int i) { return release(user, i); }

/* ---- gradients (stages 2-3) ---- */

/* A zeroed pool buffer for the unit's gradients, before backward writes any (and the
 * engine's `prepare`: a unit backward never reached still sends its zero share). */
static tr_status grad_buffer(void *user, int i) {
    sharded *z = user;
    unit *u = &z->units[i];
    size_t n = at(z, i)->hi - at(z, i)->lo;
    if (u->gslot >= 0) return TR_OK;
    TR_CHECK(tr_grad_sync_finish(z->sync, 0, 0)); /* buffers of reduce-scatters already done come back */
    int k = -1;
    for (int j = 0; j < z->grads.n && k < 0; j++)
        if (!z->grads.busy[j] && z->grads.cap[j] >= n) k = j;
    /* None fits: wait for the oldest reduce-scatter in flight rather than grow the pool. */
    int oldest = tr_grad_sync_in_flight(z->sync);
    if (k < 0 && oldest >= 0) TR_CHECK(tr_grad_sync_finish(z->sync, oldest, 1));
    TR_CHECK(pool_get(&z->grads, n, "a unit's gradients", &k));
    u->gslot = k;
    point(z, i, z->grads.buf[k], 1);
    return TR_OK;
}

/* The engine's `reduced`: the rank's slice of the unit's sum joins the gradient shard, and
 * the unit's buffer is cleared for its next user. */
static tr_status reduced(void *user, int i) {
    sharded *z = user;
    unit *u = &z->units[i];
    if (u->gslot < 0) return TR_OK; /* no buffer: its issue failed (reported) */
    const tr_grad_sync_range *r = at(z, i);
    float *buf = z->grads.buf[u->gslot], *src = buf + (size_t)z->rank * r->len, *dst = z->gs + r->soff;
    tr_status st = TR_OK;
    if (z->first_micro) tr_accel_copy(z->accel, dst, src, bytes(r->len));
    else st = tr_accel_add(z->accel, dst, src, r->len);
    tr_accel_zero(z->accel, buf, bytes(r->hi - r->lo));
    z->grads.busy[u->gslot] = 0;
    u->gslot = -1;
    point(z, i, home(z, i, G(z)), 1); /* the flat buffer: never touched at stages 2-3 */
    return st;
}

/* The graph's parameter-use hook: the parameter's unit must be whole (stage 3: gathered;
 * stages 1-2: the step's all-gather waited) and, in backward at stages 2-3, have a gradient
 * buffer. */
static tr_status use(void *user, int param, int in_backward, uint64_t op) {
    sharded *z = user;
    int ui = tr_grad_sync_bucket_of(z->sync, param);
    unit *u = &z->units[ui];
    if (in_backward && z->stage >= 2) TR_CHECK(grad_buffer(z, ui));
    if (z->stage < 3) return wait_gather(z, ui);
    if (u->state == RELEASED) TR_CHECK(issue_gather(z, ui));
    TR_CHECK(wait_gather(z, ui));
    u->last_op = op;
    if (ui == z->current) return TR_OK;
    z->current = ui;
    int next = in_backward ? ui - 1 : ui + 1;
    /* Forward: units run in order; keep this one, the prefetched one and those this op reads
     * too (a weight and its bias may sit in two units). */
    if (!in_backward)
        for (int i = 0; i < z->n_units; i++)
            if (i != ui && i != next && z->units[i].last_op != op) TR_CHECK(release(z, i));
    if (z->prefetch && next >= 0 && next < z->n_units && z->units[next].state == RELEASED)
        TR_CHECK(issue_gather(z, next));
    return TR_OK;
}

/* ---- setup ---- */

static tr_status all_sum(void *ctx, double *v, int n) { return tr_rank_all_sum(((sharded *)ctx)->comm, v, n); }

/* Makes every rank's view whole again from the shards, after a checkpoint was loaded into
 * shards()' pieces (on GPUs the host P and the optimizer's host copies: uploaded first; the
 * buffers too, then rank 0's go everywhere): stages 1-2 all-gather every unit in place
 * (waited lazily by the next forward); stage 3 has nothing more to do. */
static tr_status sync(void *ctx) {
    sharded *z = ctx;
    if (z->accel) {
        for (int i = 0; i < z->n_units; i++)
            TR_CHECK(tr_accel_upload(z->accel, tr_grad_sync_param_slice(z->sync, i), slice(z, hostF(z), i),
                                     bytes(at(z, i)->len)));
        TR_CHECK(tr_optim_upload(z->opt));
        TR_CHECK(tr_accel_upload(z->accel, tr_params_buffers_data(tr_replica_params(z->r)),
                                 tr_params_buffers_data(tr_replica_host_params(z->r)), bytes(tr_params_buffers_numel(tr_replica_host_params(z->r)))));
    }
    TR_CHECK(tr_rank_broadcast_buffers(z->comm, z->accel, z->r));
    if (z->stage == 3) return TR_OK;
    for (int i = 0; i < z->n_units; i++) {
        TR_CHECK(wait_gather(z, i));
        TR_CHECK(tr_grad_sync_gather(z->sync, i));
    }
    return TR_OK;
}

static void destroy(void *ctx) {
    sharded *z = ctx;
    if (!z) return;
    /* The engine (it waits for what is in flight), then the communicator: its thread must stop
     * before the memory it owns (the host P's buffers when staged) goes; the replica never
     * touches them when it is destroyed. */
    tr_grad_sync_destroy(z->sync);
    tr_comm_destroy(z->comm);
    tr_optim_destroy(z->opt);
    tr_accel_free(z->accel, z->ps, bytes(z->S));
    tr_accel_free(z->accel, z->gs, bytes(z->S));
    pool_free(&z->params);
    pool_free(&z->grads);
    tr_replica_destroy(z->r);
    tr_accel_close(z->accel); /* after what holds its memory */
    tr_free(z->pieces);
    tr_free(z);
}

/* A shard of S floats in the replica's memory (zeroed). */
static tr_status shard_alloc(sharded *z, float **out, const char *what) {
    tr_status st = tr_accel_alloc(z->accel, bytes(z->S), (void **)out);
    if (st != TR_OK) {
        tr_error_prefix("sharded: the %s shard: ", what);
        return st;
    }
    tr_accel_zero(z->accel, *out, bytes(z->S));
    return TR_OK;
}

/* The initial weights, this rank's slices only (tr_params_init_range: every strategy's
 * values), where the step keeps them (on a device through the host P's); stages 1-2 then
 * all-gather them, waited by the first forward. No rank holds or computes the whole model. */
static tr_status init_slices(sharded *z) {
    tr_params *P = tr_replica_host_params(z->r);
    tr_status st = TR_OK;
    for (int i = 0; i < z->n_units && st == TR_OK; i++) {
        size_t a = at(z, i)->lo + (size_t)z->rank * at(z, i)->len, len = at(z, i)->len;
        float *mine = tr_grad_sync_param_slice(z->sync, i), *dst = z->accel ? slice(z, hostF(z), i) : mine;
        st = tr_params_init_range(P, a, a + len, dst);
        if (st == TR_OK && z->accel) st = tr_accel_upload(z->accel, mine, dst, bytes(len));
    }
    tr_params_init_done(P);
    for (int i = 0; i < z->n_units && st == TR_OK && z->stage < 3; i++) st = tr_grad_sync_gather(z->sync, i);
    return st;
}

static tr_status create(void **ctx, const tr_options *o, const tr_strategy_env *env, tr_strategy_info *info) {
    *ctx = NULL;
    sharded *z = tr_calloc(1, sizeof *z);
    if (!z) return tr_error_set(TR_ERR_NOMEM, "sharded: out of memory");
    z->current = -1;
    tr_status st;
    TR_CHECK_GOTO(tr_rank_open(o, env, &z->comm, &z->accel, &z->gpu_shared), fail);
    z->params.accel = z->grads.accel = z->accel;
    z->stage = (int)tr_options_int(o, "stage");
    /* Stages 2-3 add each micro-batch's gradient slice into the shard (tr_accel_add). */
    if (z->stage >= 2 && (st = tr_accel_can_add(z->accel)) != TR_OK) {
        tr_error_prefix("sharded: stage %d adds gradient slices on the device (stage 1 does not): ", z->stage);
        goto fail;
    }
    z->staged = z->accel && !tr_comm_device_memory(z->comm);
    z->rank = tr_comm_rank(z->comm);
    z->world = tr_comm_size(z->comm);
    z->prefetch = tr_options_bool(o, "prefetch");
    z->broadcast_buffers = tr_options_bool(o, "broadcast_buffers");
    /* Every parameter on a multiple of 16 x world floats: units split into equal slices. */
    size_t align = 16 * (size_t)z->world;
    /* Parameters not initialised (init_slices does this rank's); on a device without the full
     * buffers the stage shards. */
    unsigned flags = TR_REPLICA_DEFER_INIT;
    if (z->accel) flags |= (z->stage >= 2 ? TR_REPLICA_NO_DEVICE_GRAD : 0) | (z->stage == 3 ? TR_REPLICA_NO_DEVICE_DATA : 0);
    TR_CHECK_GOTO(tr_replica_create_on_aligned(env->models, z->accel, align, flags, &z->r), fail);
    size_t numel = tr_params_numel(tr_replica_host_params(z->r));
    /* The engine's units: consecutive whole parameters, reduce-scattered during backward, each
     * rank updating its slices; below stage 3 the step all-gathers them, waited by their next
     * use. Staged through the host P's buffers. */
    tr_grad_sync_config sc = {.size = sizeof sc, .name = "sharded", .comm = z->comm, .accel = z->accel, .replica = z->r,
                              .reduce = TR_GRAD_REDUCE_SCATTER, .layout = TR_GRAD_UNITS,
                              .bucket_mb = tr_options_float(o, "unit_mb"), .skip_nonfinite = env->skip_nonfinite,
                              .gather_params = z->stage < 3, .eager = 1, .registry = env->registry,
                              .comm_hook = tr_options_string(o, "comm_hook"), .user = z,
                              .prepare = z->stage >= 2 ? grad_buffer : NULL, .issued = z->stage == 3 ? issued : NULL,
                              .reduced = z->stage >= 2 ? reduced : NULL};
    TR_CHECK_GOTO(tr_grad_sync_create(&z->sync, &sc), fail);
    z->n_units = tr_grad_sync_count(z->sync);
    z->S = tr_grad_sync_shard(z->sync);
    for (int i = 0; i < z->n_units; i++) z->units[i] = (unit){.state = GATHERED, .pslot = -1, .gslot = -1};
    TR_CHECK_GOTO(tr_optim_create(&z->opt, &env->optim, z->S), fail);
    if (z->accel) TR_CHECK_GOTO(tr_optim_place(z->opt, z->accel), fail);
    if (z->staged) { /* the host P's buffers, where the collectives run, in communicator memory */
        void *h = NULL;
        TR_CHECK_GOTO(tr_comm_alloc(z->comm, bytes(numel + 1), &h), fail);
        TR_CHECK_GOTO(tr_params_set_data_buffer(tr_replica_host_params(z->r), h), fail);
        TR_CHECK_GOTO(tr_comm_alloc(z->comm, bytes(numel + 1), &h), fail);
        TR_CHECK_GOTO(tr_params_set_grad_buffer(tr_replica_host_params(z->r), h), fail);
    }
    if (z->stage >= 2) {
        TR_CHECK_GOTO(shard_alloc(z, &z->gs, "gradient"), fail);
        /* Gradients go to pool buffers: the flat gradient buffer is never touched (on a
         * device there is none). */
        if (!z->accel) tr_pages_discard(G(z), bytes(numel));
    }
    tr_grad_sync_set_shards(z->sync, NULL, z->gs);
    tr_graph_set_use_hook(tr_replica_graph(z->r), use, z);
    if (tr_options_bool(o, "sync_batchnorm")) tr_graph_set_stat_reducer(tr_replica_graph(z->r), tr_rank_all_sum, z->comm);
    if (z->stage == 3) {
        TR_CHECK_GOTO(shard_alloc(z, &z->ps, "parameter"), fail);
        tr_grad_sync_set_shards(z->sync, z->ps, z->gs);
    }
    TR_CHECK_GOTO(init_slices(z), fail);
    TR_CHECK_GOTO(tr_rank_broadcast_buffers(z->comm, z->accel, z->r), fail);
    for (int i = 0; z->stage == 3 && i < z->n_units; i++) {
        /* Parameters go to pool buffers while gathered: the flat buffer is never touched. */
        z->units[i].state = RELEASED;
        point(z, i, home(z, i, F(z)), 0);
    }
    *info = (tr_strategy_info){.rank = z->rank, .world = z->world, .data_rank = z->rank, .data_world = z->world};
    if (z->accel)
        snprintf(info->description, sizeof info->description,
                 "sharded (ZeRO stage %d, %d ranks over %s, %s: this rank %s, %d units %s%s)", z->stage, z->world,
                 tr_comm_backend_name(z->comm), z->gpu_shared ? "ranks sharing GPUs (a testing mode)" : "one GPU each",
                 tr_accel_name(z->accel), z->n_units,
                 z->staged ? "staged through host memory" : "gathered and reduce-scattered in device memory",
                 tr_grad_sync_hook_name(z->sync));
    else
        snprintf(info->description, sizeof info->description,
                 "sharded (ZeRO stage %d, %d ranks over %s, %d threads each, %d units%s)", z->stage, z->world,
                 tr_comm_backend_name(z->comm), tr_get_num_threads(), z->n_units, tr_grad_sync_hook_name(z->sync));
    *ctx = z;
    return TR_OK;
fail:
    /* Start-up reads each rank's own slices: one rank can fail alone while the others wait in
     * a collective; breaking the communicator ends their wait with this rank's failure. */
    if (z->comm) tr_comm_abort(z->comm);
    destroy(z);
    return st;
}

/* ---- the step ---- */

/* A failure: peers may wait for collectives this rank left out, so the communicator is
 * broken everywhere and what is in flight drained (tr_grad_sync_broke). */
static tr_status broke(sharded *z, tr_status st) { return tr_grad_sync_broke(z->sync, st); }

static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    sharded *z = ctx;
    tr_status st = tr_grad_sync_finish(z->sync, 0, 1); /* the last micro-batch's reduce-scatters (stages 2-3) */
    if (st == TR_OK && mb->first && z->broadcast_buffers) st = tr_rank_broadcast_buffers(z->comm, z->accel, z->r);
    if (st != TR_OK) return broke(z, st);
    tr_model_out out;
    st = tr_replica_forward(z->r, mb->hb, 0, mb->hb->size, mb->normaliser, mb->step, 1, 1, &out);
    /* Stage 1: the step's first backward writes the flat gradients, with no zero-fill pass
     * (the alignment gaps hold sums of zeros); stages 2-3 move them to zeroed unit buffers. */
    if (st == TR_OK && mb->first && z->stage == 1) st = tr_graph_write_param_grads(tr_replica_graph(z->r));
    if (st != TR_OK) return broke(z, st);
    z->first_micro = mb->first;
    tr_grad_sync_begin(z->sync, z->stage >= 2 || mb->last); /* stages 2-3 reduce every micro-batch */
    st = tr_backward(tr_replica_graph(z->r), out.loss, NULL);
    if (st == TR_OK) st = tr_grad_sync_end(z->sync);
    else tr_grad_sync_begin(z->sync, 0);
    if (st == TR_OK && z->stage == 3) st = release_all(z); /* prefetched units nobody used */
    float v = 0;
    if (st == TR_OK) st = tr_accel_download(z->accel, &v, out.loss->data, sizeof v);
    if (st != TR_OK) return broke(z, st);
    *loss = v;
    return TR_OK;
}

/* The engine's step: each unit's slice updated, below stage 3 its gather started (waited by
 * the unit's next use). */
static tr_status optim_step(void *ctx, double lr, double max_norm, double *grad_norm) {
    sharded *z = ctx;
    return tr_grad_sync_step(z->sync, z->opt, lr, max_norm, grad_norm);
}

/* This rank's slice of unit i (its parameters, or with grads its summed gradients) as host
 * memory: on a device downloaded into the host P at the slice's flat offset. */
static tr_status host_slice(sharded *z, int i, int grads, float **out) {
    float *src = grads ? tr_grad_sync_grad_slice(z->sync, i) : tr_grad_sync_param_slice(z->sync, i);
    *out = src;
    if (!z->accel) return TR_OK;
    *out = slice(z, grads ? hostG(z) : hostF(z), i);
    return tr_accel_download(z->accel, *out, src, bytes(at(z, i)->len));
}

/* This rank's slices of the parameters and of their gradients. */
static tr_status nonfinite(void *ctx, double *flags, int n, char *activation, size_t size) {
    sharded *z = ctx;
    TR_CHECK(tr_grad_sync_drain(z->sync));
    tr_graph_first_nonfinite(tr_replica_graph(z->r), activation, size);
    for (int i = 0; i < z->n_units; i++) {
        size_t a = at(z, i)->lo + (size_t)z->rank * at(z, i)->len, len = at(z, i)->len;
        float *p, *g;
        TR_CHECK(host_slice(z, i, 0, &p));
        TR_CHECK(host_slice(z, i, 1, &g));
        tr_params_mark_nonfinite(tr_replica_host_params(z->r), p, a, a + len, flags);
        tr_params_mark_nonfinite(tr_replica_host_params(z->r), g, a, a + len, flags + n);
    }
    return TR_OK;
}

static tr_status forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    sharded *z = ctx;
    tr_status st = tr_replica_forward(z->r, hb, 0, hb->size, 1.0, 0, 0, with_y, out);
    if (z->stage == 3 && st == TR_OK) st = release_all(z);
    if (st == TR_OK) st = tr_replica_outputs_to_host(z->r, out);
    return st == TR_OK ? TR_OK : broke(z, st);
}

/* The full state lives on no rank (sharded checkpoints go through `shards`). */
static tr_status state(void *ctx, tr_params **P, tr_optim **opt) {
    sharded *z = ctx;
    TR_CHECK(tr_grad_sync_drain(z->sync));
    *P = tr_replica_host_params(z->r);
    *opt = NULL;
    return TR_OK;
}

/* The pieces of every parameter this rank's shard holds, with their optimizer state (on a
 * device: host copies, downloaded now; a load writes them and sync() uploads them). */
static tr_status shards(void *ctx, tr_state_shards *out) {
    sharded *z = ctx;
    TR_CHECK(tr_grad_sync_drain(z->sync));
    tr_params *P = tr_replica_host_params(z->r);
    int ns = tr_optim_state_count(z->opt);
    if (ns > TR_CKPT_MAX_STATE) return tr_error_set(TR_ERR_INTERNAL, "sharded: %d optimizer states", ns);
    if (!z->pieces) {
        z->pieces = tr_calloc((size_t)tr_params_count(P) + 1, sizeof *z->pieces);
        if (!z->pieces) return tr_error_set(TR_ERR_NOMEM, "sharded: out of memory");
    }
    TR_CHECK(tr_optim_download(z->opt));
    /* On a device: the buffers (batch-norm statistics) a checkpoint saves from the host P. */
    if (z->accel)
        TR_CHECK(tr_accel_download(z->accel, tr_params_buffers_data(P), tr_params_buffers_data(tr_replica_params(z->r)),
                                   bytes(tr_params_buffers_numel(P))));
    int n = 0;
    for (int i = 0; i < z->n_units; i++) {
        const tr_grad_sync_range *u = at(z, i);
        size_t a0 = u->lo + (size_t)z->rank * u->len, b0 = a0 + u->len;
        float *data;
        TR_CHECK(host_slice(z, i, 0, &data));
        for (int p = u->p0; p < u->p0 + u->np; p++) {
            size_t off = tr_params_offset(P, p), end = off + (size_t)tr_tensor_numel(tr_params_get(P, p));
            size_t a = a0 > off ? a0 : off, b = b0 < end ? b0 : end;
            if (a >= b) continue;
            size_t pos = u->soff + (a - a0); /* position in the shard */
            tr_ckpt_piece *pc = &z->pieces[n++];
            *pc = (tr_ckpt_piece){.param = p, .start = (int64_t)(a - off), .count = (int64_t)(b - a),
                                   .data = data + (a - a0)};
            for (int s = 0; s < ns; s++) pc->state[s] = tr_optim_state(z->opt, s) + pos;
        }
    }
    z->n_pieces = n;
    *out = (tr_state_shards){.P = P, .opt = z->opt, .pieces = z->pieces, .n_pieces = n};
    return TR_OK;
}

static tr_status memory(void *ctx, tr_strategy_memory *m) {
    sharded *z = ctx;
    *m = (tr_strategy_memory){0};
    tr_replica_memory(z->r, z->opt, m); /* the resident pages of the full buffers (a device's: those it holds) */
    uint64_t shard = (uint64_t)z->S * sizeof(float);
    if (z->ps) m->params += shard;
    if (z->gs) m->grads += shard;
    /* The unit buffers (stage 3: gathered parameters; stages 2-3: a unit's full gradients
     * during backward): working memory, as many as were needed at once. */
    m->other = z->params.bytes + z->grads.bytes;
    m->all_devices = m->params + m->grads + m->optimizer + m->activations + m->other;
    return TR_OK;
}

/* `trainer plan`: the ZeRO split of the flat buffer (aligned as create() aligns it) plus the
 * unit buffers of stages 2-3, estimated from the largest unit: stage 2 keeps about two units
 * of gradients (one filling, one being reduce-scattered), stage 3 also about three of
 * parameters (an op's units and the prefetched next one). A lower bound: a model whose
 * backward touches many units at once (tied weights keep one busy throughout) holds more
 * (a 2-layer transformer LM in 0.05 MiB units: 0.12 MiB estimated, 0.37 MiB measured). */
static tr_status estimate(const tr_options *o, const tr_strategy_estimate_env *env, tr_strategy_estimate *out) {
    int W = tr_rank_processes(o, env->devices), stage = (int)tr_options_int(o, "stage");
    size_t align = 16 * (size_t)W, F = tr_estimate_param_floats(env, align), S = F / (size_t)W;
    /* The engine's units (tr_grad_sync_units) over the parameters as create() pads them. */
    size_t *len = tr_calloc((size_t)env->n_params + 1, sizeof *len), biggest = 0;
    int *unit_of = tr_calloc((size_t)env->n_params + 1, sizeof *unit_of);
    if (!len || !unit_of) {
        tr_free(len);
        tr_free(unit_of);
        return tr_error_set(TR_ERR_NOMEM, "sharded: out of memory for the plan's units");
    }
    for (int p = 0; p < env->n_params; p++) len[p] = ((size_t)env->param_numel[p] + align - 1) / align * align;
    size_t units = (size_t)tr_grad_sync_units(len, env->n_params, tr_options_float(o, "unit_mb"), unit_of);
    for (int p = 0, q; p < env->n_params; p = q) {
        size_t cur = 0;
        for (q = p; q < env->n_params && unit_of[q] == unit_of[p]; q++) cur += len[q];
        if (cur > biggest) biggest = cur;
    }
    tr_free(len);
    tr_free(unit_of);
    out->world = W;
    out->rank_batch = (env->global_batch + W - 1) / W;
    tr_strategy_memory *m = &out->memory;
    TR_CHECK(tr_estimate_replica(env, align, out->rank_batch, m));
    m->optimizer = 4 * (uint64_t)S * (uint64_t)env->optim_states;
    if (stage >= 2) {
        m->grads = 4 * (uint64_t)S;
        m->other += 4 * (uint64_t)biggest * (units < 2 ? units : 2);
    }
    if (stage >= 3) {
        m->params = 4 * ((uint64_t)S + env->buffer_floats);
        m->other += 4 * (uint64_t)biggest * (units < 3 ? units : 3);
    }
    m->all_devices = m->params + m->grads + m->optimizer + m->activations + m->other;
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "stage", .type = TR_OPTION_INT, .default_value = "3", .min = 1, .max = 3,
     .doc = "ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters (FSDP FULL_SHARD)"},
    TR_RANK_STRATEGY_OPTIONS,
    TR_COMM_HOOK_OPTION,
    {.key = "unit_mb", .type = TR_OPTION_FLOAT, .default_value = "4", .min = 0.001, .max = 65536,
     .doc = "size of a unit (consecutive whole parameters gathered and reduce-scattered together), MiB"},
    {.key = "prefetch", .type = TR_OPTION_BOOL, .default_value = "true",
     .doc = "stage 3: start gathering the next unit while the current one computes"},
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
    .shards = shards,
    .probe = tr_rank_probe, /* wherever its backend was found, on CPU ranks or GPU ranks */
    .estimate = estimate,
    .nonfinite = nonfinite,
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_STRATEGY,
    .name = "sharded",
    .version = "0.1.0",
    .description = "ZeRO stages 1-3: optimizer state, gradients and parameters sharded over ranks",
    .options = opts,
    .n_options = sizeof opts / sizeof opts[0],
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
