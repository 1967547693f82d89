/* A run's curves from its metrics.jsonl, by the file's rules of superseded records
 * (plot_metrics.h). Records are read with jansson, a line at a time. */
#include "run/plot_metrics.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/io_error.h"
#include "trainer/log.h"

const plot_series *plot_data_find(const plot_data *d, const char *metric) {
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->s[i].metric, metric) == 0) return &d->s[i];
    return NULL;
}

static plot_series *series_of(plot_data *d, const char *metric, int sparse) {
    plot_series *s = (plot_series *)plot_data_find(d, metric);
    if (s) return s;
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 8;
        plot_series *p = realloc(d->s, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        d->s = p;
        d->cap = cap;
    }
    s = &d->s[d->n];
    *s = (plot_series){.metric = strdup(metric), .sparse = sparse};
    if (!s->metric) return NULL;
    d->n++;
    return s;
}

/* The point of `key`, replacing one of the same key, in key order. */
static int series_put(plot_series *s, int64_t key, double step, double value) {
    size_t i = s->n;
    while (i > 0 && s->key[i - 1] > key) i--;
    if (i > 0 && s->key[i - 1] == key) {
        s->step[i - 1] = step;
        s->value[i - 1] = value;
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int64_t *k = realloc(s->key, cap * sizeof *k);
        if (k) s->key = k;
        double *x = k ? realloc(s->step, cap * sizeof *x) : NULL;
        if (x) s->step = x;
        double *y = x ? realloc(s->value, cap * sizeof *y) : NULL;
        if (!y) return -1;
        s->value = y;
        s->cap = cap;
    }
    memmove(s->key + i + 1, s->key + i, (s->n - i) * sizeof *s->key);
    memmove(s->step + i + 1, s->step + i, (s->n - i) * sizeof *s->step);
    memmove(s->value + i + 1, s->value + i, (s->n - i) * sizeof *s->value);
    s->key[i] = key;
    s->step[i] = step;
    s->value[i] = value;
    s->n++;
    return 0;
}

/* {"resumed_from_step": N}: the steps after N are run again, their old points superseded. */
static void resume_at(plot_data *d, double step) {
    for (int i = 0; i < d->n; i++) {
        plot_series *s = &d->s[i];
        size_t k = 0;
        for (size_t j = 0; j < s->n; j++) {
            if (s->step[j] > step) continue;
            s->key[k] = s->key[j];
            s->step[k] = s->step[j];
            s->value[k++] = s->value[j];
        }
        s->n = k;
    }
}

static tr_status record(plot_data *d, json_t *o, const char *path, long line) {
    json_t *v = json_object_get(o, "resumed_from_step");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tr_error_set(TR_ERR_PARSE, "%s:%ld: 'resumed_from_step' must be a non-negative integer", path, line);
        resume_at(d, (double)json_integer_value(v));
        return TR_OK;
    }
    /* Records that hold no curve: a step left out, the early stop (its best_* values are not
     * the metric's curve), the memory report; and any without a step. */
    if (json_object_get(o, "skipped") || json_object_get(o, "early_stopped") || json_object_get(o, "memory"))
        return TR_OK;
    json_t *step = json_object_get(o, "step");
    if (!step) return TR_OK;
    if (!json_is_integer(step) || json_integer_value(step) < 0)
        return tr_error_set(TR_ERR_PARSE, "%s:%ld: 'step' must be a non-negative integer", path, line);
    int64_t key = json_integer_value(step);
    json_t *epoch = json_object_get(o, "epoch");
    int epoch_end = json_object_get(o, "train_loss") != NULL, sparse = epoch_end;
    if (epoch_end && json_is_integer(epoch)) key = json_integer_value(epoch);
    const char *k;
    json_object_foreach(o, k, v) sparse |= strncmp(k, "val_", 4) == 0;
    json_object_foreach(o, k, v) {
        if (!strcmp(k, "step") || !strcmp(k, "epoch") || !(json_is_number(v) || json_is_null(v))) continue;
        plot_series *s = series_of(d, k, sparse);
        double value = json_is_null(v) ? NAN : json_number_value(v);
        if (!s || series_put(s, key, (double)json_integer_value(step), value) != 0)
            return tr_error_set(TR_ERR_NOMEM, "%s:%ld: out of memory", path, line);
    }
    return TR_OK;
}

tr_status plot_data_read(plot_data *d, const char *path) {
    *d = (plot_data){0};
    char why[256];
    FILE *f = fopen(path, "r");
    if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot open: %s", path, tr_io_reason(errno, why, sizeof why));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    long line = 0;
    tr_status st = TR_OK;
    while (st == TR_OK && (len = getline(&buf, &cap, f)) >= 0) {
        line++;
        int whole = len > 0 && buf[len - 1] == '\n';
        size_t n = (size_t)len;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) n--;
        if (n == 0) continue;
        json_error_t err;
        json_t *o = json_loadb(buf, n, 0, &err);
        if (json_is_object(o)) {
            st = record(d, o, path, line);
        } else if (!whole) {
            TR_WARN("%s:%ld: the last record is cut short (a run killed while writing it?); left out", path, line);
        } else {
            st = tr_error_set(TR_ERR_PARSE, "%s:%ld: not a metrics record (a JSON object a line): %s", path, line,
                              o ? "another JSON value" : err.text);
        }
        json_decref(o);
    }
    if (st == TR_OK && ferror(f))
        st = tr_error_set(TR_ERR_IO, "%s: read failed: %s", path, tr_io_reason(errno, why, sizeof why));
    free(buf);
    fclose(f);
    if (st != TR_OK) plot_data_free(d);
    return st;
}

void plot_data_free(plot_data *d) {
    for (int i = 0; i < d->n; i++) {
        free(d->s[i].metric);
        free(d->s[i].key);
        free(d->s[i].step);
        free(d->s[i].value);
    }
    free(d->s);
    *d = (plot_data){0};
}
