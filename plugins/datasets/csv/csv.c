/* Dataset plugin `csv`: numeric tables, one sample per row, read whole in create().
 *
 * Every column but `label` is a feature (x: (n_features) f32); the label column is a class id
 * (classify: a non-negative integer; n_classes = largest label + 1) or a float target
 * (regress). Cells are split on ',' and trimmed; no quoting, so no commas inside cells. Blank
 * lines are skipped; a non-numeric cell, one beyond the float range or a row with another
 * number of cells is refused with file:line and the column name. Files may be gzip (read by tr_file_read).
 *
 * Splits: with `val_path`, the validation split is that file (same columns); otherwise the last
 * val_fraction of `path`'s rows (in file order: shuffle the file beforehand if it is sorted)
 * and the train split is the rest. `normalize` statistics (per feature: mean/std, or min/max)
 * come from the train rows only and are applied to both splits; a constant feature becomes 0. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/io.h"
#include "trainer/memory.h"
#include "trainer/model.h"
#include "trainer/plugin.h"

#define MAX_COLS 65536

typedef struct table {
    int ncol;
    int64_t nrow;
    char **names;     /* (ncol), "column N" without a header */
    double *v;        /* (nrow, ncol) */
    int64_t *line;    /* (nrow) file line of each row, for messages */
} table;

typedef struct csv {
    tr_data_spec spec;
    int64_t n;
    int regress;
    float *x;         /* (n, n_features), normalised */
    float *yf;        /* (n) regress */
    int32_t *yi;      /* (n) classify */
} csv;

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

static int blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r') return 0;
    return 1;
}

/* Splits a line in place at ','; returns the number of cells (at most max). */
static int split(char *line, char **cells, int max) {
    int n = 0;
    for (char *p = line;;) {
        char *c = strchr(p, ',');
        if (n < max) cells[n] = p;
        n++;
        if (!c) break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

static void table_free(table *t) {
    if (t->names)
        for (int i = 0; i < t->ncol; i++) free(t->names[i]);
    free(t->names);
    free(t->v);
    free(t->line);
    memset(t, 0, sizeof *t);
}

static tr_status parse(const char *path, int header, table *t) {
    char *buf;
    size_t len;
    TR_CHECK(tr_file_read(path, &buf, &len));
    tr_status st = TR_OK;
    char **cells = malloc(MAX_COLS * sizeof *cells);
    size_t cap = 0;
    int64_t lineno = 0;
    if (!cells) {
        st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        if (blank(line)) continue;
        int n = split(line, cells, MAX_COLS);
        if (n > MAX_COLS) {
            st = tr_error_set(TR_ERR_PARSE, "%s:%lld: %d columns, at most %d", path,
                              (long long)lineno, n, MAX_COLS);
            goto out;
        }
        if (!t->names) {
            t->ncol = n;
            t->names = calloc((size_t)n, sizeof *t->names);
            if (!t->names) {
                st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
                goto out;
            }
            for (int i = 0; i < n; i++) {
                char tmp[32];
                snprintf(tmp, sizeof tmp, "column %d", i + 1);
                t->names[i] = strdup(header ? trim(cells[i]) : tmp);
                if (!t->names[i]) {
                    st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
                    goto out;
                }
            }
            if (header) continue;
        }
        if (n != t->ncol) {
            st = tr_error_set(TR_ERR_PARSE, "%s:%lld: %d cells, expected %d like the %s", path,
                              (long long)lineno, n, t->ncol, header ? "header" : "first row");
            goto out;
        }
        if ((size_t)(t->nrow + 1) * (size_t)n > cap) {
            size_t nc = cap ? cap * 2 : (size_t)n * 1024;
            double *nv = realloc(t->v, nc * sizeof *nv);
            if (!nv) {
                st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory at line %lld", path, (long long)lineno);
                goto out;
            }
            t->v = nv;
            int64_t *nl = realloc(t->line, nc / (size_t)n * sizeof *nl);
            if (!nl) {
                st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory at line %lld", path, (long long)lineno);
                goto out;
            }
            t->line = nl;
            cap = nc;
        }
        for (int i = 0; i < n; i++) {
            char *c = trim(cells[i]), *end;
            errno = 0;
            double v = strtod(c, &end);
            if (!*c || *end || !isfinite(v)) {
                st = tr_error_set(TR_ERR_PARSE, "%s:%lld: column '%s': expected a number, got '%s'",
                                  path, (long long)lineno, t->names[i], c);
                goto out;
            }
            if (fabs(v) > FLT_MAX) { /* samples are f32: it would become inf */
                st = tr_error_set(TR_ERR_PARSE, "%s:%lld: column '%s': %s is beyond the float range (+-%g)",
                                  path, (long long)lineno, t->names[i], c, FLT_MAX);
                goto out;
            }
            t->v[t->nrow * n + i] = v;
        }
        t->line[t->nrow++] = lineno;
    }
    if (t->nrow == 0) st = tr_error_set(TR_ERR_PARSE, "%s: no data rows", path);
out:
    free(cells);
    tr_free(buf);
    if (st != TR_OK) table_free(t);
    return st;
}

static int find_col(const table *t, const char *name) {
    for (int i = 0; i < t->ncol; i++)
        if (strcmp(t->names[i], name) == 0) return i;
    return -1;
}

/* Classify labels must be non-negative integers; *max becomes the largest seen. */
static tr_status check_labels(const char *path, const table *t, int lc, int regress,
                              int64_t *max) {
    for (int64_t r = 0; r < t->nrow; r++) {
        double v = t->v[r * t->ncol + lc];
        if (regress) continue;
        if (v < 0 || v != floor(v) || v > 2147483647.0)
            return tr_error_set(TR_ERR_PARSE,
                                "%s:%lld: column '%s': expected a non-negative integer class "
                                "id, got %g (or set task=regress)",
                                path, (long long)t->line[r], t->names[lc], v);
        if ((int64_t)v > *max) *max = (int64_t)v;
    }
    return TR_OK;
}

static void destroy(void *ctx) {
    csv *s = ctx;
    if (!s) return;
    free(s->x);
    free(s->yf);
    free(s->yi);
    free(s);
}

static tr_status build(csv *s, const tr_options *o, const tr_dataset_env *env, table *tr,
                       table *tv) {
    char path[4096], vpath[4096];
    tr_path_resolve(path, sizeof path, env->base_dir, tr_options_string(o, "path"));
    const char *vp = tr_options_string(o, "val_path");
    int header = tr_options_bool(o, "header"), has_val = vp && vp[0];
    s->regress = strcmp(tr_options_string(o, "task"), "regress") == 0;
    TR_CHECK(parse(path, header, tr));
    const char *lname = tr_options_string(o, "label");
    int lc = find_col(tr, lname);
    if (!header && lc < 0) {
        char *end;
        long c = strtol(lname, &end, 10);
        if (*lname && !*end && c >= 0 && c < tr->ncol) lc = (int)c;
        else
            return tr_error_set(TR_ERR_INVALID,
                                "%s: header=false: give label as a column number 0..%d, got '%s'",
                                path, tr->ncol - 1, lname);
    }
    if (lc < 0) {
        char cols[512] = "";
        for (int i = 0; i < tr->ncol && strlen(cols) < 400; i++)
            snprintf(cols + strlen(cols), sizeof cols - strlen(cols), "%s'%s'", i ? ", " : "",
                     tr->names[i]);
        return tr_error_set(TR_ERR_INVALID, "%s: no label column '%s' (columns: %s)", path,
                            lname, cols);
    }
    if (tr->ncol < 2)
        return tr_error_set(TR_ERR_INVALID, "%s: only the label column, no features", path);
    int64_t max = -1;
    TR_CHECK(check_labels(path, tr, lc, s->regress, &max));
    if (has_val) {
        tr_path_resolve(vpath, sizeof vpath, env->base_dir, vp);
        TR_CHECK(parse(vpath, header, tv));
        if (tv->ncol != tr->ncol)
            return tr_error_set(TR_ERR_PARSE, "%s: %d columns, but %s has %d", vpath, tv->ncol,
                                path, tr->ncol);
        if (header)
            for (int i = 0; i < tr->ncol; i++)
                if (strcmp(tv->names[i], tr->names[i]) != 0)
                    return tr_error_set(TR_ERR_PARSE, "%s: column %d is '%s', but in %s it is '%s'",
                                        vpath, i + 1, tv->names[i], path, tr->names[i]);
        TR_CHECK(check_labels(vpath, tv, lc, s->regress, &max));
    }
    /* rows of the train split and of this split */
    int64_t train0 = 0, train1 = tr->nrow;
    const table *src = tr;
    int64_t r0 = 0, r1 = tr->nrow;
    if (!has_val) {
        int64_t nval = (int64_t)floor((double)tr->nrow * env->val_fraction);
        train1 = tr->nrow - nval;
        if (env->split == TR_SPLIT_VAL) {
            r0 = train1;
            if (nval == 0)
                return tr_error_set(TR_ERR_INVALID,
                                    "%s: no validation rows: %lld rows x val_fraction %g; give "
                                    "val_path or a larger val_fraction",
                                    path, (long long)tr->nrow, env->val_fraction);
        } else {
            r1 = train1;
            if (r1 == 0)
                return tr_error_set(TR_ERR_INVALID, "%s: no training rows left after val_fraction %g",
                                    path, env->val_fraction);
        }
    } else if (env->split == TR_SPLIT_VAL) {
        src = tv;
        r1 = tv->nrow;
    }
    int nc = tr->ncol, nf = nc - 1;
    s->n = r1 - r0;
    s->x = malloc((size_t)(s->n * nf) * sizeof *s->x);
    if (s->regress) s->yf = malloc((size_t)s->n * sizeof *s->yf);
    else s->yi = malloc((size_t)s->n * sizeof *s->yi);
    if (!s->x || (!s->yf && !s->yi)) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    const char *norm = tr_options_string(o, "normalize");
    int standard = strcmp(norm, "standard") == 0, minmax = strcmp(norm, "minmax") == 0;
    for (int c = 0, f = 0; c < nc; c++) {
        if (c == lc) continue;
        double shift = 0, scale = 1;
        if (standard || minmax) {
            double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
            for (int64_t r = train0; r < train1; r++) {
                double v = tr->v[r * nc + c];
                sum += v;
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            double mean = sum / (double)(train1 - train0);
            for (int64_t r = train0; r < train1; r++) {
                double d = tr->v[r * nc + c] - mean;
                sq += d * d;
            }
            double sd = sqrt(sq / (double)(train1 - train0));
            if (standard) {
                shift = mean;
                scale = sd > 0 ? 1.0 / sd : 0.0;
            } else {
                shift = lo;
                scale = hi > lo ? 1.0 / (hi - lo) : 0.0;
            }
        }
        for (int64_t r = r0; r < r1; r++)
            s->x[(r - r0) * nf + f] = (float)((src->v[r * nc + c] - shift) * scale);
        f++;
    }
    for (int64_t r = r0; r < r1; r++) {
        double v = src->v[r * nc + lc];
        if (s->regress) s->yf[r - r0] = (float)v;
        else s->yi[r - r0] = (int32_t)v;
    }
    tr_data_spec *d = &s->spec;
    *d = (tr_data_spec){.x_dtype = TR_F32, .x_ndim = 1, .x_shape = {nf}, .x_numel = nf,
                        .y_ndim = 0, .y_numel = 1};
    if (s->regress) {
        d->task = TR_TASK_REGRESS;
        d->y_dtype = TR_F32;
        d->n_classes = 0;
    } else {
        d->task = TR_TASK_CLASSIFY;
        d->y_dtype = TR_I32;
        d->n_classes = max + 1;
    }
    return TR_OK;
}

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    csv *s = calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "csv: out of memory");
    table tr = {0}, tv = {0};
    tr_status st = build(s, o, env, &tr, &tv);
    table_free(&tr);
    table_free(&tv);
    if (st != TR_OK) {
        destroy(s);
        return st;
    }
    *ctx = s;
    return TR_OK;
}

static void spec(void *ctx, tr_data_spec *out) { *out = ((csv *)ctx)->spec; }
static int64_t size(void *ctx) { return ((csv *)ctx)->n; }

static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    csv *s = ctx;
    if (index < 0 || index >= s->n)
        return tr_error_set(TR_ERR_INVALID, "csv: sample %lld out of range [0, %lld)",
                            (long long)index, (long long)s->n);
    int64_t nf = s->spec.x_numel;
    memcpy(x, s->x + index * nf, (size_t)nf * sizeof *s->x);
    if (y) {
        if (s->regress) *(float *)y = s->yf[index];
        else *(int32_t *)y = s->yi[index];
    }
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "path", .type = TR_OPTION_STRING, .default_value = NULL,
     .doc = "CSV file (plain or .gz), relative to the config"},
    {.key = "val_path", .type = TR_OPTION_STRING, .default_value = "",
     .doc = "validation CSV; empty: the last val_fraction of path's rows"},
    {.key = "label", .type = TR_OPTION_STRING, .default_value = "label",
     .doc = "label column name (a 0-based column number when header=false)"},
    {.key = "header", .type = TR_OPTION_BOOL, .default_value = "true",
     .doc = "the first line names the columns"},
    {.key = "normalize", .type = TR_OPTION_CHOICE, .default_value = "standard",
     .choices = "none|standard|minmax",
     .doc = "per-feature scaling with statistics of the train rows"},
    {.key = "task", .type = TR_OPTION_CHOICE, .default_value = "classify",
     .choices = "classify|regress",
     .doc = "classify: integer labels >= 0; regress: float targets"},
};
static const tr_dataset_ops ops = {
    .create = create, .destroy = destroy, .spec = spec, .size = size, .get = get};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_DATASET, .name = "csv", .version = "1.0.0",
    .description = "numeric CSV tables: features and a label column",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops,
    .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
