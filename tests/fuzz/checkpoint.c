/* Fuzz target `checkpoint`: the checkpoint reader (core/src/run/checkpoint_load.c and the
 * state.json reader) on a checkpoint folder made from the input. Input: up to six parts
 * separated by FUZZ_SEP, the files state.json, model.safetensors, optimizer.safetensors,
 * index.json, shard-00000-of-00002.safetensors, shard-00001-of-00002.safetensors in that
 * order; an empty or missing part is an absent file (no index.json: a full checkpoint).
 *
 * The model is fixed and small: parameters fc.weight (3, 4) and fc.bias (3), buffer
 * norm.mean (4), an Adam optimizer over them. Each input is loaded whole with the optimizer,
 * weights only, and as two ZeRO-style pieces; a refused load must change nothing (compared
 * with a copy taken before) and name the checkpoint. `trainer checkpoint consolidate` runs on
 * it too when its index declares at most 2^20 elements (a real index may ask for any size). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "trainer/checkpoint.h"
#include "trainer/optim.h"
#include "trainer/params.h"
#include "trainer/safetensors.h"

#define N_FILES 6
#define MAX_CONSOLIDATE (1 << 20)

static const char *const files[N_FILES] = {"state.json",
                                           "model.safetensors",
                                           "optimizer.safetensors",
                                           "index.json",
                                           "shard-00000-of-00002.safetensors",
                                           "shard-00001-of-00002.safetensors"};

typedef struct model {
    tr_params *P;
    tr_optim *opt;
    float piece_w[7], piece_b[3]; /* fc.weight [2, 9), fc.bias [0, 3) */
} model;

static model *the_model(void) {
    static model m;
    if (m.P) return &m;
    tr_status st = tr_params_create(&m.P);
    if (!st) st = tr_params_add(m.P, "fc.weight", 2, (int64_t[]){3, 4}, TR_INIT_KAIMING_UNIFORM, 0, NULL);
    if (!st) st = tr_params_add(m.P, "fc.bias", 1, (int64_t[]){3}, TR_INIT_FAN_IN_UNIFORM, 4, NULL);
    if (!st) st = tr_params_add_buffer(m.P, "norm.mean", 1, (int64_t[]){4}, TR_INIT_ONES, 0, NULL);
    if (!st) st = tr_params_finalize(m.P, 7);
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAM);
    if (!st) st = tr_optim_create(&m.opt, &oc, tr_params_numel(m.P));
    if (st) fuzz_fail("cannot make the model: %s", tr_error_msg());
    return &m;
}

/* Everything a load may change, copied. */
typedef struct snapshot {
    float *data;
    size_t n;
    int64_t steps;
} snapshot;

static void snap(model *m, snapshot *s) {
    size_t np = tr_params_numel(m->P), nb = tr_params_buffers_numel(m->P), ns = (size_t)tr_optim_state_count(m->opt);
    s->n = np + nb + ns * np + 10;
    s->data = malloc(s->n * sizeof(float));
    if (!s->data) fuzz_fail("out of memory");
    float *p = s->data;
    memcpy(p, tr_params_data(m->P), np * sizeof(float)), p += np;
    memcpy(p, tr_params_buffers_data(m->P), nb * sizeof(float)), p += nb;
    for (size_t k = 0; k < ns; k++) memcpy(p, tr_optim_state(m->opt, (int)k), np * sizeof(float)), p += np;
    memcpy(p, m->piece_w, sizeof m->piece_w), p += 7;
    memcpy(p, m->piece_b, sizeof m->piece_b);
    s->steps = tr_optim_steps(m->opt);
}

static void refused(model *m, snapshot *before, const char *what, const char *dir) {
    snapshot after;
    snap(m, &after);
    if (memcmp(before->data, after.data, before->n * sizeof(float)) != 0 || before->steps != after.steps)
        fuzz_fail("%s: a refused checkpoint changed the model or the optimizer (%s)", what, tr_error_msg());
    const char *needles[] = {dir, NULL};
    fuzz_expect_message(what, needles);
    free(after.data);
}

static void load_all(model *m, const char *dir) {
    tr_train_state s;
    snapshot before;
    snap(m, &before);
    tr_error_clear();
    if (tr_checkpoint_load(dir, m->P, m->opt, &s) != TR_OK) refused(m, &before, "load with optimizer", dir);
    else if (strnlen(s.model, sizeof s.model) == sizeof s.model || strnlen(s.config_hash, sizeof s.config_hash) == sizeof s.config_hash)
        fuzz_fail("load: unterminated strings in the train state");
    free(before.data);

    snap(m, &before);
    tr_error_clear();
    if (tr_checkpoint_load(dir, m->P, NULL, NULL) != TR_OK) refused(m, &before, "load weights", dir);
    free(before.data);

    tr_ckpt_piece pc[2] = {{.param = 0, .start = 2, .count = 7, .data = m->piece_w},
                           {.param = 1, .start = 0, .count = 3, .data = m->piece_b}};
    snap(m, &before);
    tr_error_clear();
    if (tr_checkpoint_load_pieces(dir, m->P, NULL, pc, 2, NULL) != TR_OK) refused(m, &before, "load pieces", dir);
    free(before.data);
}

/* Elements an index.json declares (capped past the limit), so consolidation stays small. */
static size_t index_elements(const fuzz_part *ix) {
    json_t *j = json_loadb((const char *)ix->data, ix->size, 0, NULL);
    size_t total = 0;
    for (int b = 0; b < 2; b++) {
        json_t *list = json_object_get(j, b ? "buffers" : "params"), *t;
        size_t i;
        json_array_foreach(list, i, t) {
            json_t *shape = json_object_get(t, "shape"), *d;
            size_t k, n = 1;
            json_array_foreach(shape, k, d) {
                json_int_t v = json_integer_value(d);
                if (v > MAX_CONSOLIDATE || (n *= (size_t)(v > 0 ? v : 1)) > MAX_CONSOLIDATE) n = MAX_CONSOLIDATE + 1;
            }
            total += n;
            if (total > MAX_CONSOLIDATE) total = MAX_CONSOLIDATE + 1;
        }
    }
    json_decref(j);
    return total;
}

static void consolidate(const char *dir, const char *scratch) {
    char out[1024];
    snprintf(out, sizeof out, "%s/consolidated.safetensors", scratch);
    tr_error_clear();
    if (tr_checkpoint_consolidate(dir, out) != TR_OK) {
        const char *needles[] = {dir, NULL};
        fuzz_expect_message("consolidate", needles);
        return;
    }
    tr_safetensors *f;
    if (tr_safetensors_open(&f, out) != TR_OK) fuzz_fail("consolidate wrote an unreadable file: %s", tr_error_msg());
    tr_safetensors_close(f);
    fuzz_remove_tree(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    model *m = the_model();
    const char *scratch = fuzz_scratch_dir();
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/step-00000001", scratch);
    fuzz_remove_tree(dir);
    if (mkdir(dir, 0755) != 0) fuzz_fail("%s: cannot make the checkpoint folder", dir);
    fuzz_part part[N_FILES];
    int n = fuzz_split(data, size, part, N_FILES);
    for (int i = 0; i < n; i++) {
        if (part[i].size == 0) continue;
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (fuzz_write_file(path, part[i].data, part[i].size) != 0) fuzz_fail("%s: cannot write", path);
    }
    tr_train_state s;
    tr_error_clear();
    if (tr_checkpoint_read_state(dir, &s) != TR_OK) {
        const char *needles[] = {dir, NULL};
        fuzz_expect_message("read state", needles);
    }
    load_all(m, dir);
    if (n <= 3 || part[3].size == 0 || index_elements(&part[3]) <= MAX_CONSOLIDATE) consolidate(dir, scratch);
    return 0;
}
