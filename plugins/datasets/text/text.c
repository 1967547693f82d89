/* Dataset plugin `text`: raw bytes of a text file (plain or gzip), read whole in create().
 *
 *   lm:       byte-level language modelling, vocabulary 256. The last val_fraction of the
 *             file's bytes is the validation split, the rest the train split; sample i of a
 *             split is its bytes [i*stride, i*stride + seq_len + 1): x the first seq_len, y the
 *             last seq_len (x shifted by one).
 *   classify: one sample per line "label<TAB>text"; labels are any strings, ids follow the
 *             `classes` list, or else the sorted (strcmp) order of the train file's distinct
 *             labels so every split and file agrees (a label outside them is refused); the
 *             text's bytes are truncated or zero-padded to seq_len. The last val_fraction of
 *             the lines is the validation split. Blank lines are skipped; a line without a TAB
 *             is refused with file:line. A trailing '\r' (CRLF files) is dropped.
 *   pairs:    one sample per line "score<TAB>query<TAB>passage" (query/passage scoring with
 *             an embedding model): x (2, seq_len) the two texts' bytes, truncated or
 *             zero-padded; y the score (TR_F32, e.g. 1 related, 0 not). The last val_fraction
 *             of the lines is the validation split.
 * With `tokenizer` (a Hugging Face tokenizer.json, token_table.h), classify and pairs read
 * texts as that tokenizer's ids instead of bytes: x (max_length) TR_I32 (pairs: (2,
 * max_length), each text encoded alone), -1 for padding at the end ("a token id -1 is
 * padding": models mask it); with padding longest the loader cuts each batch to its longest
 * sample (tr_data_spec.x_trim_pad). The lines above, or JSON Lines (.jsonl/.json) and CSV
 * (.csv, with a header) whose columns text_column, text_pair_column and label_column name.
 * A `path` in data.val_params other than the train split's is a validation file, used whole
 * (no val_fraction); with nothing held out the validation split is empty ("none"). For
 * `trainer predict` (env->labels_optional) such a file may have no labels: classify lines are
 * then texts (the first line has no TAB), pairs lines query<TAB>passage (the first has one).
 * x is TR_I32; y TR_I32 (lm, classify) or TR_F32 (pairs). */
#define _POSIX_C_SOURCE 200809L
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

typedef struct text {
    tr_data_spec spec;
    int classify, pairs;
    int64_t n, stride;
    uint8_t *bytes;     /* lm: the split's bytes; classify: (n, seq_len) padded */
    int64_t len;
    int32_t *labels;    /* classify: (n) */
    char **names;       /* classify: (n_names) class names, ids in this order, into names_buf */
    char *names_buf;
    int64_t n_names;
    float *scores;      /* pairs: (n); bytes is then (n, 2, seq_len) */
    int tokenized;      /* with a tokenizer: the samples are tok's */
    tt_data tok;
    int unlabelled;     /* a validation file without labels, for predict (labels, scores unset) */
} text;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The next non-blank line of the text at *cur, split off in place (a trailing '\r' dropped),
 * counting lines in *lineno; NULL at the end. */
static char *next_line(char **cur, int64_t *lineno) {
    while (*cur && **cur) {
        char *line = *cur, *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        *cur = next;
        ++*lineno;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = '\0';
        if (l) return line;
    }
    return NULL;
}

/* The rows [*a, *b) of n that this split takes: all of them for a validation file (`whole`),
 * else the train split all but the last val_fraction, the validation split that last share
 * (maybe none: an empty split, "no validation split"). */
static void split_range(int64_t n, const tr_dataset_env *env, int whole, int64_t *a, int64_t *b) {
    int64_t nval = whole ? 0 : (int64_t)floor((double)n * env->val_fraction);
    *a = 0;
    *b = n - nval;
    if (env->split == TR_SPLIT_VAL && !whole) *a = *b, *b = n;
}

static tr_status load_lm(text *s, const char *path, char *buf, size_t len, int64_t T,
                         const tr_dataset_env *env, int whole) {
    int64_t a, b;
    split_range((int64_t)len, env, whole, &a, &b);
    s->spec = (tr_data_spec){.task = TR_TASK_LM, .x_dtype = TR_I32, .x_ndim = 1, .x_shape = {T},
                             .x_numel = T, .y_dtype = TR_I32, .y_ndim = 1, .y_shape = {T},
                             .y_numel = T, .n_classes = 256, .vocab = 256};
    if (env->split == TR_SPLIT_VAL && !whole && b - a < T + 1) return TR_OK; /* too little held out: none */
    if (b - a < T + 1)
        return tr_error_set(TR_ERR_INVALID,
                            "%s: the %s split holds %lld bytes (file %zu bytes, val_fraction %g), "
                            "one sample needs seq_len+1 = %lld",
                            path, env->split == TR_SPLIT_VAL ? "validation" : "train", (long long)(b - a), len,
                            whole ? 0.0 : env->val_fraction, (long long)(T + 1));
    s->len = b - a;
    s->bytes = malloc((size_t)s->len);
    if (!s->bytes) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    memcpy(s->bytes, buf + a, (size_t)s->len);
    s->n = (s->len - (T + 1)) / s->stride + 1;
    return TR_OK;
}

/* The "label<TAB>text" lines of buf, split in place: labels, texts and their file lines (*n
 * of each; blank lines are skipped, so a row's line is not its index). With `bare` (a file for
 * predict) a first line without a TAB makes every line a text, TABs and all, and *bare 1 (the
 * labels NULL); else *bare becomes 0. */
static tr_status read_lines(const char *path, char *buf, char ***lab, char ***txt, int64_t **ln, int64_t *n, int *bare) {
    int64_t cap = 1024, lineno = 0;
    int none = 0;
    *n = 0;
    *lab = malloc((size_t)cap * sizeof **lab);
    *txt = malloc((size_t)cap * sizeof **txt);
    *ln = malloc((size_t)cap * sizeof **ln);
    if (!*lab || !*txt || !*ln) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    for (char *cur = buf, *line; (line = next_line(&cur, &lineno));) {
        char *tab = strchr(line, '\t');
        if (*n == 0 && bare && *bare) none = !tab;
        if (!tab && !none)
            return tr_error_set(TR_ERR_PARSE, "%s:%lld: expected 'label<TAB>text', found no TAB",
                                path, (long long)lineno);
        if (!none) *tab = '\0';
        if (*n == cap) {
            cap *= 2;
            char **a = realloc(*lab, (size_t)cap * sizeof *a);
            if (a) *lab = a;
            char **b = realloc(*txt, (size_t)cap * sizeof *b);
            if (b) *txt = b;
            int64_t *c = realloc(*ln, (size_t)cap * sizeof *c);
            if (c) *ln = c;
            if (!a || !b || !c) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
        }
        (*lab)[*n] = none ? NULL : line;
        (*txt)[*n] = none ? line : tab + 1;
        (*ln)[*n] = lineno;
        ++*n;
    }
    if (bare) *bare = none;
    if (*n == 0) return tr_error_set(TR_ERR_PARSE, "%s: no 'label<TAB>text' lines", path);
    return TR_OK;
}

/* The class names: the declared list (`classes`), or the distinct labels of the train split's
 * file in sorted (strcmp) order, so that every split and file agrees on the ids. */
static tr_status class_names(text *s, const char *declared, const char *train_path, char **lab, int64_t n) {
    while (*declared == ' ') declared++;
    if (*declared) {
        size_t len = strlen(declared);
        if (declared[0] != '[' || declared[len - 1] != ']')
            return tr_error_set(TR_ERR_INVALID, "text: classes: expected a list of labels [a, b, ...], got '%s'", declared);
        s->names_buf = strdup(declared + 1);
        s->names = calloc(len, sizeof *s->names);
        if (!s->names_buf || !s->names) return tr_error_set(TR_ERR_NOMEM, "text: out of memory");
        s->names_buf[len - 2] = '\0';
        for (char *p = s->names_buf, *c;; p = c + 1) {
            c = strchr(p, ',');
            if (c) *c = '\0';
            while (*p == ' ') p++;
            size_t l = strlen(p);
            while (l && p[l - 1] == ' ') p[--l] = '\0';
            if (!*p) return tr_error_set(TR_ERR_INVALID, "text: classes: an empty name in %s", declared);
            for (int64_t k = 0; k < s->n_names; k++)
                if (strcmp(s->names[k], p) == 0) return tr_error_set(TR_ERR_INVALID, "text: classes: '%s' is listed twice in %s", p, declared);
            s->names[s->n_names++] = p;
            if (!c) break;
        }
        return TR_OK;
    }
    char *buf = NULL, **tl = NULL, **tt = NULL;
    int64_t *tn = NULL;
    size_t len;
    tr_status st = TR_OK;
    if (train_path) { /* a validation file: the ids are the train file's */
        st = tr_file_read(train_path, &buf, &len);
        if (st == TR_OK) st = read_lines(train_path, buf, &tl, &tt, &tn, &n, NULL);
        lab = tl;
    }
    if (st == TR_OK) {
        s->names = malloc((size_t)n * sizeof *s->names);
        if (!s->names) st = tr_error_set(TR_ERR_NOMEM, "text: out of memory");
    }
    if (st == TR_OK) {
        char **sorted = s->names;
        memcpy(sorted, lab, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++)
            if (k == 0 || strcmp(sorted[i], sorted[k - 1]) != 0) sorted[k++] = sorted[i];
        s->n_names = k;
        /* own the names: they point into a buffer freed below (or the caller's) */
        size_t total = 0;
        for (int64_t i = 0; i < k; i++) total += strlen(sorted[i]) + 1;
        s->names_buf = malloc(total ? total : 1);
        if (!s->names_buf) st = tr_error_set(TR_ERR_NOMEM, "text: out of memory");
        for (int64_t i = 0, at = 0; st == TR_OK && i < k; i++) {
            size_t l = strlen(sorted[i]) + 1;
            memcpy(s->names_buf + at, sorted[i], l);
            sorted[i] = s->names_buf + at;
            at += (int64_t)l;
        }
    }
    free(tl);
    free(tt);
    free(tn);
    tr_free(buf);
    return st;
}

static tr_status load_classify(text *s, const char *path, char *buf, int64_t T, const tr_dataset_env *env, int whole,
                               const char *declared, const char *train_path) {
    char **lab = NULL, **txt = NULL;
    int64_t *ln = NULL, n = 0, a, b;
    int bare = whole && env->split == TR_SPLIT_VAL && env->labels_optional;
    tr_status st = read_lines(path, buf, &lab, &txt, &ln, &n, &bare);
    s->unlabelled = bare; /* a validation file (whole): the classes are the train file's */
    if (st == TR_OK) st = class_names(s, declared, whole ? train_path : NULL, lab, n);
    if (st != TR_OK) goto out;
    split_range(n, env, whole, &a, &b);
    s->n = b - a;
    s->spec = (tr_data_spec){.task = TR_TASK_CLASSIFY, .x_dtype = TR_I32, .x_ndim = 1,
                             .x_shape = {T}, .x_numel = T, .y_dtype = TR_I32, .y_ndim = 0,
                             .y_numel = 1, .n_classes = s->n_names, .vocab = 256};
    if (b == a) {
        if (env->split != TR_SPLIT_VAL)
            st = tr_error_set(TR_ERR_INVALID, "%s: the train split is empty (%lld lines, val_fraction %g)",
                              path, (long long)n, env->val_fraction);
        goto out; /* a validation split of none: empty */
    }
    s->bytes = calloc((size_t)(s->n * T), 1);
    s->labels = malloc((size_t)s->n * sizeof *s->labels);
    if (!s->bytes || !s->labels) {
        st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    /* names found in the file are sorted: a binary search; a declared list is in the user's
     * order: a linear one (declared classes are few) */
    int sorted = !*declared;
    for (int64_t i = a; i < b; i++) {
        size_t l = strlen(txt[i]);
        memcpy(s->bytes + (i - a) * T, txt[i], l < (size_t)T ? l : (size_t)T);
        s->labels[i - a] = -1;
        if (s->unlabelled) continue;
        int64_t id = -1;
        if (sorted) {
            char **hit = bsearch(&lab[i], s->names, (size_t)s->n_names, sizeof *s->names, cmp_str);
            if (hit) id = hit - s->names;
        }
        for (int64_t k = 0; !sorted && k < s->n_names && id < 0; k++)
            if (strcmp(s->names[k], lab[i]) == 0) id = k;
        if (id < 0) {
            st = tr_error_set(TR_ERR_PARSE, "%s:%lld: label '%s' is not one of the %lld classes (%s)", path,
                              (long long)ln[i], lab[i], (long long)s->n_names,
                              *declared ? "data.params classes" : "the labels of the train split's file");
            goto out;
        }
        s->labels[i - a] = (int32_t)id;
    }
out:
    free(lab);
    free(txt);
    free(ln);
    return st;
}

/* pairs: count the lines, then fill the split's rows. A validation file for predict whose
 * first line has one TAB is "query<TAB>passage" lines, without scores. */
static tr_status load_pairs(text *s, const char *path, char *buf, int64_t T, const tr_dataset_env *env, int whole) {
    int64_t n = 0;
    for (const char *c = buf; *c; c++) n += *c == '\n';
    n++;
    s->bytes = calloc((size_t)(n * 2 * T), 1);
    s->scores = malloc((size_t)n * sizeof *s->scores);
    if (!s->bytes || !s->scores) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    int64_t lineno = 0, k = 0;
    int optional = whole && env->split == TR_SPLIT_VAL && env->labels_optional;
    for (char *cur = buf, *line; (line = next_line(&cur, &lineno));) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (k == 0 && optional) s->unlabelled = t1 && !t2;
        const char *q = line, *d;
        double v = NAN;
        if (s->unlabelled) { /* query<TAB>passage: the passage takes the rest */
            if (!t1)
                return tr_error_set(TR_ERR_PARSE, "%s:%lld: expected 'query<TAB>passage' (no score: the file's first line "
                                    "has none), found no TAB", path, (long long)lineno);
            *t1 = '\0';
            d = t1 + 1;
        } else {
            if (!t2)
                return tr_error_set(TR_ERR_PARSE, "%s:%lld: expected 'score<TAB>query<TAB>passage', found %s TAB", path,
                                    (long long)lineno, t1 ? "one" : "no");
            *t1 = *t2 = '\0';
            q = t1 + 1;
            d = t2 + 1;
            char *end;
            v = strtod(line, &end); /* an underflow to 0 or a denormal is fine */
            if (end == line || *end || !isfinite(v) || fabs(v) > FLT_MAX)
                return tr_error_set(TR_ERR_PARSE, "%s:%lld: score '%s' is not a finite number within the float range",
                                    path, (long long)lineno, line);
        }
        size_t lq = strlen(q), ld = strlen(d);
        memcpy(s->bytes + k * 2 * T, q, lq < (size_t)T ? lq : (size_t)T);
        memcpy(s->bytes + k * 2 * T + T, d, ld < (size_t)T ? ld : (size_t)T);
        s->scores[k++] = (float)v;
    }
    if (k == 0) return tr_error_set(TR_ERR_PARSE, "%s: no 'score<TAB>query<TAB>passage' lines", path);
    int64_t a, b;
    split_range(k, env, whole, &a, &b);
    s->spec = (tr_data_spec){.task = TR_TASK_REGRESS, .x_dtype = TR_I32, .x_ndim = 2, .x_shape = {2, T},
                             .x_numel = 2 * T, .y_dtype = TR_F32, .y_ndim = 0, .y_numel = 1, .vocab = 256};
    if (b == a && env->split == TR_SPLIT_VAL) return TR_OK; /* none held out: empty */
    if (b == a)
        return tr_error_set(TR_ERR_INVALID, "%s: the %s split is empty (%lld lines, val_fraction %g)", path,
                            env->split == TR_SPLIT_VAL ? "validation" : "train", (long long)k, env->val_fraction);
    memmove(s->bytes, s->bytes + a * 2 * T, (size_t)((b - a) * 2 * T));
    memmove(s->scores, s->scores + a, (size_t)(b - a) * sizeof *s->scores);
    s->n = b - a;
    return TR_OK;
}

static void destroy(void *ctx) {
    text *s = ctx;
    if (!s) return;
    free(s->bytes);
    free(s->scores);
    free(s->labels);
    free(s->names);
    free(s->names_buf);
    tt_free(&s->tok);
    free(s);
}

/* With a tokenizer (classify or pairs): the split's texts as token ids (token_table.h). */
static tr_status create_tokenized(text *s, const tr_options *o, const tr_options *to, const tr_dataset_env *env,
                                  const char *path, const char *train_path, int whole) {
    if (!s->classify && !s->pairs)
        return tr_error_set(TR_ERR_INVALID, "text: tokenizer: mode lm reads bytes (a language model on a tokenizer's ids "
                                            "is not supported yet); use mode classify or pairs");
    (void)o;
    tt_config c;
    tt_config_read(&c, to, env->base_dir);
    c.plugin = "text";
    c.classes = tr_options_string(to, "classes");
    c.regress = c.two_texts = s->pairs;
    if (s->pairs && !c.pair_col[0]) c.pair_col = "text_pair";
    /* the lines' own layouts, their fields named by the column options */
    const char *names[3] = {c.label_col, c.text_col, c.pair_col};
    c.lines = 1;
    c.names = names;
    c.n_names = s->pairs || c.pair_col[0] ? 3 : 2; /* label<TAB>text[<TAB>pair] */
    s->tokenized = 1;
    TR_CHECK(tt_load(&s->tok, &c, path, train_path, whole, env));
    s->n = s->tok.n;
    tt_spec(&s->tok, s->pairs, &s->spec);
    return TR_OK;
}

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    text *s = calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "text: out of memory");
    /* A path of data.val_params other than the train split's is a validation file, whole. */
    const tr_options *to = env->train_opts ? env->train_opts : o;
    char path[4096], train_path[4096];
    tr_path_resolve(path, sizeof path, env->base_dir, tr_options_string(o, "path"));
    tr_path_resolve(train_path, sizeof train_path, env->base_dir, tr_options_string(to, "path"));
    int whole = env->split == TR_SPLIT_VAL && strcmp(path, train_path) != 0;
    int64_t T = tr_options_int(o, "seq_len");
    s->stride = tr_options_int(o, "stride");
    if (s->stride == 0) s->stride = T;
    s->classify = strcmp(tr_options_string(o, "mode"), "classify") == 0;
    s->pairs = strcmp(tr_options_string(o, "mode"), "pairs") == 0;
    char *buf;
    size_t len;
    tr_status st = TR_OK;
    if (tr_options_string(to, "tokenizer")[0]) {
        st = create_tokenized(s, o, to, env, path, train_path, whole);
        if (st != TR_OK) {
            destroy(s);
            return st;
        }
        *ctx = s;
        return TR_OK;
    }
    st = tr_file_read(path, &buf, &len);
    if (st == TR_OK) {
        if (len == 0)
            st = tr_error_set(TR_ERR_PARSE, "%s: empty file", path);
        else if (s->classify)
            st = load_classify(s, path, buf, T, env, whole, tr_options_string(to, "classes"), train_path);
        else if (s->pairs)
            st = load_pairs(s, path, buf, T, env, whole);
        else
            st = load_lm(s, path, buf, len, T, env, whole);
        if (st == TR_OK && !s->classify && tr_options_string(to, "classes")[0])
            st = tr_error_set(TR_ERR_INVALID, "text: classes: only for mode classify");
        tr_free(buf);
    }
    if (st != TR_OK) {
        destroy(s);
        return st;
    }
    *ctx = s;
    return TR_OK;
}

static void spec(void *ctx, tr_data_spec *out) { *out = ((text *)ctx)->spec; }

static const char *class_name(void *ctx, int64_t id) {
    const text *s = ctx;
    if (s->tokenized) return s->classify ? tt_class_name(&s->tok, id) : NULL;
    return s->classify && id >= 0 && id < s->n_names ? s->names[id] : NULL;
}
static int64_t size(void *ctx) { return ((text *)ctx)->n; }

static int labelled(void *ctx) {
    const text *s = ctx;
    return !(s->tokenized ? s->tok.unlabelled : s->unlabelled);
}

static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    text *s = ctx;
    if (index < 0 || index >= s->n)
        return tr_error_set(TR_ERR_INVALID, "text: sample %lld out of range [0, %lld)",
                            (long long)index, (long long)s->n);
    if (s->tokenized) return tt_sample(&s->tok, index, x, y);
    int64_t T = s->spec.x_numel;
    int32_t *xs = x, *ys = y;
    if (s->pairs) {
        const uint8_t *p = s->bytes + index * T;
        for (int64_t t = 0; t < T; t++) xs[t] = p[t];
        if (y && !s->unlabelled) *(float *)y = s->scores[index];
        return TR_OK;
    }
    if (s->classify) {
        const uint8_t *p = s->bytes + index * T;
        for (int64_t t = 0; t < T; t++) xs[t] = p[t];
        if (ys && !s->unlabelled) *ys = s->labels[index];
        return TR_OK;
    }
    const uint8_t *p = s->bytes + index * s->stride;
    for (int64_t t = 0; t < T; t++) xs[t] = p[t];
    if (ys)
        for (int64_t t = 0; t < T; t++) ys[t] = p[t + 1];
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "path", .type = TR_OPTION_PATH, .default_value = NULL,
     .doc = "text file (plain or .gz), relative to the config"},
    {.key = "mode", .type = TR_OPTION_CHOICE, .default_value = "lm", .choices = "lm|classify|pairs",
     .doc = "lm: byte-level next-byte prediction; classify: lines 'label<TAB>text'; pairs: lines 'score<TAB>query<TAB>passage'"},
    {.key = "seq_len", .type = TR_OPTION_INT, .default_value = "128", .min = 1, .max = 1 << 24,
     .doc = "bytes per sample (classify: truncated or zero-padded; pairs: per text)"},
    {.key = "stride", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = 1 << 24,
     .doc = "lm: bytes between sample starts; 0 = seq_len"},
    {.key = "classes", .type = TR_OPTION_STRING, .default_value = "",
     .doc = "classify: the list of labels [a, b, ...], ids in list order; empty: the distinct labels of the "
            "train file, sorted"},
    TT_OPTION_SPECS,
};
static const tr_dataset_ops ops = {
    .create = create, .destroy = destroy, .spec = spec, .size = size, .get = get,
    .class_name = class_name, .labelled = labelled};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_DATASET, .name = "text", .version = "1.3.0",
    .description = "text files: byte-level LM, label<TAB>text classification or scored text pairs (bytes, or a tokenizer's ids)",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops,
    .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
