/* Reference tensor files (see refio.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refio.h"
#include "trainer/memory.h"

#ifndef TRAINER_REF_DIR
#define TRAINER_REF_DIR "refs"
#endif

static void die(const char *path, const char *what) {
    fprintf(stderr, "FAIL reference file %s: %s (run tools/reference/make_refs.py)\n", path, what);
    exit(1);
}

ref_file *ref_open(const char *case_name) {
    ref_file *rf = calloc(1, sizeof *rf);
    const char *dir = getenv("TRAINER_REF_DIR");
    snprintf(rf->path, sizeof rf->path, "%s/%s.bin", dir ? dir : TRAINER_REF_DIR, case_name);
    FILE *f = fopen(rf->path, "rb");
    if (!f) die(rf->path, "cannot open");
    char magic[7];
    uint32_t count;
    if (fread(magic, 1, 7, f) != 7 || memcmp(magic, "TRREF1\n", 7) != 0) die(rf->path, "bad magic");
    if (fread(&count, 4, 1, f) != 1 || count > 100000) die(rf->path, "bad count");
    rf->n = (int)count;
    rf->t = calloc(count ? count : 1, sizeof *rf->t);
    for (uint32_t i = 0; i < count; i++) {
        ref_tensor *t = &rf->t[i];
        uint32_t len, dtype, ndim;
        if (fread(&len, 4, 1, f) != 1 || len >= sizeof t->name) die(rf->path, "bad name length");
        if (fread(t->name, 1, len, f) != len) die(rf->path, "truncated name");
        t->name[len] = '\0';
        if (fread(&dtype, 4, 1, f) != 1 || fread(&ndim, 4, 1, f) != 1 || ndim > TR_MAX_DIMS ||
            dtype >= TR_DTYPE_COUNT)
            die(rf->path, "bad header");
        t->dtype = (tr_dtype)dtype;
        t->ndim = (int)ndim;
        t->numel = 1;
        for (uint32_t d = 0; d < ndim; d++) {
            if (fread(&t->shape[d], 8, 1, f) != 1) die(rf->path, "truncated shape");
            t->numel *= t->shape[d];
        }
        size_t bytes = (size_t)t->numel * tr_dtype_size(t->dtype);
        t->data = malloc(bytes ? bytes : 1);
        if (fread(t->data, 1, bytes, f) != bytes) die(rf->path, "truncated data");
    }
    fclose(f);
    return rf;
}

void ref_close(ref_file *rf) {
    if (!rf) return;
    for (int i = 0; i < rf->n; i++) free(rf->t[i].data);
    free(rf->t);
    free(rf);
}

const ref_tensor *ref_get(const ref_file *rf, const char *name) {
    for (int i = 0; i < rf->n; i++)
        if (strcmp(rf->t[i].name, name) == 0) return &rf->t[i];
    return NULL;
}

const ref_tensor *ref_need(const ref_file *rf, const char *name) {
    const ref_tensor *t = ref_get(rf, name);
    if (!t) {
        fprintf(stderr, "FAIL reference file %s has no tensor '%s'\n", rf->path, name);
        exit(1);
    }
    return t;
}

tr_tensor *ref_to_graph(tr_graph *g, const ref_tensor *r, int requires_grad) {
    tr_tensor *t = requires_grad ? tr_graph_leaf(g, r->dtype, r->ndim, r->shape)
                                 : tr_graph_input(g, r->dtype, r->ndim, r->shape);
    if (t) memcpy(t->data, r->data, (size_t)r->numel * tr_dtype_size(r->dtype));
    return t;
}

float *ref_floats(const ref_tensor *r) {
    float *out = tr_malloc((size_t)(r->numel ? r->numel : 1) * sizeof(float));
    for (int64_t i = 0; i < r->numel; i++)
        out[i] = r->dtype == TR_F64 ? (float)((double *)r->data)[i] : ((float *)r->data)[i];
    return out;
}
