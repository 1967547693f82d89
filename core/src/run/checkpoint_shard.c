/* Sharded checkpoints: every rank writes the pieces it holds into the temporary directory
 * rank 0 made; rank 0 then writes index.json, the model's files (tr_params_add_file) and
 * state.json and renames the directory into place (the same crash safety as a full
 * checkpoint: no ".tmp", complete). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/checkpoint_impl.h"
#include "trainer/memory.h"
#include "trainer/safetensors.h"

static void shard_name(char *out, size_t cap, int rank, int world) {
    snprintf(out, cap, "shard-%05d-of-%05d.safetensors", rank, world);
}

tr_status tr_checkpoint_begin(const char *dir, const char *name, long tag, char *tmp, size_t cap) {
    if (!dir || !*dir || !tmp) return tr_error_set(TR_ERR_INVALID, "checkpoint save: dir and tmp are required");
    char final_path[PATH_CAP], tmp_path[PATH_CAP];
    TR_CHECK(ckpt_begin(dir, name, tag, final_path, tmp_path));
    if (strlen(tmp_path) >= cap) {
        ckpt_remove_tree(tmp_path, 0);
        return tr_error_set(TR_ERR_INVALID, "%s: path longer than %zu bytes", tmp_path, cap - 1);
    }
    memcpy(tmp, tmp_path, strlen(tmp_path) + 1);
    return TR_OK;
}

tr_status tr_checkpoint_tmp_path(const char *dir, const char *name, long tag, char *tmp, size_t cap) {
    int k = snprintf(tmp, cap, "%s/%.200s.tmp-%ld", dir, name, tag);
    if (k < 0 || (size_t)k >= cap) return tr_error_set(TR_ERR_INVALID, "%s/%s: path longer than %zu bytes", dir, name, cap - 1);
    return TR_OK;
}

void tr_checkpoint_abandon(const char *tmp) {
    if (tmp && *tmp) ckpt_remove_tree(tmp, 0);
}

tr_status tr_checkpoint_write_shard(const char *tmp, int rank, int world, tr_params *P, tr_optim *opt,
                                    const tr_ckpt_piece *pieces, int n) {
    if (!tmp || !P || rank < 0 || rank >= world || n < 0 || (n && !pieces))
        return tr_error_set(TR_ERR_INVALID, "checkpoint shard: bad arguments (rank %d of %d, %d pieces)", rank, world, n);
    int ns = opt ? tr_optim_state_count(opt) : 0, nb = rank == 0 ? tr_params_buffer_count(P) : 0;
    if (ns > TR_CKPT_MAX_STATE) return tr_error_set(TR_ERR_INTERNAL, "%d optimizer states", ns);
    char fname[64], path[PATH_CAP];
    shard_name(fname, sizeof fname, rank, world);
    TR_CHECK(ckpt_join(path, sizeof path, tmp, fname));
    size_t cap = (size_t)n * (size_t)(1 + ns) + (size_t)nb;
    tr_st_entry *e = tr_calloc(cap ? cap : 1, sizeof *e);
    char *names = tr_calloc(cap ? cap : 1, CKPT_NAME_CAP);
    char *seen = tr_calloc((size_t)tr_params_count(P) + 1, 1);
    json_t *starts = json_object();
    tr_status st = e && names && seen && starts ? TR_OK : TR_ERR_NOMEM;
    int k = 0;
    for (int i = 0; i < n && st == TR_OK; i++) {
        const tr_ckpt_piece *pc = &pieces[i];
        if (pc->param < 0 || pc->param >= tr_params_count(P) || pc->start < 0 ||
            pc->start + pc->count > tr_tensor_numel(tr_params_get(P, pc->param)) || seen[pc->param]) {
            st = tr_error_set(TR_ERR_INVALID, "%s: piece %d is outside its parameter or a second piece of it", path, i);
            break;
        }
        if (pc->count == 0) continue;
        seen[pc->param] = 1;
        const char *pname = tr_params_name(P, pc->param);
        json_object_set_new(starts, pname, json_integer(pc->start));
        for (int s = -1; s < ns; s++) {
            char *nm = names + (size_t)k * CKPT_NAME_CAP;
            if (s < 0)
                snprintf(nm, CKPT_NAME_CAP, "%s", pname);
            else
                snprintf(nm, CKPT_NAME_CAP, "%s.%s", pname, tr_optim_state_name(opt, s));
            e[k++] = (tr_st_entry){.name = nm, .dtype = TR_F32, .ndim = 1, .shape = {pc->count},
                                   .data = s < 0 ? pc->data : pc->state[s]};
        }
    }
    for (int i = 0; i < nb && st == TR_OK; i++) {
        tr_tensor *t = tr_params_buffer(P, i);
        e[k] = (tr_st_entry){.name = tr_params_buffer_name(P, i), .dtype = TR_F32, .ndim = t->ndim, .data = t->data};
        memcpy(e[k].shape, t->shape, sizeof e[k].shape);
        k++;
    }
    char *sj = st == TR_OK ? json_dumps(starts, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char rs[16], ws[16];
    snprintf(rs, sizeof rs, "%d", rank);
    snprintf(ws, sizeof ws, "%d", world);
    const char *meta[] = {"trainer_kind", "shard", "rank", rs, "world", ws, "starts", sj ? sj : "{}"};
    if (st == TR_OK && !sj) st = TR_ERR_NOMEM;
    if (st == TR_OK) st = tr_safetensors_write(path, e, k, meta, 4);
    free(sj);
    json_decref(starts);
    tr_free(e);
    tr_free(names);
    tr_free(seen);
    return st;
}

static json_t *tensor_list(tr_params *P, int buffers) {
    json_t *a = json_array();
    int n = buffers ? tr_params_buffer_count(P) : tr_params_count(P);
    for (int i = 0; a && i < n; i++) {
        tr_tensor *t = buffers ? tr_params_buffer(P, i) : tr_params_get(P, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_array_append_new(a, json_pack("{s:s, s:o}", "name", buffers ? tr_params_buffer_name(P, i)
                                                                         : tr_params_name(P, i), "shape", shape));
    }
    return a;
}

static tr_status write_index(const char *tmp, int world, tr_params *P, tr_optim *opt) {
    char path[PATH_CAP];
    TR_CHECK(ckpt_join(path, sizeof path, tmp, INDEX_FILE));
    json_t *files = json_array();
    for (int r = 0; r < world; r++) {
        char f[64];
        shard_name(f, sizeof f, r, world);
        json_array_append_new(files, json_string(f));
    }
    json_t *o = json_pack("{s:s, s:i, s:i, s:o, s:o, s:o}", "format", "trainer-sharded", "version", 1, "world", world,
                          "files", files, "params", tensor_list(P, 0), "buffers", tensor_list(P, 1));
    if (o && opt) {
        json_t *states = json_array();
        for (int k = 0; k < tr_optim_state_count(opt); k++)
            json_array_append_new(states, json_string(tr_optim_state_name(opt, k)));
        json_object_set_new(o, "optimizer",
                            json_pack("{s:o, s:I}", "states", states, "steps", (json_int_t)tr_optim_steps(opt)));
    }
    if (!o) return tr_error_set(TR_ERR_NOMEM, "%s: cannot build the index", path);
    tr_status st = ckpt_write_json(o, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(o);
    return st;
}

tr_status tr_checkpoint_commit(const char *dir, const char *name, const char *tmp, int world, tr_params *P,
                               tr_optim *opt, const tr_train_state *s) {
    return ckpt_commit_shards(dir, name, tmp, world, P, opt, s, NULL, NULL);
}

tr_status ckpt_commit_shards(const char *dir, const char *name, const char *tmp, int world, tr_params *P, tr_optim *opt,
                             const tr_train_state *s, const struct run_classes *c, json_t *loop) {
    char final_path[PATH_CAP];
    TR_CHECK(ckpt_join(final_path, sizeof final_path, dir, name));
    tr_status st;
    TR_CHECK_GOTO(write_index(tmp, world, P, opt), fail);
    TR_CHECK_GOTO(ckpt_write_files(tmp, P), fail);
    TR_CHECK_GOTO(ckpt_write_state(tmp, s, c, loop), fail);
    TR_CHECK_GOTO(ckpt_commit(dir, final_path, tmp), fail);
    return TR_OK;
fail:
    return ckpt_abandon(final_path, tmp, st);
}
