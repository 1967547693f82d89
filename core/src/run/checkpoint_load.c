/* Checkpoint loading (docs/design.md "Checkpoints"): full checkpoints (model.safetensors +
 * optimizer.safetensors) and sharded ones (index.json + one shard file per rank of any world
 * size) go through one loop that hands every stored piece of a parameter to the targets it
 * overlaps, so a full or partial model, a whole optimizer or a ZeRO shard loads from either.
 * Everything is checked first (names, shapes, dtypes, optimizer kind, each target covered
 * exactly once), and only then copied: a refused checkpoint changes nothing. A sharded
 * checkpoint's files are read twice (check, then copy), one at a time. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/checkpoint_impl.h"
#include "trainer/memory.h"
#include "trainer/safetensors.h"

typedef struct target {
    int param;
    int64_t start, count;
    float *data;
    float *state[TR_CKPT_MAX_STATE];
    int64_t covered;
} target;

typedef struct source {
    const char *path;
    tr_params *P;
    tr_optim *opt;           /* NULL: weights only */
    target *t;
    int nt;
    int sharded;
    tr_safetensors *mf, *of; /* full */
    json_t *index;           /* sharded */
    int world;
    int64_t steps;
} source;

static tr_status shape_mismatch(const char *file, const char *kind, const char *name, int nd_a, const int64_t *a,
                                const tr_tensor *t) {
    char x[128], y[128];
    ckpt_shape_str(x, sizeof x, nd_a, a);
    ckpt_shape_str(y, sizeof y, t->ndim, t->shape);
    return tr_error_set(TR_ERR_INVALID, "%s: %s '%s' has shape %s in the checkpoint, the model has %s", file, kind,
                        name, x, y);
}

static int same_shape(int nd, const int64_t *shape, const tr_tensor *t) {
    return nd == t->ndim && memcmp(shape, t->shape, (size_t)nd * sizeof shape[0]) == 0;
}

static tr_status missing(const char *file, const char *name) {
    return tr_error_set(TR_ERR_INVALID,
                        "%s: the model has '%s' but the checkpoint does not (a checkpoint of another model?)", file,
                        name);
}

static tr_status extra(const char *file, const char *name) {
    return tr_error_set(TR_ERR_INVALID,
                        "%s: the checkpoint has '%s' but the model does not (a checkpoint of another model?)", file,
                        name);
}

/* A tensor of f, F32, with the tensor t's shape. */
static tr_status check_entry(const char *file, const tr_safetensors *f, const char *kind, const char *name,
                             const tr_tensor *t, const tr_st_entry **out) {
    const tr_st_entry *e = tr_safetensors_find(f, name);
    if (!e) return missing(file, name);
    if (!same_shape(e->ndim, e->shape, t)) return shape_mismatch(file, kind, name, e->ndim, e->shape, t);
    if (e->dtype != TR_F32)
        return tr_error_set(TR_ERR_INVALID, "%s: %s '%s' is %s in the checkpoint, the model expects F32", file, kind,
                            name, tr_dtype_name(e->dtype));
    if (out) *out = e;
    return TR_OK;
}

static tr_status parse_steps(const char *file, const char *sv, int64_t *steps) {
    char *end = NULL;
    errno = 0;
    long long x = sv && *sv >= '0' && *sv <= '9' ? strtoll(sv, &end, 10) : -1;
    if (x < 0 || !end || *end || errno == ERANGE)
        return tr_error_set(TR_ERR_PARSE, "%s: metadata 'steps' must be a non-negative decimal integer, got '%s'",
                            file, sv ? sv : "missing");
    *steps = x;
    return TR_OK;
}

/* Hands elements [start, start + count) of parameter p (data from file df and, with states,
 * the optimizer state from file sf) to every target they overlap: counted (copy 0) or copied
 * (copy 1) with pread (tr_safetensors_copy), so no page of the files is mapped in (a rank
 * holds its pieces, never the files). */
static tr_status apply(source *src, const tr_safetensors *df, const tr_safetensors *sf, int p, int64_t start, int64_t count,
                  const float *data, const float *const *states, int copy) {
    int ns = src->opt ? tr_optim_state_count(src->opt) : 0;
    for (int i = 0; i < src->nt; i++) {
        target *t = &src->t[i];
        if (t->param != p) continue;
        int64_t a = start > t->start ? start : t->start;
        int64_t b = start + count < t->start + t->count ? start + count : t->start + t->count;
        if (a >= b) continue;
        if (!copy) {
            t->covered += b - a;
            continue;
        }
        size_t bytes = (size_t)(b - a) * sizeof(float);
        TR_CHECK(tr_safetensors_copy(df, t->data + (a - t->start), data + (a - start), bytes));
        for (int k = 0; k < ns; k++)
            TR_CHECK(tr_safetensors_copy(sf, t->state[k] + (a - t->start), states[k] + (a - start), bytes));
    }
    return TR_OK;
}

/* ---- full checkpoints ---- */

/* mpath: the checkpoint's model.safetensors, or a weights file given whole. */
static tr_status open_full(source *src, const char *mpath) {
    char opath[PATH_CAP];
    TR_CHECK(ckpt_join(opath, sizeof opath, src->path, OPTIM_FILE));
    tr_params *P = src->P;
    TR_CHECK(tr_safetensors_open(&src->mf, mpath));
    int np = tr_params_count(P), nb = tr_params_buffer_count(P);
    for (int i = 0; i < np; i++)
        TR_CHECK(check_entry(mpath, src->mf, "parameter", tr_params_name(P, i), tr_params_get(P, i), NULL));
    for (int i = 0; i < nb; i++)
        TR_CHECK(check_entry(mpath, src->mf, "buffer", tr_params_buffer_name(P, i), tr_params_buffer(P, i), NULL));
    for (int i = 0; i < tr_safetensors_count(src->mf); i++) {
        const char *name = tr_safetensors_at(src->mf, i)->name;
        if (tr_params_find(P, name) < 0 && tr_params_find_buffer(P, name) < 0) return extra(mpath, name);
    }
    if (!src->opt) return TR_OK;
    if (access(opath, F_OK) != 0)
        return tr_error_set(TR_ERR_NOT_FOUND, "%s: missing: the checkpoint holds no optimizer state (saved without one?)",
                            opath);
    TR_CHECK(tr_safetensors_open(&src->of, opath));
    const char *kind = tr_safetensors_meta(src->of, "trainer_kind");
    if (!kind || strcmp(kind, "optimizer") != 0)
        return tr_error_set(TR_ERR_PARSE, "%s: not an optimizer state file (metadata trainer_kind is '%s')", opath,
                            kind ? kind : "missing");
    TR_CHECK(parse_steps(opath, tr_safetensors_meta(src->of, "steps"), &src->steps));
    int ns = tr_optim_state_count(src->opt);
    if (tr_safetensors_count(src->of) != np * ns)
        return tr_error_set(TR_ERR_INVALID,
                            "%s: %d state tensors in the checkpoint, the optimizer has %d (%d per parameter: another "
                            "optimizer kind?)",
                            opath, tr_safetensors_count(src->of), np * ns, ns);
    for (int i = 0; i < np; i++)
        for (int k = 0; k < ns; k++) {
            char name[CKPT_NAME_CAP];
            snprintf(name, sizeof name, "%s.%s", tr_params_name(P, i), tr_optim_state_name(src->opt, k));
            if (!tr_safetensors_find(src->of, name))
                return tr_error_set(TR_ERR_INVALID,
                                    "%s: the optimizer has state '%s' but the checkpoint does not (another optimizer "
                                    "kind?)",
                                    opath, name);
            TR_CHECK(check_entry(opath, src->of, "optimizer state", name, tr_params_get(P, i), NULL));
        }
    return TR_OK;
}

static tr_status visit_full(source *src, int copy) {
    tr_params *P = src->P;
    int ns = src->opt ? tr_optim_state_count(src->opt) : 0;
    for (int i = 0; i < tr_params_count(P); i++) {
        const float *states[TR_CKPT_MAX_STATE] = {0};
        for (int k = 0; k < ns; k++) {
            char name[CKPT_NAME_CAP];
            snprintf(name, sizeof name, "%s.%s", tr_params_name(P, i), tr_optim_state_name(src->opt, k));
            states[k] = tr_safetensors_find(src->of, name)->data;
        }
        TR_CHECK(apply(src, src->mf, src->of, i, 0, tr_tensor_numel(tr_params_get(P, i)),
                       tr_safetensors_find(src->mf, tr_params_name(P, i))->data, states, copy));
    }
    if (copy)
        for (int i = 0; i < tr_params_buffer_count(P); i++) {
            tr_tensor *t = tr_params_buffer(P, i);
            memcpy(t->data, tr_safetensors_find(src->mf, tr_params_buffer_name(P, i))->data, tr_tensor_bytes(t));
        }
    return TR_OK;
}

/* ---- sharded checkpoints ---- */

static tr_status index_shape(const char *file, json_t *o, const char **name, int *nd, int64_t *shape) {
    json_t *n = json_object_get(o, "name"), *s = json_object_get(o, "shape");
    if (!json_is_string(n) || !json_is_array(s) || json_array_size(s) < 1 || json_array_size(s) > TR_MAX_DIMS)
        return tr_error_set(TR_ERR_PARSE, "%s: each tensor needs a 'name' and a 'shape' of 1..%d dims", file,
                            TR_MAX_DIMS);
    *name = json_string_value(n);
    *nd = (int)json_array_size(s);
    for (int d = 0; d < *nd; d++) {
        json_t *v = json_array_get(s, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) <= 0)
            return tr_error_set(TR_ERR_PARSE, "%s: '%s': dims must be positive integers", file, *name);
        shape[d] = json_integer_value(v);
    }
    return TR_OK;
}

/* index.json's parameters (or buffers) must be the model's, with the same shapes. */
static tr_status check_index_tensors(const char *file, json_t *list, tr_params *P, int buffers) {
    const char *kind = buffers ? "buffer" : "parameter";
    int n = buffers ? tr_params_buffer_count(P) : tr_params_count(P);
    if (!json_is_array(list)) return tr_error_set(TR_ERR_PARSE, "%s: '%ss' must be a list", file, kind);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *name;
        int nd;
        int64_t shape[TR_MAX_DIMS];
        TR_CHECK(index_shape(file, json_array_get(list, i), &name, &nd, shape));
        int at = buffers ? tr_params_find_buffer(P, name) : tr_params_find(P, name);
        if (at < 0) return extra(file, name);
        tr_tensor *t = buffers ? tr_params_buffer(P, at) : tr_params_get(P, at);
        if (!same_shape(nd, shape, t)) return shape_mismatch(file, kind, name, nd, shape, t);
    }
    if ((int)json_array_size(list) != n)
        for (int i = 0; i < n; i++) {
            const char *name = buffers ? tr_params_buffer_name(P, i) : tr_params_name(P, i);
            int found = 0;
            for (size_t k = 0; k < json_array_size(list) && !found; k++)
                found = strcmp(json_string_value(json_object_get(json_array_get(list, k), "name")), name) == 0;
            if (!found) return missing(file, name);
        }
    return TR_OK;
}

static tr_status open_sharded(source *src, const char *ipath) {
    json_error_t jerr;
    src->index = json_load_file(ipath, JSON_REJECT_DUPLICATES, &jerr);
    if (!src->index)
        return tr_error_set(TR_ERR_PARSE, "%s:%d:%d: not valid JSON: %s", ipath, jerr.line, jerr.column, jerr.text);
    json_t *ix = src->index, *fmt = json_object_get(ix, "format"), *files = json_object_get(ix, "files");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "trainer-sharded") != 0)
        return tr_error_set(TR_ERR_PARSE, "%s: 'format' must be \"trainer-sharded\"", ipath);
    json_t *w = json_object_get(ix, "world");
    if (!json_is_integer(w) || json_integer_value(w) < 1 || !json_is_array(files) ||
        json_array_size(files) != (size_t)json_integer_value(w))
        return tr_error_set(TR_ERR_PARSE, "%s: 'world' must be a positive integer and 'files' list that many files",
                            ipath);
    src->world = (int)json_integer_value(w);
    for (int r = 0; r < src->world; r++) {
        json_t *f = json_array_get(files, (size_t)r);
        if (!json_is_string(f) || strchr(json_string_value(f), '/') || json_string_value(f)[0] == '.')
            return tr_error_set(TR_ERR_PARSE, "%s: files[%d] must be a file name in the checkpoint directory", ipath, r);
    }
    TR_CHECK(check_index_tensors(ipath, json_object_get(ix, "params"), src->P, 0));
    TR_CHECK(check_index_tensors(ipath, json_object_get(ix, "buffers"), src->P, 1));
    if (!src->opt) return TR_OK;
    json_t *o = json_object_get(ix, "optimizer"), *states = json_object_get(o, "states");
    if (!json_is_object(o))
        return tr_error_set(TR_ERR_NOT_FOUND, "%s: the checkpoint holds no optimizer state (saved without one?)", ipath);
    json_t *steps = json_object_get(o, "steps");
    if (!json_is_integer(steps) || json_integer_value(steps) < 0)
        return tr_error_set(TR_ERR_PARSE, "%s: optimizer 'steps' must be a non-negative integer", ipath);
    src->steps = json_integer_value(steps);
    int ns = tr_optim_state_count(src->opt);
    if (!json_is_array(states) || json_array_size(states) != (size_t)ns)
        return tr_error_set(TR_ERR_INVALID, "%s: %zu optimizer states in the checkpoint, the optimizer has %d (another "
                            "optimizer kind?)", ipath, json_is_array(states) ? json_array_size(states) : 0, ns);
    for (int k = 0; k < ns; k++) {
        int found = 0;
        for (size_t i = 0; i < json_array_size(states) && !found; i++) {
            json_t *v = json_array_get(states, i);
            found = json_is_string(v) && strcmp(json_string_value(v), tr_optim_state_name(src->opt, k)) == 0;
        }
        if (!found)
            return tr_error_set(TR_ERR_INVALID,
                                "%s: the optimizer has state '%s' but the checkpoint does not (another optimizer kind?)",
                                ipath, tr_optim_state_name(src->opt, k));
    }
    return TR_OK;
}

/* One shard file: checks it (copy 0) or copies from it (copy 1). */
static tr_status visit_shard(source *src, int r, int copy) {
    char fpath[PATH_CAP];
    const char *fname = json_string_value(json_array_get(json_object_get(src->index, "files"), (size_t)r));
    TR_CHECK(ckpt_join(fpath, sizeof fpath, src->path, fname));
    tr_safetensors *f;
    TR_CHECK(tr_safetensors_open(&f, fpath));
    tr_status st = TR_OK;
    json_t *starts = NULL;
    const char *kind = tr_safetensors_meta(f, "trainer_kind"), *sj = tr_safetensors_meta(f, "starts");
    if (!kind || strcmp(kind, "shard") != 0 || !sj || !(starts = json_loads(sj, 0, NULL)) || !json_is_object(starts)) {
        st = tr_error_set(TR_ERR_PARSE, "%s: not a shard file (metadata trainer_kind 'shard' and 'starts' expected)",
                          fpath);
        goto done;
    }
    tr_params *P = src->P;
    int ns = src->opt ? tr_optim_state_count(src->opt) : 0;
    const char *name;
    json_t *v;
    json_object_foreach(starts, name, v) {
        int p = tr_params_find(P, name);
        const tr_st_entry *e = tr_safetensors_find(f, name);
        if (p < 0) {
            st = extra(fpath, name);
            break;
        }
        int64_t numel = tr_tensor_numel(tr_params_get(P, p));
        if (!e || e->dtype != TR_F32 || e->ndim != 1 || !json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > numel - e->shape[0]) { /* start + count, without overflow */
            st = tr_error_set(TR_ERR_INVALID, "%s: piece '%s' is not an F32 run of elements inside the parameter's %lld",
                              fpath, name, (long long)numel);
            break;
        }
        const float *states[TR_CKPT_MAX_STATE] = {0};
        for (int k = 0; k < ns && st == TR_OK; k++) {
            char sn[CKPT_NAME_CAP];
            snprintf(sn, sizeof sn, "%s.%s", name, tr_optim_state_name(src->opt, k));
            const tr_st_entry *se = tr_safetensors_find(f, sn);
            if (!se || se->dtype != TR_F32 || se->ndim != 1 || se->shape[0] != e->shape[0])
                st = tr_error_set(TR_ERR_INVALID, "%s: optimizer state '%s' is missing or not the piece's size", fpath, sn);
            else
                states[k] = se->data;
        }
        if (st != TR_OK) break;
        st = apply(src, f, f, p, json_integer_value(v), e->shape[0], e->data, states, copy);
        if (st != TR_OK) break;
    }
    /* Rank 0's file holds the buffers. */
    for (int i = 0; r == 0 && st == TR_OK && i < tr_params_buffer_count(P); i++) {
        const tr_st_entry *e;
        tr_tensor *t = tr_params_buffer(P, i);
        st = check_entry(fpath, f, "buffer", tr_params_buffer_name(P, i), t, &e);
        if (st == TR_OK && copy) memcpy(t->data, e->data, tr_tensor_bytes(t));
    }
done:
    json_decref(starts);
    tr_safetensors_close(f);
    return st;
}

/* ---- the loop ---- */

static tr_status load(source *src, tr_train_state *s) {
    char spath[PATH_CAP], ipath[PATH_CAP], mpath[PATH_CAP];
    tr_train_state ns = {0};
    /* A weights file (what consolidation writes): the weights alone, no state. */
    int file = ckpt_is_file(src->path);
    if (file && src->opt)
        return tr_error_set(TR_ERR_INVALID, "%s: a weights file holds no optimizer state (resume from a checkpoint folder)",
                            src->path);
    if (file) {
        if ((size_t)snprintf(mpath, sizeof mpath, "%s", src->path) >= sizeof mpath)
            return tr_error_set(TR_ERR_INVALID, "%s: path too long", src->path);
    } else {
        TR_CHECK(ckpt_join(spath, sizeof spath, src->path, STATE_FILE));
        TR_CHECK(ckpt_join(ipath, sizeof ipath, src->path, INDEX_FILE));
        TR_CHECK(ckpt_join(mpath, sizeof mpath, src->path, MODEL_FILE));
        TR_CHECK(ckpt_read_state(spath, &ns));
        src->sharded = access(ipath, F_OK) == 0;
    }
    if (src->opt && tr_optim_state_count(src->opt) > TR_CKPT_MAX_STATE)
        return tr_error_set(TR_ERR_INTERNAL, "%d optimizer states", tr_optim_state_count(src->opt));
    if (src->sharded) {
        TR_CHECK(open_sharded(src, ipath));
        for (int r = 0; r < src->world; r++) TR_CHECK(visit_shard(src, r, 0));
    } else {
        TR_CHECK(open_full(src, mpath));
        TR_CHECK(visit_full(src, 0));
    }
    for (int i = 0; i < src->nt; i++) {
        const target *t = &src->t[i];
        if (t->covered != t->count)
            return tr_error_set(TR_ERR_INVALID, "%s: elements [%lld, %lld) of '%s' are %s", src->path,
                                (long long)t->start, (long long)(t->start + t->count), tr_params_name(src->P, t->param),
                                t->covered < t->count ? "not all in the checkpoint (a shard file missing?)"
                                                      : "in more than one piece (shard files of two checkpoints?)");
    }
    /* Everything checked: now copy. */
    if (src->sharded) {
        for (int r = 0; r < src->world; r++) TR_CHECK(visit_shard(src, r, 1));
    } else {
        TR_CHECK(visit_full(src, 1));
    }
    if (src->opt) tr_optim_set_steps(src->opt, src->steps);
    if (s) *s = ns;
    return TR_OK;
}

static tr_status run_load(source *src, tr_train_state *s) {
    tr_status st = load(src, s);
    if (st != TR_OK) tr_error_prefix("checkpoint refused: "); /* the message names the file */
    tr_safetensors_close(src->mf);
    tr_safetensors_close(src->of);
    json_decref(src->index);
    tr_free(src->t);
    return st;
}

tr_status tr_checkpoint_load_pieces(const char *path, tr_params *P, tr_optim *opt, const tr_ckpt_piece *pieces,
                                    int n, tr_train_state *s) {
    if (!path || !P || n < 0 || (n && !pieces))
        return tr_error_set(TR_ERR_INVALID, "checkpoint load: path, params and pieces are required");
    source src = {.path = path, .P = P, .opt = opt, .nt = n};
    src.t = tr_calloc((size_t)(n ? n : 1), sizeof *src.t);
    if (!src.t) return TR_ERR_NOMEM;
    int ns = opt ? tr_optim_state_count(opt) : 0;
    for (int i = 0; i < n; i++) {
        const tr_ckpt_piece *pc = &pieces[i];
        if (pc->param < 0 || pc->param >= tr_params_count(P) || pc->start < 0 || pc->count < 0 ||
            pc->start + pc->count > tr_tensor_numel(tr_params_get(P, pc->param)) || (pc->count && !pc->data)) {
            tr_free(src.t);
            return tr_error_set(TR_ERR_INVALID, "checkpoint load: piece %d is not inside a parameter", i);
        }
        src.t[i] = (target){.param = pc->param, .start = pc->start, .count = pc->count, .data = pc->data};
        for (int k = 0; k < ns && k < TR_CKPT_MAX_STATE; k++) src.t[i].state[k] = pc->state[k];
    }
    return run_load(&src, s);
}

tr_status tr_checkpoint_load(const char *path, tr_params *P, tr_optim *opt, tr_train_state *s) {
    if (!path || !P) return tr_error_set(TR_ERR_INVALID, "checkpoint load: path and params are required");
    if (opt && tr_optim_size(opt) != tr_params_numel(P))
        return tr_error_set(TR_ERR_INVALID, "checkpoint load: the optimizer covers %zu elements, the parameters %zu",
                            tr_optim_size(opt), tr_params_numel(P));
    int np = tr_params_count(P), ns = opt ? tr_optim_state_count(opt) : 0;
    tr_ckpt_piece *pc = tr_calloc((size_t)(np ? np : 1), sizeof *pc);
    if (!pc) return TR_ERR_NOMEM;
    for (int i = 0; i < np; i++) {
        size_t off = tr_params_offset(P, i);
        pc[i] = (tr_ckpt_piece){.param = i, .count = tr_tensor_numel(tr_params_get(P, i)),
                                .data = tr_params_data(P) + off};
        for (int k = 0; k < ns && k < TR_CKPT_MAX_STATE; k++) pc[i].state[k] = tr_optim_state(opt, k) + off;
    }
    tr_status st = tr_checkpoint_load_pieces(path, P, opt, pc, np, s);
    tr_free(pc);
    /* The alignment gaps between parameters are zero and stay zero (no file stores them). */
    for (int i = 0; st == TR_OK && i < np; i++) {
        size_t end = tr_params_offset(P, i) + (size_t)tr_tensor_numel(tr_params_get(P, i));
        size_t next = i + 1 < np ? tr_params_offset(P, i + 1) : tr_params_numel(P);
        memset(tr_params_data(P) + end, 0, (next - end) * sizeof(float));
        for (int k = 0; k < ns; k++) memset(tr_optim_state(opt, k) + end, 0, (next - end) * sizeof(float));
    }
    return st;
}

/* ---- consolidation ---- */

/* The model a sharded checkpoint's index describes, as parameters and buffers. */
static tr_status params_from_index(const char *ipath, tr_params **out) {
    json_error_t jerr;
    json_t *ix = json_load_file(ipath, JSON_REJECT_DUPLICATES, &jerr);
    if (!ix) return tr_error_set(TR_ERR_PARSE, "%s:%d:%d: not valid JSON: %s", ipath, jerr.line, jerr.column, jerr.text);
    tr_params *P = NULL;
    tr_status st = tr_params_create(&P);
    for (int b = 0; b < 2 && st == TR_OK; b++) {
        json_t *list = json_object_get(ix, b ? "buffers" : "params");
        if (!json_is_array(list)) st = tr_error_set(TR_ERR_PARSE, "%s: '%s' must be a list", ipath, b ? "buffers" : "params");
        for (size_t i = 0; st == TR_OK && i < json_array_size(list); i++) {
            const char *name;
            int nd;
            int64_t shape[TR_MAX_DIMS];
            st = index_shape(ipath, json_array_get(list, i), &name, &nd, shape);
            if (st == TR_OK)
                st = b ? tr_params_add_buffer(P, name, nd, shape, TR_INIT_ZEROS, 0, NULL)
                       : tr_params_add(P, name, nd, shape, TR_INIT_ZEROS, 0, NULL);
        }
    }
    if (st == TR_OK) st = tr_params_finalize(P, 0);
    json_decref(ix);
    if (st != TR_OK) {
        if (!strstr(tr_error_msg(), ipath)) tr_error_prefix("%s: ", ipath); /* tr_params' own messages */
        tr_params_destroy(P);
        return st;
    }
    *out = P;
    return TR_OK;
}

tr_status tr_checkpoint_consolidate(const char *path, const char *out_file) {
    if (!path || !out_file) return tr_error_set(TR_ERR_INVALID, "consolidate: a checkpoint and an output file are required");
    char ipath[PATH_CAP], mpath[PATH_CAP];
    TR_CHECK(ckpt_join(ipath, sizeof ipath, path, INDEX_FILE));
    TR_CHECK(ckpt_join(mpath, sizeof mpath, path, MODEL_FILE));
    tr_params *P = NULL;
    tr_status st;
    if (ckpt_is_file(path)) snprintf(mpath, sizeof mpath, "%s", path); /* a weights file: copied */
    if (access(ipath, F_OK) == 0) {
        st = params_from_index(ipath, &P);
    } else if (access(mpath, F_OK) == 0) {
        /* A full checkpoint: its model.safetensors is already one file. */
        tr_safetensors *f;
        TR_CHECK(tr_safetensors_open(&f, mpath));
        int n = tr_safetensors_count(f);
        tr_st_entry *e = tr_calloc((size_t)(n ? n : 1), sizeof *e);
        st = e ? TR_OK : TR_ERR_NOMEM;
        for (int i = 0; i < n && st == TR_OK; i++) e[i] = *tr_safetensors_at(f, i);
        const char *meta[] = {"format", "pt", "trainer_kind", "model"};
        if (st == TR_OK) st = tr_safetensors_write(out_file, e, n, meta, 2);
        tr_free(e);
        tr_safetensors_close(f);
        return st;
    } else {
        return tr_error_set(TR_ERR_NOT_FOUND, "%s: not a checkpoint (neither %s nor %s; give a checkpoint folder such "
                                               "as runs/NAME/0/checkpoints/step-00000100, or a run folder)",
                            path, INDEX_FILE, MODEL_FILE);
    }
    if (st == TR_OK) st = tr_checkpoint_load(path, P, NULL, NULL);
    if (st == TR_OK) st = ckpt_write_model_file(out_file, P);
    tr_params_destroy(P);
    return st;
}
