/* Checkpoints (docs/design.md "Checkpoints"), writing: the folder protocol, a full save and
 * state.json. Loading is checkpoint_load.c, a checkpoints folder (latest, prune, pointers)
 * checkpoint_dir.c.
 *
 * A save writes <dir>/<name>.tmp-<pid>/ (model.safetensors, the files the model is rebuilt
 * from (tr_params_add_file), optimizer.safetensors when an optimizer is given, state.json,
 * each fsync'ed), fsyncs it, renames it to <dir>/<name> and
 * fsyncs <dir>, so a directory without ".tmp" is always complete. An existing <name> is never
 * replaced. A load reads and checks all three files before it touches the model, the
 * optimizer or the state, so a refused checkpoint changes nothing. Limits: F32 parameters
 * only (the registry holds nothing else); names of at most ~1000 bytes; the optimizer state
 * is saved for the slice the given optimizer owns (a shard saves its shard). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/io_error.h"
#include "classes.h"
#include "trainer/checkpoint.h"
#include "trainer/log.h"
#include "trainer/io.h"
#include "trainer/memory.h"
#include "trainer/safetensors.h"

#include "run/checkpoint_impl.h"

tr_status ckpt_join(char *out, size_t cap, const char *a, const char *b) {
    int k = snprintf(out, cap, "%s/%s", a, b);
    if (k < 0 || (size_t)k >= cap)
        return tr_error_set(TR_ERR_INVALID, "%s/%s: path longer than %zu bytes", a, b, cap - 1);
    return TR_OK;
}

void ckpt_fsync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Removes a file or a directory tree (symlinks are removed, never followed). */
tr_status ckpt_remove_tree(const char *path, int depth) {
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return TR_OK;
        return tr_error_set(TR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode)) {
        if (unlink(path) != 0) return tr_error_set(TR_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
        return TR_OK;
    }
    if (depth > 8) return tr_error_set(TR_ERR_IO, "%s: directories nested too deep to remove", path);
    DIR *d = opendir(path);
    if (!d) return tr_error_set(TR_ERR_IO, "%s: cannot open the directory: %s", path, strerror(errno));
    tr_status st = TR_OK;
    struct dirent *de;
    while (st == TR_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char sub[PATH_CAP];
        st = ckpt_join(sub, sizeof sub, path, de->d_name);
        if (st == TR_OK) st = ckpt_remove_tree(sub, depth + 1);
    }
    closedir(d);
    if (st == TR_OK && rmdir(path) != 0)
        st = tr_error_set(TR_ERR_IO, "%s: cannot remove the directory: %s", path, strerror(errno));
    return st;
}

void ckpt_shape_str(char *out, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(out, cap, "(");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(out + k, cap - k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k < cap) snprintf(out + k, cap - k, ")");
}

tr_status ckpt_write_bytes(const char *path, const void *data, size_t n) {
    char why[256];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return tr_error_set(TR_ERR_IO, "%s: cannot create: %s", path, tr_io_reason(errno, why, sizeof why));
    tr_status st = TR_OK;
    size_t done = 0;
    while (st == TR_OK && done < n) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            st = tr_error_set(TR_ERR_IO, "%s: write failed after %zu of %zu bytes: %s", path, done, n,
                              tr_io_reason(w < 0 ? errno : ENOSPC, why, sizeof why));
        else
            done += (size_t)w;
    }
    if (st == TR_OK && fsync(fd) != 0)
        st = tr_error_set(TR_ERR_IO, "%s: fsync failed: %s", path, tr_io_reason(errno, why, sizeof why));
    if (close(fd) != 0 && st == TR_OK)
        st = tr_error_set(TR_ERR_IO, "%s: close failed: %s", path, tr_io_reason(errno, why, sizeof why));
    return st;
}

tr_status ckpt_write_json(json_t *o, const char *path, size_t flags) {
    char *text = json_dumps(o, flags);
    if (!text) return tr_error_set(TR_ERR_NOMEM, "%s: cannot encode the JSON", path);
    tr_status st = ckpt_write_bytes(path, text, strlen(text));
    free(text);
    return st;
}

tr_status ckpt_write_files(const char *dir, const tr_params *P) {
    for (int i = 0; i < tr_params_file_count(P); i++) {
        const void *data;
        size_t size;
        const char *name = tr_params_file(P, i, &data, &size);
        char path[PATH_CAP];
        TR_CHECK(ckpt_join(path, sizeof path, dir, name));
        TR_CHECK(ckpt_write_bytes(path, data, size));
    }
    return TR_OK;
}

/* ---- state.json ---- */

tr_status ckpt_write_state(const char *dir, const tr_train_state *s, const run_classes *c, json_t *loop) {
    char path[PATH_CAP], tmp[PATH_CAP];
    TR_CHECK(ckpt_join(path, sizeof path, dir, STATE_FILE));
    TR_CHECK(ckpt_join(tmp, sizeof tmp, dir, STATE_FILE ".tmp"));
    char seed[32];
    snprintf(seed, sizeof seed, "%" PRIu64, s->seed);
    char hash[sizeof s->config_hash], model[sizeof s->model];
    snprintf(hash, sizeof hash, "%s", s->config_hash); /* tolerate unterminated fields */
    snprintf(model, sizeof model, "%s", s->model);
    json_t *o = json_pack("{s:I, s:I, s:I, s:s, s:s, s:s}", "epoch", (json_int_t)s->epoch, "step",
                          (json_int_t)s->step, "batch_in_epoch", (json_int_t)s->batch_in_epoch, "seed", seed,
                          "config_hash", hash, "model", model);
    if (o && c && c->count > 0) {
        json_t *classes = classes_to_json(c);
        if (!classes || json_object_set_new(o, "classes", classes) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    if (!o)
        return tr_error_set(TR_ERR_INVALID,
                            "%s: cannot encode the train state (config_hash, model or class names not UTF-8?)", path);
    if (loop && json_object_set(o, "loop", loop) != 0) {
        json_decref(o);
        return tr_error_set(TR_ERR_NOMEM, "%s: cannot encode the loop's figures", path);
    }
    tr_status st = ckpt_write_json(o, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    char why[256];
    if (st == TR_OK && rename(tmp, path) != 0)
        st = tr_error_set(TR_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, tr_io_reason(errno, why, sizeof why));
    if (st != TR_OK) unlink(tmp);
    return st;
}

static tr_status get_int(const char *path, json_t *o, const char *key, int64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return tr_error_set(TR_ERR_PARSE, "%s: '%s' must be a non-negative integer", path, key);
    *out = json_integer_value(v);
    return TR_OK;
}

static tr_status get_str(const char *path, json_t *o, const char *key, char *out, size_t cap) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || json_string_length(v) >= cap)
        return tr_error_set(TR_ERR_PARSE, "%s: '%s' must be a string of at most %zu bytes", path, key,
                            cap - 1);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return TR_OK;
}

tr_status ckpt_read_state(const char *path, tr_train_state *s) {
    memset(s, 0, sizeof *s);
    json_error_t jerr;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) {
        if (access(path, F_OK) != 0)
            return tr_error_set(TR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return tr_error_set(TR_ERR_PARSE, "%s:%d:%d: not valid JSON: %s", path, jerr.line, jerr.column,
                            jerr.text);
    }
    tr_status st = TR_OK;
    if (!json_is_object(o)) st = tr_error_set(TR_ERR_PARSE, "%s: expected a JSON object", path);
    if (st == TR_OK) st = get_int(path, o, "epoch", &s->epoch);
    if (st == TR_OK) st = get_int(path, o, "step", &s->step);
    if (st == TR_OK) st = get_int(path, o, "batch_in_epoch", &s->batch_in_epoch);
    if (st == TR_OK) {
        json_t *v = json_object_get(o, "seed");
        const char *t = json_is_string(v) ? json_string_value(v) : NULL;
        char *end = NULL;
        errno = 0;
        unsigned long long x = t && *t >= '0' && *t <= '9' ? strtoull(t, &end, 10) : 0;
        if (json_is_integer(v) && json_integer_value(v) >= 0)
            s->seed = (uint64_t)json_integer_value(v);
        else if (!t || !end || *end || errno == ERANGE)
            st = tr_error_set(TR_ERR_PARSE,
                              "%s: 'seed' must be a decimal unsigned 64-bit integer in a string", path);
        else
            s->seed = (uint64_t)x;
    }
    if (st == TR_OK) st = get_str(path, o, "config_hash", s->config_hash, sizeof s->config_hash);
    if (st == TR_OK) st = get_str(path, o, "model", s->model, sizeof s->model);
    json_decref(o);
    return st;
}

tr_status tr_checkpoint_read_state(const char *path, tr_train_state *s) {
    char spath[PATH_CAP];
    TR_CHECK(ckpt_join(spath, sizeof spath, path, STATE_FILE));
    tr_status st = ckpt_read_state(spath, s);
    if (st != TR_OK) tr_error_prefix("checkpoint refused: ");
    return st;
}

tr_status ckpt_read_loop(const char *path, json_t **loop) {
    *loop = NULL;
    char spath[PATH_CAP];
    TR_CHECK(ckpt_join(spath, sizeof spath, path, STATE_FILE));
    json_error_t jerr;
    json_t *o = json_load_file(spath, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) return tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s:%d:%d: not valid JSON: %s", spath, jerr.line,
                                jerr.column, jerr.text);
    json_t *v = json_object_get(o, "loop");
    tr_status st = TR_OK;
    if (v && !json_is_object(v))
        st = tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s: 'loop' must be an object", spath);
    else if (v)
        *loop = json_incref(v);
    json_decref(o);
    return st;
}

/* ---- save ---- */

tr_status ckpt_write_model(const char *dir, tr_params *P) {
    char path[PATH_CAP];
    TR_CHECK(ckpt_join(path, sizeof path, dir, MODEL_FILE));
    return ckpt_write_model_file(path, P);
}

tr_status ckpt_write_model_file(const char *path, tr_params *P) {
    int np = tr_params_count(P), nb = tr_params_buffer_count(P), n = np + nb;
    tr_st_entry *e = tr_calloc((size_t)(n > 0 ? n : 1), sizeof *e);
    if (!e) return TR_ERR_NOMEM;
    tr_status st = TR_OK;
    for (int i = 0; i < n && st == TR_OK; i++) {
        tr_tensor *t = i < np ? tr_params_get(P, i) : tr_params_buffer(P, i - np);
        const char *name = i < np ? tr_params_name(P, i) : tr_params_buffer_name(P, i - np);
        if (!t || !t->data || t->dtype != TR_F32)
            st = tr_error_set(TR_ERR_INVALID, "%s: %s '%s' has no F32 data (params not finalized?)", path,
                              i < np ? "parameter" : "buffer", name ? name : "?");
        else
            e[i] = (tr_st_entry){.name = name, .dtype = TR_F32, .ndim = t->ndim, .data = t->data};
        if (st == TR_OK) memcpy(e[i].shape, t->shape, sizeof e[i].shape);
    }
    const char *meta[] = {"format", "pt", "trainer_kind", "model"};
    if (st == TR_OK) st = tr_safetensors_write(path, e, n, meta, 2);
    tr_free(e);
    return st;
}

/* Per parameter "<name>.<state>" (e.g. "fc.weight.exp_avg"), in the parameter's shape, so
 * the file does not depend on the flat layout (a sharded strategy aligns differently). */
static tr_status write_optim(const char *dir, tr_params *P, tr_optim *opt) {
    char path[PATH_CAP];
    TR_CHECK(ckpt_join(path, sizeof path, dir, OPTIM_FILE));
    int ns = tr_optim_state_count(opt), np = tr_params_count(P);
    if (ns < 0 || ns > TR_CKPT_MAX_STATE) return tr_error_set(TR_ERR_INTERNAL, "%s: %d optimizer states", path, ns);
    if (tr_optim_size(opt) != tr_params_numel(P))
        return tr_error_set(TR_ERR_INVALID, "%s: the optimizer covers %zu elements, the parameters %zu", path,
                            tr_optim_size(opt), tr_params_numel(P));
    size_t n = (size_t)np * (size_t)ns;
    tr_st_entry *e = tr_calloc(n ? n : 1, sizeof *e);
    char *names = tr_calloc(n ? n : 1, CKPT_NAME_CAP);
    tr_status st = e && names ? TR_OK : TR_ERR_NOMEM;
    for (int i = 0; i < np && st == TR_OK; i++) {
        tr_tensor *t = tr_params_get(P, i);
        for (int k = 0; k < ns; k++) {
            char *nm = names + ((size_t)i * (size_t)ns + (size_t)k) * CKPT_NAME_CAP;
            snprintf(nm, CKPT_NAME_CAP, "%s.%s", tr_params_name(P, i), tr_optim_state_name(opt, k));
            tr_st_entry *x = &e[(size_t)i * (size_t)ns + (size_t)k];
            *x = (tr_st_entry){.name = nm, .dtype = TR_F32, .ndim = t->ndim,
                               .data = tr_optim_state(opt, k) + tr_params_offset(P, i)};
            memcpy(x->shape, t->shape, sizeof x->shape);
        }
    }
    char steps[32];
    snprintf(steps, sizeof steps, "%" PRId64, tr_optim_steps(opt));
    const char *meta[] = {"steps", steps, "trainer_kind", "optimizer"};
    if (st == TR_OK) st = tr_safetensors_write(path, e, (int)n, meta, 2);
    tr_free(e);
    tr_free(names);
    return st;
}

static int valid_name(const char *name) {
    return name && *name && name[0] != '.' && !strchr(name, '/') && !strstr(name, ".tmp");
}

static tr_status begin(const char *dir, const char *name, long tag, char *final_path, char *tmp_path) {
    TR_CHECK(ckpt_join(final_path, PATH_CAP, dir, name));
    TR_CHECK(tr_checkpoint_tmp_path(dir, name, tag, tmp_path, PATH_CAP));
    TR_CHECK(tr_mkdirs(dir));
    struct stat sb;
    if (lstat(final_path, &sb) == 0)
        return tr_error_set(TR_ERR_INVALID,
                            "%s: a checkpoint of that name exists already; refusing to overwrite it (choose "
                            "another name or remove it)",
                            final_path);
    TR_CHECK(ckpt_remove_tree(tmp_path, 0)); /* a stale one of an earlier process with our tag */
    if (mkdir(tmp_path, 0755) != 0) {
        char why[256];
        return tr_error_set(TR_ERR_IO, "cannot create the directory %s: %s", tmp_path,
                            tr_io_reason(errno, why, sizeof why));
    }
    return TR_OK;
}

tr_status ckpt_begin(const char *dir, const char *name, long tag, char *final_path, char *tmp_path) {
    if (!valid_name(name))
        return tr_error_set(
            TR_ERR_INVALID,
            "checkpoint save: name '%s' must be non-empty, contain no '/' or \".tmp\" and not start with '.'",
            name ? name : "(null)");
    tr_status st = begin(dir, name, tag, final_path, tmp_path);
    if (st != TR_OK) tr_error_prefix("checkpoint %s/%s not saved: ", dir, name);
    return st;
}

tr_status ckpt_commit(const char *dir, const char *final_path, const char *tmp_path) {
    ckpt_fsync_path(tmp_path);
    if (rename(tmp_path, final_path) != 0)
        return errno == EEXIST || errno == ENOTEMPTY
                   ? tr_error_set(
                         TR_ERR_INVALID,
                         "%s: a checkpoint of that name appeared during the save; refusing to overwrite it",
                         final_path)
                   : tr_error_set(TR_ERR_IO, "%s: cannot rename %s into place: %s", final_path, tmp_path,
                                  strerror(errno));
    ckpt_fsync_path(dir);
    return TR_OK;
}

tr_status ckpt_abandon(const char *final_path, const char *tmp_path, tr_status st) {
    tr_error_prefix("checkpoint %s not saved: ", final_path);
    /* Keep the first error's message: removal errors would overwrite it. */
    char *msg = strdup(tr_error_msg());
    ckpt_remove_tree(tmp_path, 0);
    if (msg) {
        tr_error_set(st, "%s", msg);
        free(msg);
    }
    return st;
}

tr_status tr_checkpoint_save(const char *dir, const char *name, tr_params *P, tr_optim *opt,
                             const tr_train_state *s) {
    return ckpt_save(dir, name, P, opt, s, NULL, NULL);
}

tr_status ckpt_save(const char *dir, const char *name, tr_params *P, tr_optim *opt, const tr_train_state *s,
                    const run_classes *c, json_t *loop) {
    if (!dir || !*dir || !P || !s)
        return tr_error_set(TR_ERR_INVALID, "checkpoint save: dir, params and state are required");
    if (!tr_params_data(P) && tr_params_count(P) > 0)
        return tr_error_set(TR_ERR_INVALID, "checkpoint save: the params are not finalized");
    char final_path[PATH_CAP], tmp_path[PATH_CAP];
    TR_CHECK(ckpt_begin(dir, name, (long)getpid(), final_path, tmp_path));
    tr_status st;
    TR_CHECK_GOTO(ckpt_write_model(tmp_path, P), fail);
    TR_CHECK_GOTO(ckpt_write_files(tmp_path, P), fail);
    if (opt) TR_CHECK_GOTO(write_optim(tmp_path, P, opt), fail);
    TR_CHECK_GOTO(ckpt_write_state(tmp_path, s, c, loop), fail);
    TR_CHECK_GOTO(ckpt_commit(dir, final_path, tmp_path), fail);
    return TR_OK;
fail:
    return ckpt_abandon(final_path, tmp_path, st);
}
