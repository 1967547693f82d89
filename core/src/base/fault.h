/* Private: fault injection for the reliability tests (docs/distributed.md, "Fault points").
 *
 *   TRAINER_FAULT_KILL_AT_STEP=N      the optimizer step it happens at (1-based)
 *   TRAINER_FAULT_KILL_RANK=r         only rank r (default: every rank)
 *   TRAINER_FAULT_KILL_POINT=P        step (default): after step N and its checkpoint;
 *                                     collective: inside the first collective of step N that
 *                                     moves at least 2 elements, after part of it went through;
 *                                     checkpoint: half-way through the first safetensors file
 *                                     this rank writes for step N's checkpoint
 *   TRAINER_FAULT_LATE_LIVENESS_MS=N  every tr_process_gone look comes N ms late (checked
 *                                     here, applied by base/runtime.c)
 *
 * The process dies with SIGKILL, as `kill -9` would do it. Never in a relaunched attempt
 * (TRAINER_RESTART_COUNT > 0), so that max_restarts can finish the job. The environment is
 * read once (tr_fault_setup); a hook that is not armed costs one relaxed atomic load. */
#ifndef TRAINER_BASE_FAULT_H
#define TRAINER_BASE_FAULT_H

#include <stdint.h>

#include "trainer/status.h"

/* TRAINER_FAULT_LATE_LIVENESS_MS at most (one minute). */
#define TR_FAULT_LATE_LIVENESS_MAX_MS 60000

typedef enum tr_fault_point {
    TR_FAULT_NONE = 0,
    TR_FAULT_STEP,
    TR_FAULT_COLLECTIVE,
    TR_FAULT_CHECKPOINT,
} tr_fault_point;

/* Reads and checks the environment for this rank: *point is TR_FAULT_NONE when nothing is to
 * be injected here, else the point and *step the step. A malformed variable is an error that
 * names it. */
tr_status tr_fault_setup(int rank, tr_fault_point *point, int64_t *step);
/* The next hook of that point (tr_fault_armed) kills the process. */
void tr_fault_arm(tr_fault_point p);
void tr_fault_disarm(void);
/* Whether the hook of point p is armed (cheap; called on hot paths). */
int tr_fault_armed(tr_fault_point p);
/* Says what is being injected on stderr (one line, the rank's last), then SIGKILLs itself. */
void tr_fault_kill(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
