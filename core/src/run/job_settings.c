/* A job's settings: every section of the config checked, and the trainer, optimizer,
 * devices and loggers read with their defaults written back. */
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

/* The keys each section may hold. */
static const char *const top_keys[] = {"run", "model", "data", "optimizer", "scheduler", "trainer", "strategy", "checkpoint", "plugins"};
static const char *const ckpt_keys[] = {"every_n_epochs", "every_n_steps", "keep_last", "resume", "monitor", "mode",
                                        "save_top_k", "save_last"};
static const char *const run_keys[] = {"name", "seed", "output_dir"};
static const char *const model_keys[] = {"name", "params", "init_from"};
static const char *const data_keys[] = {"name", "params", "val_params", "batch_size", "shuffle", "drop_last", "prefetch", "workers", "val_fraction"};
static const char *const opt_keys[] = {"name", "lr", "weight_decay", "momentum", "dampening", "nesterov", "betas", "eps"};
static const char *const sched_keys[] = {"name", "warmup_steps", "step_size", "gamma", "min_lr"};
static const char *const trainer_keys[] = {"max_epochs", "max_steps", "grad_accum", "grad_clip", "log_every", "val_every_n_steps", "val_every_n_epochs",
                                           "limit_train_batches", "limit_val_batches", "val_check_interval", "fast_dev_run",
                                           "threads", "strategy", "accelerator", "devices", "precision", "progress", "max_restarts",
                                           "on_nan", "max_consecutive_skips", "flush_denormals", "gpu_backend", "profile",
                                           "loggers", "early_stopping", "activation_checkpointing"};
#define N_(a) (sizeof(a) / sizeof(a[0]))

tr_status job_check_sections(const tr_cfg_node *r) {
    TR_CHECK(tr_cfg_check_keys(r, top_keys, N_(top_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(r, "run"), run_keys, N_(run_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(r, "model"), model_keys, N_(model_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(r, "data"), data_keys, N_(data_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(r, "optimizer"), opt_keys, N_(opt_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(r, "scheduler"), sched_keys, N_(sched_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(r, "trainer"), trainer_keys, N_(trainer_keys)));
    TR_CHECK(tr_cfg_check_keys(tr_cfg_child(r, "checkpoint"), ckpt_keys, N_(ckpt_keys)));
    return TR_OK;
}

/* Typed reads that also write an absent key's default into the config, so the run
 * directory's config.yaml is the fully resolved one. */
static tr_status set_default(job *j, const char *key, const char *text) {
    /* Exactly what the typed reads took as absent: a value they read (a quoted "" too) may be
     * borrowed by the settings and must stay. */
    const tr_cfg_node *n = tr_cfg_find(j->root, key);
    if (n && !tr_cfg_null_(n)) return TR_OK;
    TR_CHECK(tr_config_set(j->cfg, key, text));
    j->root = tr_config_root(j->cfg);
    return TR_OK;
}

tr_status job_set_default(job *j, const char *key, const char *text) { return set_default(j, key, text); }

static tr_status get_int(job *j, const char *key, int64_t def, int64_t min, int64_t max, int64_t *out) {
    TR_CHECK(tr_cfg_get_int(j->root, key, def, min, max, out, 0));
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)def);
    return set_default(j, key, text);
}

static tr_status get_float(job *j, const char *key, double def, double min, double max, double *out) {
    TR_CHECK(tr_cfg_get_float(j->root, key, def, min, max, out, 0));
    char text[32];
    snprintf(text, sizeof text, "%.10g", def);
    return set_default(j, key, text);
}

/* trainer.devices: auto, a count, -1 (all), or a list of GPU ids. */
static tr_status read_devices(job *j, job_settings *s) {
    const tr_cfg_node *n = tr_cfg_find(j->root, "trainer.devices");
    s->n_device_ids = 0;
    if (n && tr_cfg_node_kind(n) == TR_CFG_SEQ) {
        size_t k = tr_cfg_size(n);
        if (k == 0 || k > TR_MAX_DEVICE_IDS)
            return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: trainer.devices: a list of 1 to %d GPU ids, got %zu", tr_cfg_source(n),
                                tr_cfg_line(n), tr_cfg_column(n), TR_MAX_DEVICE_IDS, k);
        for (size_t i = 0; i < k; i++) {
            const char *v = tr_cfg_scalar(tr_cfg_item(n, i));
            char *end = NULL;
            long id = v ? strtol(v, &end, 10) : -1;
            if (!v || end == v || *end || id < 0 || id > 1 << 20)
                return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: trainer.devices: item %zu is not a GPU id: '%s'", tr_cfg_source(n),
                                    tr_cfg_line(n), tr_cfg_column(n), i, v ? v : "(not a scalar)");
            s->device_ids[s->n_device_ids++] = (int)id;
        }
        s->devices_asked = s->n_device_ids;
        return TR_OK;
    }
    const char *text = n ? tr_cfg_scalar(n) : NULL;
    if (!n || (text && (strcmp(text, "auto") == 0 || strcmp(text, "") == 0 || strcmp(text, "~") == 0 ||
                        strcmp(text, "null") == 0))) {
        s->devices_asked = TR_DEVICES_AUTO;
        return set_default(j, "trainer.devices", "auto");
    }
    int64_t v;
    TR_CHECK(tr_cfg_get_int(j->root, "trainer.devices", 1, -1, 4096, &v, 0));
    if (v == 0)
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: trainer.devices: 0 devices (a count >= 1, -1 for all, auto, or a list "
                                            "of GPU ids)", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n));
    s->devices_asked = (int)v;
    return TR_OK;
}

static tr_status get_bool(job *j, const char *key, int def, int *out) {
    TR_CHECK(tr_cfg_get_bool(j->root, key, def, out, 0));
    return set_default(j, key, def ? "true" : "false");
}

static tr_status get_string(job *j, const char *key, const char *def, const char **out) {
    TR_CHECK(tr_cfg_get_string(j->root, key, def, out, 0));
    return set_default(j, key, def);
}

static tr_status get_choice(job *j, const char *key, const char *choices, const char *def, int *out) {
    TR_CHECK(tr_cfg_get_choice(j->root, key, choices, def, out, 0));
    return set_default(j, key, def);
}

/* The same for a plugin's options under `section` (model.params, ...). */
tr_status job_plugin_defaults(job *j, const char *section, const tr_plugin *p) {
    for (uint32_t i = 0; i < p->desc->n_options; i++) {
        const tr_option_spec *o = &p->desc->options[i];
        if (!o->default_value) continue;
        char key[256];
        snprintf(key, sizeof key, "%s.%s", section, o->key);
        TR_CHECK(set_default(j, key, o->default_value));
    }
    return TR_OK;
}

static tr_status read_optim(job *j, tr_optim_config *oc) {
    int kind;
    TR_CHECK(get_choice(j, "optimizer.name", "sgd|adam|adamw", "adamw", &kind));
    *oc = tr_optim_defaults((tr_optim_kind)kind);
    TR_CHECK(get_float(j, "optimizer.lr", oc->lr, 1e-12, 1e3, &oc->lr));
    TR_CHECK(get_float(j, "optimizer.weight_decay", oc->weight_decay, 0, 10, &oc->weight_decay));
    TR_CHECK(get_float(j, "optimizer.momentum", oc->momentum, 0, 1, &oc->momentum));
    TR_CHECK(get_float(j, "optimizer.dampening", oc->dampening, 0, 1, &oc->dampening));
    TR_CHECK(get_bool(j, "optimizer.nesterov", oc->nesterov, &oc->nesterov));
    TR_CHECK(get_float(j, "optimizer.eps", oc->eps, 0, 1, &oc->eps));
    const tr_cfg_node *betas = tr_cfg_find(j->root, "optimizer.betas");
    if (betas) {
        if (tr_cfg_node_kind(betas) != TR_CFG_SEQ || tr_cfg_size(betas) != 2)
            return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: optimizer.betas: expected [beta1, beta2]",
                                tr_cfg_source(betas), tr_cfg_line(betas), tr_cfg_column(betas));
        /* An item left unset (optimizer.betas[1]=0.99 alone makes [~, 0.99]) takes its default. */
        TR_CHECK(get_float(j, "optimizer.betas[0]", oc->beta1, 0, 0.999999, &oc->beta1));
        TR_CHECK(get_float(j, "optimizer.betas[1]", oc->beta2, 0, 0.999999, &oc->beta2));
    } else {
        char text[64];
        snprintf(text, sizeof text, "[%.10g, %.10g]", oc->beta1, oc->beta2);
        TR_CHECK(set_default(j, "optimizer.betas", text));
    }
    tr_status st = tr_optim_config_validate(oc);
    if (st != TR_OK) tr_error_prefix("%s: ", tr_cfg_source(j->root));
    return st;
}

/* trainer.loggers: a list of logger names, each at most once (a name alone is a list of one;
 * [] none); absent: [jsonl]. */
static tr_status read_loggers(job *j, job_settings *s) {
    const tr_cfg_node *n = tr_cfg_find(j->root, "trainer.loggers");
    s->loggers = 0;
    if (!n || tr_cfg_null_(n)) {
        s->loggers = RUN_LOGGER_JSONL;
        return set_default(j, "trainer.loggers", "[jsonl]");
    }
    int seq = tr_cfg_node_kind(n) == TR_CFG_SEQ;
    for (size_t i = 0; i < (seq ? tr_cfg_size(n) : 1); i++) {
        char key[64] = "trainer.loggers";
        if (seq) snprintf(key, sizeof key, "trainer.loggers[%zu]", i);
        int k;
        TR_CHECK(tr_cfg_get_choice(j->root, key, RUN_LOGGER_NAMES, NULL, &k, 1));
        if (s->loggers & (1u << k)) {
            const tr_cfg_node *it = tr_cfg_find(j->root, key);
            return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: '%s' is listed twice", tr_cfg_source(it), tr_cfg_line(it),
                                tr_cfg_column(it), key, tr_cfg_scalar(it));
        }
        s->loggers |= 1u << k;
    }
    return TR_OK;
}

/* trainer.activation_checkpointing: false (the default), true (every block) or N >= 1 (the
 * blocks 0, N, 2N, ...): tr_graph_set_checkpointing's every, 0 for false. */
static tr_status read_act_ckpt(job *j, job_settings *s) {
    static const char *const key = "trainer.activation_checkpointing";
    const tr_cfg_node *n = tr_cfg_find(j->root, key);
    s->act_ckpt = 0;
    if (!n || tr_cfg_null_(n)) return set_default(j, key, "false");
    const char *v = tr_cfg_node_kind(n) == TR_CFG_SCALAR ? tr_cfg_scalar(n) : NULL;
    static const char *const on[] = {"true", "yes", "on"}, *const off[] = {"false", "no", "off"};
    for (int i = 0; v && i < 3; i++) {
        if (strcasecmp(v, on[i]) == 0) s->act_ckpt = 1;
        if (strcasecmp(v, off[i]) == 0) return TR_OK;
    }
    if (s->act_ckpt) return TR_OK;
    char *end = NULL;
    errno = 0;
    long every = v && *v ? strtol(v, &end, 10) : 0;
    if (v && *v && !*end && errno == 0 && every >= 1 && every <= 1 << 20) {
        s->act_ckpt = (int)every;
        return TR_OK;
    }
    return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: expected true (every block), false, or a block interval N >= 1 "
                        "(every N-th block), got '%s'", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n), key,
                        v ? v : "(not a scalar)");
}

/* run.name and run.output_dir make the run directory <output_dir>/<name>/<version>. */
static tr_status check_run_paths(const job *j, const job_settings *s) {
    const char *n = s->name;
    const tr_cfg_node *at = tr_cfg_find(j->root, "run.name");
    if (!n[0] || strchr(n, '/') || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: run.name: must name a folder (not empty, no '/', not . or ..), got '%s'",
                            tr_cfg_source(at), tr_cfg_line(at), tr_cfg_column(at), n);
    at = tr_cfg_find(j->root, "run.output_dir");
    if (!s->outdir[0])
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: run.output_dir: is empty (write . for the current folder)",
                            tr_cfg_source(at), tr_cfg_line(at), tr_cfg_column(at));
    return TR_OK;
}

tr_status job_settings_read(job *j, job_settings *s) {
    TR_CHECK(get_string(j, "run.name", "run", &s->name));
    TR_CHECK(get_int(j, "run.seed", 1, 0, INT64_MAX, &s->seed));
    TR_CHECK(get_string(j, "run.output_dir", "runs", &s->outdir));
    TR_CHECK(check_run_paths(j, s));
    TR_CHECK(get_int(j, "data.batch_size", 64, 1, 1 << 24, &s->batch));
    TR_CHECK(get_bool(j, "data.shuffle", 1, &s->shuffle));
    TR_CHECK(get_bool(j, "data.drop_last", 0, &s->drop_last));
    TR_CHECK(get_int(j, "data.prefetch", 2, 0, 64, &s->prefetch));
    TR_CHECK(get_int(j, "data.workers", 1, 0, 64, &s->workers));
    TR_CHECK(get_float(j, "data.val_fraction", 0.1, 0, 0.9, &s->val_fraction));
    TR_CHECK(get_int(j, "trainer.max_epochs", 10, 1, 1000000, &s->max_epochs));
    TR_CHECK(get_int(j, "trainer.max_steps", -1, -1, INT64_MAX, &s->max_steps));
    if (s->max_steps == 0) { /* -1 is "no limit" (Lightning's spelling); 0 would train nothing */
        const tr_cfg_node *n = tr_cfg_find(j->root, "trainer.max_steps");
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: trainer.max_steps: 0 would train nothing; use -1 for no limit "
                            "(training then ends at trainer.max_epochs), a positive step count, or `trainer eval` to "
                            "score a model without training", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n));
    }
    TR_CHECK(get_float(j, "trainer.grad_clip", 0, 0, 1e9, &s->grad_clip));
    TR_CHECK(get_int(j, "trainer.grad_accum", 1, 1, 1000000, &s->accum));
    TR_CHECK(get_int(j, "trainer.log_every", 50, 1, INT64_MAX, &s->log_every));
    TR_CHECK(get_int(j, "trainer.val_every_n_steps", 0, 0, INT64_MAX, &s->val_every_n_steps));
    TR_CHECK(get_int(j, "trainer.val_every_n_epochs", 1, 0, INT64_MAX, &s->val_every_n_epochs));
    TR_CHECK(limits_read(j)); /* fast_dev_run sets the length and cadence read above */
    TR_CHECK(get_int(j, "trainer.threads", 0, 0, 4096, &s->threads));
    TR_CHECK(get_choice(j, "trainer.progress", "auto|bar|lines", "auto", &s->progress));
    TR_CHECK(get_choice(j, "trainer.profile", "false|true|shapes", "false", &s->profile)); /* = TR_PROFILE_OPS_* */
    TR_CHECK(get_bool(j, "trainer.flush_denormals", 1, &s->flush_denormals));
    TR_CHECK(get_choice(j, "trainer.accelerator", "auto|cpu|gpu", "auto", &s->accelerator));
    TR_CHECK(read_devices(j, s));
    TR_CHECK(get_int(j, "trainer.max_restarts", 0, 0, 1000, &s->max_restarts));
    TR_CHECK(get_choice(j, "trainer.on_nan", "stop|skip", "stop", &s->on_nan));
    TR_CHECK(get_int(j, "trainer.max_consecutive_skips", 10, 0, INT64_MAX, &s->max_consecutive_skips));
    TR_CHECK(get_choice(j, "trainer.precision", "fp32|bf16-mixed", "fp32", &s->precision));
    TR_CHECK(read_act_ckpt(j, s));
    TR_CHECK(read_loggers(j, s));
    int sched_kind;
    TR_CHECK(get_choice(j, "scheduler.name", "constant|step|cosine", "constant", &sched_kind));
    s->sched.kind = (tr_sched_kind)sched_kind;
    TR_CHECK(get_int(j, "scheduler.warmup_steps", 0, 0, INT64_MAX, &s->sched.warmup_steps));
    TR_CHECK(get_int(j, "scheduler.step_size", 1000, 1, INT64_MAX, &s->sched.step_size));
    TR_CHECK(get_float(j, "scheduler.gamma", 0.1, 0, 1, &s->sched.gamma));
    TR_CHECK(get_float(j, "scheduler.min_lr", 0, 0, 1e3, &s->sched.min_lr));
    TR_CHECK(get_int(j, "checkpoint.every_n_epochs", 1, 0, INT64_MAX, &s->ck_epochs));
    TR_CHECK(get_int(j, "checkpoint.every_n_steps", 0, 0, INT64_MAX, &s->ck_steps));
    TR_CHECK(get_int(j, "checkpoint.keep_last", 3, 1, 1000000, &s->keep_last));
    TR_CHECK(get_choice(j, "checkpoint.resume", "auto|never", "auto", &s->resume));
    TR_CHECK(monitor_read_settings(j));
    TR_CHECK(limits_finish(j));
    TR_CHECK(tr_cfg_get_string(j->root, "model.init_from", NULL, &s->init_from, 0));
    return read_optim(j, &s->optim);
}
