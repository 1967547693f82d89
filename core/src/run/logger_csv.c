/* trainer.loggers `csv`: metrics.csv in the layout of Lightning's CSVLogger: a header of every
 * key logged so far, sorted, and a row per record with empty cells for the keys it lacks. Keys
 * appear as the run goes (the first validation brings val_loss), so a record with a new key
 * rewrites the file under the wider header, as Lightning does: written to metrics.csv.tmp and
 * renamed over it, so a kill never leaves half a file. A resumed run reads the header back
 * and appends. Cells are numbers and true/false, never a comma or a quote, so the file's own
 * rows split on commas. Records with a group (the memory report) stay in metrics.jsonl. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/io_error.h"
#include "run/log_file.h"
#include "run/logger.h"
#include "trainer/io.h"
#include "trainer/memory.h"

enum { CSV_MAX_COLS = 64 };

typedef struct csv_log {
    log_file lf;
    char dir[1100];
    char *cols[CSV_MAX_COLS]; /* the header, sorted; owned */
    int n;
} csv_log;

static int col_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int col_index(char *const *cols, int n, const char *key, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(cols[i]) == len && strncmp(cols[i], key, len) == 0) return i;
    return -1;
}

/* The cells of one line (no newline) into start/len, at most max; their count. */
static int split(const char *line, size_t n, const char **start, size_t *len, int max) {
    int k = 0;
    size_t a = 0;
    for (size_t i = 0; i <= n && k < max; i++) {
        if (i < n && line[i] != ',') continue;
        start[k] = line + a;
        len[k++] = i - a;
        a = i + 1;
    }
    return k;
}

static tr_status add_col(csv_log *c, const char *key, size_t len) {
    if (c->n == CSV_MAX_COLS)
        return tr_error_set(TR_ERR_INVALID, "%s: more than %d columns", c->lf.path, CSV_MAX_COLS);
    char *s = malloc(len + 1);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", c->lf.path);
    memcpy(s, key, len);
    s[len] = '\0';
    c->cols[c->n++] = s;
    return TR_OK;
}

/* One line of cells under `cols`: cell i is what `cell` gives for column i ("" none). */
typedef const char *(*cell_fn)(const void *from, const char *col, char buf[48], size_t *len);

static tr_status put_line(log_file *lf, char *const *cols, int n, cell_fn cell, const void *from) {
    char line[4096], buf[48];
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *s = cell(from, cols[i], buf, &len);
        if (k + len + 2 > sizeof line)
            return tr_error_set(TR_ERR_INTERNAL, "%s: a row longer than %zu bytes", lf->path, sizeof line);
        if (i) line[k++] = ',';
        memcpy(line + k, s, len);
        k += len;
    }
    line[k++] = '\n';
    return log_file_put(lf, line, k);
}

static const char *header_cell(const void *from, const char *col, char buf[48], size_t *len) {
    *len = strlen(col);
    return col;
}

static const char *record_cell(const void *from, const char *col, char buf[48], size_t *len) {
    const run_record *r = from;
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->v[i].key, col) == 0) {
            const char *s = run_value_text(buf, &r->v[i], 0);
            *len = strlen(s);
            return s;
        }
    *len = 0;
    return "";
}

/* A row of the old file laid out under the new header. */
typedef struct old_row {
    char *const *cols; /* the old header */
    int n_cols, n;
    const char *start[CSV_MAX_COLS];
    size_t len[CSV_MAX_COLS];
} old_row;

static const char *old_cell(const void *from, const char *col, char buf[48], size_t *len) {
    const old_row *o = from;
    int i = col_index(o->cols, o->n_cols, col, strlen(col));
    *len = i >= 0 && i < o->n ? o->len[i] : 0;
    return i >= 0 && i < o->n ? o->start[i] : "";
}

/* metrics.csv again under the header cols[0..n) (old_cols: the header it has), through a
 * temporary file renamed over it; then open for appending. */
static tr_status rewrite(csv_log *c, char *const *old_cols, int n_old) {
    TR_CHECK(log_file_close(&c->lf));
    char *text = NULL;
    size_t size = 0;
    struct stat sb;
    if (stat(c->lf.path, &sb) == 0 && sb.st_size > 0) TR_CHECK(tr_file_read(c->lf.path, &text, &size));
    log_file tmp;
    tr_status st = log_file_open(&tmp, c->dir, "metrics.csv.tmp", "w");
    if (st == TR_OK) st = put_line(&tmp, c->cols, c->n, header_cell, NULL);
    const char *p = text ? memchr(text, '\n', size) : NULL; /* the old header goes */
    for (p = p ? p + 1 : NULL; st == TR_OK && p && p < text + size;) {
        const char *end = memchr(p, '\n', (size_t)(text + size - p));
        size_t n = end ? (size_t)(end - p) : (size_t)(text + size - p);
        old_row o = {.cols = old_cols, .n_cols = n_old};
        o.n = split(p, n, o.start, o.len, CSV_MAX_COLS);
        if (n) st = put_line(&tmp, c->cols, c->n, old_cell, &o);
        p += n + 1;
    }
    tr_free(text);
    tr_status cl = log_file_close(&tmp);
    if (st == TR_OK) st = cl;
    if (st == TR_OK && rename(tmp.path, c->lf.path) != 0) {
        char why[256];
        st = tr_error_set(TR_ERR_IO, "%s: cannot replace it with %s: %s", c->lf.path, tmp.path,
                          tr_io_reason(errno, why, sizeof why));
    }
    if (st != TR_OK) {
        remove(tmp.path);
        return st;
    }
    return log_file_open(&c->lf, c->dir, "metrics.csv", "a");
}

static tr_status csv_close(void *ctx) {
    csv_log *c = ctx;
    tr_status st = log_file_close(&c->lf);
    for (int i = 0; i < c->n; i++) free(c->cols[i]);
    free(c);
    return st;
}

/* A resumed run's metrics.csv: its header, then appending. */
static tr_status read_header(csv_log *c) {
    char *text;
    size_t size;
    TR_CHECK(tr_file_read(c->lf.path, &text, &size));
    const char *end = memchr(text, '\n', size);
    size_t n = end ? (size_t)(end - text) : size;
    const char *start[CSV_MAX_COLS];
    size_t len[CSV_MAX_COLS];
    int k = n ? split(text, n, start, len, CSV_MAX_COLS) : 0;
    tr_status st = TR_OK;
    for (int i = 0; i < k && st == TR_OK; i++)
        if (len[i] && col_index(c->cols, c->n, start[i], len[i]) < 0) st = add_col(c, start[i], len[i]);
    tr_free(text);
    return st;
}

static tr_status csv_open(void **ctx, const run_logger_env *env) {
    csv_log *c = calloc(1, sizeof *c);
    if (!c) return tr_error_set(TR_ERR_NOMEM, "%s/metrics.csv: out of memory", env->run_dir);
    snprintf(c->dir, sizeof c->dir, "%s", env->run_dir);
    snprintf(c->lf.path, sizeof c->lf.path, "%s/metrics.csv", env->run_dir);
    struct stat sb;
    int append = env->resuming && stat(c->lf.path, &sb) == 0 && sb.st_size > 0;
    tr_status st = append ? read_header(c) : TR_OK;
    if (st == TR_OK && append && c->n == 0) st = tr_error_set(TR_ERR_PARSE, "%s: no header line to append under", c->lf.path);
    if (st == TR_OK) st = log_file_open(&c->lf, c->dir, "metrics.csv", append ? "a" : "w");
    if (st != TR_OK) {
        csv_close(c);
        return st;
    }
    *ctx = c;
    return TR_OK;
}

static tr_status csv_record(void *ctx, const run_record *r) {
    csv_log *c = ctx;
    if (r->group) return TR_OK;
    char *old[CSV_MAX_COLS];
    int n_old = c->n;
    memcpy(old, c->cols, sizeof old);
    for (int i = 0; i < r->n; i++)
        if (col_index(c->cols, c->n, r->v[i].key, strlen(r->v[i].key)) < 0)
            TR_CHECK(add_col(c, r->v[i].key, strlen(r->v[i].key)));
    if (c->n > n_old) {
        qsort(c->cols, (size_t)c->n, sizeof c->cols[0], col_cmp);
        TR_CHECK(rewrite(c, old, n_old));
    }
    return put_line(&c->lf, c->cols, c->n, record_cell, r);
}

const run_logger_ops run_logger_csv = {.name = "csv", .open = csv_open, .record = csv_record, .close = csv_close};
