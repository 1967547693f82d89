/* A job's plugins: their options from the config (defaults filled, every key checked), the
 * plugins found by name and kind, and the datasets made from them. */
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

int job_cfg_has_key(const tr_cfg_node *map, const char *key) {
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
void job_value_text(const tr_cfg_node *v, text_buf *b) {
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
tr_status job_options_from(const tr_cfg_node *map, const tr_cfg_node *over, const char *section, const tr_plugin *p,
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
            if (!m && job_cfg_has_key(over, tr_cfg_key(src, i))) continue;
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
tr_status job_find_plugins(job *j, const char *const *plugin_dirs) {
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

tr_status job_plugin_named(job *j, const char *key, const char *name, tr_plugin_kind kind,
                              const tr_plugin **out) {
    if (tr_registry_find(j->reg, kind, name, out) == TR_OK) return TR_OK;
    const tr_cfg_node *n = tr_config_find(j->cfg, key);
    if (n) tr_error_prefix("%s:%d:%d: %s: ", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n), key);
    else tr_error_prefix("%s: %s: ", tr_cfg_source(j->root), key);
    return TR_ERR_NOT_FOUND;
}

tr_status job_plugin_for(job *j, const char *section, tr_plugin_kind kind, const tr_plugin **out) {
    const char *name;
    char key[64];
    snprintf(key, sizeof key, "%s.name", section);
    TR_CHECK(tr_cfg_get_string(j->root, key, NULL, &name, 1));
    return job_plugin_named(j, key, name, kind, out);
}

/* The validation split reads data.params with data.val_params' keys over them, and is told
 * the train split's options (a file given there is a validation file, scored whole). */
tr_status job_make_dataset(job *j, tr_split split, void **out) {
    const tr_cfg_node *data = tr_cfg_child(j->root, "data");
    const tr_cfg_node *params = tr_cfg_child(data, "params");
    const tr_cfg_node *over = split == TR_SPLIT_VAL ? tr_cfg_child(data, "val_params") : NULL;
    tr_options *o = NULL, *train_o = NULL;
    tr_status st = job_options_from(params, over, over ? "data.val_params" : "data.params", j->data_p, &o);
    if (st == TR_OK && over) st = job_options_from(params, NULL, "data.params", j->data_p, &train_o);
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
