/* Communication backend `shm`: the ranks of one host over one POSIX shared-memory segment.
 *
 * Rendezvous: rank 0 creates /trainer-<job id>, the others open it; once all have mapped it,
 * rank 0 unlinks the name, so the memory goes away with the last process whatever way it
 * ends (a crash of any rank leaves nothing in /dev/shm). Space is reserved with
 * posix_fallocate so a full /dev/shm is an error at join, never a SIGBUS later.
 *
 * Layout: a header, one cache line per rank (barrier counter, pid, current operation), two
 * sets of data slots (one slot per rank plus a result slot, `chunk_kb` each), and a ring per
 * ordered pair of ranks for send/recv. Payloads go through in chunks; each chunk is "write
 * my slot, barrier, read" and the two sets alternate, so one barrier per phase suffices: a
 * set is rewritten only after a barrier that every rank reaches after reading it.
 *
 * Shared memory for the caller (alloc, tr_comm_alloc): one more segment per rank and
 * allocation, named /trainer-<job id>-<rank>-m<n>, mapped by every rank and unlinked at once.
 * An in-place all-reduce whose buffers all lie in such segments skips the slots: each rank
 * reduces its share straight from the peers' buffers and writes the sums into theirs. So do
 * an in-place reduce-scatter (each rank reduces its part from the peers' buffers into its
 * own) and all-gather (each copies the others' parts from their buffers).
 *
 * Algorithms: all-reduce = a reduce-scatter plus an all-gather with all ranks working in
 * parallel: each rank publishes the parts of its chunk the others reduce, reduces its own
 * 1/W from its buffer and their slots into its output and the result slot, then copies the
 * other parts of the result out; reduce-scatter reduces each rank's part
 * straight into its output; broadcast, gather, scatter and all-gather are one copy in and one
 * copy out per chunk. The barrier is a counter per rank (own cache line): waiting reads the
 * others', so a timeout names exactly the ranks that did not arrive. Waits spin briefly, then
 * sleep on a futex in the segment that every arrival bumps (ranks may outnumber cores, and a
 * waiting rank must not steal a computing rank's core); between naps (2 ms at most) they
 * check the deadline, the abort flag and whether each peer process still exists. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "trainer/comm_backend.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

#define SHM_MAGIC 0x7472736d33ull /* "trsm3" */
#define LINE 64

typedef struct shm_header {
    uint64_t magic;
    uint32_t world;
    uint32_t creator_pid;
    uint64_t chunk_bytes, p2p_bytes, total_bytes;
    _Atomic uint32_t ready;          /* set by rank 0 once the header is complete */
    _Atomic int32_t attached;        /* ranks that have mapped the segment */
    _Atomic int32_t abort_by;        /* 0, or 1 + the rank that aborted */
    _Atomic int32_t died;            /* 0, or 1 + the first rank any rank saw dead */
    char pad[LINE];
    _Atomic uint32_t progress;       /* bumped on every arrival: the futex waiters sleep on */
    _Atomic int32_t sleepers;        /* ranks asleep on it: wake only when someone is */
} shm_header;

typedef struct shm_rank {
    _Atomic uint64_t arrive;         /* barrier phases this rank has reached */
    _Atomic uint64_t seq;            /* the operation it is in */
    _Atomic int32_t pid;
    /* Written before a barrier, read by the others after it: */
    int32_t mem_ok;                  /* alloc: this rank made (then mapped) its part */
    uint64_t in_place;               /* an in-place collective's buffer in a region: ((id + 1) << 48) | offset */
    uint64_t in_count;               /* ... and its count */
    char pad[LINE - 4 * sizeof(uint64_t) - 2 * sizeof(int32_t)];
} shm_rank;

typedef struct shm_chan {
    _Atomic uint64_t written;
    char pad1[LINE - sizeof(uint64_t)];
    _Atomic uint64_t read;
    char pad2[LINE - sizeof(uint64_t)];
} shm_chan;

/* Memory from alloc: one segment per rank, each mapped by every rank. */
#define MAX_REGIONS 64
#define MAX_SHARED_WORLD 256
#define REGION_SHIFT 48
typedef struct region {
    size_t bytes;                    /* 0: free */
    uint8_t **base;                  /* world mappings, base[rank] */
} region;

typedef struct shm {
    int rank, world;
    char name[160];
    int unlinked;
    uint8_t *base;
    size_t size;
    shm_header *h;
    shm_rank *ranks;
    shm_chan *chans;                 /* world * world, [src * world + dst] */
    uint8_t *p2p;                    /* world * world rings of p2p_bytes */
    uint8_t *data;                   /* 2 sets of (world + 1) slots of chunk_bytes */
    size_t chunk, p2p_bytes;
    uint64_t phase;                  /* barrier phases passed */
    uint64_t set;                    /* chunks done: selects the data set */
    const tr_comm_op *op;            /* the operation running (for messages) */
    double last_check;
    double spin_s;                   /* busy-wait this long before sleeping */
    const char *activity;            /* for messages outside an operation */
    region regions[MAX_REGIONS];
    uint32_t made;                   /* allocs so far: the same on every rank, the next id */
} shm;

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static uint8_t *slot(shm *s, int set, int r) {
    return s->data + ((size_t)set * (size_t)(s->world + 1) + (size_t)r) * s->chunk;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}


static const char *op_label(const shm *s, char *buf, size_t size) {
    if (!s->op) return s->activity;
    snprintf(buf, size, "%s #%llu", tr_comm_kind_name(s->op->call.kind), (unsigned long long)s->op->seq);
    return buf;
}

/* Deadline, abort flag and peer liveness, checked every couple of milliseconds of waiting. */
static tr_status check_health(shm *s, double deadline, uint64_t target) {
    double now = tr_now();
    if (now - s->last_check < 0.002) return TR_OK;
    s->last_check = now;
    /* The first death any rank saw is named before any abort: the ranks it stopped abort
     * (or exit) after it, and are not the cause. */
    int dead = atomic_load_explicit(&s->h->died, memory_order_acquire) - 1;
    int32_t ab = atomic_load_explicit(&s->h->abort_by, memory_order_acquire);
    if (ab && dead < 0) return tr_error_set(TR_ERR_ABORTED, "rank %d aborted the job", ab - 1);
    for (int r = 0; r < s->world && dead < 0; r++) {
        if (r == s->rank || atomic_load_explicit(&s->ranks[r].arrive, memory_order_acquire) >= target) continue;
        if (tr_process_gone(atomic_load_explicit(&s->ranks[r].pid, memory_order_relaxed))) {
            int32_t none = 0;
            atomic_compare_exchange_strong(&s->h->died, &none, r + 1);
            dead = atomic_load_explicit(&s->h->died, memory_order_acquire) - 1;
        }
    }
    if (dead >= 0) {
        pid_t pid = atomic_load_explicit(&s->ranks[dead].pid, memory_order_relaxed);
        uint64_t at = atomic_load_explicit(&s->ranks[dead].seq, memory_order_relaxed);
        return tr_error_set(TR_ERR_COMM, "rank %d (pid %d) died %s this operation", dead, (int)pid,
                            s->op && at == s->op->seq ? "in the middle of" : "before reaching");
    }
    if (now > deadline) {
        char missing[512] = "", lbl[96];
        size_t len = 0;
        for (int r = 0; r < s->world && len < sizeof missing - 48; r++) {
            if (atomic_load_explicit(&s->ranks[r].arrive, memory_order_acquire) >= target) continue;
            uint64_t at = atomic_load_explicit(&s->ranks[r].seq, memory_order_relaxed);
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d (at #%llu)", len ? ", " : "", r,
                                    (unsigned long long)at);
        }
        return tr_error_set(TR_ERR_TIMEOUT, "timed out in %s: these ranks did not arrive: %s", op_label(s, lbl, sizeof lbl),
                            missing);
    }
    return TR_OK;
}

/* Tells sleeping peers that something arrived (a barrier counter, ring progress). */
static void notify(shm *s) {
    atomic_fetch_add_explicit(&s->h->progress, 1, memory_order_release);
    if (atomic_load_explicit(&s->h->sleepers, memory_order_acquire) > 0)
        syscall(SYS_futex, &s->h->progress, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleeps until the progress word moves past `seen` or 2 ms pass (then health is checked). */
static void doze(shm *s, uint32_t seen) {
    atomic_fetch_add_explicit(&s->h->sleepers, 1, memory_order_acq_rel);
    struct timespec ts = {0, 2000000};
    syscall(SYS_futex, &s->h->progress, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub_explicit(&s->h->sleepers, 1, memory_order_acq_rel);
}

/* Waits until cond holds. A peer is usually just behind: spin with pause, then yield for up
 * to spin_us (a yielding thread keeps its CPU awake, which matters in VMs where waking an idle
 * CPU costs 100 us), then sleep on the segment's futex so a waiting rank does not steal the
 * core of a rank still computing (ranks and their communicator threads may outnumber cores).
 * Between naps (2 ms at most) the deadline, the abort flag and the peers are checked. */
#define WAIT_UNTIL(s, cond, deadline, target)                                                 \
    do {                                                                                      \
        double t0_ = 0;                                                                       \
        for (unsigned spins_ = 0;; spins_++) {                                                \
            uint32_t seen_ = atomic_load_explicit(&(s)->h->progress, memory_order_acquire);   \
            if (cond) break;                                                                  \
            if (spins_ < 128) {                                                               \
                cpu_relax();                                                                  \
                continue;                                                                     \
            }                                                                                 \
            double now_ = tr_now();                                                           \
            if (t0_ == 0) t0_ = now_;                                                         \
            if (now_ - t0_ < (s)->spin_s) sched_yield();                                      \
            else doze((s), seen_);                                                            \
            TR_CHECK(check_health((s), (deadline), (target)));                                \
        }                                                                                     \
    } while (0)

static int all_arrived(shm *s, uint64_t target) {
    for (int r = 0; r < s->world; r++)
        if (atomic_load_explicit(&s->ranks[r].arrive, memory_order_acquire) < target) return 0;
    return 1;
}

static tr_status barrier(shm *s, double deadline) {
    uint64_t target = ++s->phase;
    atomic_store_explicit(&s->ranks[s->rank].arrive, target, memory_order_release);
    notify(s);
    WAIT_UNTIL(s, all_arrived(s, target), deadline, target);
    return TR_OK;
}

/* [lo, hi) of m elements for rank r: W blocks aligned to a cache line. */
static void part(size_t m, size_t es, int r, int world, size_t *lo, size_t *hi) {
    size_t align = LINE / es ? LINE / es : 1, blk = round_up((m + (size_t)world - 1) / (size_t)world, align);
    *lo = blk * (size_t)r < m ? blk * (size_t)r : m;
    *hi = *lo + blk < m ? *lo + blk : m;
}

/* Reduces [lo, hi) over every rank's slot of `set` into dst. */
static void reduce_slots(shm *s, int set, size_t lo, size_t hi, size_t es, tr_dtype dt, tr_red_op op, uint8_t *dst,
                         size_t slot_off) {
    if (hi <= lo) return;
    size_t n = hi - lo, off = slot_off + lo * es;
    if (s->world == 1) {
        memmove(dst, slot(s, set, 0) + off, n * es);
        return;
    }
    tr_reduce2(dst, slot(s, set, 0) + off, slot(s, set, 1) + off, n, dt, op);
    for (int r = 2; r < s->world; r++) tr_reduce_into(dst, slot(s, set, r) + off, n, dt, op);
}

static int next_set(shm *s) { return (int)(s->set++ & 1); }

/* The packed place of [p, p + bytes) inside one of this rank's regions, or 0. */
static uint64_t region_at(const shm *s, const void *ptr, size_t bytes) {
    const uint8_t *p = ptr;
    for (uint32_t id = 0; id < s->made && id < MAX_REGIONS; id++) {
        const region *g = &s->regions[id];
        const uint8_t *b = g->bytes ? g->base[s->rank] : NULL;
        if (b && p >= b && bytes <= g->bytes && (size_t)(p - b) <= g->bytes - bytes)
            return ((uint64_t)(id + 1) << REGION_SHIFT) | (uint64_t)(p - b);
    }
    return 0;
}

/* The packed place of an in-place buffer inside one of this rank's regions, or 0. */
static uint64_t shared_at(const shm *s, const void *send, const void *recv, size_t bytes) {
    return send == recv ? region_at(s, recv, bytes) : 0;
}

/* Every rank's published buffer of `bytes` as mapped in this process. */
static tr_status peer_buffers(shm *s, size_t bytes, uint8_t **buf) {
    for (int q = 0; q < s->world; q++) {
        uint64_t at = s->ranks[q].in_place;
        uint32_t id = (uint32_t)(at >> REGION_SHIFT) - 1;
        size_t off = (size_t)(at & (((uint64_t)1 << REGION_SHIFT) - 1));
        const region *g = id < MAX_REGIONS ? &s->regions[id] : NULL;
        if (!g || !g->bytes || off > g->bytes || bytes > g->bytes - off)
            return tr_error_set(TR_ERR_COMM, "rank %d's buffer lies in shared memory this rank does not hold (freed here, "
                                             "or allocated in another order)", q);
        buf[q] = g->base[q] + off;
    }
    return TR_OK;
}

/* Every rank's buffer in its region (all in place): each rank reduces its 1/W straight from
 * the peers' buffers into its own and writes the result into theirs, a block at a time so the
 * copies read it from L1; one barrier at the end. About 2 bytes of memory traffic per byte
 * reduced, half the staged path's, and no barrier per chunk. */
static tr_status all_reduce_shared(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), n = k->count, lo, hi;
    uint8_t *buf[MAX_SHARED_WORLD];
    TR_CHECK(peer_buffers(s, n * es, buf));
    /* Each rank owns the parts of each staging-sized chunk that it owns in the staged path,
     * so the sums are the same bits whichever path runs. */
    const size_t C = s->chunk / es, blk = 16384 / es;
    uint8_t *mine = buf[s->rank];
    for (size_t off = 0; off < n; off += C) {
        part(n - off < C ? n - off : C, es, s->rank, s->world, &lo, &hi);
        for (size_t i = off + lo; i < off + hi; i += blk) {
            size_t len = off + hi - i < blk ? off + hi - i : blk;
            for (int q = 0; q < s->world; q++)
                if (q != s->rank) tr_reduce_into(mine + i * es, buf[q] + i * es, len, k->dtype, k->op);
            for (int q = 0; q < s->world; q++)
                if (q != s->rank) memcpy(buf[q] + i * es, mine + i * es, len * es);
        }
    }
    return barrier(s, dl);
}

/* Publishes the parts of chunk [in, in + m) that the others reduce (not my own: I read it
 * from my buffer). */
static void stage_parts(shm *s, int set, const uint8_t *in, size_t m, size_t es) {
    for (int q = 0; q < s->world; q++) {
        size_t lo, hi;
        if (q == s->rank) continue;
        part(m, es, q, s->world, &lo, &hi);
        if (hi > lo) memcpy(slot(s, set, s->rank) + lo * es, in + lo * es, (hi - lo) * es);
    }
}

/* Per chunk: publish the parts the others reduce, barrier, reduce my part from my buffer and
 * their slots straight into my output and into the result slot, barrier, copy the others'
 * parts out of the result slot. About 4 bytes of memory traffic per byte reduced, against 2
 * for a memcpy.
 *
 * Once the job has allocated shared memory (s->made is the same on every rank), each rank
 * also says at the first chunk's barrier where its buffer lies in it and how many elements
 * it reduces; a rank whose buffer lies there stages nothing before it. After the barrier every
 * rank reads the same answers: all in shared memory with one count, the direct path; else
 * the ranks that staged nothing stage their chunk now and everyone meets once more (none: no
 * extra barrier). A rank whose count differs (a contract broken, or the fault point that dies
 * half-way) thus stays on the staged path, where its peers wait for the rest as they would for
 * a death inside the call. The
 * answers are read before a barrier that every rank reaches afterwards (the chunk's second one,
 * or the direct path's), so the next call cannot overwrite them too early; a call of no
 * elements has no such barrier and never asks. */
static tr_status all_reduce(shm *s, const tr_comm_call *k, double dl, int to_all) {
    size_t es = tr_dtype_size(k->dtype), C = s->chunk / es;
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv;
    int me = s->rank, out = to_all || me == k->root, staged = 0, set = 0;
    if (to_all && s->made && k->count) {
        uint64_t at = shared_at(s, k->send, k->recv, k->count * es);
        size_t m = k->count < C ? k->count : C;
        s->ranks[me].in_place = at;
        s->ranks[me].in_count = k->count;
        set = next_set(s);
        if (!at) stage_parts(s, set, src, m, es);
        TR_CHECK(barrier(s, dl));
        int all = 1, any = 0;
        for (int q = 0; q < s->world; q++) {
            all &= s->ranks[q].in_place != 0 && s->ranks[q].in_count == k->count;
            any |= s->ranks[q].in_place != 0;
        }
        if (all) return all_reduce_shared(s, k, dl);
        if (any) {
            if (at) stage_parts(s, set, src, m, es);
            TR_CHECK(barrier(s, dl));
        }
        staged = 1; /* the first chunk is published, its first barrier passed */
    }
    for (size_t off = 0; off < k->count; off += C) {
        size_t m = k->count - off < C ? k->count - off : C, lo, hi;
        const uint8_t *in = src + off * es;
        if (!staged) {
            set = next_set(s);
            stage_parts(s, set, in, m, es);
            TR_CHECK(barrier(s, dl));
        }
        staged = 0;
        part(m, es, me, s->world, &lo, &hi);
        uint8_t *res = slot(s, set, s->world);
        if (hi > lo) {
            size_t len = hi - lo;
            uint8_t *acc = out ? dst + (off + lo) * es : res + lo * es;
            int first = 1;
            for (int q = 0; q < s->world; q++) {
                if (q == me) continue;
                if (first) tr_reduce2(acc, in + lo * es, slot(s, set, q) + lo * es, len, k->dtype, k->op);
                else tr_reduce_into(acc, slot(s, set, q) + lo * es, len, k->dtype, k->op);
                first = 0;
            }
            if (out) memcpy(res + lo * es, acc, len * es);
        }
        TR_CHECK(barrier(s, dl));
        if (!out) continue;
        for (int q = 0; q < s->world; q++) {
            if (q == me) continue;
            part(m, es, q, s->world, &lo, &hi);
            if (hi > lo) memcpy(dst + (off + lo) * es, res + lo * es, (hi - lo) * es);
        }
    }
    return TR_OK;
}

/* In-place reduce-scatter and all-gather (NCCL's layout: rank r's part at r * count of a
 * buffer of W count elements) once the job has allocated shared memory: each rank says at a
 * first barrier where its whole buffer lies (mine; NULL: not in place) and its count. When
 * every rank's lies in shared memory with one count, buf gets them all as mapped here and
 * *direct is 1; else the caller goes the staged way, whose first barrier every rank reaches
 * after reading the answers. */
static tr_status meet_in_place(shm *s, const void *mine, size_t count, size_t es, double dl, uint8_t **buf, int *direct) {
    *direct = 0;
    if (!s->made || !count) return TR_OK;
    s->ranks[s->rank].in_place = mine ? region_at(s, mine, count * es * (size_t)s->world) : 0;
    s->ranks[s->rank].in_count = count;
    TR_CHECK(barrier(s, dl));
    for (int q = 0; q < s->world; q++)
        if (!s->ranks[q].in_place || s->ranks[q].in_count != count) return TR_OK;
    TR_CHECK(peer_buffers(s, count * es * (size_t)s->world, buf));
    *direct = 1;
    return TR_OK;
}

/* Every buffer in shared memory: each rank reduces its part straight from the peers' buffers,
 * a block at a time through L1 in rank order (the staged path's order, so the same bits), into
 * its own; one barrier at the end, after which the peers may write their buffers again. */
static tr_status reduce_scatter_shared(shm *s, const tr_comm_call *k, uint8_t **buf, double dl) {
    enum { BLOCK = 16384 };
    _Alignas(LINE) uint8_t acc[BLOCK];
    size_t es = tr_dtype_size(k->dtype), n = k->count, blk = BLOCK / es, at = (size_t)s->rank * n * es;
    for (size_t i = 0; i < n; i += blk) {
        size_t len = n - i < blk ? n - i : blk, off = at + i * es;
        tr_reduce2(acc, buf[0] + off, buf[1] + off, len, k->dtype, k->op);
        for (int q = 2; q < s->world; q++) tr_reduce_into(acc, buf[q] + off, len, k->dtype, k->op);
        memcpy(buf[s->rank] + off, acc, len * es);
    }
    return barrier(s, dl);
}

static tr_status reduce_scatter(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), C = s->chunk / es / (size_t)s->world, n = k->count;
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv;
    if (C == 0) return tr_error_set(TR_ERR_INVALID, "chunk_kb too small for %d ranks", s->world);
    uint8_t *buf[MAX_SHARED_WORLD];
    int direct;
    TR_CHECK(meet_in_place(s, dst == src + (size_t)s->rank * n * es ? src : NULL, n, es, dl, buf, &direct));
    if (direct) return reduce_scatter_shared(s, k, buf, dl);
    for (size_t off = 0; off < n; off += C) {
        size_t m = n - off < C ? n - off : C;
        int set = next_set(s);
        uint8_t *mine = slot(s, set, s->rank);
        for (int r = 0; r < s->world; r++) memcpy(mine + (size_t)r * m * es, src + ((size_t)r * n + off) * es, m * es);
        TR_CHECK(barrier(s, dl));
        reduce_slots(s, set, 0, m, es, k->dtype, k->op, dst + off * es, (size_t)s->rank * m * es);
    }
    return TR_OK;
}

/* Every buffer in shared memory: each rank copies the others' parts straight from their
 * buffers into its own; one barrier at the end, after which the owners may change them. */
static tr_status all_gather_shared(shm *s, const tr_comm_call *k, uint8_t **buf, double dl) {
    size_t part = k->count * tr_dtype_size(k->dtype);
    for (int q = 0; q < s->world; q++)
        if (q != s->rank) memcpy(buf[s->rank] + (size_t)q * part, buf[q] + (size_t)q * part, part);
    return barrier(s, dl);
}

/* broadcast, gather, all_gather, scatter: one copy in, one barrier, copies out. */
static tr_status move(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), n = k->count, W = (size_t)s->world, r0 = (size_t)k->root;
    size_t C = s->chunk / es / (k->kind == TR_COMM_SCATTER ? W : 1);
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv;
    int me = s->rank;
    for (size_t off = 0; off < n; off += C) {
        size_t m = n - off < C ? n - off : C;
        int set = next_set(s);
        switch (k->kind) {
        case TR_COMM_BROADCAST:
            if (me == k->root) memcpy(slot(s, set, me), dst + off * es, m * es);
            break;
        case TR_COMM_SCATTER:
            if (me == k->root)
                for (size_t r = 0; r < W; r++) memcpy(slot(s, set, me) + r * m * es, src + (r * n + off) * es, m * es);
            break;
        default: memcpy(slot(s, set, me), src + off * es, m * es); break;
        }
        TR_CHECK(barrier(s, dl));
        switch (k->kind) {
        case TR_COMM_BROADCAST:
            if (me != k->root) memcpy(dst + off * es, slot(s, set, (int)r0), m * es);
            break;
        case TR_COMM_SCATTER:
            memcpy(dst + off * es, slot(s, set, (int)r0) + (size_t)me * m * es, m * es);
            break;
        case TR_COMM_GATHER:
            if (me != k->root) break;
            /* fall through */
        default:
            for (size_t r = 0; r < W; r++) memcpy(dst + (r * n + off) * es, slot(s, set, (int)r), m * es);
            break;
        }
    }
    /* The last chunk's readers must finish before a later point-to-point or single-phase
     * operation could reuse the set two chunks on: guaranteed by the next operation's first
     * barrier, which every collective has before it writes a set it shares. */
    return TR_OK;
}

/* In place in communicator memory on every rank: the direct path; else move's copies. */
static tr_status all_gather(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), n = k->count;
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv, *buf[MAX_SHARED_WORLD];
    int direct;
    TR_CHECK(meet_in_place(s, src == dst + (size_t)s->rank * n * es ? dst : NULL, n, es, dl, buf, &direct));
    return direct ? all_gather_shared(s, k, buf, dl) : move(s, k, dl);
}

static tr_status send_bytes(shm *s, int peer, const uint8_t *p, size_t n, double dl) {
    shm_chan *ch = &s->chans[(size_t)s->rank * (size_t)s->world + (size_t)peer];
    uint8_t *ring = s->p2p + ((size_t)s->rank * (size_t)s->world + (size_t)peer) * s->p2p_bytes;
    uint64_t w = atomic_load_explicit(&ch->written, memory_order_relaxed);
    while (n) {
        uint64_t rd;
        WAIT_UNTIL(s, (rd = atomic_load_explicit(&ch->read, memory_order_acquire), w - rd < s->p2p_bytes), dl,
                   UINT64_MAX);
        size_t at = (size_t)(w % s->p2p_bytes), room = s->p2p_bytes - (size_t)(w - rd);
        size_t len = n < room ? n : room;
        if (len > s->p2p_bytes - at) len = s->p2p_bytes - at;
        memcpy(ring + at, p, len);
        w += len;
        p += len;
        n -= len;
        atomic_store_explicit(&ch->written, w, memory_order_release);
        notify(s);
    }
    return TR_OK;
}

static tr_status recv_bytes(shm *s, int peer, uint8_t *p, size_t n, double dl) {
    shm_chan *ch = &s->chans[(size_t)peer * (size_t)s->world + (size_t)s->rank];
    uint8_t *ring = s->p2p + ((size_t)peer * (size_t)s->world + (size_t)s->rank) * s->p2p_bytes;
    uint64_t rd = atomic_load_explicit(&ch->read, memory_order_relaxed);
    while (n) {
        uint64_t w;
        WAIT_UNTIL(s, (w = atomic_load_explicit(&ch->written, memory_order_acquire), w > rd), dl, UINT64_MAX);
        size_t at = (size_t)(rd % s->p2p_bytes), len = (size_t)(w - rd) < n ? (size_t)(w - rd) : n;
        if (len > s->p2p_bytes - at) len = s->p2p_bytes - at;
        memcpy(p, ring + at, len);
        rd += len;
        p += len;
        n -= len;
        atomic_store_explicit(&ch->read, rd, memory_order_release);
        notify(s);
    }
    return TR_OK;
}

static tr_status run(void *ctx, const tr_comm_op *op) {
    shm *s = ctx;
    const tr_comm_call *k = &op->call;
    s->op = op;
    atomic_store_explicit(&s->ranks[s->rank].seq, op->seq, memory_order_relaxed);
    size_t bytes = k->count * tr_dtype_size(k->dtype);
    tr_status st = TR_OK;
    if (s->world == 1) { /* nothing to exchange */
        if (k->kind == TR_COMM_SCATTER || k->kind == TR_COMM_GATHER || k->kind == TR_COMM_ALL_GATHER ||
            k->kind == TR_COMM_ALL_REDUCE || k->kind == TR_COMM_REDUCE || k->kind == TR_COMM_REDUCE_SCATTER)
            if (bytes && k->recv != k->send) memmove(k->recv, k->send, bytes);
        s->op = NULL;
        return TR_OK;
    }
    switch (k->kind) {
    case TR_COMM_BARRIER: st = barrier(s, op->deadline); break;
    case TR_COMM_SEND: st = send_bytes(s, k->root, k->send, bytes, op->deadline); break;
    case TR_COMM_RECV: st = recv_bytes(s, k->root, k->recv, bytes, op->deadline); break;
    case TR_COMM_ALL_REDUCE: st = all_reduce(s, k, op->deadline, 1); break;
    case TR_COMM_REDUCE: st = all_reduce(s, k, op->deadline, 0); break;
    case TR_COMM_REDUCE_SCATTER: st = reduce_scatter(s, k, op->deadline); break;
    case TR_COMM_BROADCAST:
    case TR_COMM_GATHER:
    case TR_COMM_SCATTER: st = move(s, k, op->deadline); break;
    case TR_COMM_ALL_GATHER: st = all_gather(s, k, op->deadline); break;
    default: st = tr_error_set(TR_ERR_UNSUPPORTED, "operation %d", (int)k->kind); break;
    }
    s->op = NULL;
    return st;
}

/* A new segment `name` of `size` bytes (a crashed run's of that name removed first), reserved
 * and mapped into *p. 0, or the errno with *what the step that failed (then the name is gone);
 * the caller unlinks the name once every rank has mapped it. */
static int seg_create(const char *name, size_t size, void **p, const char **what) {
    *p = NULL;
    shm_unlink(name);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600), e = 0;
    if (fd < 0) {
        *what = "create";
        return errno;
    }
    void *m = MAP_FAILED;
    if ((e = posix_fallocate(fd, 0, (off_t)size))) *what = "reserve";
    else if ((m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        e = errno;
        *what = "map";
    }
    close(fd);
    if (e) shm_unlink(name);
    else *p = m;
    return e;
}

/* Maps the existing segment `name` whole into *p (*size its bytes); 0 or the errno. */
static int seg_open(const char *name, size_t *size, void **p) {
    *p = NULL;
    int fd = shm_open(name, O_RDWR, 0600), e = 0;
    if (fd < 0) return errno;
    struct stat sb;
    void *m = MAP_FAILED;
    if (fstat(fd, &sb) != 0) e = errno;
    else if (sb.st_size <= 0) e = EAGAIN; /* not sized yet */
    else if ((m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) e = errno;
    close(fd);
    if (!e) {
        *p = m;
        *size = (size_t)sb.st_size;
    }
    return e;
}

static void mem_name(const shm *s, int r, uint32_t id, char *buf, size_t size) {
    snprintf(buf, size, "%s-%d-m%u", s->name, r, (unsigned)id);
}

static void region_release(shm *s, region *g, size_t size) {
    for (int q = 0; g->base && q < s->world; q++)
        if (g->base[q]) munmap(g->base[q], size);
    tr_free(g->base);
    *g = (region){0};
}

/* Each rank makes a segment of its own, all map all: three barriers, every rank the same way
 * whatever fails (then every rank returns NULL and the core gives plain memory). Names are
 * unlinked once all have mapped them. Region ids are never reused: past MAX_REGIONS allocs
 * in a communicator's life, or past MAX_SHARED_WORLD ranks, memory is plain. */
static tr_status mem_alloc(void *ctx, size_t bytes, double deadline, void **out) {
    shm *s = ctx;
    *out = NULL;
    uint32_t id = s->made++;
    if (id >= MAX_REGIONS || s->world == 1 || s->world > MAX_SHARED_WORLD) return TR_OK;
    region *g = &s->regions[id];
    size_t size = round_up(bytes, 4096);
    char name[200];
    const char *what;
    g->base = tr_calloc((size_t)s->world, sizeof *g->base);
    mem_name(s, s->rank, id, name, sizeof name);
    int me = s->rank, ok = g->base && seg_create(name, size, (void **)&g->base[me], &what) == 0, made = ok;
    s->activity = "alloc";
    s->ranks[me].mem_ok = ok;
    tr_status st = barrier(s, deadline);
    for (int q = 0; st == TR_OK && q < s->world; q++) ok &= s->ranks[q].mem_ok;
    for (int q = 0; st == TR_OK && ok && q < s->world; q++) {
        if (q == me) continue;
        char peer[200];
        size_t got = 0;
        mem_name(s, q, id, peer, sizeof peer);
        void *p;
        if (seg_open(peer, &got, &p) == 0 && got == size) g->base[q] = p;
        else ok = 0;
        if (p && got != size) munmap(p, got);
    }
    s->ranks[me].mem_ok = ok;
    if (st == TR_OK) st = barrier(s, deadline);
    if (made) shm_unlink(name);
    for (int q = 0; st == TR_OK && q < s->world; q++) ok &= s->ranks[q].mem_ok;
    /* Once more, so that no rank's next alloc rewrites mem_ok before every rank has read it. */
    if (st == TR_OK) st = barrier(s, deadline);
    s->activity = "joining";
    if (st != TR_OK || !ok) {
        region_release(s, g, size);
        return st;
    }
    g->bytes = size;
    *out = g->base[me];
    return TR_OK;
}

static void mem_free(void *ctx, void *ptr) {
    shm *s = ctx;
    for (uint32_t id = 0; id < s->made && id < MAX_REGIONS; id++)
        if (s->regions[id].bytes && s->regions[id].base[s->rank] == ptr) {
            region_release(s, &s->regions[id], s->regions[id].bytes);
            return;
        }
}

static void destroy(void *ctx) {
    shm *s = ctx;
    if (!s) return;
    for (uint32_t id = 0; id < s->made && id < MAX_REGIONS; id++)
        if (s->regions[id].bytes) region_release(s, &s->regions[id], s->regions[id].bytes);
    if (s->rank == 0 && !s->unlinked && s->name[0]) shm_unlink(s->name);
    if (s->base) munmap(s->base, s->size);
    tr_free(s);
}

static void abort_all(void *ctx) {
    shm *s = ctx;
    int32_t none = 0;
    atomic_compare_exchange_strong(&s->h->abort_by, &none, s->rank + 1);
    notify(s);
}

static void layout(shm *s, size_t total_hint) {
    size_t W = (size_t)s->world, off = round_up(sizeof(shm_header), LINE);
    (void)total_hint;
    s->h = (shm_header *)s->base;
    s->ranks = (shm_rank *)(s->base + off);
    off += W * sizeof(shm_rank);
    s->chans = (shm_chan *)(s->base + off);
    off += W * W * sizeof(shm_chan);
    off = round_up(off, 4096);
    s->p2p = s->base + off;
    off += W * W * s->p2p_bytes;
    s->data = s->base + round_up(off, 4096);
}

static size_t total_size(size_t W, size_t chunk, size_t p2p) {
    size_t off = round_up(sizeof(shm_header), LINE) + W * sizeof(shm_rank) + W * W * sizeof(shm_chan);
    off = round_up(off, 4096) + W * W * p2p;
    return round_up(off, 4096) + 2 * (W + 1) * chunk;
}

static tr_status join(shm *s, double deadline) {
    if (s->rank == 0) {
        const char *what = "";
        void *p;
        int e = seg_create(s->name, s->size, &p, &what);
        if (e && !strcmp(what, "reserve"))
            return tr_error_set(TR_ERR_COMM, "cannot reserve %zu bytes of shared memory for %s: %s (is /dev/shm "
                                             "large enough? lower chunk_kb)", s->size, s->name, strerror(e));
        if (e) return tr_error_set(TR_ERR_COMM, "cannot %s shared memory %s: %s", what, s->name, strerror(e));
        s->base = p;
        layout(s, s->size);
        s->h->magic = SHM_MAGIC;
        s->h->world = (uint32_t)s->world;
        s->h->creator_pid = (uint32_t)getpid();
        s->h->chunk_bytes = s->chunk;
        s->h->p2p_bytes = s->p2p_bytes;
        s->h->total_bytes = s->size;
        atomic_store(&s->ranks[0].pid, (int32_t)getpid());
        atomic_store(&s->h->attached, 1);
        atomic_store_explicit(&s->h->ready, 1, memory_order_release);
    } else {
        for (;;) {
            size_t got;
            void *p;
            if (seg_open(s->name, &got, &p) == 0) {
                shm_header *h = p;
                if (got >= sizeof(shm_header) && atomic_load_explicit(&h->ready, memory_order_acquire) &&
                    h->magic == SHM_MAGIC && !tr_process_gone((int)h->creator_pid)) {
                    if (h->world != (uint32_t)s->world || h->total_bytes != (uint64_t)got || h->chunk_bytes != s->chunk ||
                        h->p2p_bytes != s->p2p_bytes) {
                        unsigned hw = h->world;
                        munmap(p, got);
                        return tr_error_set(TR_ERR_COMM, "%s was made for %u ranks (or other chunk_kb/p2p_kb), "
                                                         "this rank expects %d", s->name, hw, s->world);
                    }
                    s->base = p;
                    break;
                }
                munmap(p, got);
            }
            if (tr_now() > deadline)
                return tr_error_set(TR_ERR_TIMEOUT, "timed out joining: rank 0 never created %s", s->name);
            nanosleep(&(struct timespec){0, 2000000}, NULL);
        }
        layout(s, s->size);
        atomic_store(&s->ranks[s->rank].pid, (int32_t)getpid());
        atomic_fetch_add(&s->h->attached, 1);
    }
    /* Everyone mapped: the name can go (rank 0), nothing outlives the processes. */
    while (atomic_load(&s->h->attached) < s->world) {
        if (tr_now() > deadline) {
            char missing[256] = "";
            size_t len = 0;
            for (int r = 0; r < s->world && len < sizeof missing - 16; r++)
                if (!atomic_load(&s->ranks[r].pid)) len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", r);
            return tr_error_set(TR_ERR_TIMEOUT, "timed out joining %s: these ranks never joined: %s", s->name, missing);
        }
        if (s->rank != 0 && tr_process_gone((int)s->h->creator_pid))
            return tr_error_set(TR_ERR_COMM, "rank 0 (pid %u) died while the job was joining", s->h->creator_pid);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (s->rank == 0) {
        shm_unlink(s->name);
        s->unlinked = 1;
    }
    return TR_OK;
}

static tr_status create(void **ctx, const tr_options *o, const tr_comm_env *env, double deadline) {
    *ctx = NULL;
    shm *s = tr_calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    s->rank = env->rank;
    s->world = env->size;
    if (env->local_size != env->size) {
        tr_free(s);
        return tr_error_set(TR_ERR_UNSUPPORTED, "shm joins ranks of one host: this job spans hosts (%d ranks, %d "
                                                "here); across hosts use strategy.backend mpi (nccl for GPU ranks) with "
                                                "ranks that mpirun or srun started", env->size, env->local_size);
    }
    size_t W = (size_t)s->world, pairs = W * W;
    s->chunk = round_up((size_t)tr_options_int(o, "chunk_kb") * 1024, 4096);
    s->p2p_bytes = round_up((size_t)tr_options_int(o, "p2p_kb") * 1024, 4096);
    s->spin_s = (double)tr_options_int(o, "spin_us") * 1e-6;
    s->activity = "joining";
    /* Keep the segment modest with many ranks (container /dev/shm is often 64 MiB). */
    while (s->p2p_bytes > 4096 && pairs * s->p2p_bytes > ((size_t)32 << 20)) s->p2p_bytes /= 2;
    while (s->chunk > 65536 && 2 * (W + 1) * s->chunk > ((size_t)128 << 20)) s->chunk /= 2;
    s->size = total_size(W, s->chunk, s->p2p_bytes);
    snprintf(s->name, sizeof s->name, "/trainer-%s", env->job_id[0] ? env->job_id : "job");
    tr_status st = join(s, deadline);
    if (st != TR_OK) {
        destroy(s);
        return st;
    }
    *ctx = s;
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "chunk_kb", .type = TR_OPTION_INT, .default_value = "256", .min = 4, .max = 1 << 20,
     .doc = "per-rank staging slot in KiB: payloads move in chunks of this size"},
    {.key = "p2p_kb", .type = TR_OPTION_INT, .default_value = "256", .min = 4, .max = 1 << 20,
     .doc = "ring per ordered pair of ranks for send/recv, KiB"},
    {.key = "spin_us", .type = TR_OPTION_INT, .default_value = "200", .min = 0, .max = 10000000,
     .doc = "busy-wait (yielding) this long for peers before sleeping, microseconds"},
};
static const tr_comm_backend_ops ops = {
    .create = create, .destroy = destroy, .run = run, .abort = abort_all, .alloc = mem_alloc, .free = mem_free};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_COMM, .name = "shm", .version = "0.1.0",
    .description = "ranks on one host over POSIX shared memory (the CPU default)",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops, .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
