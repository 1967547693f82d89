/* The set of a run's loggers (logger.h): opens those trainer.loggers names, hands each record
 * and text to all of them, closes them; and the value helpers the loggers share. */
#include "run/logger.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* In RUN_LOGGER_NAMES' order: bit i is all[i]. */
static const run_logger_ops *const all[] = {&run_logger_jsonl, &run_logger_tensorboard, &run_logger_csv};

int run_record_int(const run_record *r, const char *key, int64_t *out) {
    for (int i = 0; i < r->n; i++)
        if (r->v[i].kind == RUN_VALUE_INT && strcmp(r->v[i].key, key) == 0) {
            *out = r->v[i].integer;
            return 1;
        }
    return 0;
}

const char *run_value_text(char buf[48], const run_value *v, int json) {
    if (v->kind == RUN_VALUE_BOOL) return v->integer ? "true" : "false";
    if (v->kind == RUN_VALUE_INT) {
        snprintf(buf, 48, "%lld", v->integer);
    } else if (isfinite(v->real)) {
        snprintf(buf, 48, v->fmt, v->real);
    } else { /* JSON has no NaN or infinity */
        snprintf(buf, 48, "%s", json ? "null" : isnan(v->real) ? "nan" : v->real > 0 ? "inf" : "-inf");
    }
    return buf;
}

tr_status run_loggers_open(run_loggers *ls, unsigned which, const run_logger_env *env) {
    memset(ls, 0, sizeof *ls);
    for (int i = 0; i < (int)(sizeof all / sizeof all[0]); i++) {
        if (!(which & (1u << i))) continue;
        tr_status st = all[i]->open(&ls->ctx[ls->n], env);
        if (st != TR_OK) {
            run_loggers_close(ls);
            return st;
        }
        ls->ops[ls->n++] = all[i];
    }
    return TR_OK;
}

/* The first failure of several calls, kept while the others still run. */
typedef struct first_error {
    tr_status st;
    char msg[1024];
} first_error;

static void keep(first_error *e, tr_status st) {
    if (st == TR_OK || e->st != TR_OK) return;
    e->st = st;
    snprintf(e->msg, sizeof e->msg, "%s", tr_error_msg());
}

static tr_status first_of(const first_error *e) { return e->st == TR_OK ? TR_OK : tr_error_set(e->st, "%s", e->msg); }

tr_status run_loggers_record(run_loggers *ls, const run_record *r) {
    first_error e = {0};
    for (int i = 0; i < ls->n; i++) keep(&e, ls->ops[i]->record(ls->ctx[i], r));
    return first_of(&e);
}

tr_status run_loggers_text(run_loggers *ls, const char *tag, const char *text, int64_t step) {
    first_error e = {0};
    for (int i = 0; i < ls->n; i++)
        if (ls->ops[i]->text) keep(&e, ls->ops[i]->text(ls->ctx[i], tag, text, step));
    return first_of(&e);
}

tr_status run_loggers_close(run_loggers *ls) {
    first_error e = {0};
    for (int i = 0; i < ls->n; i++) keep(&e, ls->ops[i]->close(ls->ctx[i]));
    ls->n = 0;
    return first_of(&e);
}
