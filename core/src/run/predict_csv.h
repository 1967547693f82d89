/* Private: `trainer predict`'s CSV (docs/config.md, "eval and predict"): a header for the
 * data's task, then a row per sample as the evaluation pass hands out the outputs.
 *
 *   predict_csv p = {.path = out, .spec = &j->spec, .classes = &j->classes, .unlabelled = u};
 *   TR_CHECK(predict_csv_open(&p));
 *   eval_pass how = {.fn = predict_csv_rows, .user = &p};   // job_evaluate
 *   st = predict_csv_close(&p, st);
 *
 * Rows: classification index,label,prediction,confidence,prob_<class>... (names when the
 * classes have them); LMs index,loss,accuracy,next_token; regression
 * index,label_<k>...,prediction_<k>...; scored text pairs index,score,similarity. A split
 * without labels (unlabelled) has no label or score columns (LMs: no loss or accuracy). */
#ifndef TRAINER_RUN_PREDICT_CSV_H
#define TRAINER_RUN_PREDICT_CSV_H

#include <stdio.h>

#include "classes.h"
#include "trainer/data.h"
#include "trainer/model.h"

typedef struct predict_csv {
    const char *path;             /* borrowed */
    const tr_data_spec *spec;     /* borrowed */
    const run_classes *classes;   /* borrowed: named classes are written by name */
    int unlabelled;               /* the split has no labels */
    FILE *f;
} predict_csv;

/* Makes the file's folder, opens it and writes the header. */
tr_status predict_csv_open(predict_csv *p);
/* The rows of a batch (an eval_batch_fn: user is the predict_csv). */
tr_status predict_csv_rows(void *user, const tr_host_batch *hb, const tr_model_out *mo);
/* Closes the file (nothing when not open); returns st, or the close's failure after TR_OK. */
tr_status predict_csv_close(predict_csv *p, tr_status st);

#endif
