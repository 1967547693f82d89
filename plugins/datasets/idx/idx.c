/* Dataset plugin `idx`: MNIST / Fashion-MNIST in the IDX format, plain or gzip (tr_file_read reads
 * both transparently; gzip is recognised by its magic bytes).
 *
 * Images: magic 0x00000803, count, rows, cols, then count*rows*cols bytes. Labels: magic
 * 0x00000801, count, then count bytes, each < `classes`. The whole files are read and checked
 * in create(): wrong magic, truncation, trailing bytes, differing counts and out-of-range
 * labels are refused naming the file. `first`/`count` keep a contiguous range (e.g. train =
 * the first 8000 test images, validation = first 8000, count 2000). x is (1, rows, cols) or,
 * flattened, (rows*cols) f32: pixel/255, then (x - mean)/std when `normalize`. Only the
 * selected range is kept in memory (1 byte per pixel); get() converts on the fly. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/io.h"
#include "trainer/memory.h"
#include "trainer/model.h"
#include "trainer/plugin.h"

typedef struct idx {
    tr_data_spec spec;
    int64_t n;
    uint8_t *pixels;   /* (n, rows*cols) */
    uint8_t *labels;   /* (n) */
    int normalize;
    float mean, std;
} idx;

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void destroy(void *ctx) {
    idx *s = ctx;
    if (!s) return;
    free(s->pixels);
    free(s->labels);
    free(s);
}

static tr_status load(idx *s, const tr_options *o, const tr_dataset_env *env) {
    char ip[4096], lp[4096];
    tr_path_resolve(ip, sizeof ip, env->base_dir, tr_options_string(o, "images"));
    tr_path_resolve(lp, sizeof lp, env->base_dir, tr_options_string(o, "labels"));
    uint8_t *im = NULL, *lb = NULL;
    size_t ilen, llen;
    tr_status st;
    TR_CHECK_GOTO(tr_file_read(ip, (char **)&im, &ilen), out);
    TR_CHECK_GOTO(tr_file_read(lp, (char **)&lb, &llen), out);
    if (ilen < 16) {
        st = tr_error_set(TR_ERR_PARSE, "%s: truncated: %zu bytes, an IDX image header needs 16", ip, ilen);
        goto out;
    }
    if (be32(im) != 0x803) {
        st = tr_error_set(TR_ERR_PARSE, "%s: not an IDX image file: magic 0x%08x, expected 0x00000803",
                          ip, be32(im));
        goto out;
    }
    uint64_t n = be32(im + 4), rows = be32(im + 8), cols = be32(im + 12);
    if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536) {
        st = tr_error_set(TR_ERR_PARSE, "%s: bad image size %llux%llu", ip,
                          (unsigned long long)rows, (unsigned long long)cols);
        goto out;
    }
    uint64_t px = rows * cols, have = (ilen - 16) / px;
    if (16 + n * px != ilen) {
        if (16 + n * px > ilen)
            st = tr_error_set(TR_ERR_PARSE, "%s: truncated: header says %llu images of %llux%llu, file holds %llu",
                              ip, (unsigned long long)n, (unsigned long long)rows,
                              (unsigned long long)cols, (unsigned long long)have);
        else
            st = tr_error_set(TR_ERR_PARSE, "%s: %llu bytes after the %llu images of %llux%llu the header announces",
                              ip, (unsigned long long)(ilen - 16 - n * px), (unsigned long long)n,
                              (unsigned long long)rows, (unsigned long long)cols);
        goto out;
    }
    if (llen < 8) {
        st = tr_error_set(TR_ERR_PARSE, "%s: truncated: %zu bytes, an IDX label header needs 8", lp, llen);
        goto out;
    }
    if (be32(lb) != 0x801) {
        st = tr_error_set(TR_ERR_PARSE, "%s: not an IDX label file: magic 0x%08x, expected 0x00000801",
                          lp, be32(lb));
        goto out;
    }
    uint64_t nl = be32(lb + 4);
    if (8 + nl != llen) {
        st = tr_error_set(TR_ERR_PARSE, "%s: %s: header says %llu labels, file holds %llu", lp,
                          8 + nl > llen ? "truncated" : "trailing bytes", (unsigned long long)nl,
                          (unsigned long long)(llen - 8));
        goto out;
    }
    if (nl != n) {
        st = tr_error_set(TR_ERR_PARSE, "%s holds %llu labels but %s holds %llu images", lp,
                          (unsigned long long)nl, ip, (unsigned long long)n);
        goto out;
    }
    int64_t classes = tr_options_int(o, "classes");
    for (uint64_t i = 0; i < n; i++)
        if (lb[8 + i] >= classes) {
            st = tr_error_set(TR_ERR_PARSE, "%s: label %llu is %d, expected < %lld (set classes)",
                              lp, (unsigned long long)i, lb[8 + i], (long long)classes);
            goto out;
        }
    int64_t first = tr_options_int(o, "first"), count = tr_options_int(o, "count");
    if (count < 0) count = (int64_t)n - first;
    if (first > (int64_t)n || count <= 0 || first + count > (int64_t)n) {
        st = tr_error_set(TR_ERR_INVALID, "%s: first=%lld count=%lld is outside its %llu images",
                          ip, (long long)first, (long long)tr_options_int(o, "count"),
                          (unsigned long long)n);
        goto out;
    }
    s->n = count;
    s->pixels = malloc((size_t)(count * (int64_t)px));
    s->labels = malloc((size_t)count);
    if (!s->pixels || !s->labels) {
        st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", ip);
        goto out;
    }
    memcpy(s->pixels, im + 16 + (size_t)first * px, (size_t)(count * (int64_t)px));
    memcpy(s->labels, lb + 8 + first, (size_t)count);
    tr_data_spec *d = &s->spec;
    *d = (tr_data_spec){.task = TR_TASK_CLASSIFY, .x_dtype = TR_F32, .x_numel = (int64_t)px,
                        .y_dtype = TR_I32, .y_ndim = 0, .y_numel = 1, .n_classes = classes};
    if (tr_options_bool(o, "flatten")) {
        d->x_ndim = 1;
        d->x_shape[0] = (int64_t)px;
    } else {
        d->x_ndim = 3;
        d->x_shape[0] = 1;
        d->x_shape[1] = (int64_t)rows;
        d->x_shape[2] = (int64_t)cols;
    }
    st = TR_OK;
out:
    tr_free(im);
    tr_free(lb);
    return st;
}

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    idx *s = calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "idx: out of memory");
    s->normalize = tr_options_bool(o, "normalize");
    s->mean = (float)tr_options_float(o, "mean");
    s->std = (float)tr_options_float(o, "std");
    if (s->normalize && !(s->std > 0)) {
        double sd = s->std;
        free(s);
        return tr_error_set(TR_ERR_INVALID, "idx: std must be > 0, got %g", sd);
    }
    tr_status st = load(s, o, env);
    if (st != TR_OK) {
        destroy(s);
        return st;
    }
    *ctx = s;
    return TR_OK;
}

static void spec(void *ctx, tr_data_spec *out) { *out = ((idx *)ctx)->spec; }
static int64_t size(void *ctx) { return ((idx *)ctx)->n; }

static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    idx *s = ctx;
    if (index < 0 || index >= s->n)
        return tr_error_set(TR_ERR_INVALID, "idx: sample %lld out of range [0, %lld)",
                            (long long)index, (long long)s->n);
    int64_t n = s->spec.x_numel;
    const uint8_t *p = s->pixels + index * n;
    /* Samples come in shuffled order, so the pixels are rarely in cache: ask for all of the
     * sample's lines at once rather than one miss at a time (the loop was 76% load stalls). */
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < (uintptr_t)(p + n); a += 64) __builtin_prefetch((const void *)a);
    float *xs = x;
    if (s->normalize) {
        float a = 1.0f / (255.0f * s->std), b = -s->mean / s->std;
        for (int64_t i = 0; i < n; i++) xs[i] = (float)p[i] * a + b;
    } else {
        for (int64_t i = 0; i < n; i++) xs[i] = (float)p[i] / 255.0f;
    }
    if (y) *(int32_t *)y = s->labels[index];
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "images", .type = TR_OPTION_PATH, .default_value = NULL,
     .doc = "IDX image file (idx3-ubyte, plain or .gz), relative to the config"},
    {.key = "labels", .type = TR_OPTION_PATH, .default_value = NULL,
     .doc = "IDX label file (idx1-ubyte, plain or .gz), relative to the config"},
    {.key = "normalize", .type = TR_OPTION_BOOL, .default_value = "true",
     .doc = "x = (pixel/255 - mean)/std; false: pixel/255"},
    {.key = "mean", .type = TR_OPTION_FLOAT, .default_value = "0.1307", .doc = "normalisation mean"},
    {.key = "std", .type = TR_OPTION_FLOAT, .default_value = "0.3081", .doc = "normalisation std"},
    {.key = "flatten", .type = TR_OPTION_BOOL, .default_value = "false",
     .doc = "x is (rows*cols) instead of (1, rows, cols)"},
    {.key = "first", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = 4294967295.0,
     .doc = "index of the first sample kept"},
    {.key = "count", .type = TR_OPTION_INT, .default_value = "-1", .min = -1, .max = 4294967295.0,
     .doc = "samples kept from first; -1 = all the rest"},
    {.key = "classes", .type = TR_OPTION_INT, .default_value = "10", .min = 1, .max = 256,
     .doc = "number of classes; every label must be below it"},
};
static const tr_dataset_ops ops = {
    .create = create, .destroy = destroy, .spec = spec, .size = size, .get = get};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_DATASET, .name = "idx", .version = "1.0.0",
    .description = "MNIST-style IDX image/label files, plain or gzip",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops,
    .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
