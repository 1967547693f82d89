/* Private: what `trainer eval` reports of its pass (docs/config.md, "eval and predict"): the
 * scores as a table on stdout (eval_print.c) and as one record appended to the metrics.jsonl
 * of the run the checkpoint belongs to (eval_record.c).
 *
 *   eval_report r = {.checkpoint = ck, .step = 40, .split = "val", .spec = &j->spec, ...};
 *   eval_report_print(j, &r);
 *   if (eval_report_record_path(ck, path, sizeof path)) TR_CHECK(eval_report_append(path, &r));
 */
#ifndef TRAINER_RUN_EVAL_REPORT_H
#define TRAINER_RUN_EVAL_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* Classes up to which the table has a row per class and the confusion matrix is printed. */
#define EVAL_PRINT_MAX 20

typedef struct eval_report {
    const char *checkpoint;         /* the checkpoint folder or weights file scored */
    int64_t step;                   /* its step; -1: a weights file (no train state) */
    const char *split;              /* "val" or "train": the records' key prefix */
    const char *const *overrides;   /* the command line's key=value (n_overrides), borrowed */
    int n_overrides;
    const tr_data_spec *spec;
    const run_classes *classes;     /* classification: their names, when they have some */
    int64_t samples;
    double loss, accuracy, perplexity;  /* NAN where the task has none */
    const class_scores *cls;        /* classification; NULL otherwise */
    const class_counts *counts;     /* classification: the counts (matrix when kept) */
    const regress_scores *reg;      /* regression; NULL otherwise */
    const char *record;             /* the metrics.jsonl the record goes to; NULL: none */
} eval_report;

/* Classification: precision, recall, F1 and support per class (up to EVAL_PRINT_MAX classes),
 * macro and weighted, then the confusion matrix (up to EVAL_PRINT_MAX classes); lines through
 * job_say. Nothing for other tasks (their figures fit the summary line). */
void eval_report_print(job *j, const eval_report *r);
/* RUN/metrics.jsonl into out when the checkpoint lies in RUN/checkpoints/ and RUN holds the
 * run's config.yaml: 1; else 0 (a weights file elsewhere: no run to record in). */
int eval_report_record_path(const char *checkpoint, char *out, size_t size);
/* Appends {"eval": {...}} to the file at path (made when absent) with one write, so that it
 * never interleaves with a training run's records. A failure names the file. */
tr_status eval_report_append(const char *path, const eval_report *r);

#endif
