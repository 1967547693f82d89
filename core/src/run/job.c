/* A job from a config, shared by `trainer run`, `eval`, `predict` and the other commands: its
 * output, opened (settings, plugins, datasets, the model, validation, the strategy) and closed,
 * and its checkpoints found and loaded. The parts: job_parts.h. */
#include "job_parts.h"
#include "plugin/plugin_impl.h"

#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io_error.h"
#include "comm/env.h"
#include "config/node.h"
#include "kernels/gemm_bf16.h"
#include "run/run_api.h"
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/runtime.h"

void job_say(job *j, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (j->info.rank != 0) return;
    progress_clear(&j->prog);
    printf("%s\n", line);
    fflush(stdout);
    job_write(j, j->log, "%s\n", line);
}

void job_write(job *j, FILE *f, const char *fmt, ...) {
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    int bad = vfprintf(f, fmt, ap) < 0;
    va_end(ap);
    bad = fflush(f) != 0 || bad;
    if (!bad || j->io_error[0]) return;
    char why[256];
    tr_io_reason(errno ? errno : EIO, why, sizeof why);
    snprintf(j->io_error, sizeof j->io_error, "%s/log.txt: write failed: %s", j->run_dir, why);
    clearerr(f);
}

void job_record(job *j, const run_record *r) {
    if (run_loggers_record(&j->loggers, r) != TR_OK && !j->io_error[0])
        snprintf(j->io_error, sizeof j->io_error, "%s", tr_error_msg());
}

tr_status job_io_status(const job *j) {
    return j->io_error[0] ? tr_error_set(TR_ERR_IO, "%s", j->io_error) : TR_OK;
}

tr_status job_read_settings(job *j) {
    j->root = tr_config_root(j->cfg);
    TR_CHECK(job_check_sections(j->root));
    return job_settings_read(j, &j->s);
}

tr_status job_plan_model(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                         const char *const *plugin_dirs) {
    TR_CHECK(tr_config_load(&j->cfg, config_path));
    for (int i = 0; i < n_overrides; i++) TR_CHECK(tr_config_override(j->cfg, overrides[i]));
    char dirbuf[1024];
    snprintf(dirbuf, sizeof dirbuf, "%s", config_path);
    snprintf(j->cfg_dir, sizeof j->cfg_dir, "%s", dirname(dirbuf));
    TR_CHECK(job_read_settings(j));
    tr_set_num_threads((int)j->s.threads);
    tr_set_flush_denormals(j->s.flush_denormals);
    tr_set_precision((tr_precision)j->s.precision);

    TR_CHECK(job_find_plugins(j, plugin_dirs));
    TR_CHECK(job_plugin_for(j, "model", TR_PLUGIN_MODEL, &j->model_p));
    TR_CHECK(job_plugin_for(j, "data", TR_PLUGIN_DATASET, &j->data_p));
    return job_absolute_paths(j);
}

tr_status job_plan(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                   const char *const *plugin_dirs) {
    TR_CHECK(job_plan_model(j, config_path, overrides, n_overrides, plugin_dirs));
    TR_CHECK(job_choose_strategy(j));
    TR_CHECK(job_check_world(j));
    /* bf16-mixed is the devices' arithmetic (tr_accel_open applies it; a device plugin that
     * cannot was refused by the strategy's probe, tr_accel_probe); on the CPU, the ops' GEMMs
     * in bf16 (kernels/gemm_bf16.h), where the CPU has AVX512-BF16. */
    int cpu_bf16 = j->s.precision == TR_PRECISION_BF16_MIXED && j->accelerator != TR_ACCEL_GPU;
    char why[160];
    if (cpu_bf16 && !tr_cpu_bf16_supported(why, sizeof why)) {
        const tr_cfg_node *n = tr_config_find(j->cfg, "trainer.precision");
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s:%d:%d: trainer.precision: %s on the CPU (strategy %s%s%s): %s, "
                                                "which %s needs there; run with trainer.precision=fp32",
                            tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n),
                            tr_precision_name((tr_precision)j->s.precision), j->picked, j->why[0] ? ": " : "", j->why,
                            why, tr_precision_name((tr_precision)j->s.precision));
    }
    tr_cpu_set_bf16(cpu_bf16);
    return TR_OK;
}

/* The validation split must hold samples the model built from the train split accepts (the
 * loader sizes its slots from the train spec). */
static tr_status check_val_spec(const job *j, const tr_data_spec *v) {
    const tr_data_spec *t = &j->spec;
    int same = v->task == t->task && v->x_dtype == t->x_dtype && v->x_ndim == t->x_ndim && v->x_numel == t->x_numel &&
               v->y_dtype == t->y_dtype && v->y_ndim == t->y_ndim && v->y_numel == t->y_numel &&
               memcmp(v->x_shape, t->x_shape, sizeof t->x_shape[0] * (size_t)t->x_ndim) == 0 &&
               memcmp(v->y_shape, t->y_shape, sizeof t->y_shape[0] * (size_t)t->y_ndim) == 0;
    if (!same)
        return tr_error_set(TR_ERR_INVALID, "data (%s): the validation split's samples (%lld x values, %lld y values) do not "
                                            "match the train split's (%lld, %lld)",
                            j->data_p->desc->name, (long long)v->x_numel, (long long)v->y_numel, (long long)t->x_numel,
                            (long long)t->y_numel);
    if (v->n_classes > t->n_classes)
        return tr_error_set(TR_ERR_INVALID, "data (%s): the validation split has %lld classes, the train split %lld (the "
                                            "model has %lld outputs)",
                            j->data_p->desc->name, (long long)v->n_classes, (long long)t->n_classes, (long long)t->n_classes);
    return TR_OK;
}

int job_processes(const job *j) {
    int n = j->sops->processes ? j->sops->processes(j->strat_opts, (int)j->s.devices) : 1;
    return n > 0 ? n : 1;
}

/* Whether an error making the validation split stops the job: always for a dataset built for
 * ABI 0.7 or later (it says "none" with an empty split, tr_dataset_ops); for an older one only
 * when the config gives data.val_params (it may have said "none" with an error). */
static int val_error_stops(const job *j) {
    const tr_plugin_desc *d = j->data_p->desc;
    return d->abi_major > 0 || d->abi_minor >= 7 || tr_cfg_find(j->root, "data.val_params") != NULL;
}

/* Batches cut to their longest sample (tr_data_spec.x_trim_pad, ABI 0.9) reach only a model
 * and a strategy built for 0.9 or later: an older one may assume every batch has the spec's
 * length, so it gets them padded to it (the same numbers where the model masks padding). */
static int built_before_trim(const tr_plugin *p) {
    return p && p->desc->abi_major == 0 && p->desc->abi_minor < 9;
}

static void trim_needs_new_plugins(job *j) {
    if (!j->spec.x_trim_pad) return;
    const tr_plugin *old = built_before_trim(j->model_p) ? j->model_p : built_before_trim(j->strat_p) ? j->strat_p : NULL;
    if (!old) return;
    j->spec.x_trim_pad = 0;
    TR_INFO("data: batches keep the full sequence length (padding: longest needs plugins built for ABI 0.9; %s %s has %u.%u)",
            tr_plugin_kind_name(old->desc->kind), old->desc->name, old->desc->abi_major, old->desc->abi_minor);
}

static tr_status open_val(job *j) {
    tr_status st = job_make_dataset(j, TR_SPLIT_VAL, &j->val_ds);
    if (st != TR_OK) {
        if (val_error_stops(j)) return st;
        TR_WARN("no validation split: %s", tr_error_msg());
        return TR_OK;
    }
    if (j->dops->size(j->val_ds) <= 0) {
        j->dops->destroy(j->val_ds);
        j->val_ds = NULL;
        TR_INFO("no validation split: data.val_fraction %g holds no sample out and no validation file is given",
                j->s.val_fraction);
        return TR_OK;
    }
    tr_data_spec vspec = {0}; /* a dataset built for an older minor fills only the fields it knows */
    j->dops->spec(j->val_ds, &vspec);
    j->val_unlabelled = j->labels_optional && j->dops->labelled && !j->dops->labelled(j->val_ds);
    return check_val_spec(j, &vspec);
}

/* The classes the model is built for: the data's, or, when a checkpoint is evaluated, the
 * checkpoint's (which must agree with the data's). */
static tr_status settle_classes(job *j) {
    if (j->spec.task != TR_TASK_CLASSIFY) return TR_OK;
    TR_CHECK(classes_of_data(&j->classes, j->dops, j->train_ds, j->spec.n_classes));
    if (j->ckpt_classes.count <= 0) return TR_OK;
    int64_t n;
    TR_CHECK(classes_reconcile(&j->classes, &j->ckpt_classes, j->ckpt_path, &n));
    j->spec.n_classes = n;
    j->classes.count = n;
    return TR_OK;
}

/* data.val_params inherits data.params: the keys it does not set are written into it with
 * params' values (defaults included), so the run's config.yaml says what the validation split
 * read, and reads back the same. */
static tr_status val_params_resolve(job *j) {
    const tr_cfg_node *params = tr_cfg_find(j->root, "data.params"), *over = tr_cfg_find(j->root, "data.val_params");
    if (!params || !over || tr_cfg_node_kind(over) != TR_CFG_MAP) return TR_OK;
    for (size_t i = 0; i < tr_cfg_size(params); i++) {
        const char *k = tr_cfg_key(params, i);
        if (job_cfg_has_key(over, k)) continue;
        char key[300];
        snprintf(key, sizeof key, "data.val_params.%s", k);
        text_buf text = {0};
        job_value_text(tr_cfg_item(params, i), &text);
        tr_status st = text.oom || !text.s ? tr_error_set(TR_ERR_NOMEM, "%s: out of memory", key)
                                           : tr_config_set(j->cfg, key, text.s);
        free(text.s);
        TR_CHECK(st);
        j->root = tr_config_root(j->cfg); /* the nodes may have moved */
        params = tr_cfg_find(j->root, "data.params");
        over = tr_cfg_find(j->root, "data.val_params");
    }
    return TR_OK;
}

tr_status job_open_model(job *j) {
    int own = !j->train_ds; /* else the caller's own samples (trainer embed's texts) */
    if (own) {
        TR_CHECK(plugin_copy_ops(j->data_p, &j->dops_table, sizeof j->dops_table,
                                 offsetof(tr_dataset_ops, get) + sizeof j->dops_table.get, "dataset", "create ... get"));
        j->dops = &j->dops_table;
        TR_CHECK(job_make_dataset(j, TR_SPLIT_TRAIN, &j->train_ds));
    }
    memset(&j->spec, 0, sizeof j->spec); /* a dataset built for an older minor fills only the fields it knows */
    j->dops->spec(j->train_ds, &j->spec);
    if (j->dops->size(j->train_ds) <= 0) return tr_error_set(TR_ERR_INVALID, "data: the training split is empty");
    trim_needs_new_plugins(j);
    TR_CHECK(settle_classes(j)); /* first: the validation split is checked against the model's classes */
    if (own) TR_CHECK(open_val(j));

    TR_CHECK(job_options_from(tr_cfg_find(j->root, "model.params"), NULL, "model.params", j->model_p, &j->model_opts));
    TR_CHECK(job_plugin_defaults(j, "model.params", j->model_p));
    TR_CHECK(job_plugin_defaults(j, "data.params", j->data_p));
    TR_CHECK(val_params_resolve(j));
    return job_make_models(j);
}

tr_status job_open(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                   const char *const *plugin_dirs) {
    TR_CHECK(job_plan(j, config_path, overrides, n_overrides, plugin_dirs));
    return job_open_planned(j);
}

tr_status job_open_planned(job *j) {
    TR_CHECK(job_open_model(j));
    return job_open_strategy(j);
}

tr_status job_open_strategy(job *j) {
    const tr_dataset_ops *dops = j->dops;
    tr_strategy_env env = {.models = j->models, .spec = &j->spec, .optim = j->s.optim, .global_batch = j->s.batch,
                           .grad_accum = j->s.accum, .threads = (int)j->s.threads, .seed = (uint64_t)j->s.seed,
                           .devices = (int)j->s.devices, .registry = j->reg, .skip_nonfinite = j->s.on_nan == ON_NAN_SKIP,
                           .accelerator = j->accelerator, .gpu_backend = j->accelerator == TR_ACCEL_GPU ? j->gpus.backend : NULL,
                           .gpu_ids = j->gpu_ids, .n_gpu_ids = j->n_gpu_ids};
    tr_status st = j->sops->create(&j->strat, j->strat_opts, &env, &j->info);
    if (st != TR_OK) j->strat = NULL;
    if (st == TR_OK) st = job_plugin_defaults(j, "strategy", j->strat_p); /* j->strat stays: job_close destroys it */
    if (st != TR_OK) {
        tr_error_prefix("strategy %s: ", j->strat_p->desc->name);
        return st;
    }

    j->train_sampler = (tr_sampler){.n = dops->size(j->train_ds), .global_batch = j->s.batch,
                                    .rank = j->info.data_rank, .world = j->info.data_world,
                                    .shuffle = j->s.shuffle, .drop_last = j->s.drop_last, .seed = (uint64_t)j->s.seed};
    if (j->train_sampler.n == 0) return tr_error_set(TR_ERR_INVALID, "data: the training split is empty");
    TR_CHECK(tr_loader_create(&j->train_L, dops, j->train_ds, &j->spec, &j->train_sampler, (int)j->s.prefetch, (int)j->s.workers));
    if (j->val_ds && dops->size(j->val_ds) > 0) {
        tr_sampler vs = j->train_sampler;
        vs.n = dops->size(j->val_ds);
        vs.shuffle = 0;
        vs.drop_last = 0;
        TR_CHECK(tr_loader_create(&j->val_L, dops, j->val_ds, &j->spec, &vs, (int)j->s.prefetch, (int)j->s.workers));
    }
    /* Validation is collective (the strategy's settle, the metric sums): every rank has it or
     * none does. */
    if (j->info.world > 1 && j->sops->all_sum) {
        double have = j->val_L != NULL;
        TR_CHECK(j->sops->all_sum(j->strat, &have, 1));
        if (have > 0 && have < j->info.world)
            return tr_error_set(TR_ERR_INVALID, "data: the validation split loaded on %.0f of %d ranks only (rank %d: %s)",
                                have, j->info.world, j->info.rank, j->val_L ? "loaded" : "none");
    }
    return TR_OK;
}

void job_close(job *j) {
    progress_end(&j->prog);
    tr_loader_destroy(j->train_L);
    tr_loader_destroy(j->val_L);
    if (j->strat) j->sops->destroy(j->strat);
    tr_model_factory_destroy(j->models);
    tr_options_destroy(j->strat_opts);
    tr_options_destroy(j->model_opts);
    if (j->train_ds) j->dops->destroy(j->train_ds);
    if (j->val_ds) j->dops->destroy(j->val_ds);
    classes_free(&j->classes);
    classes_free(&j->ckpt_classes);
    tr_registry_destroy(j->reg);
    tr_config_destroy(j->cfg);
    if (j->log) fclose(j->log);
    run_loggers_close(&j->loggers); /* a failed run's: its error is the one to report */
}

tr_status job_find_checkpoint(const char *path, char *out, size_t size) { return tr_checkpoint_find(path, out, size); }

tr_status job_resolve_checkpoint(const job *j, const char *path, char *out, size_t size) {
    if (strcmp(path, "best") != 0 && strcmp(path, "last") != 0) return tr_checkpoint_find(path, out, size);
    /* The config's run: its newest version holding the pointer. */
    char at[1200];
    struct stat sb;
    int found = -1;
    for (int v = 0; v < 100000; v++) {
        snprintf(at, sizeof at, "%s/%s/%d", j->s.outdir, j->s.name, v);
        if (stat(at, &sb) != 0) break;
        snprintf(at, sizeof at, "%s/%s/%d/checkpoints/%s", j->s.outdir, j->s.name, v, path);
        if (lstat(at, &sb) == 0) found = v;
    }
    if (found < 0)
        return tr_error_set(TR_ERR_NOT_FOUND, "%s: no version of the run %s/%s has checkpoints/%s (kept %s)", path,
                            j->s.outdir, j->s.name, path,
                            strcmp(path, "best") == 0 ? "when checkpoint.monitor is set" : "with checkpoint.save_last: true");
    snprintf(at, sizeof at, "%s/%s/%d/checkpoints/%s", j->s.outdir, j->s.name, found, path);
    return tr_checkpoint_find(at, out, size);
}

tr_status job_checkpoint_state(const job *j, const char *path, tr_train_state *state) {
    struct stat sb;
    memset(state, 0, sizeof *state);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return TR_OK; /* a weights file: no state, no model name */
    TR_CHECK(tr_checkpoint_read_state(path, state));
    if (strcmp(state->model, j->model_p->desc->name) != 0)
        return tr_error_set(TR_ERR_INVALID, "checkpoint refused: %s holds a '%s' model, the config's model is '%s'",
                            path, state->model, j->model_p->desc->name);
    return TR_OK;
}

tr_status job_load_checkpoint(job *j, const char *path, int with_optim, tr_train_state *state) {
    TR_CHECK(job_checkpoint_state(j, path, state));
    if (j->sops->shards) {
        tr_state_shards sh;
        TR_CHECK(j->sops->shards(j->strat, &sh));
        TR_CHECK(tr_checkpoint_load_pieces(path, sh.P, with_optim ? sh.opt : NULL, sh.pieces, sh.n_pieces, state));
    } else {
        tr_params *P;
        tr_optim *opt;
        TR_CHECK(j->sops->state(j->strat, &P, &opt));
        TR_CHECK(tr_checkpoint_load(path, P, with_optim ? opt : NULL, state));
    }
    if (j->sops->sync) TR_CHECK(j->sops->sync(j->strat));
    return TR_OK;
}

/* Whether run.output_dir can be made and written, without making it: its nearest existing
 * ancestor must be a writable directory. So a run that could not save anything fails before
 * any rank starts (access() answers EROFS even for root). */
static tr_status check_output_dir(const char *dir) {
    char p[1024], why[256];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return tr_error_set(TR_ERR_INVALID, "run.output_dir: '%s': longer than %zu bytes", dir, sizeof p - 1);
    struct stat sb;
    for (;;) {
        if (stat(p, &sb) == 0) break;
        if (errno == ENOTDIR) { /* a file on the way: name it */
            for (char *c = p + 1; *c; c++) {
                if (*c != '/') continue;
                *c = '\0';
                if (stat(p, &sb) == 0 && !S_ISDIR(sb.st_mode)) break;
                *c = '/';
            }
            return tr_error_set(TR_ERR_IO, "run.output_dir: %s cannot be created: %s is not a directory", dir, p);
        }
        if (errno != ENOENT)
            return tr_error_set(TR_ERR_IO, "run.output_dir: %s: %s", p, tr_io_reason(errno, why, sizeof why));
        char *slash = strrchr(p, '/');
        if (!slash) {
            snprintf(p, sizeof p, ".");
        } else if (slash == p) {
            p[1] = '\0';
        } else {
            *slash = '\0';
        }
    }
    if (!S_ISDIR(sb.st_mode))
        return tr_error_set(TR_ERR_IO, "run.output_dir: %s cannot be created: %s is not a directory", dir, p);
    if (access(p, W_OK | X_OK) != 0) {
        tr_io_reason(errno, why, sizeof why);
        if (strcmp(p, dir) == 0) return tr_error_set(TR_ERR_IO, "run.output_dir: %s cannot be written: %s", dir, why);
        return tr_error_set(TR_ERR_IO, "run.output_dir: %s cannot be created in %s: %s", dir, p, why);
    }
    return TR_OK;
}

tr_status tr_run_plan(const char *config_path, const char *const *overrides, int n_overrides,
                      const char *const *plugin_dirs, tr_run_plan_result *out) {
    memset(out, 0, sizeof *out);
    job j;
    memset(&j, 0, sizeof j);
    tr_status st = job_plan(&j, config_path, overrides, n_overrides, plugin_dirs);
    if (st == TR_OK) st = check_output_dir(j.s.outdir);
    if (st == TR_OK) {
        out->processes = job_processes(&j);
        out->max_restarts = (int)j.s.max_restarts;
        snprintf(out->strategy, sizeof out->strategy, "%s", j.strat_p->desc->name);
    }
    job_close(&j);
    return st;
}

int tr_launched_externally(void) { return tr_comm_env_launcher() != NULL; }
