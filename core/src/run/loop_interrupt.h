/* Private: the training loop's stop on a signal. */
#ifndef TRAINER_RUN_LOOP_INTERRUPT_H
#define TRAINER_RUN_LOOP_INTERRUPT_H

#include <stdint.h>

#include "run/loop.h"

/* Ctrl-C or SIGTERM (tr_run_interrupt) on some rank, agreed by all at this step: saved here
 * (mid-epoch, resumed exactly as checkpoint.every_n_steps is) so that nothing is lost. */
tr_status loop_interrupt_stop(loop *lp, int64_t ep, const tr_host_batch *hb, int signo);

#endif
