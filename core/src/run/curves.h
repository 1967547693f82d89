/* Private: curves.svg, the run folder's picture of its loss curves (docs/plot.md), drawn
 * from its metrics.jsonl at the end of `trainer run`. */
#ifndef TRAINER_RUN_CURVES_H
#define TRAINER_RUN_CURVES_H

#include "run/job.h"

/* Rank 0, when the run folder is open and trainer.loggers writes metrics.jsonl: writes
 * <run folder>/curves.svg (trainer plot's default picture of the run). Whatever the run's
 * outcome: nothing to draw yet (no record with loss or val_loss) writes none, a failure is a
 * warning line, and this thread's error message is kept as it was. */
void job_curves(job *j);

#endif
