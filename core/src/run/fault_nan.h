/* Private: TRAINER_FAULT_NAN_AT_STEP and TRAINER_FAULT_NAN_RANK, for the tests. */
#ifndef TRAINER_RUN_FAULT_NAN_H
#define TRAINER_RUN_FAULT_NAN_H

#include <stdint.h>

#include "run/loop.h"

/* Fault injection for the tests: TRAINER_FAULT_NAN_AT_STEP=N makes the first input value of
 * optimizer step N's first micro-batch (1-based, as logged) NaN; with TRAINER_FAULT_NAN_RANK=r
 * on rank r only. Floating-point inputs only. Read once: the step to poison on this rank, or 0. */
int64_t fault_nan_step(const job *j);

void fault_nan_apply(const loop *lp, int64_t step, const tr_micro_batch *mb);

#endif
