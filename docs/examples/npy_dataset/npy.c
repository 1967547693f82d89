/* Dataset plugin `npy`: NumPy .npy arrays, an example of a third-party dataset built against
 * the installed trainer SDK only (with pkg-config: see the Makefile next to this file).
 *
 *   data:
 *     name: npy
 *     params: {x: features.npy, y: labels.npy}     # x: (N, ...) numbers; y: (N) class ids
 *
 * x is (N, d1, d2, ...) of float32, float64, uint8, int32 or int64 (the per-sample shape is
 * d1, d2, ...; values become float32, times `scale`); y is (N) integer class ids (task
 * classify) or (N) / (N, k) numbers (task regress). Both are C-ordered, little-endian, format
 * version 1, 2 or 3, plain or gzip. Everything is read in create(); get() copies one row.
 *
 * Splits: with `val_x` / `val_y` the validation split is those files; otherwise the last
 * val_fraction of the rows (file order) and the train split the rest; none held out is an
 * empty validation split ("no validation split", plugin ABI 0.7). A malformed file is
 * refused naming it and what is wrong. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trainer/io.h>
#include <trainer/memory.h>
#include <trainer/model.h>
#include <trainer/plugin.h>

enum { MAX_DIMS = 8, MAX_CLASSES = 1 << 24 };

/* One parsed .npy file: its raw bytes and where the data starts. */
typedef struct array {
    char *bytes;         /* the whole file (tr_file_read) */
    const char *data;    /* the elements, C order */
    char kind;           /* 'f' float, 'i' signed, 'u' unsigned */
    int width;           /* bytes per element */
    int ndim;
    int64_t shape[MAX_DIMS];
    int64_t numel;
} array;

typedef struct npy {
    tr_data_spec spec;
    int64_t n;
    float *x;            /* (n, x_numel) */
    void *y;             /* (n, y_numel) int32 or float */
} npy;

static tr_status bad(const char *path, const char *what) {
    return tr_error_set(TR_ERR_INVALID, "npy: %s: %s", path, what);
}

/* The value of 'key' in the header dict, as the text after "'key':". */
static const char *dict_value(const char *header, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s':", key);
    const char *p = strstr(header, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    return p;
}

static tr_status parse_header(const char *path, const char *header, array *a) {
    const char *d = dict_value(header, "descr"), *f = dict_value(header, "fortran_order"),
               *s = dict_value(header, "shape");
    if (!d || !f || !s) return bad(path, "header lacks 'descr', 'fortran_order' or 'shape'");
    /* descr: '<f4', '|u1', ... (little-endian or byte-sized only) */
    if (d[0] != '\'' || (d[1] != '<' && d[1] != '|' && d[1] != '=') || !d[2] || !strchr("fiu", d[2]) || d[3] < '1' ||
        d[3] > '8' || d[4] != '\'')
        return bad(path, "dtype is not a little-endian number (float32/64, int8-64, uint8-64)");
    a->kind = d[2];
    a->width = d[3] - '0';
    if ((a->kind == 'f' && a->width != 4 && a->width != 8) || (a->width & (a->width - 1)))
        return bad(path, "unsupported element width");
    if (strncmp(f, "False", 5) != 0) return bad(path, "Fortran-ordered arrays are not supported (save with C order)");
    if (*s != '(') return bad(path, "malformed 'shape'");
    a->ndim = 0;
    a->numel = 1;
    for (const char *p = s + 1; *p != ')';) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || a->ndim == MAX_DIMS) return bad(path, "malformed 'shape' (or more than 8 dims)");
        if (v == 0 && a->ndim > 0) return bad(path, "a per-sample dimension is 0");
        if (v > 0 && a->numel > INT64_MAX / 8 / v) return bad(path, "'shape' too large");
        a->shape[a->ndim++] = v;
        a->numel *= v;
        p = end;
    }
    if (a->ndim == 0) return bad(path, "a scalar, not an array of samples");
    return TR_OK;
}

static void array_free(array *a) {
    tr_free(a->bytes);
    memset(a, 0, sizeof *a);
}

static tr_status array_read(const char *path, array *a) {
    memset(a, 0, sizeof *a);
    size_t len;
    TR_CHECK(tr_file_read(path, &a->bytes, &len));
    const unsigned char *b = (const unsigned char *)a->bytes;
    tr_status st;
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
        st = bad(path, "not a .npy file (no \\x93NUMPY magic)");
        goto fail;
    }
    size_t hlen, hstart;
    if (b[6] == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if ((b[6] == 2 || b[6] == 3) && len >= 12) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        st = bad(path, "unknown .npy format version");
        goto fail;
    }
    if (hstart + hlen > len) {
        st = bad(path, "truncated header");
        goto fail;
    }
    char header[4096];
    if (hlen >= sizeof header) {
        st = bad(path, "header too long");
        goto fail;
    }
    memcpy(header, a->bytes + hstart, hlen);
    header[hlen] = 0;
    TR_CHECK_GOTO(parse_header(path, header, a), fail);
    a->data = a->bytes + hstart + hlen;
    if ((uint64_t)a->numel > (uint64_t)(len - hstart - hlen) / (uint64_t)a->width) { /* no overflow: numel < 2^60 */
        char what[128];
        snprintf(what, sizeof what, "truncated: %lld elements of %d bytes announced, %zu bytes present",
                 (long long)a->numel, a->width, len - hstart - hlen);
        st = bad(path, what);
        goto fail;
    }
    return TR_OK;
fail:
    array_free(a);
    return st;
}

/* Element i of a as a double (the data may be unaligned: memcpy). */
static double element(const array *a, int64_t i) {
    const char *p = a->data + i * a->width;
    if (a->kind == 'f') {
        if (a->width == 4) {
            float v;
            memcpy(&v, p, 4);
            return v;
        }
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    uint64_t u = 0;
    memcpy(&u, p, (size_t)a->width); /* little-endian host */
    if (a->kind == 'i' && a->width < 8 && (u >> (a->width * 8 - 1)) & 1) u |= ~(uint64_t)0 << (a->width * 8);
    return a->kind == 'i' ? (double)(int64_t)u : (double)u;
}

static void destroy(void *ctx) {
    npy *s = ctx;
    if (!s) return;
    tr_free(s->x);
    tr_free(s->y);
    tr_free(s);
}

/* Fills s from rows [lo, hi) of x and y. */
static tr_status take(npy *s, const array *x, const array *y, int64_t lo, int64_t hi, int regress, int64_t classes,
                      const char *ypath, double scale) {
    int64_t xn = s->spec.x_numel, yn = s->spec.y_numel;
    s->n = hi - lo;
    s->x = tr_malloc((size_t)(s->n > 0 ? s->n : 1) * (size_t)xn * sizeof(float));
    s->y = tr_malloc((size_t)(s->n > 0 ? s->n : 1) * (size_t)yn * 4);
    if (!s->x || !s->y) return tr_error_set(TR_ERR_NOMEM, "npy: out of memory for %lld samples", (long long)s->n);
    for (int64_t i = 0; i < s->n * xn; i++) s->x[i] = (float)(element(x, lo * xn + i) * scale);
    for (int64_t i = 0; i < s->n * yn; i++) {
        double v = element(y, lo * yn + i);
        if (regress) {
            ((float *)s->y)[i] = (float)v;
        } else if (v < 0 || v >= (double)classes) {
            return tr_error_set(TR_ERR_INVALID, "npy: %s: row %lld: label %g outside [0, %lld)", ypath,
                                (long long)(lo + i), v, (long long)classes);
        } else {
            ((int32_t *)s->y)[i] = (int32_t)v;
        }
    }
    return TR_OK;
}

static tr_status load(npy *s, const tr_options *o, const tr_dataset_env *env, array *x, array *y) {
    int val_files = env->split == TR_SPLIT_VAL && tr_options_string(o, "val_x")[0];
    char xpath[4096], ypath[4096];
    tr_path_resolve(xpath, sizeof xpath, env->base_dir, tr_options_string(o, val_files ? "val_x" : "x"));
    tr_path_resolve(ypath, sizeof ypath, env->base_dir, tr_options_string(o, val_files ? "val_y" : "y"));
    if (val_files && !tr_options_string(o, "val_y")[0])
        return tr_error_set(TR_ERR_INVALID, "npy: val_x is given without val_y");
    TR_CHECK(array_read(xpath, x));
    TR_CHECK(array_read(ypath, y));
    int regress = strcmp(tr_options_string(o, "task"), "regress") == 0;
    if (y->shape[0] != x->shape[0])
        return tr_error_set(TR_ERR_INVALID, "npy: %s: %lld rows, but %s has %lld", ypath, (long long)y->shape[0], xpath,
                            (long long)x->shape[0]);
    if (!regress && (y->ndim != 1 || y->kind == 'f'))
        return bad(ypath, "task classify needs a 1-D array of integer class ids");
    if (x->ndim > TR_MAX_DIMS) return bad(xpath, "too many dims per sample");
    if (regress && y->ndim > 2) return bad(ypath, "task regress needs y of shape (N) or (N, k)");
    int64_t n = x->shape[0], classes = tr_options_int(o, "classes");
    if (!regress && classes == 0) /* the largest label + 1; out-of-range labels are refused by take() */
        for (int64_t i = 0; i < n; i++) {
            double v = element(y, i);
            if (v >= 0 && v < MAX_CLASSES && v + 1 > (double)classes) classes = (int64_t)v + 1;
        }
    if (!regress && classes == 0) classes = MAX_CLASSES; /* every label negative or too large: take() says which */

    s->spec = (tr_data_spec){.task = regress ? TR_TASK_REGRESS : TR_TASK_CLASSIFY, .x_dtype = TR_F32,
                             .x_ndim = x->ndim - 1, .x_numel = 1, .y_dtype = regress ? TR_F32 : TR_I32,
                             .y_ndim = regress ? y->ndim - 1 : 0, .y_numel = 1, .n_classes = regress ? 0 : classes};
    for (int d = 1; d < x->ndim; d++) s->spec.x_numel *= s->spec.x_shape[d - 1] = x->shape[d];
    if (regress)
        for (int d = 1; d < y->ndim; d++) s->spec.y_numel *= s->spec.y_shape[d - 1] = y->shape[d];

    int64_t lo = 0, hi = n;
    if (!tr_options_string(o, "val_x")[0]) { /* held out: the last val_fraction of the rows */
        int64_t n_val = (int64_t)((double)n * env->val_fraction); /* rounded down, as csv */
        if (env->split == TR_SPLIT_VAL) lo = n - n_val;
        else hi = n - n_val;
        if (hi == lo && env->split == TR_SPLIT_VAL) return TR_OK; /* none held out: no validation split, empty */
        if (hi == lo)
            return tr_error_set(TR_ERR_INVALID, "npy: %s: no %s rows: %lld rows x val_fraction %g (give val_x/val_y or "
                                "another data.val_fraction)", xpath, env->split == TR_SPLIT_VAL ? "validation" : "training",
                                (long long)n, env->val_fraction);
    }
    return take(s, x, y, lo, hi, regress, classes, ypath, tr_options_float(o, "scale"));
}

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    *ctx = NULL;
    npy *s = tr_calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "npy: out of memory");
    array x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    tr_status st = load(s, o, env, &x, &y);
    array_free(&x);
    array_free(&y);
    if (st != TR_OK) {
        destroy(s);
        return st;
    }
    *ctx = s;
    return TR_OK;
}

static void spec(void *ctx, tr_data_spec *out) { *out = ((npy *)ctx)->spec; }
static int64_t size(void *ctx) { return ((npy *)ctx)->n; }

static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    npy *s = ctx;
    if (index < 0 || index >= s->n)
        return tr_error_set(TR_ERR_INVALID, "npy: sample %lld out of range [0, %lld)", (long long)index, (long long)s->n);
    memcpy(x, s->x + index * s->spec.x_numel, (size_t)s->spec.x_numel * sizeof(float));
    if (y) memcpy(y, (char *)s->y + index * s->spec.y_numel * 4, (size_t)s->spec.y_numel * 4);
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "x", .type = TR_OPTION_PATH, .default_value = NULL,
     .doc = "features: .npy (or .npy.gz) of shape (N, ...), relative to the config"},
    {.key = "y", .type = TR_OPTION_PATH, .default_value = NULL,
     .doc = "targets: .npy of shape (N) class ids, or (N) / (N, k) numbers for task regress"},
    {.key = "val_x", .type = TR_OPTION_PATH, .default_value = "",
     .doc = "validation features; empty: the last data.val_fraction of x's rows"},
    {.key = "val_y", .type = TR_OPTION_PATH, .default_value = "", .doc = "validation targets (with val_x)"},
    {.key = "task", .type = TR_OPTION_CHOICE, .default_value = "classify", .choices = "classify|regress",
     .doc = "classify: y holds class ids; regress: y holds numbers"},
    {.key = "classes", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = MAX_CLASSES,
     .doc = "number of classes; 0 = the largest label in y + 1 (give it when val_y is a separate file)"},
    {.key = "scale", .type = TR_OPTION_FLOAT, .default_value = "1", .doc = "x is multiplied by this (1/255 for uint8 pixels)"},
};

static const tr_dataset_ops ops = {.create = create, .destroy = destroy, .spec = spec, .size = size, .get = get};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_DATASET,
    .name = "npy",
    .version = "1.0.0",
    .description = "NumPy .npy arrays: features (N, ...) and class ids or targets (N)",
    .options = opts,
    .n_options = sizeof opts / sizeof opts[0],
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
