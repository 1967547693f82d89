/* Private: the training loop's record of a step (log.txt, the progress bar, metrics.jsonl). */
#ifndef TRAINER_RUN_LOOP_LOG_H
#define TRAINER_RUN_LOOP_LOG_H

#include <stdint.h>

#include "run/loop.h"

/* The steps since the last step record: when they began (validation and saving left out)
 * and the global samples they trained. */
typedef struct log_window {
    double t, samples;
} log_window;

/* After optimizer step `step` (1-based) of epoch ep (from 0): the progress bar, and every
 * trainer.log_every steps and at the run's last a line and a metrics record (the window's
 * mean loss, lr, gradient norm, throughput), after which the window restarts. */
tr_status loop_log_step(loop *lp, int64_t ep, int64_t step, double lr, double gnorm, log_window *w);

#endif
