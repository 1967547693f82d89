/* `trainer export`: a run's checkpoint as a model folder another framework loads (format hf:
 * a Hugging Face folder that transformers' from_pretrained reads). The model is built as the
 * run built it, from the run's resolved config.yaml (the folder that holds checkpoints/) and
 * its data's sample spec (the data files must be there, as for eval), with the checkpoint's
 * classes; the checkpoint's weights (full, or sharded: consolidated in memory) go into one CPU
 * replica, and the model plugin's export_to (tr_model_ops, ABI 0.11) writes the files into a
 * temporary folder beside OUTDIR. That folder is fsync'ed and renamed into place, so a failure
 * leaves nothing behind, and an OUTDIR that exists with anything in it is never touched. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io_error.h"
#include "checkpoint_impl.h"
#include "job.h"
#include "plugin/plugin_impl.h"
#include "replica_impl.h"
#include "run/run_api.h"
#include "trainer/io.h"
#include "trainer/replica.h"

static const char *const formats = "hf";

static tr_status check_format(const char *format) {
    if (strcmp(format, "hf") == 0) return TR_OK;
    return tr_error_set(TR_ERR_INVALID, "--format: '%s' is not a format trainer export writes (%s: a Hugging Face "
                                        "model folder that transformers' from_pretrained loads)", format, formats);
}

/* OUTDIR may be absent or an empty folder; anything else is refused before any work. */
static tr_status check_outdir(const char *outdir) {
    char why[256];
    struct stat sb;
    if (lstat(outdir, &sb) != 0) {
        if (errno == ENOENT) return TR_OK;
        return tr_error_set(TR_ERR_IO, "%s: %s", outdir, tr_io_reason(errno, why, sizeof why));
    }
    if (!S_ISDIR(sb.st_mode))
        return tr_error_set(TR_ERR_INVALID, "%s exists and is %s: refusing to replace it (give a new folder)", outdir,
                            S_ISLNK(sb.st_mode) ? "a symbolic link" : "not a folder");
    DIR *d = opendir(outdir);
    if (!d) return tr_error_set(TR_ERR_IO, "%s: cannot read the folder: %s", outdir, tr_io_reason(errno, why, sizeof why));
    const struct dirent *de;
    const char *first = NULL;
    while (!first && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) first = de->d_name;
    tr_status st = first ? tr_error_set(TR_ERR_INVALID, "%s exists and is not empty (it holds %s): refusing to overwrite "
                                                        "anything in it (give a new or empty folder)", outdir, first)
                         : TR_OK;
    closedir(d);
    return st;
}

/* The run's config.yaml: RUN/checkpoints/NAME is the checkpoint, RUN/config.yaml the config. */
static tr_status run_config(const char *ckpt, char *out, size_t cap) {
    char real[PATH_MAX], why[256];
    if (!realpath(ckpt, real))
        return tr_error_set(TR_ERR_IO, "%s: %s", ckpt, tr_io_reason(errno, why, sizeof why));
    char *run = dirname(dirname(real));
    if (snprintf(out, cap, "%s/config.yaml", run) >= (int)cap)
        return tr_error_set(TR_ERR_INVALID, "%s/config.yaml: path too long", run);
    if (access(out, R_OK) != 0)
        return tr_error_set(TR_ERR_NOT_FOUND, "%s: the run's config %s cannot be read (%s): export builds the model "
                                              "from the config.yaml of the run folder that holds the checkpoint",
                            ckpt, out, tr_io_reason(errno, why, sizeof why));
    return TR_OK;
}

/* The temporary folder beside OUTDIR (same file system, so the final rename is atomic). */
static tr_status make_temp(const char *outdir, char *tmp, size_t cap) {
    char parent[PATH_CAP], why[256];
    if (snprintf(tmp, cap, "%s.tmp-%ld", outdir, (long)getpid()) >= (int)cap)
        return tr_error_set(TR_ERR_INVALID, "%s: path too long", outdir);
    snprintf(parent, sizeof parent, "%s", outdir);
    TR_CHECK(tr_mkdirs(dirname(parent)));
    TR_CHECK(ckpt_remove_tree(tmp, 0)); /* a leftover of an earlier process with our pid */
    if (mkdir(tmp, 0755) != 0)
        return tr_error_set(TR_ERR_IO, "cannot create the folder %s: %s", tmp, tr_io_reason(errno, why, sizeof why));
    return TR_OK;
}

static int not_dots(const struct dirent *de) { return strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0; }

/* fsyncs every file and folder under dir (the plugin's files) and lists them in name order,
 * relative to the top, into list ("a, b, sub/c"). */
static tr_status seal(const char *dir, const char *rel, char *list, size_t cap, int depth) {
    char why[256];
    if (depth > 8) return tr_error_set(TR_ERR_INVALID, "%s: folders nested too deep", dir);
    struct dirent **de;
    int n = scandir(dir, &de, not_dots, alphasort);
    if (n < 0) return tr_error_set(TR_ERR_IO, "%s: cannot read the folder: %s", dir, tr_io_reason(errno, why, sizeof why));
    tr_status st = TR_OK;
    for (int i = 0; i < n && st == TR_OK; i++) {
        char path[PATH_CAP], name[PATH_CAP];
        struct stat sb;
        st = ckpt_join(path, sizeof path, dir, de[i]->d_name);
        if (st != TR_OK) break;
        snprintf(name, sizeof name, "%s%s%s", rel, rel[0] ? "/" : "", de[i]->d_name);
        if (lstat(path, &sb) != 0) {
            st = tr_error_set(TR_ERR_IO, "%s: %s", path, tr_io_reason(errno, why, sizeof why));
        } else if (S_ISDIR(sb.st_mode)) {
            st = seal(path, name, list, cap, depth + 1);
        } else {
            size_t k = strlen(list);
            snprintf(list + k, cap - k, "%s%s", k ? ", " : "", name);
        }
        ckpt_fsync_path(path);
    }
    for (int i = 0; i < n; i++) free(de[i]);
    free(de);
    return st;
}

static tr_status commit(const char *tmp, const char *outdir) {
    char why[256], parent[PATH_CAP];
    ckpt_fsync_path(tmp);
    if (rename(tmp, outdir) != 0)
        return errno == EEXIST || errno == ENOTEMPTY || errno == ENOTDIR
                   ? tr_error_set(TR_ERR_INVALID, "%s: something appeared there during the export: refusing to overwrite "
                                                  "it", outdir)
                   : tr_error_set(TR_ERR_IO, "%s: cannot rename %s into place: %s", outdir, tmp,
                                  tr_io_reason(errno, why, sizeof why));
    snprintf(parent, sizeof parent, "%s", outdir);
    ckpt_fsync_path(dirname(parent));
    return TR_OK;
}

/* The model, its weights and the export, into tmp. */
static tr_status export_model(job *j, const tr_model_ops *ops, const char *ckpt, const char *format, const char *tmp) {
    TR_CHECK(job_open_model(j));
    tr_replica *r;
    TR_CHECK(tr_replica_create(j->models, &r));
    tr_train_state state;
    tr_status st = tr_checkpoint_load(ckpt, r->P, NULL, &state);
    const run_classes *c = j->ckpt_classes.count > 0 ? &j->ckpt_classes : &j->classes;
    const char *tok = NULL;
    char tok_path[PATH_CAP];
    if (st == TR_OK) st = tr_cfg_get_string(j->root, "data.params.tokenizer", NULL, &tok, 0);
    if (st == TR_OK && tok && *tok) tr_path_resolve(tok_path, sizeof tok_path, j->cfg_dir, tok);
    tr_model_export env = {.format = format, .dir = tmp, .n_classes = j->spec.task == TR_TASK_CLASSIFY ? c->count : 0,
                           .class_names = j->spec.task == TR_TASK_CLASSIFY ? (const char *const *)c->names : NULL,
                           .tokenizer = tok && *tok ? tok_path : NULL};
    if (st == TR_OK) {
        st = ops->export_to(r->model, r->P, &env);
        if (st != TR_OK && !strstr(tr_error_msg(), j->model_p->desc->name))
            tr_error_prefix("model %s: ", j->model_p->desc->name);
    }
    tr_replica_destroy(r);
    return st;
}

static tr_status export_job(job *j, const char *checkpoint, const char *outdir_arg, const char *format,
                            const char *const *overrides, int n_overrides, const char *const *plugin_dirs,
                            tr_export_result *res) {
    memset(res, 0, sizeof *res);
    if (!format) format = "hf";
    TR_CHECK(check_format(format));
    char outdir[PATH_CAP];
    size_t n = (size_t)snprintf(outdir, sizeof outdir, "%s", outdir_arg);
    if (!outdir_arg[0] || n >= sizeof outdir - 16)
        return tr_error_set(TR_ERR_INVALID, "OUTDIR '%s': expected a folder path (at most %zu bytes)", outdir_arg,
                            sizeof outdir - 17);
    while (n > 1 && outdir[n - 1] == '/') outdir[--n] = '\0'; /* out/ and out are one folder */
    TR_CHECK(check_outdir(outdir));
    TR_CHECK(job_find_checkpoint(checkpoint, res->checkpoint, sizeof res->checkpoint));
    snprintf(j->ckpt_path, sizeof j->ckpt_path, "%s", res->checkpoint);
    TR_CHECK(run_config(res->checkpoint, res->config, sizeof res->config));
    TR_CHECK(job_plan_model(j, res->config, overrides, n_overrides, plugin_dirs));
    /* Refused before the data is read: a model without export, another model's checkpoint. */
    tr_model_ops ops;
    TR_CHECK(plugin_model_ops(j->model_p, &ops));
    if (!ops.export_to)
        return tr_error_set(TR_ERR_UNSUPPORTED, "model '%s' cannot export --format %s: its plugin (%s) has no export "
                                                "operation (hf_encoder has)", j->model_p->desc->name, format,
                            j->model_p->path);
    tr_train_state state;
    TR_CHECK(job_checkpoint_state(j, res->checkpoint, &state));
    res->step = state.step;
    TR_CHECK(classes_read_checkpoint(&j->ckpt_classes, res->checkpoint));
    char tmp[PATH_CAP + 32];
    TR_CHECK(make_temp(outdir, tmp, sizeof tmp));
    char files[4096] = "";
    tr_status st = export_model(j, &ops, res->checkpoint, format, tmp);
    if (st == TR_OK) st = seal(tmp, "", files, sizeof files, 0);
    if (st == TR_OK) st = commit(tmp, outdir);
    if (st != TR_OK) {
        char keep[2048];
        snprintf(keep, sizeof keep, "%s", tr_error_msg());
        ckpt_remove_tree(tmp, 0);
        return tr_error_set(st, "%s", keep);
    }
    snprintf(res->outdir, sizeof res->outdir, "%s", outdir);
    job_say(j, "export: %s (step %lld, model %s) -> %s (format %s): %s", res->checkpoint, (long long)res->step,
            j->model_p->desc->name, outdir, format, files);
    return TR_OK;
}

tr_status tr_run_export(const char *checkpoint, const char *outdir, const char *format,
                        const char *const *overrides, int n_overrides, const char *const *plugin_dirs,
                        tr_export_result *out) {
    if (!checkpoint || !outdir) return tr_error_set(TR_ERR_INVALID, "export: a checkpoint and an output folder are required");
    job j;
    memset(&j, 0, sizeof j);
    tr_status st = export_job(&j, checkpoint, outdir, format, overrides, n_overrides, plugin_dirs, out);
    job_close(&j);
    return st;
}
