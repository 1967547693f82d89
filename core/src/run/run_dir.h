/* Private: the run folder of `trainer run`. */
#ifndef TRAINER_RUN_RUN_DIR_H
#define TRAINER_RUN_RUN_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "run/job.h"
#include "run/run_lock.h"

/* Whether the run will resume, and from which checkpoint (into ckpt), as run_dir_choose will
 * decide: read before the strategy exists (so on every rank, without the lock). */
int run_dir_probe(job *j, int64_t total, char *ckpt, size_t size);

/* Rank 0 picks the run directory (a finished run starts the next version), locks it and
 * tells the other ranks, so that all agree before anyone creates a folder. */
tr_status run_dir_choose(job *j, int64_t total, run_lock *lock, char *ckpt, size_t size, int *resuming);

/* Rank 0: the run folder, its config, log and metrics files and the checkpoints folder, made
 * and probed before training so that an unwritable place fails at once; the folders a
 * killed save left are removed. */
tr_status run_dir_open(job *j, int resuming, int64_t step, const char *ck_dir);

/* Closes log.txt and the loggers' files; a failure (some file systems report write errors
 * only at close) is the run's error. */
tr_status run_dir_close(job *j);

#endif
