/* A job from a config: reading and checking every section, finding the plugins, making the
 * datasets, the strategy and the loaders (shared by `trainer run`, `eval` and `predict`). */
#include "job.h"
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
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/run.h"
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

/* A growing string: option texts have no length limit (a list of class names can be long). */
typedef struct text_buf {
    char *s;
    size_t len, cap;
    int oom;
} text_buf;

static void tb_add(text_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void tb_str(text_buf *b, const char *s) { tb_add(b, s, strlen(s)); }

/* One config entry as "key=value" (a list as "key=[a, b]") into *out (malloc'ed). */
static tr_status option_text(const tr_cfg_node *map, size_t i, char **out) {
    const tr_cfg_node *v = tr_cfg_item(map, i);
    text_buf b = {0};
    tb_str(&b, tr_cfg_key(map, i));
    tb_str(&b, "=");
    if (tr_cfg_node_kind(v) == TR_CFG_SCALAR) {
        tb_str(&b, tr_cfg_scalar(v));
    } else if (tr_cfg_node_kind(v) == TR_CFG_SEQ) {
        tb_str(&b, "[");
        for (size_t k = 0; k < tr_cfg_size(v); k++) {
            const tr_cfg_node *it = tr_cfg_item(v, k);
            const char *s = tr_cfg_scalar(it);
            if (!s) { /* a list or mapping inside: read as "" it would vanish from the list */
                free(b.s);
                return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: expected a value, got a %s", tr_cfg_source(it),
                                    tr_cfg_line(it), tr_cfg_column(it), tr_cfg_path(it),
                                    tr_cfg_node_kind(it) == TR_CFG_SEQ ? "list" : "mapping");
            }
            if (k) tb_str(&b, ", ");
            tb_str(&b, s);
        }
        tb_str(&b, "]");
    } else {
        free(b.s);
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: expected a value or a list",
                            tr_cfg_source(v), tr_cfg_line(v), tr_cfg_column(v), tr_cfg_path(v));
    }
    if (b.oom) {
        free(b.s);
        return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", tr_cfg_path(v));
    }
    *out = b.s;
    return TR_OK;
}

static int has_key(const tr_cfg_node *map, const char *key) {
    for (size_t i = 0; map && i < tr_cfg_size(map); i++)
        if (strcmp(tr_cfg_key(map, i), key) == 0) return 1;
    return 0;
}

/* A scalar as YAML flow text: plain when that reads back the same, else single-quoted. */
static void yaml_text(text_buf *b, const char *s) {
    int plain = s[0] && s[0] != ' ' && s[strlen(s) - 1] != ' ';
    for (const char *c = s; plain && *c; c++)
        plain = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || strchr("_./+- ", *c);
    if (plain && !(s[0] == '-' && (s[1] == ' ' || !s[1]))) {
        tb_str(b, s);
        return;
    }
    tb_str(b, "'");
    for (const char *c = s; *c; c++) {
        if (*c == '\'') tb_str(b, "'");
        tb_add(b, c, 1);
    }
    tb_str(b, "'");
}

/* A config value (a scalar or a list of scalars) as YAML flow text, for tr_config_set. */
static void value_text(const tr_cfg_node *v, text_buf *b) {
    if (tr_cfg_node_kind(v) != TR_CFG_SEQ) {
        const char *s = tr_cfg_scalar(v);
        yaml_text(b, s ? s : "");
        return;
    }
    tb_str(b, "[");
    for (size_t k = 0; k < tr_cfg_size(v); k++) {
        const char *s = tr_cfg_scalar(tr_cfg_item(v, k));
        if (k) tb_str(b, ", ");
        yaml_text(b, s ? s : "");
    }
    tb_str(b, "]");
}

/* A plugin's options section (a mapping, or absent) as "key=value" strings; with `over`
 * (data.val_params over data.params), its keys replace the section's. */
static tr_status options_from(const tr_cfg_node *map, const tr_cfg_node *over, const char *section, const tr_plugin *p,
                              tr_options **out) {
    enum { MAX_KV = 64 };
    char *kv[MAX_KV];
    int n = 0;
    char where[256];
    const tr_cfg_node *at = over ? over : map;
    if (at) snprintf(where, sizeof where, "%s:%d:%d: %s", tr_cfg_source(at), tr_cfg_line(at), tr_cfg_column(at), tr_cfg_path(at));
    else snprintf(where, sizeof where, "config: %s", section);
    tr_status st = TR_OK;
    for (int m = 0; m < 2 && st == TR_OK; m++) {
        const tr_cfg_node *src = m ? over : map;
        if (src && tr_cfg_node_kind(src) != TR_CFG_MAP) {
            st = tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: expected a mapping of %s options", tr_cfg_source(src),
                              tr_cfg_line(src), tr_cfg_column(src), tr_cfg_path(src), p->desc->name);
            break;
        }
        for (size_t i = 0; src && i < tr_cfg_size(src) && st == TR_OK; i++) {
            if (!m && has_key(over, tr_cfg_key(src, i))) continue;
            if (n == MAX_KV) st = tr_error_set(TR_ERR_INVALID, "%s: more than %d options", where, MAX_KV);
            else if ((st = option_text(src, i, &kv[n])) == TR_OK) n++;
        }
    }
    if (st == TR_OK) st = tr_options_create(out, p->desc->options, p->desc->n_options, (const char *const *)kv, n, where);
    for (int i = 0; i < n; i++) free(kv[i]);
    return st;
}

/* `plugins:` lists folders to search (as TRAINER_PLUGIN_PATH does) or plugin files (.so) to
 * load, relative to the config's folder, before the default search path. Anything else, or a
 * path that is not there, is an error naming the entry: a silently skipped entry would leave
 * the user wondering why their plugin is "not found". */
static tr_status find_plugins(job *j, const char *const *plugin_dirs) {
    TR_CHECK(tr_registry_create(&j->reg));
    const tr_cfg_node *pl = tr_cfg_child(j->root, "plugins");
    if (pl && tr_cfg_null_(pl)) pl = NULL;
    if (pl && tr_cfg_node_kind(pl) != TR_CFG_SEQ)
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: plugins: expected a list of folders or .so files, e.g. [my_plugins]",
                            tr_cfg_source(pl), tr_cfg_line(pl), tr_cfg_column(pl));
    for (size_t i = 0; pl && i < tr_cfg_size(pl); i++) {
        const tr_cfg_node *it = tr_cfg_item(pl, i);
        const char *d = tr_cfg_scalar(it);
        if (!d || !d[0])
            return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: expected a folder or a .so file", tr_cfg_source(it),
                                tr_cfg_line(it), tr_cfg_column(it), tr_cfg_path(it));
        char path[1024];
        tr_path_resolve(path, sizeof path, j->cfg_dir, d);
        struct stat sb;
        size_t n = strlen(path);
        int is_so = n > 3 && strcmp(path + n - 3, ".so") == 0;
        if (stat(path, &sb) != 0)
            return tr_error_set(TR_ERR_NOT_FOUND, "%s:%d:%d: %s: %s: no such %s (relative paths are from the config's folder)",
                                tr_cfg_source(it), tr_cfg_line(it), tr_cfg_column(it), tr_cfg_path(it), path,
                                is_so ? "plugin file" : "folder");
        tr_status st = TR_OK;
        if (S_ISDIR(sb.st_mode)) st = tr_registry_scan(j->reg, path, "config", 1);
        else if (S_ISREG(sb.st_mode) && is_so) st = tr_registry_add_file(j->reg, path, "config");
        else
            return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: %s is neither a folder nor a plugin file (.so)",
                                tr_cfg_source(it), tr_cfg_line(it), tr_cfg_column(it), tr_cfg_path(it), path);
        if (st != TR_OK) {
            tr_error_prefix("%s:%d:%d: %s: ", tr_cfg_source(it), tr_cfg_line(it), tr_cfg_column(it), tr_cfg_path(it));
            return st;
        }
    }
    return tr_registry_scan_search_path(j->reg, NULL, plugin_dirs);
}

static tr_status plugin_named(job *j, const char *key, const char *name, tr_plugin_kind kind,
                              const tr_plugin **out) {
    if (tr_registry_find(j->reg, kind, name, out) == TR_OK) return TR_OK;
    const tr_cfg_node *n = tr_config_find(j->cfg, key);
    if (n) tr_error_prefix("%s:%d:%d: %s: ", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n), key);
    else tr_error_prefix("%s: %s: ", tr_cfg_source(j->root), key);
    return TR_ERR_NOT_FOUND;
}

static tr_status plugin_for(job *j, const char *section, tr_plugin_kind kind, const tr_plugin **out) {
    const char *name;
    char key[64];
    snprintf(key, sizeof key, "%s.name", section);
    TR_CHECK(tr_cfg_get_string(j->root, key, NULL, &name, 1));
    return plugin_named(j, key, name, kind, out);
}

/* The validation split reads data.params with data.val_params' keys over them, and is told
 * the train split's options (a file given there is a validation file, scored whole). */
static tr_status make_dataset(job *j, tr_split split, void **out) {
    const tr_cfg_node *data = tr_cfg_child(j->root, "data");
    const tr_cfg_node *params = tr_cfg_child(data, "params");
    const tr_cfg_node *over = split == TR_SPLIT_VAL ? tr_cfg_child(data, "val_params") : NULL;
    tr_options *o = NULL, *train_o = NULL;
    tr_status st = options_from(params, over, over ? "data.val_params" : "data.params", j->data_p, &o);
    if (st == TR_OK && over) st = options_from(params, NULL, "data.params", j->data_p, &train_o);
    tr_dataset_env env = {.split = split, .seed = (uint64_t)j->s.seed, .base_dir = j->cfg_dir,
                          .val_fraction = j->s.val_fraction, .train_opts = train_o,
                          .labels_optional = split == TR_SPLIT_VAL && j->labels_optional};
    if (st == TR_OK) {
        st = j->dops->create(out, o, &env);
        if (st != TR_OK) {
            *out = NULL;
            tr_error_prefix("data (%s, %s split): ", j->data_p->desc->name, split == TR_SPLIT_VAL ? "validation" : "train");
        }
    }
    tr_options_destroy(o);
    tr_options_destroy(train_o);
    return st;
}

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
                                           "loggers", "early_stopping"};
#define N_(a) (sizeof(a) / sizeof(a[0]))

static tr_status check_sections(const tr_cfg_node *r) {
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
static tr_status plugin_defaults(job *j, const char *section, const tr_plugin *p) {
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

static tr_status read_settings(job *j, job_settings *s) {
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

/* trainer.accelerator, trainer.devices and trainer.strategy through the selection rule
 * (tr_choose_devices) over the GPUs the device plugins see (trainer.gpu_backend: auto, or one
 * device plugin by name): auto picks cpu for no GPU and one device, single-gpu for one GPU,
 * ddp for several devices. no_gpu: NULL, or why the GPUs found cannot be used (a retry under
 * accelerator auto, see job_plan): the choice is then made as if none were found. The choice
 * is written into the resolved config. */
static tr_status pick_strategy(job *j, const char *no_gpu) {
    const char *name = j->strategy_asked, *backend;
    j->strat_p = NULL;
    j->choice_made = 0;
    j->gpu_refused[0] = 0;
    TR_CHECK(tr_cfg_get_string(j->root, "trainer.gpu_backend", "auto", &backend, 0));
    tr_device_request rq = {.accelerator = (tr_accelerator)j->s.accelerator, .devices = j->s.devices_asked,
                            .ids = j->s.device_ids, .n_ids = j->s.n_device_ids, .strategy = name};
    /* A CPU request (accelerator cpu, or strategy cpu) never needs the GPUs counted; a backend
     * named is checked all the same. */
    int cpu_only = rq.accelerator == TR_ACCEL_CPU || (rq.accelerator == TR_ACCEL_AUTO && strcmp(name, "cpu") == 0);
    if (!no_gpu) { /* a retry keeps the first pick's count */
        if (!cpu_only || strcmp(backend, "auto") != 0) TR_CHECK(tr_gpu_scan_registry(j->reg, backend, &j->gpus));
        else snprintf(j->gpus.why, sizeof j->gpus.why, "not counted for a CPU run");
    }
    /* Ranks started by mpirun/srun/torchrun: auto and -1 mean the job's ranks, not this rank's
     * cores (a launcher may pin each rank to one) nor every GPU of the host. On GPUs, one per
     * rank of this host (the job may span hosts); a host with fewer GPUs than ranks keeps the
     * old rule (accelerator auto: the world, which the CPU then runs; gpu: the GPUs, shared).
     * Not for cpu, which is one device (job_check_world refuses it under several ranks). */
    tr_comm_env ce;
    int gpus = no_gpu ? 0 : j->gpus.count;
    if (tr_launched_externally() && rq.n_ids == 0 && strcmp(name, "cpu") != 0 &&
        (rq.devices == TR_DEVICES_AUTO || rq.devices == TR_DEVICES_ALL) && tr_comm_env_detect(&ce) == TR_OK && ce.size > 1) {
        int on_gpus = rq.accelerator == TR_ACCEL_GPU || (rq.accelerator == TR_ACCEL_AUTO && gpus > 0);
        if (on_gpus && ce.local_size <= gpus) rq.devices = ce.local_size;
        else if (rq.accelerator != TR_ACCEL_GPU) rq.devices = ce.size;
    }
    tr_device_choice c;
    TR_CHECK(tr_choose_devices(&rq, no_gpu ? 0 : j->gpus.count, no_gpu ? no_gpu : j->gpus.why, tr_cpu_count(), &c));
    j->s.devices = c.devices;
    j->accelerator = c.accelerator;
    j->n_gpu_ids = c.accelerator == TR_ACCEL_GPU ? c.n_ids : 0;
    memcpy(j->gpu_ids, c.ids, sizeof j->gpu_ids);
    j->choice_made = 1;
    snprintf(j->picked, sizeof j->picked, "%s", c.strategy);
    snprintf(j->why, sizeof j->why, "%s", c.why);
    j->strategy_auto = strcmp(name, "auto") == 0;
    if (j->strategy_auto) {
        TR_CHECK(tr_config_set(j->cfg, "trainer.strategy", c.strategy));
        j->root = tr_config_root(j->cfg);
    }
    if (!j->strategy_auto) return plugin_named(j, "trainer.strategy", c.strategy, TR_PLUGIN_STRATEGY, &j->strat_p);
    tr_status st = tr_registry_find(j->reg, TR_PLUGIN_STRATEGY, c.strategy, &j->strat_p);
    if (st != TR_OK) tr_error_prefix("trainer.strategy: auto picked %s (%s), which is not installed: ", c.strategy, c.why);
    return st;
}

/* The chosen strategy's table, options and probe (can it run here, on this accelerator?). */
static tr_status ready_strategy(job *j) {
    TR_CHECK(job_strategy_ops(j->strat_p, &j->sops_table));
    j->sops = &j->sops_table;
    /* Leaving a step out whole is a promise of optim_step since ABI 0.3 (skip_nonfinite). */
    const tr_plugin_desc *d = j->strat_p->desc;
    if (j->s.on_nan == ON_NAN_SKIP && d->abi_major == 0 && d->abi_minor < 3)
        return tr_error_set(TR_ERR_PLUGIN, "trainer.on_nan: skip: strategy %s (%s) was built for plugin ABI %u.%u, which cannot "
                                           "leave a step out (ABI 0.3 can): rebuild it against this SDK or use on_nan: stop",
                            d->name, j->strat_p->path, d->abi_major, d->abi_minor);
    tr_options_destroy(j->strat_opts);
    j->strat_opts = NULL;
    TR_CHECK(options_from(tr_cfg_child(j->root, "strategy"), NULL, "strategy", j->strat_p, &j->strat_opts));
    /* Only a strategy whose probe saw the accelerator and the device plugin (ABI 0.5) and
     * accepted them runs on GPUs: an older one, or one without a probe, cannot open a device
     * and would train on the CPU while GPUs were asked. */
    if (j->accelerator == TR_ACCEL_GPU && (!j->sops->probe || (d->abi_major == 0 && d->abi_minor < 5))) {
        if (!j->sops->probe)
            snprintf(j->gpu_refused, sizeof j->gpu_refused, "strategy %s cannot run on GPUs (it has no probe to say it can)",
                     d->name);
        else
            snprintf(j->gpu_refused, sizeof j->gpu_refused, "strategy %s cannot run on GPUs (built for plugin ABI %u.%u: "
                     "it cannot open a device before 0.5)", d->name, d->abi_major, d->abi_minor);
        return tr_error_set(TR_ERR_UNSUPPORTED, "strategy %s (%s) cannot run here: %s", d->name, j->strat_p->path,
                            j->gpu_refused);
    }
    if (j->sops->probe) {
        tr_strategy_probe pe = {.devices = (int)j->s.devices, .gpus = j->gpus.count, .registry = j->reg,
                                .accelerator = j->accelerator,
                                .gpu_backend = j->accelerator == TR_ACCEL_GPU ? j->gpus.backend : NULL};
        tr_status st = j->sops->probe(j->strat_opts, &pe);
        if (st != TR_OK) {
            if (j->accelerator == TR_ACCEL_GPU) snprintf(j->gpu_refused, sizeof j->gpu_refused, "%s", tr_error_msg());
            tr_error_prefix("strategy %s (%s) cannot run here: ", j->strat_p->desc->name, j->strat_p->path);
            return st;
        }
    }
    return TR_OK;
}

/* Picks and readies the strategy. Under accelerator auto, GPUs found but unusable are not an
 * error: the GPU request the rule refuses (more devices than GPUs), a strategy that is not
 * installed, or one that cannot run on GPUs; the choice is then made again on the CPU, and the
 * reason printed at start says why. */
static tr_status choose_strategy(job *j) {
    const char *name;
    TR_CHECK(tr_cfg_get_string(j->root, "trainer.strategy", "auto", &name, 0));
    snprintf(j->strategy_asked, sizeof j->strategy_asked, "%s", name);
    tr_status st = pick_strategy(j, NULL);
    if (st != TR_OK && !j->choice_made && j->gpus.count > 0) /* the rule refused a GPU request */
        snprintf(j->gpu_refused, sizeof j->gpu_refused, "%s", tr_error_msg());
    else if (st == TR_ERR_NOT_FOUND && j->choice_made && j->accelerator == TR_ACCEL_GPU)
        snprintf(j->gpu_refused, sizeof j->gpu_refused, "no strategy plugin %s is installed", j->picked);
    if (st == TR_OK) st = ready_strategy(j); /* sets gpu_refused when the strategy cannot run on GPUs */
    if (st == TR_OK || j->s.accelerator != TR_ACCEL_AUTO || !j->gpu_refused[0]) return st;
    char no_gpu[sizeof j->why];
    int n = j->gpus.count;
    snprintf(no_gpu, sizeof no_gpu, "%d GPU%s of %s left unused: %s", n, n == 1 ? "" : "s", j->gpus.backend->desc->name,
             j->gpu_refused);
    TR_CHECK(pick_strategy(j, no_gpu));
    j->gpu_fallback = 1;
    if (!j->strategy_auto) { /* auto's reason says it already ("found no GPU (...)") */
        size_t len = strlen(j->why);
        snprintf(j->why + len, sizeof j->why - len, "; %s", no_gpu);
    }
    return ready_strategy(j);
}

tr_status job_strategy_ops(const tr_plugin *p, tr_strategy_ops *out) {
    /* The first published table ends with `state`; entries after it may be absent: an older
     * plugin's shorter table is copied into a full one whose missing entries are NULL, so the
     * optional operations are plain NULL checks everywhere. */
    TR_CHECK(plugin_copy_ops(p, out, sizeof *out, offsetof(tr_strategy_ops, state) + sizeof out->state, "strategy",
                             "create ... state"));
    const char *missing = !out->create ? "create" : !out->destroy ? "destroy" : !out->train_micro ? "train_micro"
                          : !out->optim_step ? "optim_step" : !out->forward ? "forward" : !out->state ? "state" : NULL;
    if (missing)
        return tr_error_set(TR_ERR_PLUGIN, "%s: strategy %s lacks the required operation '%s'", p->path, p->desc->name, missing);
    return TR_OK;
}

tr_status job_read_settings(job *j) {
    j->root = tr_config_root(j->cfg);
    TR_CHECK(check_sections(j->root));
    return read_settings(j, &j->s);
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

    TR_CHECK(find_plugins(j, plugin_dirs));
    TR_CHECK(plugin_for(j, "model", TR_PLUGIN_MODEL, &j->model_p));
    TR_CHECK(plugin_for(j, "data", TR_PLUGIN_DATASET, &j->data_p));
    return job_absolute_paths(j);
}

tr_status job_plan(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                   const char *const *plugin_dirs) {
    TR_CHECK(job_plan_model(j, config_path, overrides, n_overrides, plugin_dirs));
    TR_CHECK(choose_strategy(j));
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
    tr_status st = make_dataset(j, TR_SPLIT_VAL, &j->val_ds);
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
        if (has_key(over, k)) continue;
        char key[300];
        snprintf(key, sizeof key, "data.val_params.%s", k);
        text_buf text = {0};
        value_text(tr_cfg_item(params, i), &text);
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
        TR_CHECK(make_dataset(j, TR_SPLIT_TRAIN, &j->train_ds));
    }
    memset(&j->spec, 0, sizeof j->spec); /* a dataset built for an older minor fills only the fields it knows */
    j->dops->spec(j->train_ds, &j->spec);
    if (j->dops->size(j->train_ds) <= 0) return tr_error_set(TR_ERR_INVALID, "data: the training split is empty");
    trim_needs_new_plugins(j);
    TR_CHECK(settle_classes(j)); /* first: the validation split is checked against the model's classes */
    if (own) TR_CHECK(open_val(j));

    TR_CHECK(options_from(tr_cfg_find(j->root, "model.params"), NULL, "model.params", j->model_p, &j->model_opts));
    TR_CHECK(plugin_defaults(j, "model.params", j->model_p));
    TR_CHECK(plugin_defaults(j, "data.params", j->data_p));
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
    if (st == TR_OK) st = plugin_defaults(j, "strategy", j->strat_p); /* j->strat stays: job_close destroys it */
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
