/* The thread team (trainer/team.h): threads started once that run one function each per run,
 * woken by a generation counter, and a barrier that a failing member breaks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "trainer/memory.h"
#include "trainer/runtime.h"
#include "trainer/team.h"

enum { MAX_SIZE = 4096, MSG = 2048 };

/* Runs come every few hundred microseconds in training: a waiter spins this long before it
 * sleeps on a condition variable, which saves a wake-up per run. */
#define SPIN_S 50e-6

typedef struct member {
    tr_team *team;
    int i;
    pthread_t thread;
    int started;
    tr_status st;
    char msg[MSG];
} member;

struct tr_team {
    int size;
    char name[64];
    member *m;
    /* the run, under mu; gen moves once per run, read without mu while spinning */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    _Atomic uint64_t gen;
    _Atomic int finished;
    int members, quit;
    tr_team_fn fn;
    void *user;
    /* the barrier, broken when a member fails */
    pthread_mutex_t bmu;
    pthread_cond_t bcv;
    int b_count, broken;
    uint64_t b_gen;
    int first_failed;        /* the member whose failure broke the barrier (-1: none) */
};

static void barrier_break(tr_team *t, int i) {
    pthread_mutex_lock(&t->bmu);
    if (!t->broken) t->first_failed = i;
    t->broken = 1;
    pthread_cond_broadcast(&t->bcv);
    pthread_mutex_unlock(&t->bmu);
}

tr_status tr_team_barrier(tr_team *t, int parties) {
    pthread_mutex_lock(&t->bmu);
    uint64_t g = t->b_gen;
    if (++t->b_count == parties) {
        t->b_count = 0;
        t->b_gen++;
        pthread_cond_broadcast(&t->bcv);
    } else {
        while (g == t->b_gen && !t->broken) pthread_cond_wait(&t->bcv, &t->bmu);
    }
    int broken = t->broken && g == t->b_gen;
    pthread_mutex_unlock(&t->bmu);
    return broken ? tr_error_set(TR_ERR_ABORTED, "%s: another member of the team failed", t->name) : TR_OK;
}

static void run_member(tr_team *t, member *m) {
    m->st = t->fn(m->i, t->user);
    if (m->st == TR_OK) return;
    snprintf(m->msg, sizeof m->msg, "%s", tr_error_msg());
    barrier_break(t, m->i);
}

static void spin_while(const _Atomic uint64_t *gen, uint64_t seen) {
    double t0 = tr_now();
    while (atomic_load_explicit(gen, memory_order_acquire) == seen && tr_now() - t0 < SPIN_S) {
    }
}

static void *member_main(void *arg) {
    member *m = arg;
    tr_team *t = m->team;
    uint64_t seen = 0;
    for (;;) {
        spin_while(&t->gen, seen);
        pthread_mutex_lock(&t->mu);
        while (t->gen == seen) pthread_cond_wait(&t->go, &t->mu);
        seen = t->gen;
        int quit = t->quit, in_run = m->i < t->members;
        pthread_mutex_unlock(&t->mu);
        if (quit) break;
        if (!in_run) continue;
        run_member(t, m);
        pthread_mutex_lock(&t->mu);
        if (++t->finished == t->members - 1) pthread_cond_signal(&t->done);
        pthread_mutex_unlock(&t->mu);
    }
    return NULL;
}

/* Moves the generation: the members wake (for a run, or to quit). Under mu. */
static void wake(tr_team *t) {
    t->finished = 0;
    t->gen++;
    pthread_cond_broadcast(&t->go);
}

tr_status tr_team_create(tr_team **team, int size, const char *name) {
    *team = NULL;
    if (size < 1 || size > MAX_SIZE)
        return tr_error_set(TR_ERR_INVALID, "team %s: %d members, expected 1 to %d", name ? name : "", size, MAX_SIZE);
    tr_team *t = tr_calloc(1, sizeof *t);
    member *m = tr_calloc((size_t)size, sizeof *m);
    if (!t || !m) {
        tr_free(t);
        tr_free(m);
        return tr_error_set(TR_ERR_NOMEM, "team %s: out of memory for %d members", name ? name : "", size);
    }
    t->size = size;
    t->m = m;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "team");
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    pthread_mutex_init(&t->bmu, NULL);
    pthread_cond_init(&t->bcv, NULL);
    for (int i = 0; i < size; i++) m[i] = (member){.team = t, .i = i};
    for (int i = 1; i < size; i++) {
        if (pthread_create(&m[i].thread, NULL, member_main, &m[i]) != 0) {
            tr_team_destroy(t);
            return tr_error_set(TR_ERR_NOMEM, "%s: cannot start the thread of member %d of %d", name ? name : "team", i,
                                size);
        }
        m[i].started = 1;
    }
    *team = t;
    return TR_OK;
}

void tr_team_destroy(tr_team *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->quit = 1;
    wake(t);
    pthread_mutex_unlock(&t->mu);
    for (int i = 1; i < t->size; i++)
        if (t->m[i].started) pthread_join(t->m[i].thread, NULL);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->go);
    pthread_cond_destroy(&t->done);
    pthread_mutex_destroy(&t->bmu);
    pthread_cond_destroy(&t->bcv);
    tr_free(t->m);
    tr_free(t);
}

int tr_team_size(const tr_team *t) { return t->size; }

/* The run's error: the lowest-numbered member's that is not TR_ERR_ABORTED (which a broken
 * barrier gives), the same whichever thread was faster; else the first failure's. */
static tr_status first_error(const tr_team *t, int members) {
    int bad = -1;
    for (int i = 0; i < members && bad < 0; i++)
        if (t->m[i].st != TR_OK && t->m[i].st != TR_ERR_ABORTED) bad = i;
    if (bad < 0) bad = t->first_failed;
    return bad < 0 ? TR_OK : tr_error_set(t->m[bad].st, "%s", t->m[bad].msg);
}

tr_status tr_team_run(tr_team *t, int members, tr_team_fn fn, void *user) {
    if (members < 1 || members > t->size)
        return tr_error_set(TR_ERR_INVALID, "%s: a run of %d members, the team has %d", t->name, members, t->size);
    pthread_mutex_lock(&t->bmu);
    t->b_count = 0;
    t->broken = 0;
    t->first_failed = -1;
    pthread_mutex_unlock(&t->bmu);
    for (int i = 0; i < members; i++) t->m[i].st = TR_OK;
    pthread_mutex_lock(&t->mu); /* the members read the run under mu, after gen moves */
    t->fn = fn;
    t->user = user;
    t->members = members;
    if (members > 1) wake(t);
    pthread_mutex_unlock(&t->mu);
    run_member(t, &t->m[0]);
    if (members > 1) {
        double t0 = tr_now();
        while (atomic_load_explicit(&t->finished, memory_order_acquire) < members - 1 && tr_now() - t0 < SPIN_S) {
        }
        pthread_mutex_lock(&t->mu);
        while (t->finished < members - 1) pthread_cond_wait(&t->done, &t->mu);
        pthread_mutex_unlock(&t->mu);
    }
    return first_error(t, members);
}
