/* Private: what a resumed run checks, restores and says. */
#ifndef TRAINER_RUN_LOOP_RESUME_H
#define TRAINER_RUN_LOOP_RESUME_H

#include "run/loop.h"

/* Resuming under a config that changes the math would not continue the same run: refused,
 * naming the keys that differ from the run's saved config.yaml. */
tr_status loop_resume_check(job *j, const char *ckpt, const tr_train_state *s, const char *digest);

/* Resuming: a line and metrics.jsonl's {"resumed_from_step": N}: the records of steps after N
 * that the interrupted run wrote are superseded by the ones that follow (docs/config.md,
 * "metrics.jsonl"). found: whether the checkpoint had the loop's figures (loop_totals.h). */
tr_status loop_resume_note(loop *lp, const char *ckpt, int found);

/* The top k and early stopping's count from the checkpoint resumed; notes[i] says when a changed
 * monitor starts one afresh. */
tr_status loop_resume_restore(loop *lp, const char *ckpt, char notes[2][1400]);

#endif
