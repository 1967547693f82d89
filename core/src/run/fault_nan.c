/* Fault injection for the tests: a NaN in one step's inputs (TRAINER_FAULT_NAN_*). */
#include "run/fault_nan.h"

#include <math.h>
#include <stdlib.h>

int64_t fault_nan_step(const job *j) {
    const char *at = getenv("TRAINER_FAULT_NAN_AT_STEP"), *rank = getenv("TRAINER_FAULT_NAN_RANK");
    if (!at || (rank && atoi(rank) != j->info.rank) || j->spec.x_dtype != TR_F32) return 0;
    return atoll(at);
}

void fault_nan_apply(const loop *lp, int64_t step, const tr_micro_batch *mb) {
    if (lp->nan_at == step && mb->first && mb->hb->size > 0) ((float *)mb->hb->x)[0] = NAN;
}
