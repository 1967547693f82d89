/* Private: the run folder's lock. Two trainers writing one run folder (a run resumed twice at
 * once) would interleave their checkpoints, metrics and logs; the second refuses at start,
 * naming the first's pid. Only rank 0 takes it, so the ranks of one job never lock each other
 * out. It is an flock(2) on <run_dir>/run.lock, which the kernel drops when its holder dies:
 * a lock a killed run left is taken over without asking. */
#ifndef TRAINER_RUN_RUN_LOCK_H
#define TRAINER_RUN_RUN_LOCK_H

#include "trainer/status.h"

typedef struct run_lock {
    int fd;          /* -1: not held */
    char path[1300];
} run_lock;

#define RUN_LOCK_NONE {.fd = -1}

/* Makes run_dir when missing and locks it, writing this process's pid into the lock file.
 * Another live process holding it: TR_ERR_INVALID naming it, its pid and what to do. */
tr_status run_lock_take(run_lock *l, const char *run_dir);
/* Removes the lock file and drops the lock (nothing when not held). */
void run_lock_release(run_lock *l);

#endif
