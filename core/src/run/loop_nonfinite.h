/* Private: trainer.on_nan at a non-finite step. */
#ifndef TRAINER_RUN_LOOP_NONFINITE_H
#define TRAINER_RUN_LOOP_NONFINITE_H

#include <stdint.h>

#include "run/loop.h"
#include "run/nonfinite.h"

/* A step whose loss or gradient norm was not finite (optim_step applied no non-finite
 * gradient): stop with the description, or with on_nan skip log it and go on, unless the
 * parameters or buffers themselves are no longer finite. */
tr_status loop_nonfinite_step(loop *lp, const nonfinite_seen *seen, int64_t step, double loss, double gnorm,
                              int gnorm_bad);

#endif
