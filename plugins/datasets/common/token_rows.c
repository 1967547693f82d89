/* Reading a tokenized text table's file into rows (token_rows.h). The whole file must be
 * UTF-8 (a BOM is skipped); blank lines are skipped. A quote inside an unquoted CSV field is
 * kept as it is, as Python's csv module does. */
#define _POSIX_C_SOURCE 200809L
#include "token_rows.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/io.h"
#include "trainer/memory.h"

void tt_rows_free(rows *r) {
    free(r->at);
    free(r->len);
    free(r->line);
    free(r->str);
    memset(r, 0, sizeof *r);
}

const char *tt_cell(const rows *r, int64_t i, int c) {
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

tr_status tt_read_rows(const char *path, const tt_config *c, rows *out) {
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
    if (st != TR_OK) tt_rows_free(out);
    return st;
}
