/* Private: the state of one training run's loop (train.c), which the loop_*.c files that
 * do its parts (validation, saving, profiling, ...) share. */
#ifndef TRAINER_RUN_LOOP_H
#define TRAINER_RUN_LOOP_H

#include <stdint.h>

#include "base/fault.h"
#include "run/ckpt_select.h"
#include "run/early_stop.h"
#include "run/job.h"
#include "run/loop_totals.h"
#include "run/run_limits.h"
#include "trainer/checkpoint.h"
#include "trainer/optim.h"
#include "trainer/profile.h"

typedef struct loop {
    job *j;
    char ck_dir[1200];
    tr_train_state state;
    int64_t per_epoch, n_batches, total, last_saved; /* n_batches: the epoch's, after limit_train_batches */
    limit_counts lim;  /* trainer.limit_*_batches, val_check_interval (run_limits.h) */
    loop_totals tot;   /* the epoch's and the log window's loss sums, skipped steps: checkpointed */
    int64_t nan_at;    /* fault injection: the step whose batch gets a NaN (0: none) */
    double per_sample_tokens;
    tr_fault_point fault;    /* TRAINER_FAULT_KILL_* for this rank (base/fault.h) */
    int64_t fault_step;
    tr_profile *prof;        /* trainer.profile: attached to this thread from the end of the
                              * first step to the end of the last (neither the warm-up nor the
                              * run's final validation and checkpoint count) */
    int64_t prof_from;       /* the step it was attached after (0: not yet) */
    ckpt_select sel;         /* checkpoint.monitor's top k, best and last: checkpointed */
    early_stop es;           /* trainer.early_stopping: checkpointed */
    int want_save;           /* this step entered the top k: save it */
    int early_stopped;       /* early stopping ended the run at this step */
} loop;

/* The schedule over a run of `total` optimizer steps (cosine decays over what follows the
 * warm-up). */
tr_sched_config loop_sched(const job *j, int64_t total);

#endif
