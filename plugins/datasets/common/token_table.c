/* Tokenized text tables (token_table.h): the classes, each row's label and the one-time
 * encoding, in chunks of tr_tokenizer_encode_batch on a thread team. Reading the file's
 * layouts is token_rows.c. */
#define _POSIX_C_SOURCE 200809L
#include "token_rows.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/memory.h"
#include "trainer/team.h"

#define CHUNK 256       /* texts per encode_batch call */
#define MAX_THREADS 8
#define DEFAULT_MAX_LENGTH 512
#define MAX_CLASSES (1 << 24) /* the classes option's bound */
#define MAX_LENGTH (1 << 20) /* tokens per sample, as the max_length option's bound */

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
        if (!int_label(tt_cell(cr, i, COL_LABEL), &v)) all_int = 0;
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
    for (int64_t i = 0; i < cr->n; i++) sorted[i] = (char *)tt_cell(cr, i, COL_LABEL);
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
    const char *s = tt_cell(r, i, COL_LABEL);
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
static tr_status job_run(int t, void *user) {
    job *j = (job *)user + t;
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
                texts[i] = tt_cell(r, a + i, col);
                tl[i] = r->len[a + i][col];
                pairs[i] = pair && j->seqs == 1 ? tt_cell(r, a + i, COL_PAIR) : NULL;
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
    return j->st == TR_OK ? TR_OK : tr_error_set(j->st, "%s", j->msg);
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
    tr_team *team = NULL;
    d->off = malloc((size_t)(n * d->seqs + 1) * sizeof *d->off);
    tr_status st = d->off ? TR_OK : tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    for (int t = 0; t < nt; t++) {
        jobs[t] = (job){.tok = tok, .c = c, .path = path, .r = r, .lo = lo + n * t / nt, .hi = lo + n * (t + 1) / nt,
                        .seqs = d->seqs, .max_length = d->max_length, .truncate = truncate};
        jobs[t].lens = malloc((size_t)((jobs[t].hi - jobs[t].lo) * d->seqs + 1) * sizeof *jobs[t].lens);
        if (!jobs[t].lens) st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == TR_OK && nt > 1 && tr_team_create(&team, nt, c->plugin) != TR_OK) { /* no threads: all here */
        TR_WARN("%s: encoding on this thread alone (%s)", path, tr_error_msg());
        team = NULL;
    }
    if (st == TR_OK && team) st = tr_team_run(team, nt, job_run, jobs); /* the first row's error */
    for (int t = 0; st == TR_OK && !team && t < nt; t++) st = job_run(t, jobs);
    tr_team_destroy(team);
    size_t total = 0;
    for (int t = 0; st == TR_OK && t < nt; t++) total += jobs[t].n_ids;
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
    tr_status st = tt_read_rows(path, c, &r);
    d->unlabelled = st == TR_OK && r.unlabelled;
    const rows *classes_from = &r;
    const char *classes_path = path;
    if (st == TR_OK && !c->regress && !c->classes[0] && class_path && strcmp(class_path, path) != 0) {
        st = tt_read_rows(class_path, c, &cr);
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
    tt_rows_free(&r);
    tt_rows_free(&cr);
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
