/* Private: validation within the training loop. */
#ifndef TRAINER_RUN_LOOP_VALIDATE_H
#define TRAINER_RUN_LOOP_VALIDATE_H

#include <stdint.h>

#include "run/loop.h"

/* Validation: a line, a metrics record; returns loss and accuracy. epoch counts from 0, as the
 * loop's and the checkpoint's; the records, as the log, count from 1. */
tr_status loop_validate(loop *lp, int64_t epoch, const char *when, double *vloss, double *vacc);

/* Whether the end of epoch ep, reached at `step`, validates: by trainer.val_every_n_epochs
 * (and the run's last epoch), or for the run's last step (end_due, limits_val_due at it);
 * not when val_every_n_steps or val_check_interval validated that step already (validated)
 * or early stopping ended the run. */
int loop_validates_at_epoch_end(const loop *lp, int64_t ep, int64_t step, int64_t validated, int end_due);

#endif
