/* `trainer plan`: a dry run. Loads the config and the plugins, builds the data and the model
 * (one replica, to know the parameters and to measure activations), and asks the chosen
 * strategy and the alternatives (cpu, ddp, sharded stages 1-3) what they would hold per
 * rank. Nothing is trained, no process is launched, no run folder is written. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/env.h"
#include "job.h"
#include "run/run_api.h"
#include "trainer/comm.h"
#include "replica_impl.h"
#include "run/model_factory.h"
#include "trainer/memory.h"
#include "trainer/replica.h"

size_t tr_estimate_param_floats(const tr_strategy_estimate_env *env, size_t align) {
    size_t n = 0;
    if (align == 0) align = 16;
    for (int i = 0; i < env->n_params; i++) n += ((size_t)env->param_numel[i] + align - 1) / align * align;
    return n;
}

tr_status tr_estimate_replica(const tr_strategy_estimate_env *env, size_t align, int64_t samples,
                              tr_strategy_memory *out) {
    uint64_t f = tr_estimate_param_floats(env, align), act;
    TR_CHECK(env->activations(env->user, samples, &act));
    *out = (tr_strategy_memory){.params = 4 * (f + env->buffer_floats), .grads = 4 * f,
                                .optimizer = 4 * f * (uint64_t)env->optim_states, .activations = act};
    out->all_devices = out->params + out->grads + out->optimizer + out->activations;
    return TR_OK;
}

enum { MAX_SIZES = 16 };

typedef struct planner {
    job *j;
    int64_t sizes[MAX_SIZES];    /* activation peaks measured so far, by sample count */
    int everys[MAX_SIZES];       /* and activation checkpointing (the factory's) */
    uint64_t peaks[MAX_SIZES];
    int n_sizes;
} planner;

/* The arena peak of one training forward and backward of `samples` samples, on a fresh
 * replica (so the peak is this size's alone), from the first samples of the train split
 * (repeated when it is smaller). */
static tr_status activations(void *user, int64_t samples, uint64_t *bytes) {
    planner *pl = user;
    job *j = pl->j;
    int every = model_factory_checkpointing(j->models);
    for (int i = 0; i < pl->n_sizes; i++)
        if (pl->sizes[i] == samples && pl->everys[i] == every) {
            *bytes = pl->peaks[i];
            return TR_OK;
        }
    if (samples <= 0) {
        *bytes = 0;
        return TR_OK;
    }
    const tr_dataset_ops *dops = j->data_p->desc->ops;
    int64_t n = dops->size(j->train_ds);
    size_t xb = (size_t)j->spec.x_numel * tr_dtype_size(j->spec.x_dtype), yb = (size_t)j->spec.y_numel * tr_dtype_size(j->spec.y_dtype);
    size_t xbytes, ybytes;
    if (n <= 0 || __builtin_mul_overflow(xb, (size_t)samples, &xbytes) || __builtin_mul_overflow(yb, (size_t)samples, &ybytes) ||
        xbytes > SIZE_MAX / 2 || ybytes > SIZE_MAX / 2)
        return tr_error_set(TR_ERR_INVALID, "plan: cannot measure a batch of %lld samples of %lld-sample data", (long long)samples,
                            (long long)n);
    char *x = tr_malloc(xbytes), *y = tr_malloc(ybytes);
    tr_replica *r = NULL;
    tr_status st = x && y ? TR_OK : tr_error_set(TR_ERR_NOMEM, "plan: out of memory for a batch of %lld", (long long)samples);
    for (int64_t i = 0; st == TR_OK && i < samples; i++) st = dops->get(j->train_ds, i % n, x + xb * (size_t)i, y + yb * (size_t)i);
    if (st == TR_OK) st = tr_replica_create(j->models, &r);
    if (st == TR_OK) {
        tr_host_batch hb = {.x = x, .y = y, .size = samples, .global_size = samples};
        tr_model_out out;
        st = tr_replica_forward(r, &hb, 0, samples, (double)samples, 0, 1, 1, &out);
        if (st == TR_OK) st = tr_backward(r->g, out.loss, NULL);
        if (st == TR_OK) *bytes = tr_graph_activation_peak(r->g);
    }
    tr_replica_destroy(r);
    tr_free(x);
    tr_free(y);
    if (st == TR_OK && pl->n_sizes < MAX_SIZES) {
        pl->sizes[pl->n_sizes] = samples;
        pl->everys[pl->n_sizes] = every;
        pl->peaks[pl->n_sizes++] = *bytes;
    }
    return st;
}

/* One rank's activations at the chosen row's batch with trainer.activation_checkpointing as
 * configured (every block when it is off) and without it. */
static tr_status plan_checkpointing(planner *pl, tr_plan_report *rep) {
    tr_model_factory *f = pl->j->models;
    int every = model_factory_checkpointing(f);
    rep->act_ckpt_every = every;
    if (rep->rank_batch <= 0) return TR_OK;
    model_factory_set_checkpointing(f, every ? every : 1);
    tr_status st = activations(pl, rep->rank_batch, &rep->act_with);
    model_factory_set_checkpointing(f, 0);
    if (st == TR_OK) st = activations(pl, rep->rank_batch, &rep->act_without);
    model_factory_set_checkpointing(f, every);
    return st;
}

/* One row: strategy `name` with option strings kv (NULL: the config's own `strategy:`
 * options when it is the chosen one). A strategy that is missing, cannot run here or has no
 * estimate gets a row that says so. */
static void add_row(planner *pl, const tr_strategy_estimate_env *env, tr_plan_report *rep, const char *name,
                    const char *label, const char *const *kv, int n_kv, int devices, int chosen) {
    if (rep->n_rows >= TR_PLAN_MAX_ROWS) return;
    job *j = pl->j;
    tr_plan_row *row = &rep->rows[rep->n_rows++];
    memset(row, 0, sizeof *row);
    snprintf(row->strategy, sizeof row->strategy, "%s", label);
    row->chosen = chosen;
    const tr_plugin *p;
    if (tr_registry_find(j->reg, TR_PLUGIN_STRATEGY, name, &p) != TR_OK) {
        snprintf(row->note, sizeof row->note, "not available: %s", tr_error_msg());
        return;
    }
    tr_strategy_ops ops;
    if (job_strategy_ops(p, &ops) != TR_OK) {
        snprintf(row->note, sizeof row->note, "refused: %s", tr_error_msg());
        return;
    }
    tr_options *o = NULL;
    tr_status st = chosen ? TR_OK
                          : tr_options_create(&o, p->desc->options, p->desc->n_options, kv, n_kv, "plan");
    if (st != TR_OK) snprintf(row->note, sizeof row->note, "options refused: %s", tr_error_msg());
    const tr_options *use = chosen ? j->strat_opts : o;
    tr_strategy_estimate_env e = *env;
    e.devices = devices;
    if (st == TR_OK && ops.probe) {
        tr_strategy_probe pe = {.devices = devices, .gpus = j->gpus.count, .registry = j->reg, .accelerator = j->accelerator,
                                .gpu_backend = j->accelerator == TR_ACCEL_GPU ? j->gpus.backend : NULL};
        st = ops.probe(use, &pe);
        if (st != TR_OK) snprintf(row->note, sizeof row->note, "cannot run here: %s", tr_error_msg());
    }
    if (st == TR_OK && !ops.estimate) snprintf(row->note, sizeof row->note, "no estimate (the plugin has none)");
    if (st == TR_OK && ops.estimate) {
        tr_strategy_estimate est;
        memset(&est, 0, sizeof est);
        st = ops.estimate(use, &e, &est);
        if (st == TR_OK) {
            row->memory = est.memory;
            row->world = est.world;
            row->rank_batch = est.rank_batch;
            row->estimated = 1;
        } else {
            snprintf(row->note, sizeof row->note, "estimate failed: %s", tr_error_msg());
        }
    }
    tr_options_destroy(o);
}

/* The ZeRO stage when the chosen strategy is `sharded`, else 0. */
static int64_t chosen_stage_of(const job *j) {
    return strcmp(j->strat_p->desc->name, "sharded") == 0 ? tr_options_int(j->strat_opts, "stage") : 0;
}

/* The backend the ranks of a rank strategy (one with a `backend` option) will join, as
 * tr_comm_open_ranks resolves it: under a launcher from its hosts, else one host. */
static void plan_backend(const job *j, int world, tr_plan_report *rep) {
    const char *asked = tr_options_string(j->strat_opts, "backend");
    if (!asked || world < 2) return;
    tr_comm_env env = {.size = world, .local_size = world};
    if (tr_comm_env_launcher() && tr_comm_env_detect(&env) != TR_OK) return; /* job_check_world said why */
    tr_comm_ranks ranks = {.gpu_plugin = j->accelerator == TR_ACCEL_GPU ? j->gpus.backend->desc->name : NULL};
    const char *name = tr_comm_resolve_backend(j->reg, asked, &ranks, &env);
    char hosts[512] = "one host";
    if (env.local_size != env.size) tr_comm_env_hosts(&env, hosts, sizeof hosts);
    snprintf(rep->backend, sizeof rep->backend, "%s (strategy.backend %s%s: %s on %s)", name, asked,
             strcmp(asked, "auto") ? "" : " picks it", ranks.gpu_plugin ? "GPU ranks" : "CPU ranks", hosts);
}

static tr_status plan(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                      const char *const *plugin_dirs, tr_plan_report *rep) {
    TR_CHECK(job_plan(j, config_path, overrides, n_overrides, plugin_dirs));
    TR_CHECK(job_open_model(j));
    planner pl = {.j = j};
    /* The model's parameters: one replica's registry. */
    tr_replica *r;
    TR_CHECK(tr_replica_create(j->models, &r));
    int np = tr_params_count(r->P);
    int64_t *numel = calloc((size_t)(np ? np : 1), sizeof *numel);
    if (!numel) {
        tr_replica_destroy(r);
        return tr_error_set(TR_ERR_NOMEM, "plan: out of memory");
    }
    for (int i = 0; i < np; i++) numel[i] = tr_tensor_numel(tr_params_get(r->P, i));
    rep->params = tr_params_trainable(r->P);
    size_t buffers = tr_params_buffers_numel(r->P);
    tr_replica_destroy(r);

    const tr_dataset_ops *dops = j->data_p->desc->ops;
    snprintf(rep->strategy, sizeof rep->strategy, "%s", j->strat_p->desc->name);
    snprintf(rep->reason, sizeof rep->reason, "%s", j->why);
    snprintf(rep->model, sizeof rep->model, "%s", j->model_p->desc->name);
    snprintf(rep->data, sizeof rep->data, "%s", j->data_p->desc->name);
    rep->train_samples = dops->size(j->train_ds);
    rep->global_batch = j->s.batch;
    rep->grad_accum = j->s.accum;
    rep->devices = (int)j->s.devices;
    /* Under a launcher the ranks are its own, on this host and across hosts (a GPU count is
     * this host's); else the strategy's processes, or one process of its devices' replicas. */
    int world = job_world(j, &rep->processes), devices = world > 1 ? world : (int)j->s.devices;
    int states = j->s.optim.kind == TR_OPTIM_SGD ? (j->s.optim.momentum != 0) : 2;
    tr_strategy_estimate_env env = {.devices = devices, .global_batch = j->s.batch, .grad_accum = j->s.accum,
                                    .n_params = np, .param_numel = numel, .buffer_floats = buffers,
                                    .optim_states = states, .activations = activations, .user = &pl};
    /* The chosen strategy with the config's options, then the alternatives at the same
     * device count (at least 2 for the distributed ones, which need ranks to share work). */
    char label[64];
    if (chosen_stage_of(j) > 0) snprintf(label, sizeof label, "sharded stage %lld", (long long)chosen_stage_of(j));
    else snprintf(label, sizeof label, "%s", j->strat_p->desc->name);
    add_row(&pl, &env, rep, j->strat_p->desc->name, label, NULL, 0, devices, 1);
    int n = devices > 1 ? devices : 2;
    const char *s1[] = {"stage=1"}, *s2[] = {"stage=2"}, *s3[] = {"stage=3"};
    if (strcmp(j->strat_p->desc->name, "cpu") != 0) add_row(&pl, &env, rep, "cpu", "cpu", NULL, 0, 1, 0);
    if (strcmp(j->strat_p->desc->name, "ddp") != 0) add_row(&pl, &env, rep, "ddp", "ddp", NULL, 0, n, 0);
    int64_t chosen_stage = chosen_stage_of(j);
    if (chosen_stage != 1) add_row(&pl, &env, rep, "sharded", "sharded stage 1", s1, 1, n, 0);
    if (chosen_stage != 2) add_row(&pl, &env, rep, "sharded", "sharded stage 2", s2, 1, n, 0);
    if (chosen_stage != 3) add_row(&pl, &env, rep, "sharded", "sharded stage 3", s3, 1, n, 0);
    free(numel);
    plan_backend(j, world, rep);
    /* The chosen row's own world and batch head the report. */
    rep->world = rep->rows[0].world;
    rep->rank_batch = rep->rows[0].rank_batch;
    return plan_checkpointing(&pl, rep);
}

tr_status tr_run_plan_report(const char *config_path, const char *const *overrides, int n_overrides,
                             const char *const *plugin_dirs, tr_plan_report *out) {
    job j;
    memset(&j, 0, sizeof j);
    memset(out, 0, sizeof *out);
    tr_status st = plan(&j, config_path, overrides, n_overrides, plugin_dirs, out);
    job_close(&j);
    return st;
}
