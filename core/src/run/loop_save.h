/* Private: saving the training loop's checkpoint. */
#ifndef TRAINER_RUN_LOOP_SAVE_H
#define TRAINER_RUN_LOOP_SAVE_H

#include <stdint.h>

#include "run/loop.h"

/* Saves step-<step>, prunes to keep_last. */
tr_status loop_save(loop *lp);

/* Whether checkpoint.every_n_steps calls for a checkpoint at `step`. */
int loop_save_step_due(const loop *lp, int64_t step);

#endif
