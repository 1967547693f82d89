/* Private: the curves of one run's metrics.jsonl, read by its rules (docs/config.md
 * "metrics.jsonl"): every numeric key of the step, validation and epoch records is a series of
 * (step, value) points; after {"resumed_from_step": N} the points of steps after N are
 * superseded (dropped: the resumed run writes them again); a later record of the same step
 * (epoch records: of the same epoch) replaces the earlier; null (a value that was not finite)
 * is a NaN point, a gap in the curve. Skipped-step, early-stop and memory records hold no
 * curve.
 *
 *   plot_data d = {0};
 *   TR_CHECK(plot_data_read(&d, "runs/m/0/metrics.jsonl"));
 *   const plot_series *s = plot_data_find(&d, "val_loss");   // NULL: the run has none
 *   for (size_t i = 0; s && i < s->n; i++) printf("%g %g\n", s->step[i], s->value[i]);
 *   plot_data_free(&d); */
#ifndef TRAINER_RUN_PLOT_METRICS_H
#define TRAINER_RUN_PLOT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"

typedef struct plot_series {
    char *metric;       /* its metrics.jsonl key; owned */
    int sparse;         /* from validation or epoch-end records: drawn with a marker at each point */
    size_t n, cap;
    int64_t *key;       /* (n) the step, or the epoch of an epoch record: ascending */
    double *step;       /* (n) the optimizer step: the x axis */
    double *value;      /* (n) NaN where metrics.jsonl has null */
} plot_series;

typedef struct plot_data {
    plot_series *s;     /* (n) in the order first seen */
    int n, cap;
} plot_data;

/* Reads `path` into *d (zeroed, or freed). A line that is not a JSON object is an error naming
 * path:line, except a last line without its newline (a record cut short by a kill), which is
 * left out with a warning. */
tr_status plot_data_read(plot_data *d, const char *path);
/* The series of `metric`, or NULL. */
const plot_series *plot_data_find(const plot_data *d, const char *metric);
void plot_data_free(plot_data *d);

#endif
