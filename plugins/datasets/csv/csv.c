/* Dataset plugin `csv`: numeric tables, one sample per row, read whole in create().
 *
 * Every column but `label` is a feature (x: (n_features) f32); the label column is a class id
 * or a float target (regress). Classes: `classes` a count N (labels are integer ids 0..N-1),
 * a list of names (labels are those names, ids in list order), or absent (labels are
 * non-negative integers, n_classes = the largest in the files + 1); a label outside the set is
 * refused with file:line. Cells are split on ',' and trimmed; no quoting, so no commas inside
 * cells. Blank lines are skipped; a non-numeric cell, one beyond the float range or a row with
 * another number of cells is refused with file:line and the column name. Files may be gzip
 * (read by tr_file_read).
 *
 * With `tokenizer` (a Hugging Face tokenizer.json), rows are texts instead (token_table.h):
 * CSV (RFC 4180 quoting), TSV (.tsv, or `delimiter`) or JSON Lines (.jsonl/.json); x is the
 * text_column's token ids (with text_pair_column: the pair's), (max_length) TR_I32, -1 for
 * padding at the end ("a token id -1 is padding": models mask it); with padding longest the
 * loader cuts each batch to its longest sample (tr_data_spec.x_trim_pad). Labels: class names
 * or integer ids (task classify), or float targets (task regress); normalize does not apply.
 *
 * Splits: with `val_path`, the validation split is that file whole (same columns); so is a
 * `path` given in data.val_params that differs from the train split's (env->train_opts); for
 * `trainer predict` (env->labels_optional) such a file may lack the label column (unlabelled);
 * otherwise the last val_fraction of `path`'s rows (in file order: shuffle the file beforehand
 * if it is sorted) and the train split is the rest (none held out: an empty validation split).
 * `normalize` statistics (per feature: mean/std, or min/max) come from the train split's rows
 * only and are applied to both splits; a constant feature becomes 0. */
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

#include "../common/token_table.h"

#define MAX_COLS 65536

typedef struct table {
    int ncol;
    int64_t nrow;
    char **names;     /* (ncol), "column N" without a header */
    double *v;        /* (nrow, ncol) */
    int64_t *line;    /* (nrow) file line of each row, for messages */
} table;

/* The declared classes: a count, or names (count of them), or neither (inferred). */
typedef struct classes {
    int64_t count;    /* 0: inferred from the labels */
    char **names;     /* (count) or NULL: integer labels */
    char *text;       /* the option's text, for messages */
    char *buf;        /* its copy that names point into */
} classes;

typedef struct csv {
    tr_data_spec spec;
    int64_t n;
    int regress;
    classes cls;
    char (*ids)[24];  /* (cls.count) "0", "1", ...: a declared count's names */
    float *x;         /* (n, n_features), normalised */
    float *yf;        /* (n) regress */
    int32_t *yi;      /* (n) classify */
    int tokenized;    /* with a tokenizer: the samples are tok's */
    tt_data tok;
    int unlabelled;   /* a validation file without the label column (env->labels_optional) */
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

/* Splits a line in place at `delim`; returns the number of cells (at most max). */
static int split(char *line, char **cells, int max, char delim) {
    int n = 0;
    for (char *p = line;;) {
        char *c = strchr(p, delim);
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

static int find_col(const table *t, const char *name);

/* The label column: named, or (header=false) a 0-based column number; -1 when absent. */
static int label_col(const table *t, int header, const char *lname) {
    int lc = find_col(t, lname);
    if (lc >= 0 || header) return lc;
    char *end;
    long c = strtol(lname, &end, 10);
    return *lname && !*end && c >= 0 && c < t->ncol ? (int)c : -1;
}

/* Named classes: the label cell's id in the list, or -1. */
static int64_t class_id(const classes *cls, const char *cell) {
    for (int64_t k = 0; k < cls->count; k++)
        if (strcmp(cls->names[k], cell) == 0) return k;
    return -1;
}

/* The file as a table of numbers; with named classes, the label column's names become ids.
 * With `like` (the train file's table) the file may lack its label column: *unlabelled then
 * says whether it does (one column fewer, and with a header no column named lname). */
static tr_status parse(const char *path, int header, const char *lname, const classes *cls, char delim, const table *like,
                       int *unlabelled, table *t) {
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
        int n = split(line, cells, MAX_COLS, delim);
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
            if (like) *unlabelled = t->ncol == like->ncol - 1 && (!header || find_col(t, lname) < 0);
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
        int lc = cls->names && !(like && *unlabelled) ? label_col(t, header, lname) : -1;
        for (int i = 0; i < n; i++) {
            char *c = trim(cells[i]), *end;
            if (i == lc) {
                int64_t id = class_id(cls, c);
                if (id < 0) {
                    st = tr_error_set(TR_ERR_PARSE, "%s:%lld: column '%s': '%s' is not one of the %lld classes (%s)", path,
                                      (long long)lineno, t->names[i], c, (long long)cls->count, cls->text);
                    goto out;
                }
                t->v[t->nrow * n + i] = (double)id;
                continue;
            }
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

/* Classify labels must be non-negative integers, below a declared count; *max becomes the
 * largest seen. */
static tr_status check_labels(const char *path, const table *t, int lc, int regress, const classes *cls,
                              int64_t *max) {
    for (int64_t r = 0; r < t->nrow; r++) {
        double v = t->v[r * t->ncol + lc];
        if (regress) continue;
        if (v < 0 || v != floor(v) || v > 2147483647.0)
            return tr_error_set(TR_ERR_PARSE,
                                "%s:%lld: column '%s': expected a non-negative integer class "
                                "id, got %g (or set task=regress)",
                                path, (long long)t->line[r], t->names[lc], v);
        if (cls->count && v >= (double)cls->count)
            return tr_error_set(TR_ERR_PARSE, "%s:%lld: column '%s': label %g is not a class: classes is %lld (ids 0..%lld)",
                                path, (long long)t->line[r], t->names[lc], v, (long long)cls->count,
                                (long long)cls->count - 1);
        if ((int64_t)v > *max) *max = (int64_t)v;
    }
    return TR_OK;
}

/* The `classes` option: "" (inferred), a count "N", or a list "[a, b, c]" of distinct names. */
static tr_status read_classes(classes *c, const char *text, int regress) {
    while (*text == ' ') text++;
    if (!*text) return TR_OK;
    if (regress) return tr_error_set(TR_ERR_INVALID, "csv: classes: only for task=classify, got '%s'", text);
    char *end;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (end != text && !*end) {
        if (n < 1 || n > (1 << 24) || errno)
            return tr_error_set(TR_ERR_INVALID, "csv: classes: a count from 1 to %d, got '%s'", 1 << 24, text);
        c->count = n;
        return TR_OK;
    }
    size_t len = strlen(text);
    if (text[0] != '[' || text[len - 1] != ']')
        return tr_error_set(TR_ERR_INVALID, "csv: classes: expected a count or a list of class names, got '%s'", text);
    c->text = strdup(text);
    c->buf = strdup(text);
    c->names = calloc(len, sizeof *c->names);
    if (!c->text || !c->buf || !c->names) return tr_error_set(TR_ERR_NOMEM, "csv: out of memory");
    c->buf[len - 1] = '\0';
    char *body = c->buf + 1;
    if (*trim(body)) c->count = split(body, c->names, (int)len, ',');
    for (int64_t k = 0; k < c->count; k++) {
        c->names[k] = trim(c->names[k]);
        if (!c->names[k][0]) return tr_error_set(TR_ERR_INVALID, "csv: classes: class %lld of %s has no name", (long long)k, text);
        for (int64_t m = 0; m < k; m++)
            if (strcmp(c->names[m], c->names[k]) == 0)
                return tr_error_set(TR_ERR_INVALID, "csv: classes: '%s' is listed twice in %s", c->names[k], text);
    }
    if (c->count == 0) return tr_error_set(TR_ERR_INVALID, "csv: classes: the list %s names no class", text);
    return TR_OK;
}

static void destroy(void *ctx) {
    csv *s = ctx;
    if (!s) return;
    free(s->x);
    free(s->yf);
    free(s->yi);
    free(s->cls.names);
    free(s->cls.text);
    free(s->cls.buf);
    free(s->ids);
    tt_free(&s->tok);
    free(s);
}

/* A file option of o resolved against the config's folder ("" when empty). */
static void file_of(char *out, size_t cap, const tr_options *o, const char *key, const tr_dataset_env *env) {
    const char *v = tr_options_string(o, key);
    if (v && v[0]) tr_path_resolve(out, cap, env->base_dir, v);
    else out[0] = '\0';
}

/* The train split's rows of the train file: all of them with a val_path, else all but the
 * last val_fraction. */
static int64_t train_rows(const table *tr, int has_val_file, double val_fraction) {
    return has_val_file ? tr->nrow : tr->nrow - (int64_t)floor((double)tr->nrow * val_fraction);
}

/* The `delimiter` option: "" (by_ext: the tokenized reader picks by extension, else ','),
 * one character, or "tab". */
static tr_status delimiter_of(const tr_options *o, char by_ext, char *out) {
    const char *d = tr_options_string(o, "delimiter");
    if (!d[0]) *out = by_ext;
    else if (strcmp(d, "tab") == 0 || strcmp(d, "\\t") == 0) *out = '\t';
    else if (strlen(d) == 1 && d[0] != '"' && d[0] != '\n' && d[0] != '\r') *out = d[0];
    else return tr_error_set(TR_ERR_INVALID, "csv: delimiter: one character or 'tab', got '%s'", d);
    return TR_OK;
}

static tr_status build(csv *s, const tr_options *o, const tr_dataset_env *env, table *tr,
                       table *tv) {
    /* The train split's file and options decide the columns, the statistics and the classes;
     * this split's options (o: data.val_params over data.params) may name a validation file. */
    const tr_options *to = env->train_opts ? env->train_opts : o;
    char path[4096], vpath[4096], own[4096];
    file_of(path, sizeof path, to, "path", env);
    file_of(own, sizeof own, o, "path", env);
    int val = env->split == TR_SPLIT_VAL;
    if (val && strcmp(own, path) != 0) snprintf(vpath, sizeof vpath, "%s", own); /* val_params' own file, whole */
    else file_of(vpath, sizeof vpath, o, "val_path", env);
    char train_val[4096]; /* the val_path the train split was made with */
    file_of(train_val, sizeof train_val, to, "val_path", env);
    int header = tr_options_bool(to, "header"), has_val = vpath[0] != '\0';
    const char *lname = tr_options_string(to, "label");
    char delim;
    TR_CHECK(delimiter_of(to, ',', &delim));
    s->regress = strcmp(tr_options_string(to, "task"), "regress") == 0;
    TR_CHECK(read_classes(&s->cls, tr_options_string(to, "classes"), s->regress));
    TR_CHECK(parse(path, header, lname, &s->cls, delim, NULL, NULL, tr));
    int lc = label_col(tr, header, lname);
    if (!header && lc < 0)
        return tr_error_set(TR_ERR_INVALID,
                            "%s: header=false: give label as a column number 0..%d, got '%s'",
                            path, tr->ncol - 1, lname);
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
    TR_CHECK(check_labels(path, tr, lc, s->regress, &s->cls, &max));
    /* A validation file without the label column: predict's (labels_optional) to predict on;
     * refused by the validation split otherwise; the train split (reading it for the classes)
     * passes over it. */
    int bare = 0;
    if (has_val) {
        TR_CHECK(parse(vpath, header, lname, &s->cls, delim, tr, &bare, tv));
        if (bare && val && !env->labels_optional)
            return tr_error_set(TR_ERR_INVALID, "%s: no label column '%s' (%d columns: %s's without it): scoring needs the "
                                "labels; trainer predict takes a validation file without them",
                                vpath, lname, tv->ncol, path);
        s->unlabelled = bare && val;
        for (int i = 0, k = 0; s->unlabelled && header && i < tr->ncol; i++) {
            if (i == lc) continue;
            if (strcmp(tv->names[k], tr->names[i]) != 0)
                return tr_error_set(TR_ERR_PARSE, "%s: column %d is '%s', but in %s (less its label column '%s') it is '%s'",
                                    vpath, k + 1, tv->names[k], path, lname, tr->names[i]);
            k++;
        }
    }
    if (has_val && !bare) {
        if (tv->ncol != tr->ncol)
            return tr_error_set(TR_ERR_PARSE, "%s: %d columns, but %s has %d", vpath, tv->ncol,
                                path, tr->ncol);
        if (header)
            for (int i = 0; i < tr->ncol; i++)
                if (strcmp(tv->names[i], tr->names[i]) != 0)
                    return tr_error_set(TR_ERR_PARSE, "%s: column %d is '%s', but in %s it is '%s'",
                                        vpath, i + 1, tv->names[i], path, tr->names[i]);
        TR_CHECK(check_labels(vpath, tv, lc, s->regress, &s->cls, &max));
    }
    /* rows of the train split (statistics) and of this split */
    int64_t train0 = 0, train1 = train_rows(tr, train_val[0] != '\0', env->val_fraction);
    const table *src = tr;
    int64_t r0 = 0, r1 = train1;
    if (val && has_val) {
        src = tv;
        r1 = tv->nrow;
    } else if (val) {
        r0 = train1; /* none held out: an empty split, "no validation split" */
        r1 = tr->nrow;
    } else if (r1 == 0) {
        return tr_error_set(TR_ERR_INVALID, "%s: no training rows left after val_fraction %g",
                            path, env->val_fraction);
    }
    int nc = tr->ncol, nf = nc - 1;
    int snc = val && s->unlabelled ? nc - 1 : nc; /* the split's file's columns: no label column */
    s->n = r1 - r0;
    s->x = malloc((size_t)((s->n ? s->n : 1) * nf) * sizeof *s->x);
    if (s->regress) s->yf = malloc((size_t)(s->n ? s->n : 1) * sizeof *s->yf);
    else s->yi = malloc((size_t)(s->n ? s->n : 1) * sizeof *s->yi);
    if (!s->x || (!s->yf && !s->yi)) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    const char *norm = tr_options_string(to, "normalize");
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
        int sc = snc < nc && c > lc ? c - 1 : c;
        for (int64_t r = r0; r < r1; r++)
            s->x[(r - r0) * nf + f] = (float)((src->v[r * snc + sc] - shift) * scale);
        f++;
    }
    for (int64_t r = r0; r < r1; r++) {
        double v = s->unlabelled ? NAN : src->v[r * nc + lc];
        if (s->regress) s->yf[r - r0] = (float)v;
        else s->yi[r - r0] = s->unlabelled ? -1 : (int32_t)v;
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
        d->n_classes = s->cls.count ? s->cls.count : max + 1;
    }
    if (s->cls.count && !s->cls.names) { /* a declared count: its classes are named by their ids */
        s->ids = calloc((size_t)s->cls.count, sizeof *s->ids);
        if (!s->ids) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
        for (int64_t k = 0; k < s->cls.count; k++) snprintf(s->ids[k], sizeof s->ids[k], "%lld", (long long)k);
    }
    return TR_OK;
}

/* With a tokenizer: the split's texts and labels (token_table.h). The files and the train
 * split's options as in build(). */
static tr_status build_tokenized(csv *s, const tr_options *o, const tr_dataset_env *env) {
    const tr_options *to = env->train_opts ? env->train_opts : o;
    char path[4096], vpath[4096], own[4096], train_val[4096];
    file_of(path, sizeof path, to, "path", env);
    file_of(own, sizeof own, o, "path", env);
    int val = env->split == TR_SPLIT_VAL;
    if (val && strcmp(own, path) != 0) snprintf(vpath, sizeof vpath, "%s", own);
    else file_of(vpath, sizeof vpath, o, "val_path", env);
    file_of(train_val, sizeof train_val, to, "val_path", env);
    tt_config c;
    tt_config_read(&c, to, env->base_dir);
    c.plugin = "csv";
    /* label_column is the text plugin's name for csv's `label`: either may be set */
    const char *lc = tr_options_string(to, "label_column");
    c.label_col = strcmp(lc, "label") != 0 ? lc : tr_options_string(to, "label");
    c.regress = s->regress = strcmp(tr_options_string(to, "task"), "regress") == 0;
    c.classes = tr_options_string(to, "classes");
    c.header = tr_options_bool(to, "header");
    TR_CHECK(delimiter_of(to, 0, &c.delimiter));
    if (c.regress && c.classes[0]) return tr_error_set(TR_ERR_INVALID, "csv: classes: only for task=classify, got '%s'", c.classes);
    s->tokenized = 1;
    if (val && vpath[0]) return tt_load(&s->tok, &c, vpath, path, 1, env);
    return tt_load(&s->tok, &c, path, path, !val && train_val[0], env);
}

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    csv *s = calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "csv: out of memory");
    const tr_options *to = env->train_opts ? env->train_opts : o;
    if (tr_options_string(to, "tokenizer")[0]) {
        tr_status st = build_tokenized(s, o, env);
        if (st == TR_OK) s->n = s->tok.n;
        if (st == TR_OK) tt_spec(&s->tok, s->regress, &s->spec);
        if (st != TR_OK) {
            destroy(s);
            return st;
        }
        *ctx = s;
        return TR_OK;
    }
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

static const char *class_name(void *ctx, int64_t id) {
    const csv *s = ctx;
    if (s->tokenized) return tt_class_name(&s->tok, id);
    if (id < 0 || id >= s->cls.count) return NULL;
    return s->cls.names ? s->cls.names[id] : s->ids[id];
}
static int64_t size(void *ctx) { return ((csv *)ctx)->n; }

static int labelled(void *ctx) {
    const csv *s = ctx;
    return !(s->tokenized ? s->tok.unlabelled : s->unlabelled);
}

static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    csv *s = ctx;
    if (index < 0 || index >= s->n)
        return tr_error_set(TR_ERR_INVALID, "csv: sample %lld out of range [0, %lld)",
                            (long long)index, (long long)s->n);
    if (s->tokenized) return tt_sample(&s->tok, index, x, y);
    int64_t nf = s->spec.x_numel;
    memcpy(x, s->x + index * nf, (size_t)nf * sizeof *s->x);
    if (y && !s->unlabelled) {
        if (s->regress) *(float *)y = s->yf[index];
        else *(int32_t *)y = s->yi[index];
    }
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "path", .type = TR_OPTION_PATH, .default_value = NULL,
     .doc = "CSV file (plain or .gz), relative to the config"},
    {.key = "val_path", .type = TR_OPTION_PATH, .default_value = "",
     .doc = "validation CSV, scored whole; empty: the last val_fraction of path's rows"},
    {.key = "classes", .type = TR_OPTION_STRING, .default_value = "",
     .doc = "classify: a count N (labels are ids 0..N-1) or a list of class names (labels are "
            "those names, ids in list order); empty: the largest integer label + 1"},
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
    {.key = "delimiter", .type = TR_OPTION_STRING, .default_value = "",
     .doc = "the cell separator: one character or 'tab'; empty: ',' (with a tokenizer: tab for .tsv files, "
            "JSON Lines for .jsonl/.json)"},
    TT_OPTION_SPECS,
};
static const tr_dataset_ops ops = {
    .create = create, .destroy = destroy, .spec = spec, .size = size, .get = get,
    .class_name = class_name, .labelled = labelled};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_DATASET, .name = "csv", .version = "1.3.0",
    .description = "CSV tables: numeric features, or texts tokenized by a tokenizer.json, and a label column",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops,
    .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
