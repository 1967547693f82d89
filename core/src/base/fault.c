/* Fault injection for the reliability tests (see fault.h). One process-wide armed point: the
 * training loop arms it at the right step, the hooks (the loop itself, the communicator
 * thread, the safetensors writer) fire it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"

static atomic_int armed;

static tr_status env_long(const char *name, long min, long *out, int *present) {
    const char *v = getenv(name);
    *present = v && *v;
    if (!*present) return TR_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < min)
        return tr_error_set(TR_ERR_INVALID, "environment variable %s='%s': expected an integer >= %ld", name, v, min);
    *out = x;
    return TR_OK;
}

tr_status tr_fault_setup(int rank, tr_fault_point *point, int64_t *step) {
    *point = TR_FAULT_NONE;
    *step = -1;
    atomic_store(&armed, TR_FAULT_NONE);
    long at = 0, who = -1, restart = 0;
    int has_at, has_rank, has_restart;
    TR_CHECK(env_long("TRAINER_FAULT_KILL_AT_STEP", 1, &at, &has_at));
    TR_CHECK(env_long("TRAINER_FAULT_KILL_RANK", 0, &who, &has_rank));
    TR_CHECK(env_long("TRAINER_RESTART_COUNT", 0, &restart, &has_restart));
    long late = 0;
    int has_late;
    TR_CHECK(env_long("TRAINER_FAULT_LATE_LIVENESS_MS", 0, &late, &has_late));
    if (late > TR_FAULT_LATE_LIVENESS_MAX_MS)
        return tr_error_set(TR_ERR_INVALID, "environment variable TRAINER_FAULT_LATE_LIVENESS_MS='%ld': at most %d", late,
                            TR_FAULT_LATE_LIVENESS_MAX_MS);
    const char *p = getenv("TRAINER_FAULT_KILL_POINT");
    tr_fault_point kind = TR_FAULT_STEP;
    if (p && *p) {
        if (strcmp(p, "step") == 0) kind = TR_FAULT_STEP;
        else if (strcmp(p, "collective") == 0) kind = TR_FAULT_COLLECTIVE;
        else if (strcmp(p, "checkpoint") == 0) kind = TR_FAULT_CHECKPOINT;
        else
            return tr_error_set(TR_ERR_INVALID,
                                "environment variable TRAINER_FAULT_KILL_POINT='%s': expected step, collective or "
                                "checkpoint", p);
        if (!has_at)
            return tr_error_set(TR_ERR_INVALID,
                                "environment variable TRAINER_FAULT_KILL_POINT is set without TRAINER_FAULT_KILL_AT_STEP");
    }
    if (!has_at || (has_rank && who != rank) || restart > 0) return TR_OK;
    *point = kind;
    *step = at;
    return TR_OK;
}

void tr_fault_arm(tr_fault_point p) { atomic_store(&armed, (int)p); }
void tr_fault_disarm(void) { atomic_store(&armed, TR_FAULT_NONE); }

int tr_fault_armed(tr_fault_point p) { return atomic_load_explicit(&armed, memory_order_relaxed) == (int)p; }

void tr_fault_kill(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fflush(NULL);
    /* One write(2): stdio may be mid-line in another thread. */
    char out[600];
    int n = snprintf(out, sizeof out, "fault injection (TRAINER_FAULT_KILL_*): %s: SIGKILL\n", line);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
        (void)w;
    }
    raise(SIGKILL);
}
