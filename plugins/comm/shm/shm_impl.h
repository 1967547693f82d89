/* The shm backend's private header: the segment's layout (header, per-rank lines, data slots,
 * point-to-point rings), the rank's view of it, and what its three files share: shm.c (the
 * segment, rendezvous and allocations), shm_wait.c (the barrier and the health checks) and
 * shm_collect.c (the collectives). The design: shm.c's header comment. */
#ifndef TRAINER_COMM_SHM_IMPL_H
#define TRAINER_COMM_SHM_IMPL_H

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

static inline size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
/* Slot r of data set `set` (r == world: the result slot). */
uint8_t *shm_slot(shm *s, int set, int r);
/* Wakes the ranks asleep on the segment's futex, if any. */
void shm_notify(shm *s);
/* Every rank's arrival at the next barrier phase, by the deadline; a timeout, a dead peer or
 * an abort is an error naming the ranks. */
tr_status shm_barrier(shm *s, double deadline);
/* Fails (naming the ranks) past the deadline, after an abort or a death another rank saw.
 * It watches the ranks not yet at barrier phase `target` (peer < 0), or the peer of a
 * point-to-point wait (peer >= 0). A watched process gone fails it too, with *gone set and no
 * message yet: the caller looks at what it waits for once more (the peer may have delivered
 * it, then exited) and only then calls shm_report_death. */
tr_status shm_check_health(shm *s, double deadline, uint64_t target, int peer, int *gone);
/* Publishes rank `gone` (if >= 0) as dead unless another death was first, and returns the
 * error naming the first; st when no death is known (its message set by the caller). */
tr_status shm_report_death(shm *s, tr_status st, int gone);
/* Sleeps on the segment's futex while its progress counter still reads seen (2 ms at most). */
void shm_doze(shm *s, uint32_t seen);

static inline void shm_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until cond holds. A peer is usually just behind: spin with pause, then yield for up
 * to spin_us (a yielding thread keeps its CPU awake, which matters in VMs where waking an idle
 * CPU costs 100 us), then sleep on the segment's futex so a waiting rank does not steal the
 * core of a rank still computing (ranks and their communicator threads may outnumber cores).
 * Between naps (2 ms at most) the deadline, the abort flag and the peers are checked; when
 * they say stop, cond is looked at once more before the error is returned. */
#define WAIT_UNTIL(s, cond, deadline, target, peer)                                           \
    do {                                                                                      \
        double t0_ = 0;                                                                       \
        for (unsigned spins_ = 0;; spins_++) {                                                \
            uint32_t seen_ = atomic_load_explicit(&(s)->h->progress, memory_order_acquire);   \
            if (cond) break;                                                                  \
            if (spins_ < 128) {                                                               \
                shm_cpu_relax();                                                              \
                continue;                                                                     \
            }                                                                                 \
            double now_ = tr_now();                                                           \
            if (t0_ == 0) t0_ = now_;                                                         \
            if (now_ - t0_ < (s)->spin_s) sched_yield();                                      \
            else shm_doze((s), seen_);                                                        \
            int gone_;                                                                        \
            tr_status hs_ = shm_check_health((s), (deadline), (target), (peer), &gone_);      \
            if (hs_ != TR_OK) {                                                               \
                if (cond) break; /* it came after all: a peer that delivered, then exited */  \
                return shm_report_death((s), hs_, gone_);                                     \
            }                                                                                 \
        }                                                                                     \
    } while (0)

/* The backend's run entry: one collective or point-to-point operation. */
tr_status shm_run(void *ctx, const tr_comm_op *op);

#endif
