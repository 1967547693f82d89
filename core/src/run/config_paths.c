/* Makes the config's paths absolute in memory, so the resolved config.yaml written into the run
 * folder runs again from any working directory (docs/config.md): run.output_dir and
 * model.init_from (relative to the working directory), `plugins:` entries and the path options
 * (TR_OPTION_PATH, ABI 0.8) of the model and the dataset, relative to the
 * config's folder (how the plugins resolve them: tr_path_resolve against base_dir). Only
 * options declared as paths: a string option whose value merely names a file that happens to
 * be there (a csv label column `target` beside a folder `target/`) keeps its text; a plugin
 * built for 0.7 or older, which declares its paths as strings, keeps relative paths. Done
 * whether or not the file exists (the digest does not depend on it) and before the config
 * digest (config_digest.c), so a run folder's config.yaml resumes its run. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/node.h"
#include "job.h"
#include "plugin/plugin_impl.h"

/* `path` made absolute: as it is, or cwd/base/path (base left out when empty or "."). The
 * join is lexical, so a symbolic link on the way stays as the user named it. */
static tr_status absolute(char *out, size_t size, const char *base, const char *path) {
    if (path[0] == '/') return (size_t)snprintf(out, size, "%s", path) < size ? TR_OK : TR_ERR_INVALID;
    char cwd[1024];
    if (!getcwd(cwd, sizeof cwd)) return tr_error_set(TR_ERR_IO, "the working directory: %s", strerror(errno));
    int in_base = base && base[0] && strcmp(base, ".") != 0;
    while (strncmp(path, "./", 2) == 0) path += 2;
    int n = in_base && base[0] == '/' ? snprintf(out, size, "%s/%s", base, path)
            : in_base                 ? snprintf(out, size, "%s/%s/%s", cwd, base, path)
                                      : snprintf(out, size, "%s/%s", cwd, path);
    if (n < 0 || (size_t)n >= size) return tr_error_set(TR_ERR_INVALID, "%s: the absolute path is too long", path);
    return TR_OK;
}

/* Replaces a scalar's text, keeping its position for messages. */
static tr_status set_text(const tr_cfg_node *n, const char *text) {
    char *t = strdup(text);
    if (!t) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    tr_cfg_node *w = (tr_cfg_node *)n; /* the job owns the config it reads */
    free(w->text);
    w->text = t;
    return TR_OK;
}

static tr_status option_paths(job *j, const char *section, const tr_plugin *p) {
    const tr_cfg_node *params = tr_cfg_find(j->root, section);
    if (!p || tr_cfg_node_kind(params) != TR_CFG_MAP) return TR_OK;
    for (uint32_t i = 0; i < p->desc->n_options; i++) {
        const tr_option_spec *o = &p->desc->options[i];
        const tr_cfg_node *v = tr_cfg_child(params, o->key);
        const char *text = tr_cfg_scalar(v);
        if (o->type != TR_OPTION_PATH || !text || !text[0] || text[0] == '/') continue;
        char path[1200];
        TR_CHECK(absolute(path, sizeof path, j->cfg_dir, text));
        TR_CHECK(set_text(v, path));
    }
    return TR_OK;
}

tr_status job_absolute_paths(job *j) {
    char path[1200];
    const tr_cfg_node *out = tr_cfg_find(j->root, "run.output_dir");
    if (tr_cfg_scalar(out) && out->text[0] != '/') {
        TR_CHECK(absolute(path, sizeof path, NULL, out->text));
        TR_CHECK(set_text(out, path));
        j->s.outdir = out->text;
    }
    const tr_cfg_node *pl = tr_cfg_child(j->root, "plugins");
    for (size_t i = 0; i < tr_cfg_size(pl); i++) {
        const tr_cfg_node *it = tr_cfg_item(pl, i);
        const char *d = tr_cfg_scalar(it);
        if (!d || !d[0] || d[0] == '/') continue;
        TR_CHECK(absolute(path, sizeof path, j->cfg_dir, d));
        TR_CHECK(set_text(it, path));
    }
    /* model.init_from names a run's output, as --checkpoint does: from the working directory,
     * as run.output_dir; `best` and `last` name the config's own run's (job_resolve_checkpoint). */
    const tr_cfg_node *init = tr_cfg_find(j->root, "model.init_from");
    const char *from = tr_cfg_scalar(init);
    if (from && from[0] && from[0] != '/' && strcmp(from, "best") != 0 && strcmp(from, "last") != 0) {
        TR_CHECK(absolute(path, sizeof path, NULL, from));
        TR_CHECK(set_text(init, path));
        j->s.init_from = init->text;
    }
    TR_CHECK(option_paths(j, "model.params", j->model_p));
    TR_CHECK(option_paths(j, "data.params", j->data_p));
    return option_paths(j, "data.val_params", j->data_p);
}
