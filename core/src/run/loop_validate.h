/* Private: validation within the training loop. */
#ifndef TRAINER_RUN_LOOP_VALIDATE_H
#define TRAINER_RUN_LOOP_VALIDATE_H

#include <stdint.h>

#include "run/loop.h"

/* Validation: a line, a metrics record; returns loss and accuracy. epoch counts from 0, as the
 * loop's and the checkpoint's; the records, as the log, count from 1. */
tr_status loop_validate(loop *lp, int64_t epoch, const char *when, double *vloss, double *vacc);

#endif
