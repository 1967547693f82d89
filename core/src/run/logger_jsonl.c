/* trainer.loggers `jsonl`: metrics.jsonl, one JSON object a line (docs/config.md
 * "metrics.jsonl"): the record's values in order, reals in their formats, null when not
 * finite; a record with a group nests them under it ({"memory": {...}}). */
#include <stdio.h>
#include <stdlib.h>

#include "run/log_file.h"
#include "run/logger.h"

static tr_status jsonl_open(void **ctx, const run_logger_env *env) {
    log_file *lf = calloc(1, sizeof *lf);
    if (!lf) return tr_error_set(TR_ERR_NOMEM, "%s/metrics.jsonl: out of memory", env->run_dir);
    tr_status st = log_file_open(lf, env->run_dir, "metrics.jsonl", env->resuming ? "a" : "w");
    if (st != TR_OK) {
        free(lf);
        return st;
    }
    *ctx = lf;
    return TR_OK;
}

static tr_status jsonl_record(void *ctx, const run_record *r) {
    log_file *lf = ctx;
    char line[2048], num[48];
    size_t k = 0;
    k += (size_t)snprintf(line, sizeof line, "{");
    if (r->group) k += (size_t)snprintf(line + k, sizeof line - k, "\"%s\": {", r->group);
    for (int i = 0; i < r->n && k < sizeof line; i++)
        k += (size_t)snprintf(line + k, sizeof line - k, "%s\"%s\": %s", i ? ", " : "", r->v[i].key,
                              run_value_text(num, &r->v[i], 1));
    if (k < sizeof line) k += (size_t)snprintf(line + k, sizeof line - k, "%s}\n", r->group ? "}" : "");
    if (k >= sizeof line) return tr_error_set(TR_ERR_INTERNAL, "%s: a record longer than %zu bytes", lf->path, sizeof line);
    return log_file_put(lf, line, k);
}

static tr_status jsonl_close(void *ctx) {
    tr_status st = log_file_close(ctx);
    free(ctx);
    return st;
}

const run_logger_ops run_logger_jsonl = {.name = "jsonl", .open = jsonl_open, .record = jsonl_record, .close = jsonl_close};
