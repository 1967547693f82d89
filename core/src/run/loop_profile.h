/* Private: trainer.profile's records of a run. */
#ifndef TRAINER_RUN_LOOP_PROFILE_H
#define TRAINER_RUN_LOOP_PROFILE_H

#include <stdint.h>

#include "run/loop.h"

/* trainer.profile, at the end of a step: attached after the first (the warm-up: allocations,
 * first touches), detached after the last. */
void loop_profile_step(loop *lp, int64_t step);

/* trainer.profile: the table into the run folder (rank r > 0: profile-rank<r>.*) and a line in
 * the log. The run's results are saved by now: a table that cannot be written is a warning. */
void loop_profile_write(loop *lp);

#endif
