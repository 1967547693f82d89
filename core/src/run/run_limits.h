/* Private: Lightning's limits (docs/config.md, "Limits and fast_dev_run"):
 * trainer.limit_train_batches, limit_val_batches, val_check_interval and fast_dev_run. Read and
 * checked with the rest of the config; resolved against the data's batch counts when the run
 * starts. Batches are global batches (every rank takes a share of each), so every rank resolves
 * the same counts and the collectives of a step or a validation always pair up. */
#ifndef TRAINER_RUN_RUN_LIMITS_H
#define TRAINER_RUN_RUN_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"

struct job;

/* A count of batches (an integer in the config) or a fraction of an epoch's (a real in [0, 1]):
 * Lightning's int-or-float. */
typedef struct batch_limit {
    int is_count;
    int64_t count;
    double fraction;
} batch_limit;

typedef struct run_limits {
    batch_limit train, val;   /* limit_train_batches, limit_val_batches */
    batch_limit val_check;    /* val_check_interval */
    int val_check_set;        /* val_check_interval is other than 1.0 (the epoch's end) */
    int64_t fast_dev_run;     /* batches of train and validation (0: off) */
} run_limits;

/* The counts of one run, the same on every rank. */
typedef struct limit_counts {
    int64_t train_all;   /* the epoch's batches before the limit */
    int64_t train;       /* the epoch's batches trained */
    int64_t val_all;     /* the validation split's batches (0: none) */
    int64_t val;         /* batches each validation goes over (0: validation off) */
    int64_t val_check;   /* validate after every val_check training batches of an epoch (0: at its end) */
} limit_counts;

/* The four keys into j->s.lim, their defaults written into the config; bad values and
 * conflicting cadences refused naming the key and where it was set. fast_dev_run then sets the
 * run's length and validation cadence as Lightning does. Before the monitors are read. */
tr_status limits_read(struct job *j);
/* After the monitors and loggers are read: fast_dev_run turns off the loggers, checkpoint
 * selection and early stopping; limit_val_batches 0 (validation off) with a monitor is refused. */
tr_status limits_finish(struct job *j);
/* The counts for a split of train_all batches an epoch and val_all validation batches; a
 * fraction that leaves no batch, or a val_check_interval longer than the epoch, is refused. */
tr_status limits_resolve(const struct job *j, int64_t train_all, int64_t val_all, limit_counts *out);
/* Whether the optimizer step `step` of epoch ep (from 0), which took the epoch's batches from
 * `before` to `after`, calls for a validation (val_every_n_steps or val_check_interval). */
int limits_val_due(const struct job *j, const limit_counts *c, int64_t ep, int64_t step, int64_t before, int64_t after);
/* Whether the end of epoch ep validates by the epoch rule (val_every_n_epochs, and the run's
 * last epoch); `last`: the run ends with it. With val_check_interval set only its own rule counts. */
int limits_val_at_epoch_end(const struct job *j, const limit_counts *c, int64_t ep, int last);
/* A line on what the limits did to the run ("" when none is set), for the log. */
void limits_describe(const struct job *j, const limit_counts *c, char *out, size_t size);

#endif
