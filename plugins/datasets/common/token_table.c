/* Tokenized text tables (token_table.h): file layouts, labels and the one-time encoding.
 *
 * Layouts: CSV/TSV after RFC 4180 (a field in double quotes may hold the delimiter, newlines
 * and doubled quotes; a quote inside an unquoted field is kept as it is, as Python's csv
 * module does), JSON Lines (one object per line, read with jansson), and the text plugin's
 * tab-separated lines. The whole file must be UTF-8 (a BOM is skipped); blank lines are
 * skipped. Encoding runs once, in chunks of tr_tokenizer_encode_batch on a few threads. */
#define _POSIX_C_SOURCE 200809L
#include "token_table.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/io.h"
#include "trainer/memory.h"

#define CHUNK 256       /* texts per encode_batch call */
#define MAX_THREADS 8
#define DEFAULT_MAX_LENGTH 512
#define MAX_CLASSES (1 << 24) /* the classes option's bound */
#define MAX_LENGTH (1 << 20) /* tokens per sample, as the max_length option's bound */

enum { COL_TEXT, COL_PAIR, COL_LABEL, N_COLS };

/* The rows of a file: the selected cells as offsets into one string buffer. */
typedef struct rows {
    int64_t n, cap;
    size_t (*at)[N_COLS];     /* (n) offset of each cell in str; (size_t)-1: absent */
    size_t (*len)[N_COLS];
    int64_t *line;            /* (n) file line the row starts on */
    char *str;
    size_t str_n, str_cap;
    int optional;             /* the label column may be absent (a validation file for predict) */
    int unlabelled;           /* it is: no row has a label */
} rows;

static void rows_free(rows *r) {
    free(r->at);
    free(r->len);
    free(r->line);
    free(r->str);
    memset(r, 0, sizeof *r);
}

static const char *cell(const rows *r, int64_t i, int c) {
    return r->at[i][c] == (size_t)-1 ? NULL : r->str + r->at[i][c];
}

static int rows_add(rows *r, int64_t line) {
    if (r->n == r->cap) {
        int64_t cap = r->cap ? 2 * r->cap : 1024;
        void *a = realloc(r->at, (size_t)cap * sizeof *r->at), *b = a ? realloc(r->len, (size_t)cap * sizeof *r->len) : NULL;
        if (a) r->at = a;
        if (b) r->len = b;
        int64_t *l = b ? realloc(r->line, (size_t)cap * sizeof *l) : NULL;
        if (!l) return -1;
        r->line = l;
        r->cap = cap;
    }
    for (int c = 0; c < N_COLS; c++) r->at[r->n][c] = (size_t)-1, r->len[r->n][c] = 0;
    r->line[r->n++] = line;
    return 0;
}

/* Copies s[0..n) (NUL-terminated) into the string buffer as column c of the last row. */
static int rows_set(rows *r, int c, const char *s, size_t n) {
    if (r->str_n + n + 1 > r->str_cap) {
        size_t cap = r->str_cap ? r->str_cap : 4096;
        while (r->str_n + n + 1 > cap) cap *= 2;
        char *g = realloc(r->str, cap);
        if (!g) return -1;
        r->str = g;
        r->str_cap = cap;
    }
    if (n) memcpy(r->str + r->str_n, s, n);
    r->str[r->str_n + n] = '\0';
    r->at[r->n - 1][c] = r->str_n;
    r->len[r->n - 1][c] = n;
    r->str_n += n + 1;
    return 0;
}

void tt_config_read(tt_config *c, const tr_options *o, const char *base_dir) {
    memset(c, 0, sizeof *c);
    c->tokenizer_given = tr_options_string(o, "tokenizer");
    if (c->tokenizer_given && c->tokenizer_given[0])
        tr_path_resolve(c->tokenizer, sizeof c->tokenizer, base_dir, c->tokenizer_given);
    c->max_length = tr_options_int(o, "max_length");
    c->pad_longest = strcmp(tr_options_string(o, "padding"), "longest") == 0;
    c->truncation = tr_options_string(o, "truncation");
    c->text_col = tr_options_string(o, "text_column");
    c->pair_col = tr_options_string(o, "text_pair_column");
    c->label_col = tr_options_string(o, "label_column");
    c->header = 1;
    c->classes = "";
    const char *f = tr_options_string(o, "format");
    c->format = strcmp(f, "csv") == 0 ? 'c' : strcmp(f, "tsv") == 0 ? 't' : strcmp(f, "jsonl") == 0 ? 'j' : 0;
}

/* ---- reading ---- */

static tr_status check_utf8(const char *path, const char *buf, size_t len) {
    size_t bad = tr_utf8_valid_prefix(buf, len);
    if (bad == len) return TR_OK;
    int64_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < bad; i++)
        if (buf[i] == '\n') line++, line_start = i + 1;
    return tr_error_set(TR_ERR_PARSE, "%s:%lld: invalid UTF-8 at byte %zu of the line (byte %zu of the file): the file must be UTF-8 "
                        "(convert it, e.g. iconv -f latin1 -t utf-8)", path, (long long)line, bad - line_start, bad);
}

static const char *ext_of(const char *path) {
    static const char *const gz = ".gz";
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, gz) == 0) n -= 3;
    for (size_t i = n; i > 0; i--) {
        if (path[i - 1] == '.') return path + i - 1;
        if (path[i - 1] == '/') break;
    }
    return "";
}

static int ext_is(const char *path, const char *ext) {
    const char *e = ext_of(path);
    size_t n = strlen(ext);
    return strncmp(e, ext, n) == 0 && (e[n] == '\0' || strcmp(e + n, ".gz") == 0);
}

/* The columns wanted, by name; -1 when not wanted. */
typedef struct wanted {
    const char *name[N_COLS];
} wanted;

static void columns_list(char *out, size_t cap, char *const *names, int n) {
    out[0] = '\0';
    for (int i = 0; i < n && strlen(out) + 40 < cap; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s'%s'", i ? ", " : "", names[i]);
    if (n == 0) snprintf(out, cap, "none");
}

/* One CSV record from *p: fields unescaped in place, each NUL-terminated; *line counts the
 * newlines crossed. Returns the number of fields (0 for a blank line), -1 on a syntax error
 * (message set). At the end of the buffer *p is NULL. */
static int csv_record(const char *path, char **p, char *end, char delim, int64_t *line, char ***fields, size_t **lens,
                      int *cap) {
    char *r = *p, *w = r;
    int64_t start = *line;
    int n = 0;
    if (r < end && (*r == '\n' || (*r == '\r' && r + 1 < end && r[1] == '\n'))) { /* blank line */
        *p = r + (*r == '\r' ? 2 : 1);
        ++*line;
        return 0;
    }
    for (;;) {
        if (n == *cap) {
            int nc = *cap ? 2 * *cap : 64;
            char **f = realloc(*fields, (size_t)nc * sizeof *f);
            if (f) *fields = f;
            size_t *l = f ? realloc(*lens, (size_t)nc * sizeof *l) : NULL;
            if (!l) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path), -1;
            *lens = l;
            *cap = nc;
        }
        char *f = w;
        if (r < end && *r == '"') {
            r++;
            for (;;) {
                if (r >= end)
                    return tr_error_set(TR_ERR_PARSE, "%s:%lld: column %d: the quoted field opened on this line is never closed",
                                        path, (long long)start, n + 1), -1;
                if (*r == '"') {
                    if (r + 1 < end && r[1] == '"') {
                        *w++ = '"';
                        r += 2;
                        continue;
                    }
                    r++;
                    break;
                }
                if (*r == '\n') ++*line;
                *w++ = *r++;
            }
            if (r < end && *r == '\r' && r + 1 < end && r[1] == '\n') r++;
            if (r < end && *r != delim && *r != '\n')
                return tr_error_set(TR_ERR_PARSE, "%s:%lld: column %d: '%c' after the closing quote (a quote inside a quoted "
                                    "field is written twice: \"\")", path, (long long)*line, n + 1, *r), -1;
        } else {
            while (r < end && *r != delim && *r != '\n') *w++ = *r++;
            if (w > f && w[-1] == '\r' && (r >= end || *r == '\n')) w--;
        }
        (*fields)[n] = f;
        (*lens)[n] = (size_t)(w - f);
        n++;
        int last = r >= end || *r == '\n';
        *w++ = '\0'; /* w <= r: the quote or the delimiter consumed makes room */
        if (last) {
            if (r < end) ++*line;
            *p = r < end ? r + 1 : NULL;
            if (*p && *p >= end) *p = NULL;
            return n;
        }
        r++; /* the delimiter */
    }
}

static tr_status read_csv(const char *path, char *buf, size_t len, const tt_config *c, char delim, const wanted *wt, rows *out) {
    char **fields = NULL, **names = NULL;
    size_t *lens = NULL;
    int cap = 0, ncol = 0, col[N_COLS];
    int64_t line = 1;
    tr_status st = TR_OK;
    char *end = buf + len, *p = len ? buf : NULL;
    for (int k = 0; k < N_COLS; k++) col[k] = -1;
    while (p && st == TR_OK) {
        int64_t at = line;
        int n = csv_record(path, &p, end, delim, &line, &fields, &lens, &cap);
        if (n < 0) {
            st = TR_ERR_PARSE;
            break;
        }
        if (n == 0 || (n == 1 && lens[0] == 0 && ncol != 1)) continue; /* blank */
        if (!names) {
            ncol = n;
            names = calloc((size_t)n, sizeof *names);
            if (!names) {
                st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            for (int i = 0; i < n; i++) {
                char num[24];
                snprintf(num, sizeof num, "%d", i);
                names[i] = strdup(c->header ? fields[i] : num);
                if (!names[i]) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
            }
            for (int k = 0; k < N_COLS && st == TR_OK; k++) {
                if (!wt->name[k]) continue;
                for (int i = 0; i < n && col[k] < 0; i++)
                    if (strcmp(names[i], wt->name[k]) == 0) col[k] = i;
                if (col[k] < 0 && k == COL_LABEL && out->optional) {
                    out->unlabelled = 1;
                    continue;
                }
                if (col[k] < 0) {
                    char list[600];
                    columns_list(list, sizeof list, names, n);
                    st = tr_error_set(TR_ERR_INVALID, "%s: no column '%s' (%s; the columns: %s)%s", path, wt->name[k],
                                      k == COL_TEXT ? "text_column" : k == COL_PAIR ? "text_pair_column" : "the label column",
                                      list, c->header ? "" : " (header=false: columns are named by their 0-based numbers)");
                }
            }
            if (c->header) continue;
        }
        if (n != ncol) {
            st = tr_error_set(TR_ERR_PARSE, "%s:%lld: %d fields, expected %d like the %s (a field holding the delimiter "
                              "or a newline must be in double quotes)", path, (long long)at, n, ncol, c->header ? "header" : "first row");
            break;
        }
        if (rows_add(out, at)) {
            st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        for (int k = 0; k < N_COLS && st == TR_OK; k++)
            if (col[k] >= 0 && rows_set(out, k, fields[col[k]], lens[col[k]])) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == TR_OK && !names) st = tr_error_set(TR_ERR_PARSE, "%s: no rows", path);
    for (int i = 0; names && i < ncol; i++) free(names[i]);
    free(names);
    free(fields);
    free(lens);
    return st;
}

/* The text plugin's lines: n_names tab-separated fields, the last taking the rest. A file for
 * predict (out->optional) whose first line has one field fewer has no labels: each line is
 * then the fields but the label's. */
static tr_status read_lines(const char *path, char *buf, const tt_config *c, const wanted *wt, rows *out) {
    int64_t line = 0;
    const char *names[8];
    int n_names = 0;
    for (int i = 0; i < c->n_names && i < 8; i++) names[n_names++] = c->names[i];
    if (out->optional) {
        const char *first = buf;
        while (*first == '\n' || *first == '\r') first++;
        int tabs = 0;
        for (const char *q = first; *q && *q != '\n'; q++) tabs += *q == '\t';
        if (tabs < n_names - 1) { /* the label's field left out */
            out->unlabelled = 1;
            n_names = 0;
            for (int i = 0; i < c->n_names && i < 8; i++)
                if (strcmp(c->names[i], c->label_col) != 0) names[n_names++] = c->names[i];
        }
    }
    for (char *p = buf; p && *p;) {
        char *l = p, *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        p = nl ? nl + 1 : NULL;
        line++;
        size_t n = strlen(l);
        if (n && l[n - 1] == '\r') l[--n] = '\0';
        if (!n) continue;
        char *f[8];
        int k = 0;
        f[k++] = l;
        for (char *t; k < n_names && (t = strchr(f[k - 1], '\t'));) *t = '\0', f[k++] = t + 1;
        if (k < n_names) {
            char want[200] = "";
            for (int i = 0; i < n_names; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? "<TAB>" : "", names[i]);
            return tr_error_set(TR_ERR_PARSE, "%s:%lld: expected '%s'%s, found %d TAB", path, (long long)line, want,
                                out->unlabelled ? " (no label: the file's first line has none)" : "", k - 1);
        }
        if (rows_add(out, line)) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
        for (int col = 0; col < N_COLS; col++)
            for (int i = 0; wt->name[col] && i < n_names; i++)
                if (strcmp(names[i], wt->name[col]) == 0 && rows_set(out, col, f[i], strlen(f[i])))
                    return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    }
    if (out->n == 0) return tr_error_set(TR_ERR_PARSE, "%s: no lines", path);
    return TR_OK;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static tr_status read_jsonl(const char *path, char *buf, size_t len, const wanted *wt, rows *out) {
    int64_t line = 0;
    tr_status st = TR_OK;
    char *end = buf + len;
    for (char *p = buf; p < end && st == TR_OK;) {
        char *l = p, *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - l) : (size_t)(end - l);
        p = nl ? nl + 1 : end;
        line++;
        size_t i = 0;
        while (i < n && isspace((unsigned char)l[i])) i++;
        if (i == n) continue;
        json_error_t err;
        json_t *o = json_loadb(l, n, JSON_ALLOW_NUL, &err);
        if (!o)
            return tr_error_set(TR_ERR_PARSE, "%s:%lld:%d: malformed JSON: %s (JSON Lines: one object per line)", path,
                                (long long)line, err.column, err.text);
        if (!json_is_object(o)) {
            st = tr_error_set(TR_ERR_PARSE, "%s:%lld: expected a JSON object, got %s (JSON Lines: one object per line)", path,
                              (long long)line, json_kind(o));
            json_decref(o);
            break;
        }
        if (rows_add(out, line)) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
        /* A file for predict whose first object has no label has none: no object may have one. */
        json_t *label = wt->name[COL_LABEL] ? json_object_get(o, wt->name[COL_LABEL]) : NULL;
        if (out->optional && out->n == 1 && !label) out->unlabelled = 1;
        if (out->unlabelled && label && st == TR_OK)
            st = tr_error_set(TR_ERR_PARSE, "%s:%lld: key '%s' (the label column), but the first line has no label: a file "
                              "has labels on every line or on none", path, (long long)line, wt->name[COL_LABEL]);
        for (int k = 0; k < N_COLS && st == TR_OK; k++) {
            if (!wt->name[k] || (k == COL_LABEL && out->unlabelled)) continue;
            json_t *v = json_object_get(o, wt->name[k]);
            if (!v) {
                char keys[600] = "";
                const char *key;
                json_t *val;
                json_object_foreach(o, key, val) {
                    if (strlen(keys) + strlen(key) + 8 >= sizeof keys) break;
                    snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s'%s'", keys[0] ? ", " : "", key);
                }
                st = tr_error_set(TR_ERR_PARSE, "%s:%lld: no key '%s' (%s; the keys: %s)", path, (long long)line, wt->name[k],
                                  k == COL_TEXT ? "text_column" : k == COL_PAIR ? "text_pair_column" : "the label column",
                                  keys[0] ? keys : "none");
                break;
            }
            char num[64];
            const char *s = NULL;
            size_t sl = 0;
            if (json_is_string(v)) {
                s = json_string_value(v);
                sl = json_string_length(v);
            } else if (k == COL_LABEL && json_is_integer(v)) {
                snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                s = num, sl = strlen(num);
            } else if (k == COL_LABEL && json_is_real(v)) {
                snprintf(num, sizeof num, "%.17g", json_real_value(v));
                s = num, sl = strlen(num);
            } else {
                st = tr_error_set(TR_ERR_PARSE, "%s:%lld: key '%s': expected %s, got %s", path, (long long)line, wt->name[k],
                                  k == COL_LABEL ? "a string or a number" : "a string", json_kind(v));
                break;
            }
            if (rows_set(out, k, s, sl)) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
        }
        json_decref(o);
    }
    if (st == TR_OK && out->n == 0) st = tr_error_set(TR_ERR_PARSE, "%s: no JSON lines", path);
    return st;
}

/* out->optional: the label column may be absent (out->unlabelled says whether it is). */
static tr_status read_rows(const char *path, const tt_config *c, rows *out) {
    char *buf;
    size_t len;
    TR_CHECK(tr_file_read(path, &buf, &len));
    tr_status st = len ? check_utf8(path, buf, len) : tr_error_set(TR_ERR_PARSE, "%s: empty file", path);
    char *p = buf;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3, len -= 3; /* a BOM */
    wanted wt = {{c->text_col, c->pair_col && c->pair_col[0] ? c->pair_col : NULL, c->label_col}};
    /* JSON Lines by the format, else by the extension when no delimiter is given. */
    int jsonl = c->format == 'j' || (!c->format && !c->delimiter &&
                                     (ext_is(path, ".jsonl") || ext_is(path, ".json") || ext_is(path, ".ndjson")));
    char delim = c->delimiter ? c->delimiter : ext_is(path, ".tsv") || ext_is(path, ".tab") ? '\t' : ',';
    if (c->format == 't') delim = '\t';
    else if (c->format == 'c') delim = c->delimiter ? c->delimiter : ',';
    /* the text plugin's lines unless the format or the extension says JSON Lines or CSV (a
     * .tsv file there is label<TAB>text lines, as without a tokenizer) */
    int lines = c->lines && !c->format && !jsonl && !ext_is(path, ".csv");
    if (st == TR_OK) {
        if (lines) st = read_lines(path, p, c, &wt, out);
        else if (jsonl) st = read_jsonl(path, p, len, &wt, out);
        else st = read_csv(path, p, len, c, delim, &wt, out);
    }
    tr_free(buf);
    if (st != TR_OK) rows_free(out);
    return st;
}

/* ---- labels ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A non-negative decimal integer below 2^31 (surrounding spaces allowed). */
static int int_label(const char *s, int64_t *v) {
    while (*s == ' ') s++;
    if (!isdigit((unsigned char)*s)) return 0;
    int64_t x = 0;
    for (; isdigit((unsigned char)*s); s++)
        if ((x = x * 10 + (*s - '0')) > INT32_MAX) return 0;
    while (*s == ' ') s++;
    if (*s) return 0;
    *v = x;
    return 1;
}

static char *trimmed(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    return s;
}

/* Owns names[0..n) in one buffer. */
static tr_status own_names(tt_data *d, char **names, int64_t n) {
    size_t total = 1;
    for (int64_t i = 0; i < n; i++) total += strlen(names[i]) + 1;
    d->class_buf = malloc(total);
    d->class_names = malloc((size_t)(n ? n : 1) * sizeof *d->class_names);
    if (!d->class_buf || !d->class_names) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    for (int64_t i = 0, at = 0; i < n; i++) {
        size_t l = strlen(names[i]) + 1;
        memcpy(d->class_buf + at, names[i], l);
        d->class_names[i] = d->class_buf + at;
        at += (int64_t)l;
    }
    d->n_classes = n;
    return TR_OK;
}

/* The classes: declared (a count or names), or inferred from the class file's labels: its
 * integers (n_classes = the largest + 1), else its distinct names in sorted order. */
static tr_status settle_classes(tt_data *d, const tt_config *c, const rows *cr, const char *cr_path) {
    const char *decl = c->classes;
    while (*decl == ' ') decl++;
    if (*decl) {
        char *end;
        errno = 0;
        long long n = strtoll(decl, &end, 10);
        if (end != decl && !*end) {
            if (n < 1 || n > MAX_CLASSES || errno)
                return tr_error_set(TR_ERR_INVALID, "%s: classes: a count from 1 to %d, got '%s'", c->plugin, MAX_CLASSES, decl);
            d->n_classes = n;
            return TR_OK;
        }
        size_t len = strlen(decl);
        if (decl[0] != '[' || decl[len - 1] != ']')
            return tr_error_set(TR_ERR_INVALID, "%s: classes: expected a count or a list of class names [a, b, ...], got '%s'",
                                c->plugin, decl);
        char *copy = strndup(decl + 1, len - 2), **names = calloc(len, sizeof *names);
        tr_status st = copy && names ? TR_OK : tr_error_set(TR_ERR_NOMEM, "out of memory");
        int64_t n_names = 0;
        for (char *p = copy, *comma; st == TR_OK; p = comma + 1) {
            comma = strchr(p, ',');
            if (comma) *comma = '\0';
            char *name = trimmed(p);
            if (!*name) st = tr_error_set(TR_ERR_INVALID, "%s: classes: an empty name in %s", c->plugin, decl);
            for (int64_t k = 0; st == TR_OK && k < n_names; k++)
                if (strcmp(names[k], name) == 0) st = tr_error_set(TR_ERR_INVALID, "%s: classes: '%s' is listed twice in %s", c->plugin, name, decl);
            if (st == TR_OK) names[n_names++] = name;
            if (!comma) break;
        }
        if (st == TR_OK) st = own_names(d, names, n_names);
        free(copy);
        free(names);
        return st;
    }
    int all_int = 1;
    int64_t max = -1, v, at = 0;
    for (int64_t i = 0; i < cr->n && all_int; i++) {
        if (!int_label(cell(cr, i, COL_LABEL), &v)) all_int = 0;
        else if (v > max) max = v, at = i;
    }
    if (all_int && max >= MAX_CLASSES)
        return tr_error_set(TR_ERR_INVALID, "%s:%lld: label %lld would make %lld classes (more than %d): "
                            "give the classes (a count or a list) if that is meant", cr_path,
                            (long long)cr->line[at], (long long)max, (long long)max + 1, MAX_CLASSES);
    if (all_int) {
        d->n_classes = max + 1;
        return TR_OK;
    }
    char **sorted = malloc((size_t)cr->n * sizeof *sorted);
    if (!sorted) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < cr->n; i++) sorted[i] = (char *)cell(cr, i, COL_LABEL);
    qsort(sorted, (size_t)cr->n, sizeof *sorted, cmp_str);
    int64_t k = 0;
    for (int64_t i = 0; i < cr->n; i++)
        if (k == 0 || strcmp(sorted[i], sorted[k - 1]) != 0) sorted[k++] = sorted[i];
    tr_status st = own_names(d, sorted, k);
    free(sorted);
    return st;
}

/* Row i's label: a class id (a name of the list, else an integer id below n_classes) or a
 * finite float target. */
static tr_status label_of(tt_data *d, const tt_config *c, const char *path, const rows *r, int64_t i, int64_t k) {
    const char *s = cell(r, i, COL_LABEL);
    if (c->regress) {
        char *end;
        double v = strtod(s, &end);
        while (*end == ' ') end++;
        if (end == s || *end || !isfinite(v) || fabs(v) > FLT_MAX)
            return tr_error_set(TR_ERR_PARSE, "%s:%lld: column '%s': '%s' is not a finite number within the float range", path,
                                (long long)r->line[i], c->label_col, s);
        d->yf[k] = (float)v;
        return TR_OK;
    }
    int64_t id = -1, v;
    if (d->class_names) {
        char **hit = NULL;
        if (!c->classes[0]) hit = bsearch(&s, d->class_names, (size_t)d->n_classes, sizeof *d->class_names, cmp_str);
        for (int64_t m = 0; !hit && c->classes[0] && m < d->n_classes; m++)
            if (strcmp(d->class_names[m], s) == 0) hit = &d->class_names[m];
        if (hit) id = hit - d->class_names;
    }
    if (id < 0 && int_label(s, &v) && v < d->n_classes) id = v;
    if (id < 0)
        return tr_error_set(TR_ERR_PARSE, "%s:%lld: column '%s': label '%s' is not one of the %lld classes (%s)", path,
                            (long long)r->line[i], c->label_col, s, (long long)d->n_classes,
                            c->classes[0] ? "data.params classes" : d->class_names ? "the labels of the train split's file"
                                                                                    : "integer ids 0.. the train file's largest");
    d->yi[k] = (int32_t)id;
    return TR_OK;
}

/* ---- encoding ---- */

typedef struct job {
    const tr_tokenizer *tok;
    const tt_config *c;
    const char *path;
    const rows *r;
    int64_t lo, hi;          /* rows of this job */
    int seqs;
    int64_t max_length;
    int truncate;
    /* out */
    int32_t *ids;
    size_t n_ids, cap;
    int64_t *lens;           /* ((hi - lo) * seqs) */
    tr_status st;
    char msg[1024];
} job;

static int job_push(job *j, const int32_t *ids, size_t n) {
    if (j->n_ids + n > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (j->n_ids + n > cap) cap *= 2;
        int32_t *g = realloc(j->ids, cap * sizeof *g);
        if (!g) return -1;
        j->ids = g;
        j->cap = cap;
    }
    if (n) memcpy(j->ids + j->n_ids, ids, n * sizeof *ids);
    j->n_ids += n;
    return 0;
}

static void job_fail(job *j, tr_status st, int64_t row, int col) {
    const char *names[N_COLS] = {j->c->text_col, j->c->pair_col, j->c->label_col};
    j->st = st;
    if (row >= 0)
        snprintf(j->msg, sizeof j->msg, "%s:%lld: column '%s': %s", j->path, (long long)j->r->line[row], names[col], tr_error_msg());
    else
        snprintf(j->msg, sizeof j->msg, "%s", tr_error_msg());
}

/* Encodes rows [lo, hi) of column(s): with two_texts each text alone, else text (and pair). */
static void *job_run(void *arg) {
    job *j = arg;
    const rows *r = j->r;
    int pair = j->c->pair_col && j->c->pair_col[0];
    const char *texts[CHUNK], *pairs[CHUNK];
    size_t tl[CHUNK], pl[CHUNK];
    tr_encoding enc[2][CHUNK];
    for (int64_t a = j->lo; a < j->hi && j->st == TR_OK; a += CHUNK) {
        int64_t n = j->hi - a < CHUNK ? j->hi - a : CHUNK;
        int done = 0; /* sequences encoded */
        for (int s = 0; s < j->seqs && j->st == TR_OK; s++) {
            int col = s == 0 ? COL_TEXT : COL_PAIR;
            for (int64_t i = 0; i < n; i++) {
                texts[i] = cell(r, a + i, col);
                tl[i] = r->len[a + i][col];
                pairs[i] = pair && j->seqs == 1 ? cell(r, a + i, COL_PAIR) : NULL;
                pl[i] = pair && j->seqs == 1 ? r->len[a + i][COL_PAIR] : 0;
            }
            tr_status st = tr_tokenizer_encode_batch(j->tok, (size_t)n, texts, tl, pair && j->seqs == 1 ? pairs : NULL, pl, 1, enc[s]);
            if (st != TR_OK) { /* find the row, for its line */
                tr_status batch_st = st;
                char batch_msg[512];
                snprintf(batch_msg, sizeof batch_msg, "%s", tr_error_msg());
                for (int64_t i = 0; i < n; i++) {
                    tr_encoding e;
                    st = tr_tokenizer_encode(j->tok, texts[i], tl[i], pairs[i], pl[i], 1, &e);
                    if (st != TR_OK) {
                        job_fail(j, st, a + i, col);
                        break;
                    }
                    tr_encoding_free(&e);
                }
                if (j->st == TR_OK) { /* no row alone fails: the batch's error */
                    j->st = batch_st;
                    snprintf(j->msg, sizeof j->msg, "%s: %s", j->path, batch_msg);
                }
                break;
            }
            done++;
        }
        /* a sample's sequences one after another */
        for (int64_t i = 0; i < n; i++) {
            int64_t row = a + i;
            for (int s = 0; s < done; s++) {
                size_t len = enc[s][i].length;
                const char *col = s ? j->c->pair_col : j->c->text_col;
                if (j->st == TR_OK && len > (size_t)j->max_length)
                    j->st = TR_ERR_PARSE,
                    snprintf(j->msg, sizeof j->msg, "%s:%lld: column '%s': %zu tokens, longer than max_length %lld (truncation is "
                             "false: set truncation: true to cut such texts, or raise max_length)", j->path,
                             (long long)r->line[row], col, len, (long long)j->max_length);
                if (j->st == TR_OK && len == 0)
                    j->st = TR_ERR_PARSE,
                    snprintf(j->msg, sizeof j->msg, "%s:%lld: column '%s': the text gives no tokens (an empty text, and a tokenizer "
                             "that adds no special tokens)", j->path, (long long)r->line[row], col);
                if (j->st == TR_OK && job_push(j, enc[s][i].ids, len))
                    j->st = TR_ERR_NOMEM, snprintf(j->msg, sizeof j->msg, "%s: out of memory for the token ids", j->path);
                j->lens[(row - j->lo) * j->seqs + s] = (int64_t)len;
                tr_encoding_free(&enc[s][i]);
            }
        }
    }
    return NULL;
}

static tr_status open_tokenizer(tr_tokenizer **tok, const tt_config *c, int64_t *max_length, int *truncate) {
    tr_status st = tr_tokenizer_load(tok, c->tokenizer);
    if (st != TR_OK) {
        tr_error_prefix("%s: tokenizer '%s' (data.params.tokenizer): ", c->plugin, c->tokenizer_given);
        return st;
    }
    tr_truncation t;
    tr_tokenizer_truncation(*tok, &t);
    if (!c->max_length && t.enabled && t.max_length > MAX_LENGTH) {
        tr_tokenizer_free(*tok);
        *tok = NULL;
        return tr_error_set(TR_ERR_INVALID, "%s: tokenizer '%s' truncates to %zu tokens, more than the %d a sample may hold: "
                            "set data.params.max_length", c->plugin, c->tokenizer_given, t.max_length, MAX_LENGTH);
    }
    int64_t L = c->max_length ? c->max_length : t.enabled && t.max_length ? (int64_t)t.max_length : DEFAULT_MAX_LENGTH;
    *max_length = L;
    *truncate = strcmp(c->truncation, "false") != 0;
    int64_t specials = (int64_t)tr_tokenizer_num_special(*tok, c->pair_col && c->pair_col[0] && !c->two_texts);
    if (L <= specials) {
        st = tr_error_set(TR_ERR_INVALID, "%s: max_length %lld leaves no room for a token beside the %lld special tokens the tokenizer adds",
                          c->plugin, (long long)L, (long long)specials);
    } else if (*truncate) {
        tr_truncation nt = {.enabled = 1, .max_length = (size_t)L, .stride = 0,
                            .strategy = t.enabled ? t.strategy : TR_TRUNCATE_LONGEST_FIRST, .direction = t.enabled ? t.direction : TR_SIDE_RIGHT};
        if (strcmp(c->truncation, "longest_first") == 0) nt.strategy = TR_TRUNCATE_LONGEST_FIRST;
        if (strcmp(c->truncation, "only_first") == 0) nt.strategy = TR_TRUNCATE_ONLY_FIRST;
        if (strcmp(c->truncation, "only_second") == 0) nt.strategy = TR_TRUNCATE_ONLY_SECOND;
        st = tr_tokenizer_set_truncation(*tok, &nt);
    } else {
        st = tr_tokenizer_set_truncation(*tok, NULL);
    }
    if (st == TR_OK) st = tr_tokenizer_set_padding(*tok, NULL); /* padding is written per sample (tt_sample) */
    if (st != TR_OK) {
        tr_tokenizer_free(*tok);
        *tok = NULL;
    }
    return st;
}

static tr_status encode(tt_data *d, const tt_config *c, const char *path, const rows *r, int64_t lo, int64_t hi) {
    tr_tokenizer *tok = NULL;
    int truncate = 1;
    TR_CHECK(open_tokenizer(&tok, c, &d->max_length, &truncate));
    d->vocab = (int64_t)tr_tokenizer_id_bound(tok); /* sparse added or special ids included */
    int64_t n = hi - lo;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)((n + 4 * CHUNK - 1) / (4 * CHUNK)); /* a thread for at least 4 chunks */
    if (nt > cores) nt = (int)cores;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt < 1) nt = 1;
    job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    d->off = malloc((size_t)(n * d->seqs + 1) * sizeof *d->off);
    tr_status st = d->off ? TR_OK : tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    for (int t = 0; t < nt; t++) {
        jobs[t] = (job){.tok = tok, .c = c, .path = path, .r = r, .lo = lo + n * t / nt, .hi = lo + n * (t + 1) / nt,
                        .seqs = d->seqs, .max_length = d->max_length, .truncate = truncate};
        jobs[t].lens = malloc((size_t)((jobs[t].hi - jobs[t].lo) * d->seqs + 1) * sizeof *jobs[t].lens);
        if (!jobs[t].lens) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int t = 1; st == TR_OK && t < nt; t++) started[t] = pthread_create(&th[t], NULL, job_run, &jobs[t]) == 0;
    if (st == TR_OK) job_run(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else if (st == TR_OK) job_run(&jobs[t]); /* no thread: here */
    }
    size_t total = 0;
    for (int t = 0; st == TR_OK && t < nt; t++) {
        if (jobs[t].st != TR_OK) st = tr_error_set(jobs[t].st, "%s", jobs[t].msg); /* the first row's error */
        total += jobs[t].n_ids;
    }
    if (st == TR_OK) {
        d->ids = malloc((total ? total : 1) * sizeof *d->ids);
        if (!d->ids) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory for %zu token ids", path, total);
    }
    int64_t k = 0, at = 0;
    for (int t = 0; st == TR_OK && t < nt; t++) {
        if (jobs[t].n_ids) memcpy(d->ids + at, jobs[t].ids, jobs[t].n_ids * sizeof *d->ids);
        for (int64_t i = 0; i < (jobs[t].hi - jobs[t].lo) * d->seqs; i++) {
            d->off[k++] = at;
            at += jobs[t].lens[i];
        }
    }
    if (st == TR_OK) d->off[k] = at;
    for (int t = 0; t < nt; t++) {
        free(jobs[t].ids);
        free(jobs[t].lens);
    }
    tr_tokenizer_free(tok);
    return st;
}

tr_status tt_load(tt_data *d, const tt_config *c, const char *path, const char *class_path, int whole,
                  const tr_dataset_env *env) {
    memset(d, 0, sizeof *d);
    d->seqs = c->two_texts ? 2 : 1;
    d->pad_longest = c->pad_longest;
    if (c->two_texts && !(c->pair_col && c->pair_col[0]))
        return tr_error_set(TR_ERR_INVALID, "%s: text pairs need text_pair_column", c->plugin);
    rows r = {.optional = env->labels_optional && env->split == TR_SPLIT_VAL && whole}, cr = {0};
    tr_status st = read_rows(path, c, &r);
    d->unlabelled = st == TR_OK && r.unlabelled;
    const rows *classes_from = &r;
    const char *classes_path = path;
    if (st == TR_OK && !c->regress && !c->classes[0] && class_path && strcmp(class_path, path) != 0) {
        st = read_rows(class_path, c, &cr);
        classes_from = &cr;
        classes_path = class_path;
    }
    if (st == TR_OK && !c->regress && !c->classes[0] && classes_from == &r && d->unlabelled)
        st = tr_error_set(TR_ERR_INVALID, "%s: no labels to take the classes from (give data.params classes)", path);
    if (st == TR_OK && !c->regress) st = settle_classes(d, c, classes_from, classes_path);
    if (st == TR_OK && !c->regress && d->n_classes < 1)
        st = tr_error_set(TR_ERR_INVALID, "%s: no classes", path);
    int64_t nval = whole ? 0 : (int64_t)floor((double)r.n * env->val_fraction), lo = 0, hi = r.n - nval;
    if (env->split == TR_SPLIT_VAL && !whole) lo = hi, hi = r.n;
    if (st == TR_OK && hi == lo && env->split != TR_SPLIT_VAL)
        st = tr_error_set(TR_ERR_INVALID, "%s: the train split is empty (%lld rows, val_fraction %g)", path, (long long)r.n,
                          env->val_fraction);
    if (st == TR_OK) d->n = hi - lo;
    if (st == TR_OK && !d->unlabelled) {
        if (c->regress) d->yf = malloc((size_t)(d->n ? d->n : 1) * sizeof *d->yf);
        else d->yi = malloc((size_t)(d->n ? d->n : 1) * sizeof *d->yi);
        if (!d->yf && !d->yi) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int64_t i = lo; st == TR_OK && !d->unlabelled && i < hi; i++) st = label_of(d, c, path, &r, i, i - lo);
    if (st == TR_OK) st = encode(d, c, path, &r, lo, hi);
    rows_free(&r);
    rows_free(&cr);
    if (st != TR_OK) tt_free(d);
    return st;
}

void tt_spec(const tt_data *d, int regress, tr_data_spec *out) {
    int64_t L = d->max_length;
    *out = (tr_data_spec){.task = regress ? TR_TASK_REGRESS : TR_TASK_CLASSIFY, .x_dtype = TR_I32,
                          .y_dtype = regress ? TR_F32 : TR_I32, .y_ndim = 0, .y_numel = 1,
                          .n_classes = regress ? 0 : d->n_classes, .vocab = d->vocab, .x_trim_pad = d->pad_longest};
    if (d->seqs == 2) out->x_ndim = 2, out->x_shape[0] = 2, out->x_shape[1] = L, out->x_numel = 2 * L;
    else out->x_ndim = 1, out->x_shape[0] = L, out->x_numel = L;
}

tr_status tt_sample(const tt_data *d, int64_t i, int32_t *x, void *y) {
    for (int s = 0; s < d->seqs; s++) {
        int64_t a = d->off[i * d->seqs + s], n = d->off[i * d->seqs + s + 1] - a;
        int32_t *row = x + s * d->max_length;
        memcpy(row, d->ids + a, (size_t)n * sizeof *row);
        for (int64_t t = n; t < d->max_length; t++) row[t] = -1;
    }
    if (y && d->yf) *(float *)y = d->yf[i];
    else if (y && d->yi) *(int32_t *)y = d->yi[i];
    return TR_OK;
}

const char *tt_class_name(const tt_data *d, int64_t id) {
    return d->class_names && id >= 0 && id < d->n_classes ? d->class_names[id] : NULL;
}

void tt_free(tt_data *d) {
    free(d->ids);
    free(d->off);
    free(d->yi);
    free(d->yf);
    free(d->class_names);
    free(d->class_buf);
    memset(d, 0, sizeof *d);
}
