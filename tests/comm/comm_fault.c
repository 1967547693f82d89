/* One rank of the communicator fault tests (tests/e2e/comm_faults.sh).
 * usage: comm_fault PLUGIN_DIR BACKEND MODE [RANK]
 *   kill R     all-reduce in a loop; rank R kills itself (SIGKILL) in the middle
 *   nojoin R   rank R never joins; the others must time out naming it
 *   abort R    rank R calls tr_comm_abort; the others' calls must fail naming it
 *   stall R    rank R stops calling (alive, joined); the others must time out
 *   exit R     a few all-reduces, then rank R comes late to a last barrier and exits at once:
 *              the others, waiting in it, must succeed (it arrived before it exited)
 *   send R     rank R comes late, sends rank 0 one value and exits at once: rank 0's receive
 *              must succeed with the value
 * A rank whose call fails prints the message, aborts the communicator (as the strategies do:
 * the others must still name the cause, not this rank) and exits 3. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trainer/comm.h"
#include "trainer/memory.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: comm_fault PLUGIN_DIR BACKEND kill|nojoin|abort|stall|exit|send RANK\n");
        return 2;
    }
    const char *mode = argv[3];
    int target = atoi(argv[4]);
    tr_comm_env env;
    tr_registry *reg = NULL;
    const tr_plugin *p;
    tr_comm *c = NULL;
    float *buf = NULL;
    int rc = 0;
    if (tr_comm_env_detect(&env) != TR_OK) return 1;
    if (strcmp(mode, "nojoin") == 0 && env.rank == target) {
        sleep(120); /* the launcher stops it */
        return 0;
    }
    if (tr_registry_create(&reg) != TR_OK || tr_registry_scan(reg, argv[1], "test", 0) != TR_OK ||
        tr_registry_find(reg, TR_PLUGIN_COMM, argv[2], &p) != TR_OK || tr_comm_create(&c, p, NULL, &env) != TR_OK) {
        printf("rank %d: %s\n", env.rank, tr_error_msg());
        rc = 3;
        goto out;
    }
    if (strcmp(mode, "exit") == 0 || strcmp(mode, "send") == 0) { /* a peer delivers, then exits */
        double v = env.rank + 1;
        tr_status st = TR_OK;
        for (int it = 0; it < 3 && st == TR_OK; it++) st = tr_comm_all_reduce(c, &v, &v, 1, TR_F64, TR_RED_SUM);
        if (env.rank == target) nanosleep(&(struct timespec){0, 200000000}, NULL); /* the others wait for it, looking at it meanwhile */
        if (st == TR_OK && strcmp(mode, "exit") == 0) st = tr_comm_barrier(c);
        double got = -1;
        if (st == TR_OK && strcmp(mode, "send") == 0 && env.rank == target) st = tr_comm_send(c, &v, 1, TR_F64, 0);
        if (st == TR_OK && strcmp(mode, "send") == 0 && env.rank == 0) {
            st = tr_comm_recv(c, &got, 1, TR_F64, target);
            if (st == TR_OK && got != v) {
                printf("rank 0: received %g, expected %g\n", got, v);
                rc = 5;
            }
        }
        if (st != TR_OK) {
            printf("rank %d: %s\n", env.rank, tr_error_msg());
            rc = 3;
        } else if (rc == 0) {
            printf("rank %d: ok\n", env.rank);
        }
        goto out;
    }
    size_t n = 1 << 20;
    buf = tr_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) buf[i] = 1;
    for (int it = 0; it < 1000000 && rc == 0; it++) {
        if (env.rank == target && it == 20) {
            if (strcmp(mode, "kill") == 0) raise(SIGKILL);
            if (strcmp(mode, "abort") == 0) {
                tr_comm_abort(c);
                printf("rank %d: aborted the communicator\n", env.rank);
                fflush(stdout);
                sleep(3); /* let the others report before the launcher stops them */
                rc = 4;
                break;
            }
            if (strcmp(mode, "stall") == 0) {
                sleep(120); /* the launcher stops it */
                break;
            }
        }
        if (tr_comm_all_reduce(c, buf, buf, n, TR_F32, TR_RED_MAX) != TR_OK) {
            printf("rank %d: %s\n", env.rank, tr_error_msg());
            fflush(stdout);
            tr_comm_abort(c); /* as the strategies do after a failed collective */
            rc = 3;
        }
    }
out:
    fflush(stdout);
    tr_comm_destroy(c);
    tr_registry_destroy(reg);
    tr_free(buf);
    return rc;
}
