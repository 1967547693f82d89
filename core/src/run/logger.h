/* Private: the run's metrics loggers (trainer.loggers, docs/config.md "Loggers"): metrics.jsonl
 * (logger_jsonl.c), TensorBoard event files (logger_tensorboard.c) and metrics.csv
 * (logger_csv.c) behind one interface. The loop builds each record once and hands it to every
 * logger configured (job_record); rank 0 alone opens them. Each logger writes a record through
 * to its file before it returns (a killed run's files are readable up to their last record)
 * and appends when the run resumes.
 *
 *   run_value v[] = {RUN_INT("step", 40), RUN_INT("epoch", 1), RUN_REAL("val_loss", 0.52, "%.9g")};
 *   run_loggers_record(&ls, &(run_record){.kind = RUN_RECORD_VAL, .v = v, .n = 3});
 */
#ifndef TRAINER_RUN_LOGGER_H
#define TRAINER_RUN_LOGGER_H

#include <stdint.h>

#include "trainer/status.h"

typedef enum run_record_kind {
    RUN_RECORD_TRAIN,    /* every trainer.log_every steps: loss, lr, grad_norm, throughput */
    RUN_RECORD_VAL,      /* a validation */
    RUN_RECORD_EPOCH,    /* an epoch's end: its train loss */
    RUN_RECORD_SKIPPED,  /* a step trainer.on_nan skip left out */
    RUN_RECORD_RESUMED,  /* a resume: resumed_from_step N (the steps after N are run again) */
    RUN_RECORD_MEMORY,   /* after training: the strategy's memory by kind, under `group` */
    RUN_RECORD_STOPPED,  /* trainer.early_stopping ended the run: the monitored metric's best */
} run_record_kind;

typedef enum run_value_kind { RUN_VALUE_INT, RUN_VALUE_REAL, RUN_VALUE_BOOL } run_value_kind;

/* One field of a record, under its metrics.jsonl key. */
typedef struct run_value {
    const char *key;
    run_value_kind kind;
    long long integer;   /* RUN_VALUE_INT; RUN_VALUE_BOOL: 0 or 1 */
    double real;         /* RUN_VALUE_REAL */
    const char *fmt;     /* RUN_VALUE_REAL: its printf format in text files ("%.9g") */
} run_value;

#define RUN_INT(k, x) ((run_value){.key = (k), .kind = RUN_VALUE_INT, .integer = (long long)(x)})
#define RUN_REAL(k, x, f) ((run_value){.key = (k), .kind = RUN_VALUE_REAL, .real = (x), .fmt = (f)})
#define RUN_BOOL(k, x) ((run_value){.key = (k), .kind = RUN_VALUE_BOOL, .integer = !!(x)})

typedef struct run_record {
    run_record_kind kind;
    const char *group;   /* NULL, or the one key the values are nested under ({"memory": {...}}) */
    const run_value *v;  /* in metrics.jsonl's order; borrowed */
    int n;
} run_record;

/* The record's integer field `key` into *out; 0 when it has none. */
int run_record_int(const run_record *r, const char *key, int64_t *out);
/* A real's text in the text loggers: its format, or `null` (JSON) or `nan`/`inf`/`-inf`
 * (CSV, as Python's float() reads them) when it is not finite. */
const char *run_value_text(char buf[48], const run_value *v, int json);

/* What a logger's open is told. */
typedef struct run_logger_env {
    const char *run_dir;   /* runs/<name>/<version> */
    int resuming;          /* 1: the run goes on in this folder: append */
} run_logger_env;

/* A logger. Every entry returns TR_OK or an error naming its file and why. */
typedef struct run_logger_ops {
    const char *name;      /* its name in trainer.loggers */
    tr_status (*open)(void **ctx, const run_logger_env *env);
    tr_status (*record)(void *ctx, const run_record *r);
    /* A text (the resolved config) at step `step`; NULL: the logger keeps no texts. */
    tr_status (*text)(void *ctx, const char *tag, const char *text, int64_t step);
    /* Closes its files and frees ctx (also after a failure). */
    tr_status (*close)(void *ctx);
} run_logger_ops;

extern const run_logger_ops run_logger_jsonl, run_logger_tensorboard, run_logger_csv;

enum { RUN_LOGGER_JSONL = 1, RUN_LOGGER_TENSORBOARD = 2, RUN_LOGGER_CSV = 4 };
#define RUN_LOGGER_NAMES "jsonl|tensorboard|csv" /* bit i of a set is name i */

/* The loggers of a run (loggers.c): a set of RUN_LOGGER_* bits, opened in that order. */
typedef struct run_loggers {
    int n;
    const run_logger_ops *ops[3];
    void *ctx[3];
} run_loggers;

/* Opens the loggers of `which` (on a failure, those opened are closed again). */
tr_status run_loggers_open(run_loggers *ls, unsigned which, const run_logger_env *env);
/* The record to every logger (each one even when one fails); the first failure. */
tr_status run_loggers_record(run_loggers *ls, const run_record *r);
tr_status run_loggers_text(run_loggers *ls, const char *tag, const char *text, int64_t step);
/* Closes them all; the first failure. Safe on a zeroed or closed set. */
tr_status run_loggers_close(run_loggers *ls);

#endif
