/* Private to libtrainer and the trainer CLI, not installed (exported for the CLI alone, as
 * run/run_api.h). The single-host launcher and supervisor behind `trainer launch` (and
 * `trainer run` when a strategy needs several processes), in the manner of torchrun
 * standalone.
 *
 *   char *cmd[] = {"build/tests/comm_check", "build/plugins", "shm", NULL};
 *   tr_launch_config lc = {.nproc = 4, .argv = cmd};
 *   tr_launch_result r;
 *   TR_CHECK(tr_launch(&lc, &r));
 *   if (r.exit_code) fprintf(stderr, "%s\n", r.message);   // "rank 2 was killed by signal 9 ..."
 *
 * Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1),
 * MASTER_PORT, TRAINER_JOB_ID (unique per launch and attempt) and TRAINER_RESTART_COUNT; its
 * stdout and stderr come out line by line prefixed with "[rank N] ". If a rank exits
 * non-zero or is killed, the others get SIGTERM and, after grace_s, SIGKILL; with
 * max_restarts the whole job is then launched again (resuming from its newest checkpoint is
 * the job's business). SIGINT/SIGTERM to the launcher stop every rank the same way. Ranks
 * die with the launcher (PR_SET_PDEATHSIG). */
#ifndef TRAINER_LAUNCH_LAUNCH_API_H
#define TRAINER_LAUNCH_LAUNCH_API_H

#include "trainer/export.h"
#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_launch_config {
    int nproc;                  /* ranks on this host, >= 1 */
    int max_restarts;           /* relaunches after a failure */
    double grace_s;             /* SIGTERM to SIGKILL; <= 0: 5 s */
    char *const *argv;          /* NULL-terminated command every rank runs (PATH searched) */
    int quiet;                  /* no "[launcher] ..." lines on stderr */
} tr_launch_config;

typedef struct tr_launch_result {
    int exit_code;              /* 0, the failing rank's code, 128 + its signal, or 128 + the
                                   signal that stopped the launcher */
    int failed_rank;            /* -1 when none failed */
    int restarts;               /* relaunches done */
    char message[1024];         /* why it failed: rank, code or signal, last output line */
} tr_launch_result;

/* Runs the job to the end. TR_OK means the job ran (its outcome is in res); an error means
 * it could not be started (fork, pipe, exec of a missing program shows as a rank failure). */
TR_API tr_status tr_launch(const tr_launch_config *cfg, tr_launch_result *res);

#ifdef __cplusplus
}
#endif
#endif
