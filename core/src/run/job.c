/* A training job from a config: plugins, data, the CPU training loop, validation and the
 * run directory. (The cpu strategy plugin and checkpoints plug in here next.) */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <signal.h>

#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/data.h"
#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/ops.h"
#include "trainer/optim.h"
#include "trainer/run.h"
#include "trainer/runtime.h"

typedef struct job {
    tr_config *cfg;
    const tr_cfg_node *root;
    char cfg_dir[1024];
    tr_registry *reg;
    const tr_plugin *model_p, *data_p;
    void *model, *train_ds, *val_ds;
    tr_data_spec spec;
    tr_params *P;
    tr_graph *g;
    tr_optim *opt;
    tr_loader *train_L, *val_L;
    FILE *log, *metrics;
    char run_dir[1024];
} job;

static void say(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(job *j, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("%s\n", line);
    fflush(stdout);
    if (j->log) {
        fprintf(j->log, "%s\n", line);
        fflush(j->log);
    }
}

/* A plugin's options section (a mapping, or absent) as "key=value" strings. */
static tr_status options_from(const tr_cfg_node *map, const tr_plugin *p, tr_options **out) {
    const char *kv[64];
    char buf[64][512];
    int n = 0;
    char where[256];
    snprintf(where, sizeof where, "%s:%d:%d: %s", map ? tr_cfg_source(map) : "config",
             map ? tr_cfg_line(map) : 0, map ? tr_cfg_column(map) : 0,
             map ? tr_cfg_path(map) : "params");
    if (map && tr_cfg_node_kind(map) != TR_CFG_MAP)
        return tr_error_set(TR_ERR_INVALID, "%s: expected a mapping of %s options", where, p->desc->name);
    for (size_t i = 0; map && i < tr_cfg_size(map) && n < 64; i++) {
        const tr_cfg_node *v = tr_cfg_item(map, i);
        if (tr_cfg_node_kind(v) == TR_CFG_SCALAR) {
            snprintf(buf[n], sizeof buf[n], "%s=%s", tr_cfg_key(map, i), tr_cfg_scalar(v));
        } else if (tr_cfg_node_kind(v) == TR_CFG_SEQ) {
            size_t len = (size_t)snprintf(buf[n], sizeof buf[n], "%s=[", tr_cfg_key(map, i));
            for (size_t k = 0; k < tr_cfg_size(v) && len < sizeof buf[n]; k++) {
                const char *s = tr_cfg_scalar(tr_cfg_item(v, k));
                len += (size_t)snprintf(buf[n] + len, sizeof buf[n] - len, "%s%s", k ? ", " : "", s ? s : "");
            }
            if (len < sizeof buf[n]) snprintf(buf[n] + len, sizeof buf[n] - len, "]");
        } else {
            return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: expected a value or a list",
                                tr_cfg_source(v), tr_cfg_line(v), tr_cfg_column(v), tr_cfg_path(v));
        }
        kv[n] = buf[n];
        n++;
    }
    return tr_options_create(out, p->desc->options, p->desc->n_options, kv, n, where);
}

/* The config's `plugins:` folders (relative to the config) come first in the search. */
static tr_status find_plugins(job *j, const char *const *plugin_dirs) {
    TR_CHECK(tr_registry_create(&j->reg));
    const tr_cfg_node *pl = tr_cfg_child(j->root, "plugins");
    enum { MAX_DIRS = 32 };
    char paths[MAX_DIRS][1024];
    const char *first[MAX_DIRS + 1];
    int n = 0;
    for (size_t i = 0; pl && i < tr_cfg_size(pl) && n < MAX_DIRS; i++) {
        const char *d = tr_cfg_scalar(tr_cfg_item(pl, i));
        if (!d) continue;
        tr_path_resolve(paths[n], sizeof paths[n], j->cfg_dir, d);
        first[n] = paths[n];
        n++;
    }
    first[n] = NULL;
    return tr_registry_scan_search_path(j->reg, first, plugin_dirs);
}

static tr_status plugin_for(job *j, const char *section, tr_plugin_kind kind, const tr_plugin **out) {
    const char *name;
    char key[64];
    snprintf(key, sizeof key, "%s.name", section);
    TR_CHECK(tr_cfg_get_string(j->root, key, NULL, &name, 1));
    if (tr_registry_find(j->reg, kind, name, out) != TR_OK) {
        const tr_cfg_node *n = tr_config_find(j->cfg, key);
        tr_error_prefix("%s:%d:%d: %s: ", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n), key);
        return TR_ERR_NOT_FOUND;
    }
    return TR_OK;
}

static tr_status make_dataset(job *j, const tr_cfg_node *data, tr_split split, uint64_t seed,
                              double val_fraction, void **out) {
    const tr_dataset_ops *ops = j->data_p->desc->ops;
    /* The validation split reads `val_params` when given, else the same `params`. */
    const tr_cfg_node *params = tr_cfg_child(data, "params");
    if (split == TR_SPLIT_VAL && tr_cfg_child(data, "val_params")) params = tr_cfg_child(data, "val_params");
    tr_options *o;
    TR_CHECK(options_from(params, j->data_p, &o));
    tr_dataset_env env = {.split = split, .seed = seed, .base_dir = j->cfg_dir, .val_fraction = val_fraction};
    tr_status st = ops->create(out, o, &env);
    tr_options_destroy(o);
    if (st != TR_OK) tr_error_prefix("data (%s, %s split): ", j->data_p->desc->name, split == TR_SPLIT_VAL ? "validation" : "train");
    return st;
}

/* Graph inputs viewing a host batch in place (the loader keeps it until its next batch). */
static void batch_inputs(job *j, const tr_host_batch *hb, tr_batch *b, int with_y) {
    int64_t shape[TR_MAX_DIMS];
    shape[0] = hb->size;
    for (int d = 0; d < j->spec.x_ndim; d++) shape[1 + d] = j->spec.x_shape[d];
    b->x = tr_graph_view(j->g, hb->x, j->spec.x_dtype, 1 + j->spec.x_ndim, shape);
    b->y = NULL;
    if (with_y) {
        for (int d = 0; d < j->spec.y_ndim; d++) shape[1 + d] = j->spec.y_shape[d];
        b->y = tr_graph_view(j->g, hb->y, j->spec.y_dtype, 1 + j->spec.y_ndim, shape);
    }
    b->size = hb->size;
    b->first = hb->first;
    int64_t per = j->spec.task == TR_TASK_LM ? j->spec.y_numel : 1;
    b->normaliser = (double)hb->global_size * (double)per;
}

/* Counts argmax hits of logits (N, C) against integer targets (N). */
static int64_t count_correct(const tr_tensor *logits, const tr_tensor *y) {
    int64_t C = logits->shape[logits->ndim - 1], N = tr_tensor_numel(logits) / C, hits = 0;
    const float *l = logits->data;
    const int32_t *t = y->data;
    for (int64_t i = 0; i < N; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (l[i * C + c] > l[i * C + best]) best = c;
        hits += best == t[i];
    }
    return hits;
}

static tr_status validate(job *j, int64_t epoch, double *loss, double *acc) {
    *loss = NAN;
    *acc = NAN;
    if (!j->val_L) return TR_OK;
    tr_graph_set_training(j->g, 0);
    tr_graph_set_grad_enabled(j->g, 0);
    TR_CHECK(tr_loader_start_epoch(j->val_L, epoch, 0));
    const tr_model_ops *m = j->model_p->desc->ops;
    double lsum = 0;
    int64_t hits = 0, count = 0;
    const tr_host_batch *hb;
    tr_status st;
    while ((st = tr_loader_next(j->val_L, &hb)) == TR_OK && hb) {
        tr_graph_reset(j->g);
        tr_batch b;
        batch_inputs(j, hb, &b, 1);
        b.normaliser = 1; /* summed here, divided once at the end */
        tr_model_out mo = {0};
        TR_CHECK(m->forward(j->model, j->g, j->P, &b, &mo));
        TR_CHECK(tr_graph_status(j->g));
        lsum += ((float *)mo.loss->data)[0];
        if (j->spec.task != TR_TASK_REGRESS) hits += count_correct(mo.logits, b.y);
        count += hb->size * (j->spec.task == TR_TASK_LM ? j->spec.y_numel : 1);
    }
    tr_graph_set_training(j->g, 1);
    tr_graph_set_grad_enabled(j->g, 1);
    TR_CHECK(st);
    if (count) {
        *loss = lsum / (double)count;
        if (j->spec.task != TR_TASK_REGRESS) *acc = (double)hits / (double)count;
    }
    return TR_OK;
}

/* Saves step-<step>, prunes to keep_last. TRAINER_FAULT_KILL_AT_STEP=N kills the process with
 * SIGKILL right after the checkpoint of step N is complete (fault-injection tests). */
static tr_status save_checkpoint(job *j, const char *dir, const tr_train_state *s, int64_t keep_last) {
    char name[64];
    snprintf(name, sizeof name, "step-%08lld", (long long)s->step);
    TR_CHECK(tr_checkpoint_save(dir, name, j->P, j->opt, s));
    TR_CHECK(tr_checkpoint_prune(dir, (int)keep_last));
    const char *kill_at = getenv("TRAINER_FAULT_KILL_AT_STEP");
    if (kill_at && atoll(kill_at) == s->step) raise(SIGKILL);
    return TR_OK;
}

static const char *const top_keys[] = {"run", "model", "data", "optimizer", "scheduler", "trainer", "checkpoint", "plugins"};
static const char *const ckpt_keys[] = {"every_n_epochs", "every_n_steps", "keep_last", "resume"};
static const char *const run_keys[] = {"name", "seed", "output_dir"};
static const char *const model_keys[] = {"name", "params"};
static const char *const data_keys[] = {"name", "params", "val_params", "batch_size", "shuffle", "drop_last", "prefetch", "val_fraction"};
static const char *const opt_keys[] = {"name", "lr", "weight_decay", "momentum", "dampening", "nesterov", "betas", "eps"};
static const char *const sched_keys[] = {"name", "warmup_steps", "step_size", "gamma", "min_lr"};
static const char *const trainer_keys[] = {"max_epochs", "max_steps", "grad_accum", "grad_clip", "log_every", "threads", "strategy", "accelerator", "precision"};
#define N_(a) (sizeof(a) / sizeof(a[0]))

static tr_status read_optim(job *j, tr_optim_config *oc) {
    const tr_cfg_node *r = j->root;
    int kind;
    TR_CHECK(tr_cfg_get_choice(r, "optimizer.name", "sgd|adam|adamw", "adamw", &kind, 0));
    *oc = tr_optim_defaults((tr_optim_kind)kind);
    TR_CHECK(tr_cfg_get_float(r, "optimizer.lr", oc->lr, 1e-12, 1e3, &oc->lr, 0));
    TR_CHECK(tr_cfg_get_float(r, "optimizer.weight_decay", oc->weight_decay, 0, 10, &oc->weight_decay, 0));
    TR_CHECK(tr_cfg_get_float(r, "optimizer.momentum", oc->momentum, 0, 1, &oc->momentum, 0));
    TR_CHECK(tr_cfg_get_float(r, "optimizer.dampening", oc->dampening, 0, 1, &oc->dampening, 0));
    TR_CHECK(tr_cfg_get_bool(r, "optimizer.nesterov", oc->nesterov, &oc->nesterov, 0));
    TR_CHECK(tr_cfg_get_float(r, "optimizer.eps", oc->eps, 0, 1, &oc->eps, 0));
    const tr_cfg_node *betas = tr_config_find(j->cfg, "optimizer.betas");
    if (betas) {
        if (tr_cfg_node_kind(betas) != TR_CFG_SEQ || tr_cfg_size(betas) != 2)
            return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: optimizer.betas: expected [beta1, beta2]",
                                tr_cfg_source(betas), tr_cfg_line(betas), tr_cfg_column(betas));
        TR_CHECK(tr_cfg_get_float(r, "optimizer.betas[0]", 0.9, 0, 0.999999, &oc->beta1, 1));
        TR_CHECK(tr_cfg_get_float(r, "optimizer.betas[1]", 0.999, 0, 0.999999, &oc->beta2, 1));
    }
    tr_status st = tr_optim_config_validate(oc);
    if (st != TR_OK) tr_error_prefix("%s: ", tr_cfg_source(r));
    return st;
}

static void job_free(job *j) {
    tr_loader_destroy(j->train_L);
    tr_loader_destroy(j->val_L);
    if (j->g) tr_graph_destroy(j->g);
    tr_optim_destroy(j->opt);
    if (j->model) ((const tr_model_ops *)j->model_p->desc->ops)->destroy(j->model);
    if (j->train_ds) ((const tr_dataset_ops *)j->data_p->desc->ops)->destroy(j->train_ds);
    if (j->val_ds) ((const tr_dataset_ops *)j->data_p->desc->ops)->destroy(j->val_ds);
    tr_params_destroy(j->P);
    tr_registry_destroy(j->reg);
    tr_config_destroy(j->cfg);
    if (j->log) fclose(j->log);
    if (j->metrics) fclose(j->metrics);
}

static tr_status run(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                     const char *const *plugin_dirs, tr_run_result *res) {
    TR_CHECK(tr_config_load(&j->cfg, config_path));
    for (int i = 0; i < n_overrides; i++) TR_CHECK(tr_config_override(j->cfg, overrides[i]));
    j->root = tr_config_root(j->cfg);
    char dirbuf[1024];
    snprintf(dirbuf, sizeof dirbuf, "%s", config_path);
    snprintf(j->cfg_dir, sizeof j->cfg_dir, "%s", dirname(dirbuf));
    TR_CHECK(tr_cfg_check_keys(j->root, top_keys, N_(top_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(j->root, "run"), run_keys, N_(run_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(j->root, "model"), model_keys, N_(model_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(j->root, "data"), data_keys, N_(data_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(j->root, "optimizer"), opt_keys, N_(opt_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(j->root, "scheduler"), sched_keys, N_(sched_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(j->root, "trainer"), trainer_keys, N_(trainer_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(j->root, "checkpoint"), ckpt_keys, N_(ckpt_keys)));

    const char *name, *outdir;
    int64_t seed, batch, prefetch, max_epochs, max_steps, log_every, threads, warmup, step_size;
    double val_fraction, grad_clip, gamma, min_lr;
    int shuffle, drop_last, sched_kind, strategy, accel, precision;
    const tr_cfg_node *r = j->root;
    TR_CHECK(tr_cfg_get_string(r, "run.name", "run", &name, 0));
    TR_CHECK(tr_cfg_get_int(r, "run.seed", 1, 0, INT64_MAX, &seed, 0));
    TR_CHECK(tr_cfg_get_string(r, "run.output_dir", "runs", &outdir, 0));
    TR_CHECK(tr_cfg_get_int(r, "data.batch_size", 64, 1, 1 << 24, &batch, 0));
    TR_CHECK(tr_cfg_get_bool(r, "data.shuffle", 1, &shuffle, 0));
    TR_CHECK(tr_cfg_get_bool(r, "data.drop_last", 0, &drop_last, 0));
    TR_CHECK(tr_cfg_get_int(r, "data.prefetch", 2, 0, 64, &prefetch, 0));
    TR_CHECK(tr_cfg_get_float(r, "data.val_fraction", 0.1, 0, 0.9, &val_fraction, 0));
    TR_CHECK(tr_cfg_get_int(r, "trainer.max_epochs", 10, 1, 1000000, &max_epochs, 0));
    TR_CHECK(tr_cfg_get_int(r, "trainer.max_steps", -1, -1, INT64_MAX, &max_steps, 0));
    TR_CHECK(tr_cfg_get_float(r, "trainer.grad_clip", 0, 0, 1e9, &grad_clip, 0));
    int64_t accum;
    TR_CHECK(tr_cfg_get_int(r, "trainer.grad_accum", 1, 1, 1000000, &accum, 0));
    TR_CHECK(tr_cfg_get_int(r, "trainer.log_every", 50, 1, INT64_MAX, &log_every, 0));
    TR_CHECK(tr_cfg_get_int(r, "trainer.threads", 0, 0, 4096, &threads, 0));
    TR_CHECK(tr_cfg_get_choice(r, "trainer.strategy", "auto|cpu", "auto", &strategy, 0));
    TR_CHECK(tr_cfg_get_choice(r, "trainer.accelerator", "auto|cpu", "auto", &accel, 0));
    TR_CHECK(tr_cfg_get_choice(r, "trainer.precision", "fp32", "fp32", &precision, 0));
    TR_CHECK(tr_cfg_get_choice(r, "scheduler.name", "constant|step|cosine", "constant", &sched_kind, 0));
    TR_CHECK(tr_cfg_get_int(r, "scheduler.warmup_steps", 0, 0, INT64_MAX, &warmup, 0));
    TR_CHECK(tr_cfg_get_int(r, "scheduler.step_size", 1000, 1, INT64_MAX, &step_size, 0));
    TR_CHECK(tr_cfg_get_float(r, "scheduler.gamma", 0.1, 0, 1, &gamma, 0));
    TR_CHECK(tr_cfg_get_float(r, "scheduler.min_lr", 0, 0, 1e3, &min_lr, 0));
    int64_t ck_epochs, ck_steps, keep_last;
    int resume;
    TR_CHECK(tr_cfg_get_int(r, "checkpoint.every_n_epochs", 1, 0, INT64_MAX, &ck_epochs, 0));
    TR_CHECK(tr_cfg_get_int(r, "checkpoint.every_n_steps", 0, 0, INT64_MAX, &ck_steps, 0));
    TR_CHECK(tr_cfg_get_int(r, "checkpoint.keep_last", 3, 1, 1000000, &keep_last, 0));
    TR_CHECK(tr_cfg_get_choice(r, "checkpoint.resume", "auto|never", "auto", &resume, 0));
    tr_optim_config oc;
    TR_CHECK(read_optim(j, &oc));
    tr_set_num_threads((int)threads);

    TR_CHECK(find_plugins(j, plugin_dirs));
    TR_CHECK(plugin_for(j, "model", TR_PLUGIN_MODEL, &j->model_p));
    TR_CHECK(plugin_for(j, "data", TR_PLUGIN_DATASET, &j->data_p));
    const tr_dataset_ops *dops = j->data_p->desc->ops;
    const tr_model_ops *mops = j->model_p->desc->ops;
    const tr_cfg_node *data = tr_cfg_child(r, "data");
    TR_CHECK(make_dataset(j, data, TR_SPLIT_TRAIN, (uint64_t)seed, val_fraction, &j->train_ds));
    dops->spec(j->train_ds, &j->spec);
    if (make_dataset(j, data, TR_SPLIT_VAL, (uint64_t)seed, val_fraction, &j->val_ds) != TR_OK) {
        j->val_ds = NULL; /* no validation split: train only */
        TR_INFO("no validation data: %s", tr_error_msg());
    }

    TR_CHECK(tr_params_create(&j->P));
    tr_options *mo;
    TR_CHECK(options_from(tr_cfg_child(tr_cfg_child(r, "model"), "params"), j->model_p, &mo));
    tr_status st = mops->create(&j->model, mo, &j->spec, j->P);
    tr_options_destroy(mo);
    if (st != TR_OK) {
        tr_error_prefix("model %s: ", j->model_p->desc->name);
        return st;
    }
    TR_CHECK(tr_params_finalize(j->P, (uint64_t)seed));
    TR_CHECK(tr_graph_create(&j->g, 0));
    tr_graph_set_params(j->g, j->P);
    TR_CHECK(tr_optim_create(&j->opt, &oc, tr_params_numel(j->P)));

    tr_sampler ts = {.n = dops->size(j->train_ds), .global_batch = batch, .rank = 0, .world = 1,
                     .shuffle = shuffle, .drop_last = drop_last, .seed = (uint64_t)seed};
    if (ts.n == 0) return tr_error_set(TR_ERR_INVALID, "data: the training split is empty");
    TR_CHECK(tr_loader_create(&j->train_L, dops, j->train_ds, &j->spec, &ts, (int)prefetch));
    if (j->val_ds && dops->size(j->val_ds) > 0) {
        tr_sampler vs = ts;
        vs.n = dops->size(j->val_ds);
        vs.shuffle = 0;
        vs.drop_last = 0;
        TR_CHECK(tr_loader_create(&j->val_L, dops, j->val_ds, &j->spec, &vs, (int)prefetch));
    }
    int64_t n_batches = tr_sampler_batches(&ts);
    /* With accumulation an optimizer step takes `accum` batches; the epoch's last group may
     * be shorter. per_epoch counts optimizer steps. */
    int64_t per_epoch = (n_batches + accum - 1) / accum;
    if (per_epoch == 0) return tr_error_set(TR_ERR_INVALID, "data: no complete batch (drop_last with fewer samples than data.batch_size)");
    int64_t total = max_steps > 0 ? max_steps : per_epoch * max_epochs;
    if (max_steps > 0 && (max_steps + per_epoch - 1) / per_epoch < max_epochs)
        max_epochs = (max_steps + per_epoch - 1) / per_epoch;
    tr_sched_config sc = {.kind = (tr_sched_kind)sched_kind, .warmup_steps = warmup, .step_size = step_size,
                          .gamma = gamma, .total_steps = total - warmup > 1 ? total - warmup : 1, .min_lr = min_lr};

    /* Run directory: with resume auto, the version holding the newest checkpoint of this run
     * name continues; otherwise the first unused version. */
    char ckpt[1200] = "", ck_dir[1200];
    int64_t best_step = -1;
    int found_version = -1;
    for (int v = 0; resume == 0 && v < 100000; v++) {
        char d[1100];
        snprintf(d, sizeof d, "%s/%s/%d", outdir, name, v);
        struct stat sb;
        if (stat(d, &sb) != 0) break;
        char cdir[1200], cand[1200];
        snprintf(cdir, sizeof cdir, "%s/checkpoints", d);
        const char *base;
        long long cstep;
        if (tr_checkpoint_latest(cdir, cand, sizeof cand) == TR_OK && (base = strrchr(cand, '/')) &&
            sscanf(base, "/step-%lld", &cstep) == 1 && cstep > best_step) {
            best_step = cstep;
            found_version = v;
            snprintf(ckpt, sizeof ckpt, "%s", cand);
        }
    }
    tr_train_state state = {.seed = (uint64_t)seed};
    snprintf(state.model, sizeof state.model, "%s", j->model_p->desc->name);
    if (found_version >= 0) {
        snprintf(j->run_dir, sizeof j->run_dir, "%s/%s/%d", outdir, name, found_version);
        TR_CHECK(tr_checkpoint_load(ckpt, j->P, j->opt, &state));
    } else {
        for (int v = 0; v < 100000; v++) {
            snprintf(j->run_dir, sizeof j->run_dir, "%s/%s/%d", outdir, name, v);
            struct stat sb;
            if (stat(j->run_dir, &sb) != 0) break;
        }
    }
    snprintf(ck_dir, sizeof ck_dir, "%s/checkpoints", j->run_dir);
    TR_CHECK(tr_mkdirs(j->run_dir));
    char path[1200];
    snprintf(path, sizeof path, "%s/config.yaml", j->run_dir);
    TR_CHECK(tr_config_save(j->cfg, path));
    const char *mode = found_version >= 0 ? "a" : "w";
    snprintf(path, sizeof path, "%s/log.txt", j->run_dir);
    j->log = fopen(path, mode);
    snprintf(path, sizeof path, "%s/metrics.jsonl", j->run_dir);
    j->metrics = fopen(path, mode);
    if (!j->log || !j->metrics) return tr_error_set(TR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    if (found_version >= 0)
        say(j, "resuming from %s (epoch %lld, step %lld)", ckpt, (long long)state.epoch + 1, (long long)state.step);

    say(j, "trainer %s: run %s -> %s", tr_version(), name, j->run_dir);
    say(j, "strategy cpu (%d threads); model %s (%zu parameters); data %s (%lld train, %lld validation samples); "
           "global batch %lld, %lld steps/epoch, %lld epochs",
        tr_get_num_threads(), j->model_p->desc->name, tr_params_trainable(j->P), j->data_p->desc->name,
        (long long)ts.n, (long long)(j->val_ds ? dops->size(j->val_ds) : 0), (long long)batch,
        (long long)per_epoch, (long long)max_epochs);

    int64_t step = state.step;
    double t0 = tr_now(), samples = 0, tokens_per = j->spec.task == TR_TASK_LM ? (double)j->spec.y_numel : 1;
    double epoch_loss = NAN, vloss = NAN, vacc = NAN;
    int64_t ep;
    int64_t last_saved = -1;
    for (ep = state.epoch; ep < max_epochs && step < total; ep++) {
        int64_t start_batch = ep == state.epoch ? state.batch_in_epoch : 0;
        TR_CHECK(tr_loader_start_epoch(j->train_L, ep, start_batch));
        double lsum = 0, win_loss = 0;
        int64_t nb = 0, win = 0;
        double win_t = tr_now();
        const tr_host_batch *hb;
        while (step < total && (st = tr_loader_next(j->train_L, &hb)) == TR_OK && hb) {
            tr_graph_reset(j->g);
            tr_graph_set_rng(j->g, (uint64_t)seed, (uint64_t)step, (uint64_t)hb->first);
            tr_batch b;
            batch_inputs(j, hb, &b, 1);
            /* The group of micro-batches of this optimizer step: the loss is normalised by all
             * its samples, so the accumulated gradient is the exact mean over the group. */
            int64_t g0 = hb->index - hb->index % accum;
            int64_t g1 = g0 + accum < n_batches ? g0 + accum : n_batches;
            int64_t group_samples = (g1 - g0) * batch;
            if (g1 == n_batches && n_batches * batch > ts.n) group_samples -= n_batches * batch - ts.n;
            b.normaliser *= (double)group_samples / (double)hb->global_size;
            int last_micro = hb->index + 1 == g1;
            tr_model_out out = {0};
            TR_CHECK(mops->forward(j->model, j->g, j->P, &b, &out));
            if (!out.loss) return tr_error_set(TR_ERR_PLUGIN, "model %s returned no loss", j->model_p->desc->name);
            if (hb->index == g0) tr_params_zero_grad(j->P);
            TR_CHECK(tr_backward(j->g, out.loss, NULL));
            float loss = ((float *)out.loss->data)[0] * (float)((double)group_samples / (double)hb->global_size);
            if (!isfinite(loss))
                return tr_error_set(TR_ERR_NUMERIC, "step %lld: the loss is not finite (%g)", (long long)step, loss);
            nb++;
            lsum += loss;
            samples += (double)hb->size;
            if (!last_micro) continue;
            size_t n = tr_params_numel(j->P);
            if (grad_clip > 0) tr_clip_grad_norm(tr_params_grad(j->P), n, grad_clip, tr_grad_sumsq(tr_params_grad(j->P), n));
            double lr = tr_sched_lr(&sc, oc.lr, step);
            TR_CHECK(tr_optim_step(j->opt, tr_params_data(j->P), tr_params_grad(j->P), n, lr));
            step++;
            win_loss += loss;
            win++;
            if (ck_steps > 0 && step % ck_steps == 0) {
                state.epoch = ep;
                state.step = step;
                state.batch_in_epoch = hb->index + 1;
                TR_CHECK(save_checkpoint(j, ck_dir, &state, keep_last));
                last_saved = step;
            }
            if (step % log_every == 0 || step == total) {
                double dt = tr_now() - win_t;
                double sps = dt > 0 ? (double)(win * batch * accum) / dt : 0;
                say(j, "epoch %lld  step %lld/%lld  loss %.4f  lr %.3g  %.0f samples/s%s", (long long)ep + 1,
                    (long long)step, (long long)total, win_loss / (double)win, lr, sps,
                    tokens_per > 1 ? "" : "");
                fprintf(j->metrics, "{\"step\": %lld, \"epoch\": %lld, \"loss\": %.6g, \"lr\": %.6g, \"samples_per_sec\": %.1f, \"tokens_per_sec\": %.1f}\n",
                        (long long)step, (long long)ep, win_loss / (double)win, lr, sps, sps * tokens_per);
                fflush(j->metrics);
                win = 0;
                win_loss = 0;
                win_t = tr_now();
            }
        }
        TR_CHECK(st);
        epoch_loss = nb ? lsum / (double)nb : NAN;
        TR_CHECK(validate(j, ep, &vloss, &vacc));
        char extra[128] = "";
        if (j->spec.task == TR_TASK_LM && isfinite(vloss))
            snprintf(extra, sizeof extra, "  val perplexity %.3f", exp(vloss));
        say(j, "epoch %lld/%lld done: train loss %.4f  val loss %.4f  val accuracy %.2f%%%s", (long long)ep + 1,
            (long long)max_epochs, epoch_loss, vloss, 100 * vacc, extra);
        fprintf(j->metrics, "{\"epoch\": %lld, \"step\": %lld, \"train_loss\": %.6g, \"val_loss\": %.6g, \"val_accuracy\": %.6g%s%.6g}\n",
                (long long)ep, (long long)step, epoch_loss, isfinite(vloss) ? vloss : -1, isfinite(vacc) ? vacc : -1,
                ", \"val_perplexity\": ", isfinite(vloss) ? exp(vloss) : -1);
        fflush(j->metrics);
        int last = ep + 1 >= max_epochs || step >= total;
        if (last_saved != step && ((ck_epochs > 0 && (ep + 1) % ck_epochs == 0) || last)) {
            state.epoch = ep + 1;
            state.step = step;
            state.batch_in_epoch = 0;
            TR_CHECK(save_checkpoint(j, ck_dir, &state, keep_last));
            last_saved = step;
        }
    }
    double dt = tr_now() - t0;
    snprintf(res->run_dir, sizeof res->run_dir, "%s", j->run_dir);
    res->steps = step;
    res->epochs = ep;
    res->train_loss = epoch_loss;
    res->val_loss = vloss;
    res->val_accuracy = vacc;
    res->samples_per_sec = dt > 0 ? samples / dt : 0;
    say(j, "done: %lld steps in %.1f s (%.0f samples/s); final validation accuracy: %.2f%%", (long long)step, dt,
        res->samples_per_sec, 100 * vacc);
    return TR_OK;
}

tr_status tr_run_train(const char *config_path, const char *const *overrides, int n_overrides,
                       const char *const *plugin_dirs, tr_run_result *out) {
    job j;
    memset(&j, 0, sizeof j);
    memset(out, 0, sizeof *out);
    tr_status st = run(&j, config_path, overrides, n_overrides, plugin_dirs, out);
    if (st != TR_OK && j.log) fprintf(j.log, "error: %s\n", tr_error_msg());
    job_free(&j);
    return st;
}
