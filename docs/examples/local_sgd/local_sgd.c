/* Strategy `local_sgd`: ranks train independently and average their models every k steps
 * (Stich, "Local SGD converges fast and communicates little", 2019; Lin et al., "Don't use
 * large mini-batches, use local SGD", 2020). An example of a third-party strategy, built
 * against the installed trainer SDK only (docs/writing-a-strategy.md builds it step by step).
 *
 * One process per rank, as ddp: each loads its share of every global batch and takes its
 * own optimizer step on it, with no communication. k steps after the last averaging, and
 * wherever the trainer needs one model (validation, checkpoints: the settle entry; it
 * restarts the count), parameters, buffers and optimizer state are averaged over the ranks
 * with one all-reduce each.
 *
 * Each rank's loss is normalised by the whole step's sample count, as in ddp, and the rank
 * steps with world x its gradient: its share's mean gradient when shares are equal. The
 * average of the ranks' SGD steps is then exactly ddp's step, so with k = 1 and SGD (momentum,
 * Nesterov and weight decay included, all linear in the gradient) local SGD trains to ddp's
 * weights; with Adam or clipping (not linear) it is close, not equal. Batch-norm running
 * statistics are averaged too, where ddp keeps rank 0's (broadcast_buffers): models with
 * batch-norm match ddp in their parameters, not in those buffers. */
#include <math.h>
#include <stdio.h>

#include <trainer/comm.h>
#include <trainer/memory.h>
#include <trainer/runtime.h>
#include <trainer/strategy.h>

typedef struct local_sgd {
    tr_replica *r;
    tr_optim *opt;
    tr_comm *comm;
    int rank, world;
    int64_t k;               /* average every k optimizer steps */
    int64_t since_average;   /* local steps since the replicas were last equal */
} local_sgd;

static void destroy(void *ctx) {
    local_sgd *s = ctx;
    if (!s) return;
    tr_comm_destroy(s->comm);
    tr_optim_destroy(s->opt);
    tr_replica_destroy(s->r);
    tr_free(s);
}

/* One rank per device asked for, launched by `trainer run` (or mpirun/srun/torchrun). */
static int processes(const tr_options *opts, int devices) {
    (void)opts;
    return devices > 1 ? devices : 1;
}

/* It can run where its backend exists, on CPU ranks (it has no GPU path). */
static tr_status probe(const tr_options *opts, const tr_strategy_probe *env) {
    if (env->accelerator == TR_ACCEL_GPU)
        return tr_error_set(TR_ERR_UNSUPPORTED, "local_sgd runs on CPU ranks only; accelerator cpu runs it");
    return tr_comm_probe(env->registry, tr_options_string(opts, "backend"));
}

/* buf[0..n) = the mean over ranks of buf. */
static tr_status average(local_sgd *s, float *buf, size_t n) {
    if (n == 0) return TR_OK;
    TR_CHECK(tr_comm_all_reduce(s->comm, buf, buf, n, TR_F32, TR_RED_SUM));
    const float inv = 1.0f / (float)s->world;
    for (size_t i = 0; i < n; i++) buf[i] *= inv;
    return TR_OK;
}

/* Every rank gets the mean model: parameters, buffers (batch-norm statistics) and optimizer
 * state, so a checkpoint holds the one model all ranks continue from. */
static tr_status average_all(local_sgd *s) {
    tr_params *P = tr_replica_host_params(s->r);
    TR_CHECK(average(s, tr_params_data(P), tr_params_numel(P)));
    TR_CHECK(average(s, tr_params_buffers_data(P), tr_params_buffers_numel(P)));
    for (int i = 0; i < tr_optim_state_count(s->opt); i++)
        TR_CHECK(average(s, tr_optim_state(s->opt, i), tr_optim_size(s->opt)));
    s->since_average = 0;
    return TR_OK;
}

static tr_status settle(void *ctx) {
    local_sgd *s = ctx;
    return s->since_average ? average_all(s) : TR_OK;
}

/* After a checkpoint was loaded (into every rank) or at setup: rank 0's model everywhere. */
static tr_status sync(void *ctx) {
    local_sgd *s = ctx;
    tr_params *P = tr_replica_host_params(s->r);
    TR_CHECK(tr_comm_broadcast(s->comm, tr_params_data(P), tr_params_numel(P), TR_F32, 0));
    if (tr_params_buffers_numel(P))
        TR_CHECK(tr_comm_broadcast(s->comm, tr_params_buffers_data(P), tr_params_buffers_numel(P), TR_F32, 0));
    for (int i = 0; i < tr_optim_state_count(s->opt); i++)
        TR_CHECK(tr_comm_broadcast(s->comm, tr_optim_state(s->opt, i), tr_optim_size(s->opt), TR_F32, 0));
    s->since_average = 0;
    return TR_OK;
}

static tr_status create(void **ctx, const tr_options *o, const tr_strategy_env *env, tr_strategy_info *info) {
    *ctx = NULL;
    local_sgd *s = tr_calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "local_sgd: out of memory");
    tr_status st;
    tr_comm_env ce;
    const char *backend = tr_options_string(o, "backend");
    TR_CHECK_GOTO(tr_comm_open(&s->comm, env->registry, backend, tr_options_float(o, "timeout_s"), &ce), fail);
    if (env->threads == 0) { /* each rank its share of the cores */
        int t = tr_cpu_count() / (ce.local_size > 0 ? ce.local_size : 1);
        tr_set_num_threads(t > 0 ? t : 1);
    }
    s->rank = tr_comm_rank(s->comm);
    s->world = tr_comm_size(s->comm);
    s->k = tr_options_int(o, "k");
    TR_CHECK_GOTO(tr_replica_create(env->models, &s->r), fail);
    TR_CHECK_GOTO(tr_optim_create(&s->opt, &env->optim, tr_params_numel(tr_replica_host_params(s->r))), fail);
    TR_CHECK_GOTO(sync(s), fail);
    *info = (tr_strategy_info){.rank = s->rank, .world = s->world, .data_rank = s->rank, .data_world = s->world};
    snprintf(info->description, sizeof info->description, "local_sgd (%d ranks over %s, averaging every %lld steps)",
             s->world, backend, (long long)s->k);
    *ctx = s;
    return TR_OK;
fail:
    destroy(s);
    return st;
}

static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    local_sgd *s = ctx;
    if (mb->first) tr_params_zero_grad(tr_replica_host_params(s->r));
    tr_model_out out;
    TR_CHECK(tr_replica_forward(s->r, mb->hb, 0, mb->hb->size, mb->normaliser, mb->step, 1, 1, &out));
    TR_CHECK(tr_backward(tr_replica_graph(s->r), out.loss, NULL));
    *loss = ((const float *)out.loss->data)[0];
    return TR_OK;
}

static tr_status optim_step(void *ctx, double lr, double max_norm, double *grad_norm) {
    local_sgd *s = ctx;
    tr_params *P = tr_replica_host_params(s->r);
    float *g = tr_params_grad(P);
    size_t n = tr_params_numel(P);
    for (size_t i = 0; i < n; i++) g[i] *= (float)s->world; /* this rank's share's mean gradient */
    double sumsq = tr_grad_sumsq(g, n);
    *grad_norm = sqrt(sumsq); /* this rank's: there is no global gradient */
    if (isfinite(sumsq)) { /* a non-finite gradient is never applied (the trainer stops or skips) */
        if (max_norm > 0) tr_clip_grad_norm(g, n, max_norm, sumsq);
        TR_CHECK(tr_optim_step(s->opt, tr_params_data(P), g, n, lr));
    }
    if (++s->since_average >= s->k) TR_CHECK(average_all(s)); /* every rank counts, or the averages mismatch */
    return TR_OK;
}

static tr_status forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    local_sgd *s = ctx;
    return tr_replica_forward(s->r, hb, 0, hb->size, 1.0, 0, 0, with_y, out);
}

static tr_status state(void *ctx, tr_params **P, tr_optim **opt) {
    local_sgd *s = ctx;
    *P = tr_replica_host_params(s->r);
    *opt = s->opt;
    return TR_OK;
}

static tr_status all_sum(void *ctx, double *v, int n) {
    local_sgd *s = ctx;
    return tr_comm_all_reduce(s->comm, v, v, (size_t)n, TR_F64, TR_RED_SUM);
}

static tr_status memory(void *ctx, tr_strategy_memory *m) {
    local_sgd *s = ctx;
    *m = (tr_strategy_memory){0};
    tr_replica_memory(s->r, s->opt, m);
    return TR_OK;
}

/* `trainer plan`: like ddp, every rank holds a whole replica and computes its share. */
static tr_status estimate(const tr_options *o, const tr_strategy_estimate_env *env, tr_strategy_estimate *out) {
    out->world = processes(o, env->devices);
    out->rank_batch = (env->global_batch + out->world - 1) / out->world;
    return tr_estimate_replica(env, 0, out->rank_batch, &out->memory);
}

static const tr_option_spec opts[] = {
    {.key = "k", .type = TR_OPTION_INT, .default_value = "8", .min = 1, .max = 1e9,
     .doc = "average the ranks' models every k optimizer steps (1: every step, ddp's result for SGD)"},
    {.key = "backend", .type = TR_OPTION_STRING, .default_value = "shm",
     .doc = "communication backend plugin: shm (one host) or mpi (hosts; run under mpirun/srun)"},
    {.key = "timeout_s", .type = TR_OPTION_FLOAT, .default_value = "300", .min = 1, .max = 1e7,
     .doc = "a collective waiting longer fails naming the ranks that did not arrive"},
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
    .settle = settle,
    .probe = probe,
    .estimate = estimate,
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_STRATEGY,
    .name = "local_sgd",
    .version = "1.0.0",
    .description = "local SGD: ranks step independently and average their models every k steps",
    .options = opts,
    .n_options = sizeof opts / sizeof opts[0],
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
