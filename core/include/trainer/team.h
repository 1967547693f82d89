/* ABI 0.16. A fixed team of threads that runs one function on every member and waits for all
 * of them.
 *
 *   static tr_status work(int member, void *user) {   // member 0 .. members-1
 *       job *jobs = user;
 *       ...                                            // its share
 *       return tr_team_barrier(jobs[member].team, 4);  // all four have done their share
 *   }
 *   tr_team *team;
 *   TR_CHECK(tr_team_create(&team, 4, "encode"));      // 3 threads; member 0 is the caller
 *   TR_CHECK(tr_team_run(team, 4, work, jobs));        // the first error, with its message
 *   tr_team_destroy(team);
 *
 * Member 0 is the thread that calls tr_team_run; members 1 .. size-1 are the team's own
 * threads, started by tr_team_create and kept until tr_team_destroy, so a run costs a wake-up,
 * not a thread start; a waiting thread (a member between runs, the caller at a run's end)
 * spins some 50 microseconds before it sleeps, which saves the wake-up when what it waits
 * for comes that soon, as in `dataparallel`'s steps. A thread keeps its per-thread state
 * (OpenMP's thread count, a bound device) from run to run. */
#ifndef TRAINER_TEAM_H
#define TRAINER_TEAM_H

#include "trainer/export.h"
#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_team tr_team;
/* One member's part of a run; an error is returned with its message (tr_error_set). */
typedef tr_status (*tr_team_fn)(int member, void *user);

/* A team of size members, 1 to 4096 (size - 1 threads); name (copied) names it in messages. */
TR_API tr_status tr_team_create(tr_team **team, int size, const char *name);
/* Stops and joins the threads; never during a run. NULL: nothing. */
TR_API void tr_team_destroy(tr_team *team);
TR_API int tr_team_size(const tr_team *team);
/* Runs fn(i, user) on members i = 0 .. members-1 (1 <= members <= size; member 0 on this
 * thread; with members 1 no other thread wakes) and returns when every one has returned. The
 * first error wins, returned with that member's message: the lowest-numbered member's that
 * is not TR_ERR_ABORTED (what a barrier broken by another member's failure returns), else
 * the error of the member that failed first. One run at a time, from one thread. */
TR_API tr_status tr_team_run(tr_team *team, int members, tr_team_fn fn, void *user);
/* Inside a run: waits until `parties` members of the run (the first ones; each passes the
 * same number) have arrived. Once a member of the run has failed, a barrier returns
 * TR_ERR_ABORTED at once, and so do those waiting, so that no member waits forever. */
TR_API tr_status tr_team_barrier(tr_team *team, int parties);

#ifdef __cplusplus
}
#endif

#endif
