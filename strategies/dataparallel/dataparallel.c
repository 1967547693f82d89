/* Strategy `dataparallel`: one process, one replica per device (a worker thread with a share
 * of the cores on CPU-only machines), nn.DataParallel's idea without its costs. The one idea:
 * the step is a single parallel job over n slices of the flat buffers (reduce onto the
 * primary, update, copy back), each byte touched once. The replicas' threads are a core
 * thread team (trainer/team.h); the GPU step is gpu_step.c. The algorithm, the GPU paths and
 * the limits: docs/strategies.md, "dataparallel". */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

/* ---- the jobs each replica's thread runs ---- */

tr_status dp_barrier(dp *d) { return tr_team_barrier(d->team, d->active); }

/* Samples [lo, hi) of a batch of `size` for replica i. */
static void share(const dp *d, int64_t size, int i, int64_t *lo, int64_t *hi) {
    int n = d->active;
    *lo = size * i / n;
    *hi = size * (i + 1) / n;
}

/* Element range of slice k of the flat parameter buffer, 16-float aligned. */
static void slice(size_t total, int n, int k, size_t *lo, size_t *hi) {
    size_t per = (total / (size_t)n + 15) / 16 * 16;
    *lo = per * (size_t)k < total ? per * (size_t)k : total;
    *hi = per * (size_t)(k + 1) < total && k + 1 < n ? per * (size_t)(k + 1) : total;
}

/* sync batch-norm: every active replica publishes its sums, then each adds all of them in
 * replica order (the same result everywhere). */
static tr_status stat_reduce(void *user, double *values, int nv) {
    worker *w = user;
    dp *d = w->d;
    if (nv > w->n_stats) return tr_error_set(TR_ERR_INVALID, "dataparallel: %d batch-norm sums, room for %d", nv, w->n_stats);
    memcpy(w->stats, values, (size_t)nv * sizeof *values);
    TR_CHECK(dp_barrier(d));
    for (int k = 0; k < nv; k++) {
        double s = 0;
        for (int i = 0; i < d->active; i++) s += d->w[i].stats[k];
        values[k] = s;
    }
    return dp_barrier(d); /* nobody rewrites its sums before all have read them */
}

static tr_status job_train(dp *d, worker *w) {
    const tr_micro_batch *mb = d->mb;
    tr_replica *r = d->r[w->i];
    w->loss = 0;
    if (w->i >= d->active) { /* no share of this batch: contributes zero */
        if (mb->first && d->accel) tr_accel_zero(d->accel[w->i], tr_replica_device_grad(r), tr_params_numel(tr_replica_host_params(r)) * sizeof(float));
        else if (mb->first) tr_params_zero_grad(tr_replica_host_params(r));
        return TR_OK;
    }
    int64_t lo, hi;
    share(d, mb->hb->size, w->i, &lo, &hi);
    tr_model_out out;
    TR_CHECK(tr_replica_forward(r, mb->hb, lo, hi - lo, mb->normaliser, mb->step, 1, 1, &out));
    if (mb->first) TR_CHECK(tr_graph_write_param_grads(tr_replica_graph(r))); /* no zero-fill pass */
    TR_CHECK(tr_backward(tr_replica_graph(r), out.loss, NULL));
    float f; /* the loss, from the device for a GPU replica (a NULL accel copies host memory) */
    TR_CHECK(tr_accel_download(d->accel ? d->accel[w->i] : NULL, &f, out.loss->data, sizeof f));
    w->loss = f;
    return TR_OK;
}

void dp_reduce_slice(dp *d, int i) {
    tr_params *P0 = tr_replica_host_params(d->r[0]);
    size_t lo, hi;
    slice(tr_params_numel(P0), d->n, i, &lo, &hi);
    float *g0 = tr_params_grad(P0) + lo;
    for (int k = 1; k < d->n; k++) {
        const float *gk = tr_params_grad(tr_replica_host_params(d->r[k])) + lo;
        for (size_t e = 0; e < hi - lo; e++) g0[e] += gk[e];
    }
    d->w[i].sumsq = tr_grad_sumsq(g0, hi - lo);
}

static tr_status job_step(dp *d, worker *w) {
    tr_params *P0 = tr_replica_host_params(d->r[0]);
    size_t n = tr_params_numel(P0), lo, hi;
    slice(n, d->n, w->i, &lo, &hi);
    float *g0 = tr_params_grad(P0) + lo, *p0 = tr_params_data(P0);
    size_t m = hi - lo;
    dp_reduce_slice(d, w->i);
    TR_CHECK(dp_barrier(d));
    double sumsq = 0;
    for (int i = 0; i < d->n; i++) sumsq += d->w[i].sumsq;
    if (w->i == 0) d->sumsq = sumsq;
    if (isfinite(sumsq)) { /* a non-finite step is never applied: the trainer stops or skips it */
        if (d->max_norm > 0) tr_clip_grad_norm(g0, m, d->max_norm, sumsq);
        TR_CHECK(tr_optim_step_part(d->opt, p0, tr_params_grad(P0), lo, hi, d->lr));
        for (int i = 1; i < d->n; i++) memcpy(tr_params_data(tr_replica_host_params(d->r[i])) + lo, p0 + lo, m * sizeof *p0);
    }
    /* Buffers follow the primary; they are small, the primary's thread copies them. */
    size_t nb = tr_params_buffers_numel(P0);
    if (w->i == 0 && nb)
        for (int i = 1; i < d->n; i++) memcpy(tr_params_buffers_data(tr_replica_host_params(d->r[i])), tr_params_buffers_data(P0), nb * sizeof(float));
    return TR_OK;
}

static tr_status job_forward(dp *d, worker *w) {
    memset(&w->out, 0, sizeof w->out);
    w->loss = 0;
    int64_t lo, hi;
    share(d, d->hb->size, w->i, &lo, &hi);
    TR_CHECK(tr_replica_forward(d->r[w->i], d->hb, lo, hi - lo, 1.0, 0, 0, d->with_y, &w->out));
    TR_CHECK(tr_replica_outputs_to_host(d->r[w->i], &w->out)); /* nothing on the CPU */
    if (w->out.loss) w->loss = ((const float *)w->out.loss->data)[0];
    return TR_OK;
}

/* Replica i's part of the job, on its thread with its device bound. A failure aborts the
 * replicas' communicators, so that the others' collectives fail now instead of at their
 * deadline (and every rank, this one's too, aborts instead of leaving NCCL in order). */
static tr_status run_job(int i, void *user) {
    dp *d = user;
    worker *w = &d->w[i];
    if (d->kind == JOB_INIT) { /* a thread's OpenMP and OpenBLAS share, like the primary's */
        if (i > 0) tr_set_thread_local_threads(d->per_threads);
        return TR_OK;
    }
    if (d->kind == JOB_DROP) {
        dp_drop_comm(d, i);
        return TR_OK;
    }
    tr_status st = d->accel ? tr_accel_bind(d->accel[i]) : TR_OK;
    if (st == TR_OK) switch (d->kind) {
    case JOB_TRAIN: st = job_train(d, w); break;
    case JOB_STEP: st = !d->accel ? job_step(d, w) : d->comm_plugin ? dp_step_comm(d, i) : dp_step_gpu(d, i); break;
    case JOB_FORWARD: st = job_forward(d, w); break;
    case JOB_COMM: st = dp_join_comm(d, i); break;
    default: break;
    }
    w->st = st;
    if (st == TR_OK) return TR_OK;
    snprintf(w->msg, sizeof w->msg, "%s", tr_error_msg());
    dp_abort_comms(d);
    tr_error_prefix("replica %d (device %lld): ", i, (long long)d->ids[i]);
    return st;
}

/* An inference batch runs on the replicas that take a share of it (one: on this thread
 * alone); training and the step on all. */
tr_status dp_dispatch(dp *d, int kind, int active) {
    d->kind = kind;
    d->active = active;
    return tr_team_run(d->team, kind == JOB_FORWARD ? active : d->n, run_job, d);
}

/* ---- the strategy ops ---- */

static void destroy(void *ctx) {
    dp *d = ctx;
    if (!d) return;
    /* Every replica drops its communicator at once: leaving NCCL (its finalize) completes
     * only once every rank of the job is leaving. */
    if (d->team) dp_dispatch(d, JOB_DROP, d->n);
    tr_team_destroy(d->team);
    for (int i = 0; d->w && i < d->n; i++) dp_drop_comm(d, i); /* any left */
    for (int i = 0; d->r && i < d->n; i++) tr_replica_destroy(d->r[i]);
    for (int i = 0; d->w && i < d->n; i++) tr_free(d->w[i].stats);
    tr_optim_destroy(d->opt);
    for (int i = 0; d->accel && i < d->n; i++) tr_accel_close(d->accel[i]);
    tr_free(d->accel);
    tr_free(d->r);
    tr_free(d->w);
    tr_free(d->logits);
    tr_free(d->embedding);
    pthread_mutex_destroy(&d->comm_mu);
    tr_free(d);
}

/* Room for the batch-norm sums of one reduction: 2 per channel of the widest layer. */
static int max_stats(tr_params *P) {
    int64_t m = 0;
    for (int i = 0; i < tr_params_buffer_count(P); i++) {
        int64_t k = tr_tensor_numel(tr_params_buffer(P, i));
        if (k > m) m = k;
    }
    return (int)(2 * m + 2);
}

static tr_status create(void **ctx, const tr_options *o, const tr_strategy_env *env, tr_strategy_info *info) {
    *ctx = NULL;
    dp *d = tr_calloc(1, sizeof *d);
    if (!d) return tr_error_set(TR_ERR_NOMEM, "dataparallel: out of memory");
    pthread_mutex_init(&d->comm_mu, NULL);
    tr_status st;
    int n = tr_options_int_list(o, "device_ids", d->ids, DP_MAX_REPLICAS);
    if (n > DP_MAX_REPLICAS) {
        st = tr_error_set(TR_ERR_INVALID, "strategy.device_ids: %d devices, at most %d", n, DP_MAX_REPLICAS);
        goto fail;
    }
    int gpu = env->accelerator == TR_ACCEL_GPU;
    if (gpu && n <= 0) { /* trainer.devices' GPU ids */
        n = env->n_gpu_ids;
        for (int i = 0; i < n; i++) d->ids[i] = env->gpu_ids[i];
    } else if (n <= 0) {
        n = env->devices > 0 ? env->devices : 1;
        if (n > DP_MAX_REPLICAS) {
            st = tr_error_set(TR_ERR_INVALID, "dataparallel: %d replicas asked for, at most %d", n, DP_MAX_REPLICAS);
            goto fail;
        }
        for (int i = 0; i < n; i++) d->ids[i] = i;
    }
    d->n = n;
    int64_t twice;
    if (!gpu && dp_ids_repeat(d, &twice)) { /* GPU ids may repeat (the one-GPU testing mode) */
        st = tr_error_set(TR_ERR_INVALID, "strategy.device_ids: device %lld is listed twice", (long long)twice);
        goto fail;
    }
    int total = env->threads > 0 ? env->threads : tr_cpu_count();
    d->per_threads = total / n > 0 ? total / n : 1;
    /* This thread runs the primary: its OpenMP and OpenBLAS share, like every worker's. */
    tr_set_thread_local_threads(d->per_threads);
    d->r = tr_calloc((size_t)n, sizeof *d->r);
    d->w = tr_calloc((size_t)n, sizeof *d->w);
    if (!d->r || !d->w) {
        st = tr_error_set(TR_ERR_NOMEM, "dataparallel: out of memory");
        goto fail;
    }
    if (gpu && (n < 1 || !env->gpu_backend)) {
        st = tr_error_set(TR_ERR_INVALID, "dataparallel: accelerator gpu without a GPU chosen");
        goto fail;
    }
    TR_CHECK_GOTO(dp_choose_backend(d, o, env), fail);
    if (gpu) {
        d->accel = tr_calloc((size_t)n, sizeof *d->accel);
        if (!d->accel) {
            st = tr_error_set(TR_ERR_NOMEM, "dataparallel: out of memory");
            goto fail;
        }
    }
    int sync_bn = tr_options_bool(o, "sync_batchnorm");
    for (int i = 0; i < n; i++) {
        worker *w = &d->w[i];
        w->d = d;
        w->i = i;
        if (gpu) { /* the replica made on its device, with this thread bound to it */
            TR_CHECK_GOTO(tr_accel_open(env->gpu_backend, (int)d->ids[i], &d->accel[i]), fail);
            TR_CHECK_GOTO(tr_accel_bind(d->accel[i]), fail);
            TR_CHECK_GOTO(tr_replica_create_on(env->models, d->accel[i], &d->r[i]), fail);
        } else {
            TR_CHECK_GOTO(tr_replica_create(env->models, &d->r[i]), fail);
        }
        if (sync_bn) {
            w->n_stats = max_stats(tr_replica_host_params(d->r[i]));
            w->stats = tr_calloc((size_t)w->n_stats, sizeof *w->stats);
            if (!w->stats) {
                st = tr_error_set(TR_ERR_NOMEM, "dataparallel: out of memory");
                goto fail;
            }
            tr_graph_set_stat_reducer(tr_replica_graph(d->r[i]), stat_reduce, w);
        }
    }
    TR_CHECK_GOTO(tr_optim_create(&d->opt, &env->optim, tr_params_numel(tr_replica_host_params(d->r[0]))), fail);
    if (gpu) { /* the optimizer state on the primary's device; the main thread runs the primary */
        TR_CHECK_GOTO(tr_accel_bind(d->accel[0]), fail);
        TR_CHECK_GOTO(tr_optim_place(d->opt, d->accel[0]), fail);
    }
    TR_CHECK_GOTO(tr_team_create(&d->team, n, "dataparallel"), fail);
    TR_CHECK_GOTO(dp_dispatch(d, JOB_INIT, n), fail);
    int fell_back = 0;
    if (d->comm_plugin) TR_CHECK_GOTO(dp_join_backend(d, o, &fell_back), fail);
    *info = (tr_strategy_info){.rank = 0, .world = 1, .data_rank = 0, .data_world = 1};
    if (gpu) {
        char where[96] = "", how[128];
        for (int i = 0, at = 0; i < n && at < (int)sizeof where - 24; i++)
            at += snprintf(where + at, sizeof where - (size_t)at, "%s%s", i ? ", " : "", tr_accel_name(d->accel[i]));
        if (d->comm_plugin)
            snprintf(how, sizeof how, "reduced and broadcast over %s in device memory", d->comm_plugin->desc->name);
        else
            snprintf(how, sizeof how, "reduced and replicated through host memory%s", fell_back ? ", nccl unavailable" : "");
        snprintf(info->description, sizeof info->description, "dataparallel (%d GPU replica%s on %s, %s%s)", n,
                 n == 1 ? "" : "s", where, how, sync_bn ? ", sync batch-norm" : "");
    } else {
        snprintf(info->description, sizeof info->description, "dataparallel (%d CPU replica%s, %d thread%s each%s)", n,
                 n == 1 ? "" : "s", d->per_threads, d->per_threads == 1 ? "" : "s", sync_bn ? ", sync batch-norm" : "");
    }
    *ctx = d;
    return TR_OK;
fail:
    destroy(d);
    return st;
}

static int active_for(const dp *d, int64_t size) { return size < d->n ? (int)(size > 0 ? size : 1) : d->n; }

static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    dp *d = ctx;
    d->mb = mb;
    TR_CHECK(dp_dispatch(d, JOB_TRAIN, active_for(d, mb->hb->size)));
    double s = 0;
    for (int i = 0; i < d->n; i++) s += d->w[i].loss;
    *loss = s;
    return TR_OK;
}

static tr_status optim_step(void *ctx, double lr, double max_norm, double *grad_norm) {
    dp *d = ctx;
    d->lr = lr;
    d->max_norm = max_norm;
    TR_CHECK(dp_dispatch(d, JOB_STEP, d->n));
    if (isfinite(d->sumsq)) tr_optim_step_done(d->opt);
    *grad_norm = sqrt(d->sumsq);
    return TR_OK;
}

/* Replica 0 holds the summed gradients and the parameters every replica copies; each
 * replica's tape its own share's activations. */
static tr_status nonfinite(void *ctx, double *flags, int n, char *activation, size_t size) {
    dp *d = ctx;
    (void)n;
    tr_replica_find_nonfinite(d->r[0], flags, activation, size); /* from the device on GPUs */
    for (int i = 0; i < d->n; i++) {
        char what[256];
        if (!tr_graph_first_nonfinite(tr_replica_graph(d->r[i]), what, sizeof what)) continue;
        snprintf(activation, size, "%s in replica %d", what, i);
        break;
    }
    return TR_OK;
}

static const tr_tensor *output(const worker *w, int embedding) { return embedding ? w->out.embedding : w->out.logits; }

/* Concatenates the replicas' logits or embeddings (sample-major) into buf; fills t. */
static tr_status gather(dp *d, int64_t size, int embedding, float **buf, size_t *cap, tr_tensor *t) {
    const tr_tensor *first = output(&d->w[0], embedding);
    int64_t lo, hi;
    share(d, size, 0, &lo, &hi);
    size_t row = (size_t)tr_tensor_numel(first) / (size_t)(hi - lo), need = row * (size_t)size;
    if (need > *cap) {
        tr_free(*buf);
        *buf = tr_malloc(need * sizeof **buf);
        *cap = *buf ? need : 0;
        if (!*buf) return tr_error_set(TR_ERR_NOMEM, "dataparallel: out of memory for %zu gathered outputs", need);
    }
    size_t at = 0;
    for (int i = 0; i < d->active; i++) {
        const tr_tensor *x = output(&d->w[i], embedding);
        size_t k = (size_t)tr_tensor_numel(x);
        memcpy(*buf + at, x->data, k * sizeof **buf);
        at += k;
    }
    *t = *first;
    t->data = *buf;
    t->grad = NULL;
    t->view_of = NULL;
    t->shape[0] = first->shape[0] / (hi - lo) * size; /* (B, ...) or flattened (B*T, ...) */
    return TR_OK;
}

static tr_status forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    dp *d = ctx;
    memset(out, 0, sizeof *out);
    d->hb = hb;
    d->with_y = with_y;
    TR_CHECK(dp_dispatch(d, JOB_FORWARD, active_for(d, hb->size)));
    if (d->w[0].out.logits) {
        TR_CHECK(gather(d, hb->size, 0, &d->logits, &d->logits_cap, &d->t_logits));
        out->logits = &d->t_logits;
    }
    if (d->w[0].out.embedding) {
        TR_CHECK(gather(d, hb->size, 1, &d->embedding, &d->embedding_cap, &d->t_embedding));
        out->embedding = &d->t_embedding;
    }
    if (with_y) {
        double s = 0;
        for (int i = 0; i < d->active; i++) s += d->w[i].loss;
        d->loss_value = (float)s;
        d->t_loss = (tr_tensor){.data = &d->loss_value, .dtype = TR_F32, .ndim = 1, .shape = {1}, .param = -1};
        out->loss = &d->t_loss;
    }
    return TR_OK;
}

static tr_status state(void *ctx, tr_params **P, tr_optim **opt) {
    dp *d = ctx;
    if (d->accel) { /* the host copies checkpoints read */
        TR_CHECK(tr_accel_bind(d->accel[0]));
        TR_CHECK(tr_replica_download(d->r[0]));
        TR_CHECK(tr_optim_download(d->opt));
    }
    *P = tr_replica_host_params(d->r[0]);
    *opt = d->opt;
    return TR_OK;
}

/* After a checkpoint was loaded into the primary: every replica takes its weights. */
static tr_status sync_replicas(void *ctx) {
    dp *d = ctx;
    for (int i = 1; i < d->n; i++) tr_replica_copy_params(d->r[i], d->r[0]);
    for (int i = 0; d->accel && i < d->n; i++) { /* then onto the devices */
        TR_CHECK(tr_accel_bind(d->accel[i]));
        TR_CHECK(tr_replica_upload(d->r[i]));
        if (i == 0) TR_CHECK(tr_optim_upload(d->opt));
        TR_CHECK(tr_accel_sync(d->accel[i]));
    }
    if (d->accel) TR_CHECK(tr_accel_bind(d->accel[0]));
    return TR_OK;
}

/* The primary holds its replica, the one optimizer state and the gathered outputs; every
 * other replica's activations stay in that replica's arena. */
static tr_status memory(void *ctx, tr_strategy_memory *m) {
    dp *d = ctx;
    *m = (tr_strategy_memory){.other = (d->logits_cap + d->embedding_cap) * sizeof(float)};
    m->all_devices = m->other;
    tr_replica_memory(d->r[0], d->opt, m);
    tr_strategy_memory rest = {0};
    for (int i = 1; i < d->n; i++) tr_replica_memory(d->r[i], NULL, &rest);
    m->all_devices += rest.all_devices;
    return TR_OK;
}

/* On GPUs the device plugin must be able to run kernels, and a backend named must exist; on
 * the CPU none is (the replicas reduce in this process's memory). */
static tr_status probe(const tr_options *o, const tr_strategy_probe *env) {
    const char *b = tr_options_string(o, "backend");
    int named = strcmp(b, "auto") != 0 && strcmp(b, "host") != 0;
    if (env->accelerator != TR_ACCEL_GPU) {
        if (named)
            return tr_error_set(TR_ERR_UNSUPPORTED, "strategy.backend: %s joins GPU replicas; CPU replicas reduce in "
                                "this process's memory (auto or host)", b);
        return TR_OK;
    }
    TR_CHECK(tr_accel_probe(env->gpu_backend));
    tr_comm_ranks ranks = {.gpu_plugin = env->gpu_backend ? env->gpu_backend->desc->name : NULL};
    return named ? tr_comm_probe_ranks(env->registry, b, &ranks) : TR_OK;
}

/* `trainer plan`: replica 0 holds the optimizer state, every replica its parameters,
 * gradients and activations for its share. */
static tr_status estimate(const tr_options *o, const tr_strategy_estimate_env *env, tr_strategy_estimate *out) {
    int64_t ids[DP_MAX_REPLICAS];
    int n = tr_options_int_list(o, "device_ids", ids, DP_MAX_REPLICAS);
    if (n <= 0) n = env->devices > 0 ? env->devices : 1;
    if (n > DP_MAX_REPLICAS) n = DP_MAX_REPLICAS;
    out->world = n;
    out->rank_batch = (env->global_batch + n - 1) / n;
    TR_CHECK(tr_estimate_replica(env, 0, out->rank_batch, &out->memory));
    tr_strategy_memory *m = &out->memory;
    m->all_devices += (uint64_t)(n - 1) * (m->params + m->grads + m->activations);
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "device_ids", .type = TR_OPTION_INT_LIST, .default_value = "[]", .min = 0, .max = 1 << 20,
     .doc = "the devices that hold replicas, the first is the primary (empty: trainer.devices of them)"},
    {.key = "sync_batchnorm", .type = TR_OPTION_BOOL, .default_value = "false",
     .doc = "batch-norm statistics over the whole batch instead of each replica's share"},
    {.key = "backend", .type = TR_OPTION_STRING, .default_value = "auto",
     .doc = "GPU replicas: how gradients reach the primary and parameters the replicas. auto: nccl (single-process "
            "multi-device, in device memory) on distinct GPUs of the cuda plugin where nccl runs, else host; host: "
            "through host memory (the one-GPU testing mode); or a comm backend that takes device memory by name"},
};

static const tr_strategy_ops ops = {
    .create = create,
    .destroy = destroy,
    .train_micro = train_micro,
    .optim_step = optim_step,
    .forward = forward,
    .state = state,
    .sync = sync_replicas,
    .memory = memory,
    .probe = probe,
    .estimate = estimate,
    .nonfinite = nonfinite,
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_STRATEGY,
    .name = "dataparallel",
    .version = "0.1.0",
    .description = "one process, a replica per device (CPU: per worker thread): scatter, parallel backward, reduce to the primary",
    .options = opts,
    .n_options = sizeof opts / sizeof opts[0],
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
