/* The shm backend's waiting: the barrier (a counter per rank on its own cache line, so a
 * timeout names exactly the ranks that did not arrive), brief spins then naps on a futex in
 * the segment that every arrival bumps, and the checks between naps: the deadline, the abort
 * flag, whether each peer process still exists. */
#define _GNU_SOURCE
#include "shm_impl.h"

uint8_t *shm_slot(shm *s, int set, int r) {
    return s->data + ((size_t)set * (size_t)(s->world + 1) + (size_t)r) * s->chunk;
}

static const char *op_label(const shm *s, char *buf, size_t size) {
    if (!s->op) return s->activity;
    snprintf(buf, size, "%s #%llu", tr_comm_kind_name(s->op->call.kind), (unsigned long long)s->op->seq);
    return buf;
}

/* Whether this rank still waits for rank r: one not yet at barrier phase target, or the
 * peer of a point-to-point wait (peer >= 0; the ranks it does not talk to may have finished). */
static int waits_for(const shm *s, int r, uint64_t target, int peer) {
    if (r == s->rank) return 0;
    if (peer >= 0) return r == peer;
    return atomic_load_explicit(&s->ranks[r].arrive, memory_order_acquire) < target;
}

/* Deadline, abort flag and peer liveness, checked every couple of milliseconds of waiting.
 * A peer found gone is only a suspect (*gone): a rank may arrive, or write what this one waits
 * for, and exit between the waiter's last look and this check (the last collective of a job,
 * the waiter preempted). So its arrival is read again once its exit is seen, and WAIT_UNTIL
 * looks at its condition once more before shm_report_death publishes the death. */
tr_status shm_check_health(shm *s, double deadline, uint64_t target, int peer, int *gone) {
    *gone = -1;
    double now = tr_now();
    if (now - s->last_check < 0.002) return TR_OK;
    s->last_check = now;
    /* The first death any rank saw is named before any abort: the ranks it stopped abort
     * (or exit) after it, and are not the cause. */
    int dead = atomic_load_explicit(&s->h->died, memory_order_acquire) - 1;
    int32_t ab = atomic_load_explicit(&s->h->abort_by, memory_order_acquire);
    if (dead >= 0) return shm_report_death(s, TR_ERR_COMM, -1);
    if (ab) return tr_error_set(TR_ERR_ABORTED, "rank %d aborted the job", ab - 1);
    for (int r = 0; r < s->world; r++) {
        if (!waits_for(s, r, target, peer)) continue;
        if (!tr_process_gone(atomic_load_explicit(&s->ranks[r].pid, memory_order_relaxed))) continue;
        /* Its stores came before its exit, which this rank has now seen. */
        atomic_thread_fence(memory_order_seq_cst);
        if (!waits_for(s, r, target, peer)) continue;
        *gone = r;
        return TR_ERR_COMM;
    }
    if (now > deadline) {
        char missing[512] = "", lbl[96];
        size_t len = 0;
        for (int r = 0; r < s->world && len < sizeof missing - 48; r++) {
            if (!waits_for(s, r, target, peer)) continue;
            uint64_t at = atomic_load_explicit(&s->ranks[r].seq, memory_order_relaxed);
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d (at #%llu)", len ? ", " : "", r,
                                    (unsigned long long)at);
        }
        return tr_error_set(TR_ERR_TIMEOUT, "timed out in %s: %s: %s", op_label(s, lbl, sizeof lbl),
                            peer >= 0 ? "its peer did not answer" : "these ranks did not arrive", missing);
    }
    return TR_OK;
}

tr_status shm_report_death(shm *s, tr_status st, int gone) {
    if (gone >= 0) {
        int32_t none = 0;
        atomic_compare_exchange_strong(&s->h->died, &none, gone + 1);
    }
    int dead = atomic_load_explicit(&s->h->died, memory_order_acquire) - 1;
    if (dead < 0) return st; /* the message is set already */
    pid_t pid = atomic_load_explicit(&s->ranks[dead].pid, memory_order_relaxed);
    uint64_t at = atomic_load_explicit(&s->ranks[dead].seq, memory_order_relaxed);
    return tr_error_set(TR_ERR_COMM, "rank %d (pid %d) died %s this operation", dead, (int)pid,
                        s->op && at == s->op->seq ? "in the middle of" : "before reaching");
}

/* Tells sleeping peers that something arrived (a barrier counter, ring progress). */
void shm_notify(shm *s) {
    atomic_fetch_add_explicit(&s->h->progress, 1, memory_order_release);
    if (atomic_load_explicit(&s->h->sleepers, memory_order_acquire) > 0)
        syscall(SYS_futex, &s->h->progress, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleeps until the progress word moves past `seen` or 2 ms pass (then health is checked). */
void shm_doze(shm *s, uint32_t seen) {
    atomic_fetch_add_explicit(&s->h->sleepers, 1, memory_order_acq_rel);
    struct timespec ts = {0, 2000000};
    syscall(SYS_futex, &s->h->progress, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub_explicit(&s->h->sleepers, 1, memory_order_acq_rel);
}

static int all_arrived(shm *s, uint64_t target) {
    for (int r = 0; r < s->world; r++)
        if (atomic_load_explicit(&s->ranks[r].arrive, memory_order_acquire) < target) return 0;
    return 1;
}

tr_status shm_barrier(shm *s, double deadline) {
    uint64_t target = ++s->phase;
    atomic_store_explicit(&s->ranks[s->rank].arrive, target, memory_order_release);
    shm_notify(s);
    WAIT_UNTIL(s, all_arrived(s, target), deadline, target, -1);
    return TR_OK;
}
