/* Unit tests of the thread team (trainer/team.h): every member runs once per run on its own
 * thread (member 0 on the caller's), the barrier orders phases, the first error wins with its
 * message and breaks the barrier, runs of fewer members, reuse after an error, bad sizes. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"

enum { N = 5 };

typedef struct ctx {
    tr_team *team;
    pthread_t caller;
    pthread_t who[N];        /* the thread that ran each member */
    int runs[N];             /* runs each member took part in */
    int phase1[N], seen[N];  /* barrier test: members that had written phase 1 when i read */
    int parties;
    int fail_at;             /* the member that fails (-1: none) and with what */
    tr_status fail_with;
    int fail_late;           /* 1: fail after the first barrier */
} ctx;

static tr_status record(int i, void *user) {
    ctx *c = user;
    c->who[i] = pthread_self();
    c->runs[i]++;
    return TR_OK;
}

/* Phase 1 writes, barrier, phase 2 reads every member's write: all must be there. */
static tr_status phases(int i, void *user) {
    ctx *c = user;
    if (i == c->fail_at && !c->fail_late) return tr_error_set(c->fail_with, "member %d broke early", i);
    c->phase1[i] = 1;
    TR_CHECK(tr_team_barrier(c->team, c->parties));
    if (i == c->fail_at) return tr_error_set(c->fail_with, "member %d broke late", i);
    int s = 0;
    for (int k = 0; k < c->parties; k++) s += c->phase1[k];
    c->seen[i] = s;
    TR_CHECK(tr_team_barrier(c->team, c->parties)); /* nobody rewrites before all have read */
    return TR_OK;
}

static void reset(ctx *c, int parties, int fail_at, tr_status with, int late) {
    memset(c->phase1, 0, sizeof c->phase1);
    memset(c->seen, 0, sizeof c->seen);
    c->parties = parties;
    c->fail_at = fail_at;
    c->fail_with = with;
    c->fail_late = late;
}

static void test_runs(ctx *c) {
    CHECK(tr_team_size(c->team) == N, "size %d", tr_team_size(c->team));
    for (int r = 0; r < 3; r++) CHECK(tr_team_run(c->team, N, record, c) == TR_OK, "run %d: %s", r, tr_error_msg());
    for (int i = 0; i < N; i++) CHECK(c->runs[i] == 3, "member %d ran %d times of 3", i, c->runs[i]);
    CHECK(pthread_equal(c->who[0], c->caller), "member 0 runs on the caller's thread");
    for (int i = 1; i < N; i++) {
        CHECK(!pthread_equal(c->who[i], c->caller), "member %d runs on a thread of its own", i);
        for (int k = 1; k < i; k++) CHECK(!pthread_equal(c->who[i], c->who[k]), "members %d and %d share a thread", k, i);
    }
    /* a run of 2: members 2.. stay asleep; then 1: the caller alone */
    CHECK(tr_team_run(c->team, 2, record, c) == TR_OK && c->runs[0] == 4 && c->runs[1] == 4 && c->runs[2] == 3 &&
              c->runs[N - 1] == 3,
          "a run of 2 members: %d %d %d", c->runs[0], c->runs[1], c->runs[2]);
    CHECK(tr_team_run(c->team, 1, record, c) == TR_OK && c->runs[0] == 5 && c->runs[1] == 4, "a run of 1: %d %d",
          c->runs[0], c->runs[1]);
    CHECK(tr_team_run(c->team, N, record, c) == TR_OK && c->runs[N - 1] == 4, "all again after fewer: %d",
          c->runs[N - 1]);
}

static void test_barrier(ctx *c) {
    for (int r = 0; r < 20; r++) {
        reset(c, N, -1, TR_OK, 0);
        CHECK(tr_team_run(c->team, N, phases, c) == TR_OK, "barrier run %d: %s", r, tr_error_msg());
        for (int i = 0; i < N; i++) CHECK(c->seen[i] == N, "run %d: member %d saw %d of %d writes", r, i, c->seen[i], N);
    }
    /* 3 parties: a run of 3 members */
    reset(c, 3, -1, TR_OK, 0);
    CHECK(tr_team_run(c->team, 3, phases, c) == TR_OK && c->seen[0] == 3 && c->seen[2] == 3 && c->seen[3] == 0,
          "a barrier of 3: %d %d %d %s", c->seen[0], c->seen[2], c->seen[3], tr_error_msg());
}

static void test_errors(ctx *c) {
    /* member 3 fails before the barrier: the others, waiting there, are released with
     * TR_ERR_ABORTED, and member 3's own error is the run's, not theirs */
    reset(c, N, 3, TR_ERR_IO, 0);
    tr_status st = tr_team_run(c->team, N, phases, c);
    CHECK(st == TR_ERR_IO && strcmp(tr_error_msg(), "member 3 broke early") == 0, "early failure: %d %s", (int)st,
          tr_error_msg());
    /* member 2 fails after the first barrier; the others wait at the second */
    reset(c, N, 2, TR_ERR_PARSE, 1);
    st = tr_team_run(c->team, N, phases, c);
    CHECK(st == TR_ERR_PARSE && strcmp(tr_error_msg(), "member 2 broke late") == 0, "late failure: %d %s", (int)st,
          tr_error_msg());
    /* member 0 (the caller's) fails: still its message */
    reset(c, N, 0, TR_ERR_NUMERIC, 0);
    st = tr_team_run(c->team, N, phases, c);
    CHECK(st == TR_ERR_NUMERIC && strcmp(tr_error_msg(), "member 0 broke early") == 0, "member 0's failure: %s",
          tr_error_msg());
    /* a member whose own error is TR_ERR_ABORTED is the run's error when none other failed */
    reset(c, N, 4, TR_ERR_ABORTED, 0);
    st = tr_team_run(c->team, N, phases, c);
    CHECK(st == TR_ERR_ABORTED && strcmp(tr_error_msg(), "member 4 broke early") == 0, "an aborted member: %s",
          tr_error_msg());
    /* the team works again after failures, the barrier whole */
    reset(c, N, -1, TR_OK, 0);
    st = tr_team_run(c->team, N, phases, c);
    CHECK(st == TR_OK && c->seen[1] == N && c->seen[4] == N, "a run after failures: %s", tr_error_msg());
    CHECK(tr_team_run(c->team, N + 1, record, c) == TR_ERR_INVALID && strstr(tr_error_msg(), "test team: a run of 6 members, the team has 5"),
          "too many members: %s", tr_error_msg());
    CHECK(tr_team_run(c->team, 0, record, c) == TR_ERR_INVALID, "no member: %s", tr_error_msg());
}

static void test_sizes(void) {
    tr_team *t = (tr_team *)1;
    CHECK(tr_team_create(&t, 0, "zero") == TR_ERR_INVALID && !t && strstr(tr_error_msg(), "team zero: 0 members, expected 1 to 4096"),
          "size 0 refused: %s", tr_error_msg());
    CHECK(tr_team_create(&t, 5000, "big") == TR_ERR_INVALID, "size 5000 refused: %s", tr_error_msg());
    ctx c = {.caller = pthread_self()};
    CHECK(tr_team_create(&t, 1, "one") == TR_OK && tr_team_run(t, 1, record, &c) == TR_OK && c.runs[0] == 1 &&
              pthread_equal(c.who[0], c.caller),
          "a team of one runs on the caller: %s", tr_error_msg());
    tr_team_destroy(t);
    tr_team_destroy(NULL);
    /* made and destroyed without a run */
    CHECK(tr_team_create(&t, 3, "idle") == TR_OK, "idle team: %s", tr_error_msg());
    tr_team_destroy(t);
}

int main(void) {
    ctx c = {.caller = pthread_self()};
    if (tr_team_create(&c.team, N, "test team") != TR_OK) {
        CHECK(0, "create: %s", tr_error_msg());
        return test_finish();
    }
    test_runs(&c);
    test_barrier(&c);
    test_errors(&c);
    tr_team_destroy(c.team);
    test_sizes();
    return test_finish();
}
