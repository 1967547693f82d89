/* Private: the training loop's running figures that a checkpoint carries beside the train
 * state (state.json's "loop" object): the sums behind the epoch's train loss and the log
 * window's loss, the steps on_nan skip left out, and the schedule's horizon. With them a
 * resumed run writes the same epoch and step records as an uninterrupted one. They live in
 * their own object because tr_train_state is a struct callers allocate (docs/abi.md). */
#ifndef TRAINER_RUN_LOOP_TOTALS_H
#define TRAINER_RUN_LOOP_TOTALS_H

#include <stdint.h>

#include <jansson.h>

#include "trainer/status.h"

typedef struct loop_totals {
    int64_t total_steps;      /* the run's horizon (max_steps or epochs x steps) when saved; 0: unknown */
    double epoch_loss_sum;    /* the finite step losses of the epoch in progress */
    int64_t epoch_steps;      /* how many */
    double window_loss_sum;   /* the same since the last log record */
    int64_t window_steps;
    int64_t skipped;          /* steps left out for non-finite values (on_nan skip), in the run */
    int64_t skipped_in_a_row;
} loop_totals;

/* A new JSON object holding t (NULL when out of memory). */
json_t *loop_totals_json(const loop_totals *t);
/* t from the checkpoint at path; *found 0 (and t zeroed) when the checkpoint has none, as an
 * older trainer's. A malformed object is refused, naming the file and key. */
tr_status loop_totals_read(const char *path, loop_totals *t, int *found);

#endif
