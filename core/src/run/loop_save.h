/* Private: saving the training loop's checkpoint. */
#ifndef TRAINER_RUN_LOOP_SAVE_H
#define TRAINER_RUN_LOOP_SAVE_H

#include "run/loop.h"

/* Saves step-<step>, prunes to keep_last. */
tr_status loop_save(loop *lp);

#endif
