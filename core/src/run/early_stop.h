/* Private: early stopping, as Lightning's EarlyStopping (trainer.early_stopping: monitor, mode,
 * patience, min_delta): after each validation the monitored value either improves on the best
 * by more than min_delta, or counts one more validation without improvement; at `patience` of
 * them the run stops. Every rank feeds it the same value (rank 0's), so all stop at the same
 * step. The state travels in state.json (loop.early_stopping), so a resumed run goes on
 * counting, and a checkpoint there says whether the run ended by it. */
#ifndef TRAINER_RUN_EARLY_STOP_H
#define TRAINER_RUN_EARLY_STOP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "run/monitor.h"

typedef struct early_stop {
    monitor m;            /* metric MONITOR_OFF: off */
    int64_t patience;
    double min_delta;
    double best;          /* NAN: no validation yet */
    int64_t best_step;
    int64_t wait;         /* validations since the best */
    int64_t last_step;    /* the step of the last validation counted (-1: none) */
    int stopped;
} early_stop;

void early_stop_init(early_stop *e, const monitor *m, int64_t patience, double min_delta);
/* A validation's value at step; 1 when the run stops here. A second validation at the same
 * step (an epoch's end and every n steps) is not counted again. */
int early_stop_update(early_stop *e, int64_t step, double value);
/* Adds "early_stopping" to the loop object of a checkpoint's state.json (nothing when off);
 * 0 on success. */
int early_stop_put(const early_stop *e, json_t *loop);
/* The state from a checkpoint's loop object (loop, or its "early_stopping", may be NULL:
 * none). Another monitor or mode than the config's starts afresh, and *note (cap bytes, ""
 * otherwise) says so; a malformed object is refused naming the file. */
tr_status early_stop_restore(early_stop *e, json_t *loop, const char *path, char *note, size_t cap);
/* Whether the checkpoint at path was written by a run that early stopping ended. */
int early_stop_ended(const char *ckpt);

#endif
