/* Checkpoints (DESIGN.md decision 11): save, validated load, latest, prune.
 *
 * A save writes <dir>/<name>.tmp-<pid>/ (model.safetensors, optimizer.safetensors when an
 * optimizer is given, state.json, each fsync'ed), fsyncs it, renames it to <dir>/<name> and
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "trainer/checkpoint.h"
#include "trainer/log.h"
#include "trainer/io.h"
#include "trainer/memory.h"
#include "trainer/safetensors.h"

#define PATH_CAP 1100
#define MODEL_FILE "model.safetensors"
#define OPTIM_FILE "optimizer.safetensors"
#define STATE_FILE "state.json"

static tr_status join(char *out, size_t cap, const char *a, const char *b) {
    int k = snprintf(out, cap, "%s/%s", a, b);
    if (k < 0 || (size_t)k >= cap)
        return tr_error_set(TR_ERR_INVALID, "%s/%s: path longer than %zu bytes", a, b, cap - 1);
    return TR_OK;
}

static void fsync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Removes a file or a directory tree (symlinks are removed, never followed). */
static tr_status remove_tree(const char *path, int depth) {
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
        st = join(sub, sizeof sub, path, de->d_name);
        if (st == TR_OK) st = remove_tree(sub, depth + 1);
    }
    closedir(d);
    if (st == TR_OK && rmdir(path) != 0)
        st = tr_error_set(TR_ERR_IO, "%s: cannot remove the directory: %s", path, strerror(errno));
    return st;
}

static void shape_str(char *out, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(out, cap, "(");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(out + k, cap - k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k < cap) snprintf(out + k, cap - k, ")");
}

/* ---- state.json ---- */

static tr_status write_state(const char *dir, const tr_train_state *s) {
    char path[PATH_CAP], tmp[PATH_CAP];
    TR_CHECK(join(path, sizeof path, dir, STATE_FILE));
    TR_CHECK(join(tmp, sizeof tmp, dir, STATE_FILE ".tmp"));
    char seed[32];
    snprintf(seed, sizeof seed, "%" PRIu64, s->seed);
    char hash[sizeof s->config_hash], model[sizeof s->model];
    snprintf(hash, sizeof hash, "%s", s->config_hash); /* tolerate unterminated fields */
    snprintf(model, sizeof model, "%s", s->model);
    json_t *o = json_pack("{s:I, s:I, s:I, s:s, s:s, s:s}", "epoch", (json_int_t)s->epoch, "step",
                          (json_int_t)s->step, "batch_in_epoch", (json_int_t)s->batch_in_epoch, "seed", seed,
                          "config_hash", hash, "model", model);
    if (!o)
        return tr_error_set(TR_ERR_INVALID,
                            "%s: cannot encode the train state (config_hash or model not UTF-8?)", path);
    int rc = json_dump_file(o, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (rc != 0) {
        tr_status st = tr_error_set(TR_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
        unlink(tmp);
        return st;
    }
    int fd = open(tmp, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        tr_status st = tr_error_set(TR_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        unlink(tmp);
        return st;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        tr_status st = tr_error_set(TR_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        unlink(tmp);
        return st;
    }
    return TR_OK;
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

static tr_status read_state(const char *path, tr_train_state *s) {
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
    TR_CHECK(join(spath, sizeof spath, path, STATE_FILE));
    tr_status st = read_state(spath, s);
    if (st != TR_OK) tr_error_prefix("checkpoint refused: ");
    return st;
}

/* ---- save ---- */

static tr_status write_model(const char *dir, tr_params *P) {
    char path[PATH_CAP];
    TR_CHECK(join(path, sizeof path, dir, MODEL_FILE));
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

/* More than any optimizer keeps (Adam: 2). */
#define CKPT_MAX_OPTIM_STATE 8

static tr_status write_optim(const char *dir, tr_optim *opt) {
    char path[PATH_CAP];
    TR_CHECK(join(path, sizeof path, dir, OPTIM_FILE));
    tr_st_entry e[CKPT_MAX_OPTIM_STATE];
    int n = tr_optim_state_count(opt);
    if (n < 0 || n > CKPT_MAX_OPTIM_STATE)
        return tr_error_set(TR_ERR_INTERNAL, "%s: %d optimizer states", path, n);
    for (int i = 0; i < n; i++)
        e[i] = (tr_st_entry){.name = tr_optim_state_name(opt, i),
                             .dtype = TR_F32,
                             .ndim = 1,
                             .shape = {(int64_t)tr_optim_size(opt)},
                             .data = tr_optim_state(opt, i)};
    char steps[32];
    snprintf(steps, sizeof steps, "%" PRId64, tr_optim_steps(opt));
    const char *meta[] = {"steps", steps, "trainer_kind", "optimizer"};
    return tr_safetensors_write(path, e, n, meta, 2);
}

static int valid_name(const char *name) {
    return name && *name && name[0] != '.' && !strchr(name, '/') && !strstr(name, ".tmp");
}

tr_status tr_checkpoint_save(const char *dir, const char *name, tr_params *P, tr_optim *opt,
                             const tr_train_state *s) {
    if (!dir || !*dir || !P || !s)
        return tr_error_set(TR_ERR_INVALID, "checkpoint save: dir, params and state are required");
    if (!valid_name(name))
        return tr_error_set(
            TR_ERR_INVALID,
            "checkpoint save: name '%s' must be non-empty, contain no '/' or \".tmp\" and not start with '.'",
            name ? name : "(null)");
    if (!tr_params_data(P) && tr_params_count(P) > 0)
        return tr_error_set(TR_ERR_INVALID, "checkpoint save: the params are not finalized");
    char final_path[PATH_CAP], tmp_name[256], tmp_path[PATH_CAP];
    TR_CHECK(join(final_path, sizeof final_path, dir, name));
    snprintf(tmp_name, sizeof tmp_name, "%.200s.tmp-%ld", name, (long)getpid());
    TR_CHECK(join(tmp_path, sizeof tmp_path, dir, tmp_name));
    TR_CHECK(tr_mkdirs(dir));
    struct stat sb;
    if (lstat(final_path, &sb) == 0)
        return tr_error_set(TR_ERR_INVALID,
                            "%s: a checkpoint of that name exists already; refusing to overwrite it (choose "
                            "another name or remove it)",
                            final_path);
    TR_CHECK(remove_tree(tmp_path, 0)); /* a stale one of an earlier process with our pid */
    if (mkdir(tmp_path, 0755) != 0)
        return tr_error_set(TR_ERR_IO, "%s: cannot create the checkpoint directory %s: %s", final_path,
                            tmp_path, strerror(errno));
    tr_status st;
    TR_CHECK_GOTO(write_model(tmp_path, P), fail);
    if (opt) TR_CHECK_GOTO(write_optim(tmp_path, opt), fail);
    TR_CHECK_GOTO(write_state(tmp_path, s), fail);
    fsync_path(tmp_path);
    if (rename(tmp_path, final_path) != 0) {
        st = errno == EEXIST || errno == ENOTEMPTY
                 ? tr_error_set(
                       TR_ERR_INVALID,
                       "%s: a checkpoint of that name appeared during the save; refusing to overwrite it",
                       final_path)
                 : tr_error_set(TR_ERR_IO, "%s: cannot rename %s into place: %s", final_path, tmp_path,
                                strerror(errno));
        goto fail;
    }
    fsync_path(dir);
    return TR_OK;
fail:
    tr_error_prefix("checkpoint %s: ", final_path);
    {
        /* Keep the first error's message: removal errors would overwrite it. */
        char *msg = strdup(tr_error_msg());
        remove_tree(tmp_path, 0);
        if (msg) {
            tr_error_set(st, "%s", msg);
            free(msg);
        }
    }
    return st;
}

/* ---- load ---- */

static tr_status check_tensor_entry(const char *file, const tr_safetensors *f, const char *kind,
                                    const char *name, const tr_tensor *t) {
    const tr_st_entry *e = tr_safetensors_find(f, name);
    if (!e)
        return tr_error_set(
            TR_ERR_INVALID,
            "%s: the model has '%s' but the checkpoint does not (a checkpoint of another model?)", file,
            name);
    char a[128], b[128];
    shape_str(a, sizeof a, e->ndim, e->shape);
    shape_str(b, sizeof b, t->ndim, t->shape);
    if (e->ndim != t->ndim || memcmp(e->shape, t->shape, (size_t)t->ndim * sizeof t->shape[0]) != 0)
        return tr_error_set(TR_ERR_INVALID, "%s: %s '%s' has shape %s in the checkpoint, the model has %s",
                            file, kind, name, a, b);
    if (e->dtype != TR_F32)
        return tr_error_set(TR_ERR_INVALID, "%s: %s '%s' is %s in the checkpoint, the model expects F32",
                            file, kind, name, tr_dtype_name(e->dtype));
    return TR_OK;
}

static tr_status check_model(const char *file, const tr_safetensors *f, tr_params *P) {
    int np = tr_params_count(P), nb = tr_params_buffer_count(P);
    for (int i = 0; i < np; i++)
        TR_CHECK(check_tensor_entry(file, f, "parameter", tr_params_name(P, i), tr_params_get(P, i)));
    for (int i = 0; i < nb; i++)
        TR_CHECK(check_tensor_entry(file, f, "buffer", tr_params_buffer_name(P, i), tr_params_buffer(P, i)));
    for (int i = 0; i < tr_safetensors_count(f); i++) {
        const char *name = tr_safetensors_at(f, i)->name;
        if (tr_params_find(P, name) < 0 && tr_params_find_buffer(P, name) < 0)
            return tr_error_set(
                TR_ERR_INVALID,
                "%s: the checkpoint has '%s' but the model does not (a checkpoint of another model?)", file,
                name);
    }
    return TR_OK;
}

static tr_status check_optim(const char *file, const tr_safetensors *f, tr_optim *opt, int64_t *steps) {
    const char *kind = tr_safetensors_meta(f, "trainer_kind");
    if (!kind || strcmp(kind, "optimizer") != 0)
        return tr_error_set(TR_ERR_PARSE, "%s: not an optimizer state file (metadata trainer_kind is '%s')",
                            file, kind ? kind : "missing");
    const char *sv = tr_safetensors_meta(f, "steps");
    char *end = NULL;
    errno = 0;
    long long x = sv && *sv >= '0' && *sv <= '9' ? strtoll(sv, &end, 10) : -1;
    if (x < 0 || !end || *end || errno == ERANGE)
        return tr_error_set(TR_ERR_PARSE,
                            "%s: metadata 'steps' must be a non-negative decimal integer, got '%s'", file,
                            sv ? sv : "missing");
    int n = tr_optim_state_count(opt);
    if (tr_safetensors_count(f) != n)
        return tr_error_set(
            TR_ERR_INVALID,
            "%s: %d state buffers in the checkpoint, the optimizer has %d (another optimizer kind?)", file,
            tr_safetensors_count(f), n);
    for (int i = 0; i < n; i++) {
        const char *name = tr_optim_state_name(opt, i);
        const tr_st_entry *e = tr_safetensors_find(f, name);
        if (!e)
            return tr_error_set(
                TR_ERR_INVALID,
                "%s: the optimizer has state '%s' but the checkpoint does not (another optimizer kind?)",
                file, name);
        if (e->dtype != TR_F32 || e->ndim != 1 || e->shape[0] != (int64_t)tr_optim_size(opt)) {
            char a[128];
            shape_str(a, sizeof a, e->ndim, e->shape);
            return tr_error_set(TR_ERR_INVALID,
                                "%s: state '%s' is %s %s in the checkpoint, the optimizer has f32 (%zu)",
                                file, name, tr_dtype_name(e->dtype), a, tr_optim_size(opt));
        }
    }
    *steps = x;
    return TR_OK;
}

tr_status tr_checkpoint_load(const char *path, tr_params *P, tr_optim *opt, tr_train_state *s) {
    if (!path || !P) return tr_error_set(TR_ERR_INVALID, "checkpoint load: path and params are required");
    char mpath[PATH_CAP], opath[PATH_CAP], spath[PATH_CAP];
    TR_CHECK(join(mpath, sizeof mpath, path, MODEL_FILE));
    TR_CHECK(join(opath, sizeof opath, path, OPTIM_FILE));
    TR_CHECK(join(spath, sizeof spath, path, STATE_FILE));
    tr_train_state ns;
    tr_safetensors *mf = NULL, *of = NULL;
    int64_t steps = 0;
    tr_status st = TR_OK;
    TR_CHECK_GOTO(read_state(spath, &ns), done);
    TR_CHECK_GOTO(tr_safetensors_open(&mf, mpath), done);
    TR_CHECK_GOTO(check_model(mpath, mf, P), done);
    if (opt) {
        if (access(opath, F_OK) != 0) {
            st = tr_error_set(TR_ERR_NOT_FOUND,
                              "%s: missing: the checkpoint holds no optimizer state (saved without one?)",
                              opath);
            goto done;
        }
        TR_CHECK_GOTO(tr_safetensors_open(&of, opath), done);
        TR_CHECK_GOTO(check_optim(opath, of, opt, &steps), done);
    }
    /* Everything checked: now copy (memcpy: file data need not be aligned). */
    for (int i = 0; i < tr_params_count(P); i++) {
        tr_tensor *t = tr_params_get(P, i);
        memcpy(t->data, tr_safetensors_find(mf, tr_params_name(P, i))->data, tr_tensor_bytes(t));
    }
    for (int i = 0; i < tr_params_buffer_count(P); i++) {
        tr_tensor *t = tr_params_buffer(P, i);
        memcpy(t->data, tr_safetensors_find(mf, tr_params_buffer_name(P, i))->data, tr_tensor_bytes(t));
    }
    if (opt) {
        for (int i = 0; i < tr_optim_state_count(opt); i++)
            memcpy(tr_optim_state(opt, i), tr_safetensors_find(of, tr_optim_state_name(opt, i))->data,
                   tr_optim_size(opt) * sizeof(float));
        tr_optim_set_steps(opt, steps);
    }
    if (s) *s = ns;
done:
    if (st != TR_OK) tr_error_prefix("checkpoint refused: "); /* the message names the file */
    tr_safetensors_close(mf);
    tr_safetensors_close(of);
    return st;
}

/* ---- latest and prune ---- */

typedef struct ckpt_entry {
    char name[256];
    int64_t step;
} ckpt_entry;

/* Newest first: higher step, then later name. */
static int ckpt_cmp(const void *pa, const void *pb) {
    const ckpt_entry *a = pa, *b = pb;
    if (a->step != b->step) return a->step > b->step ? -1 : 1;
    return -strcmp(a->name, b->name);
}

static int is_dir(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Lists the complete checkpoints of dir, sorted newest first; *out is tr_malloc'ed. */
static tr_status list_complete(const char *dir, ckpt_entry **out, int *count) {
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return tr_error_set(TR_ERR_NOT_FOUND, "%s: no checkpoint directory", dir);
        return tr_error_set(TR_ERR_IO, "%s: cannot open the checkpoint directory: %s", dir, strerror(errno));
    }
    int cap = 0, n = 0;
    ckpt_entry *v = NULL;
    tr_status st = TR_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (nm[0] == '.' || strstr(nm, ".tmp") || strlen(nm) >= sizeof v->name) continue;
        char sub[PATH_CAP], mp[PATH_CAP], sp[PATH_CAP];
        if (join(sub, sizeof sub, dir, nm) != TR_OK || !is_dir(sub) ||
            join(mp, sizeof mp, sub, MODEL_FILE) != TR_OK || join(sp, sizeof sp, sub, STATE_FILE) != TR_OK ||
            !is_file(mp) || !is_file(sp)) {
            tr_error_clear();
            continue;
        }
        tr_train_state s;
        if (read_state(sp, &s) != TR_OK) {
            TR_WARN("checkpoint: skipping %s: %s", sub, tr_error_msg());
            tr_error_clear();
            continue;
        }
        if (n == cap) {
            int ncap = cap ? 2 * cap : 16;
            ckpt_entry *nv = tr_malloc((size_t)ncap * sizeof *nv);
            if (!nv) {
                st = TR_ERR_NOMEM;
                break;
            }
            if (n) memcpy(nv, v, (size_t)n * sizeof *v);
            tr_free(v);
            v = nv;
            cap = ncap;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", nm);
        v[n].step = s.step;
        n++;
    }
    closedir(d);
    if (st != TR_OK) {
        tr_free(v);
        return st;
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, ckpt_cmp);
    *out = v;
    *count = n;
    return TR_OK;
}

tr_status tr_checkpoint_latest(const char *dir, char *out, size_t size) {
    if (!dir || !out || size == 0)
        return tr_error_set(TR_ERR_INVALID, "checkpoint latest: dir and out are required");
    out[0] = '\0';
    ckpt_entry *v;
    int n;
    TR_CHECK(list_complete(dir, &v, &n));
    tr_status st = TR_OK;
    if (n == 0)
        st = tr_error_set(TR_ERR_NOT_FOUND, "%s: no complete checkpoint", dir);
    else if (join(out, size, dir, v[0].name) != TR_OK) {
        out[0] = '\0';
        st = tr_error_set(TR_ERR_INVALID, "%s/%s: path does not fit the %zu-byte buffer", dir, v[0].name,
                          size);
    }
    tr_free(v);
    return st;
}

/* A "<name>.tmp-<pid>" directory is stale unless process pid is alive (and not us mid-save:
 * saves are synchronous, so one of ours is a leftover too). */
static int stale_tmp(const char *name) {
    const char *t = strstr(name, ".tmp-");
    if (!t) return 0;
    char *end = NULL;
    long pid = strtol(t + 5, &end, 10);
    if (!end || *end || pid <= 0) return 1;
    if (pid == (long)getpid()) return 1;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

tr_status tr_checkpoint_prune(const char *dir, int keep_last) {
    if (!dir) return tr_error_set(TR_ERR_INVALID, "checkpoint prune: dir is required");
    if (keep_last < 1)
        return tr_error_set(TR_ERR_INVALID, "%s: keep_last must be at least 1, got %d", dir, keep_last);
    ckpt_entry *v;
    int n;
    TR_CHECK(list_complete(dir, &v, &n));
    tr_status st = TR_OK;
    for (int i = keep_last; i < n && st == TR_OK; i++) {
        char sub[PATH_CAP];
        st = join(sub, sizeof sub, dir, v[i].name);
        if (st == TR_OK) st = remove_tree(sub, 0);
    }
    tr_free(v);
    if (st != TR_OK) return st;
    DIR *d = opendir(dir);
    if (!d)
        return tr_error_set(TR_ERR_IO, "%s: cannot open the checkpoint directory: %s", dir, strerror(errno));
    /* Collect first: removing entries while readdir walks them is unspecified. */
    char(*stale)[256] = NULL;
    int ns = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!stale_tmp(de->d_name) || strlen(de->d_name) >= 256) continue;
        if (ns == cap) {
            int ncap = cap ? 2 * cap : 8;
            char(*nv)[256] = tr_malloc((size_t)ncap * sizeof *nv);
            if (!nv) {
                st = TR_ERR_NOMEM;
                break;
            }
            if (ns) memcpy(nv, stale, (size_t)ns * sizeof *nv);
            tr_free(stale);
            stale = nv;
            cap = ncap;
        }
        memcpy(stale[ns++], de->d_name, strlen(de->d_name) + 1);
    }
    closedir(d);
    for (int i = 0; i < ns && st == TR_OK; i++) {
        char sub[PATH_CAP];
        st = join(sub, sizeof sub, dir, stale[i]);
        if (st == TR_OK) st = remove_tree(sub, 0);
    }
    tr_free(stale);
    if (st == TR_OK) fsync_path(dir);
    return st;
}
