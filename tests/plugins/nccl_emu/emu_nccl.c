/* plugins/comm/nccl/nccl_rt.h over host memory: an emulated NCCL, so that the nccl backend
 * (nccl.c: the rendezvous, the staging of host buffers, the in-place rules, gather and scatter
 * as grouped sends, the errors) is tested on machines without a GPU. Built with nccl.c as the
 * comm plugin `nccl_emu`.
 *
 * "Device memory" is host memory. TRAINER_NCCL_EMU_HOST=1 makes every buffer count as host
 * memory (the staging path); otherwise every buffer counts as device memory.
 * TRAINER_NCCL_EMU_DEVICE=N puts every rank on GPU N (to see the one-rank-per-GPU refusal).
 * TRAINER_NCCL_EMU_INIT_FAIL=R makes rank R's nc_init fail, TRAINER_NCCL_EMU_INIT_DIE=R makes
 * rank R's process exit there (status 9): the others' joins must stop promptly.
 * TRAINER_NCCL_EMU_STREAM=1 refuses to wait for device work without the compute stream of a
 * bound device (what a strategy that bound its GPU must hand over, tr_accel_bound_stream), and
 * an operation on device buffers that was not marked ready when it was issued (the backend's
 * `issued` entry, called by tr_comm_issue on the issuing thread). Leaving (nc_destroy without
 * abort) completes once every rank is leaving, as ncclCommFinalize does; a rank that waited for
 * the others until its limit says so on stderr ("nccl_emu: rank R waited ...").
 *
 * TRAINER_NCCL_EMU_DIR=DIR puts that segment in a file in DIR instead of /dev/shm: NCCL's
 * network between hosts that share only a file system (tests/e2e/hosts.sh).
 *
 * A communicator is a shared-memory segment named by the unique id: a header, then one slot of
 * EMU_SLOT bytes per rank. Each call runs to the end before it returns: a collective is "copy
 * my contribution into my slot, wait for every rank's, compute my result from the slots, wait
 * until every rank has read"; a send is "fill my slot, wait for the peer's acknowledgement",
 * a receive "wait for the peer's slot, copy, acknowledge". Reductions go in rank order. Every
 * wait watches the deadline, the stop callback and abort, as NCCL's stream would be watched.
 *
 * Because the slots hold a copy of every contribution, the emulator would get right what NCCL
 * gets wrong: buffers that overlap other than in NCCL's in-place layouts, and overlapping
 * device copies. It refuses those calls instead, so the backend is held to NCCL's rules. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nccl_rt.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

#define EMU_SLOT ((size_t)64 << 20)
#define EMU_MAX 16
#define EMU_HEADER 65536

typedef struct emu_rank {
    _Atomic uint64_t arrive, depart;
    char pad[48];
} emu_rank;

typedef struct emu_seg {
    _Atomic uint64_t joined, leaving;
    emu_rank ranks[EMU_MAX];
    _Atomic uint64_t sent[EMU_MAX][EMU_MAX], acked[EMU_MAX][EMU_MAX];
} emu_seg;

struct nc_comm {
    char name[128];
    emu_seg *seg;
    size_t size;
    int rank, world, unlinked;
    void *compute;      /* the bound device's compute stream, or NULL */
    int require_stream; /* TRAINER_NCCL_EMU_STREAM */
    _Atomic unsigned char marked[NC_SLOTS]; /* nc_mark_ready's marks, per operation slot */
    uint64_t seq;
    void *scratch;
    size_t scratch_size;
    atomic_int aborted;
    double span; /* the join's time limit: leaving gets as long (at most 30 s here) */
    double deadline;
    nc_stop_fn stop;
    void *stop_arg;
};

_Static_assert(sizeof(emu_seg) <= EMU_HEADER, "the header fits its page");

static char *slot(nc_comm *c, int r) { return (char *)c->seg + EMU_HEADER + (size_t)r * EMU_SLOT; }

tr_status nc_load(void) { return TR_OK; }

tr_status nc_unique_id(unsigned char id[NC_ID_BYTES]) {
    static atomic_uint counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, NC_ID_BYTES);
    snprintf((char *)id, NC_ID_BYTES, "%x-%lx-%x", (unsigned)getpid(), (unsigned long)ts.tv_nsec,
             atomic_fetch_add(&counter, 1));
    return TR_OK;
}

tr_status nc_pick_device(int fallback, int *device, char key[NC_KEY_BYTES]) {
    const char *forced = getenv("TRAINER_NCCL_EMU_DEVICE");
    *device = forced && *forced ? atoi(forced) : fallback;
    memset(key, 0, NC_KEY_BYTES);
    snprintf(key, NC_KEY_BYTES, "emu-gpu-%d", *device);
    return TR_OK;
}

/* Waits until every rank's counter (at stride from base, in 8-byte steps) reaches target. */
static tr_status wait_all(nc_comm *c, _Atomic uint64_t *first, size_t stride, uint64_t target) {
    for (unsigned spins = 0;; spins++) {
        int all = 1;
        for (int r = 0; r < c->world && all; r++) all = atomic_load((_Atomic uint64_t *)((char *)first + (size_t)r * stride)) >= target;
        if (all) return TR_OK;
        if (atomic_load(&c->aborted)) return tr_error_set(TR_ERR_ABORTED, "the communicator was aborted");
        if (spins % 64 == 63) {
            if (c->stop && c->stop(c->stop_arg)) return tr_error_set(TR_ERR_ABORTED, "stopped");
            if (tr_now() > c->deadline) return tr_error_set(TR_ERR_TIMEOUT, "timed out");
            nanosleep(&(struct timespec){0, 20000}, NULL);
        } else {
            sched_yield();
        }
    }
}

static tr_status wait_one(nc_comm *c, _Atomic uint64_t *v, uint64_t target) { return wait_all(c, v, 0, target); }

/* The segment: a POSIX shared-memory name, or a file in TRAINER_NCCL_EMU_DIR. */
static int seg_open(const char *name) {
    const char *dir = getenv("TRAINER_NCCL_EMU_DIR");
    if (!dir || !*dir) return shm_open(name, O_CREAT | O_RDWR, 0600);
    char path[1024];
    snprintf(path, sizeof path, "%s%s", dir, name);
    return open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
}
static void seg_unlink(const char *name) {
    const char *dir = getenv("TRAINER_NCCL_EMU_DIR");
    if (!dir || !*dir) {
        shm_unlink(name);
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s%s", dir, name);
    unlink(path);
}

/* Whether the environment variable `name` names this rank (fault injection). */
static int env_names_rank(const char *name, int rank) {
    const char *v = getenv(name);
    return v && *v && atoi(v) == rank;
}

tr_status nc_init(nc_comm **out, int size, int rank, const unsigned char id[NC_ID_BYTES], int device, void *compute,
                  double deadline, nc_stop_fn stop, void *stop_arg) {
    (void)device;
    *out = NULL;
    if (size > EMU_MAX) return tr_error_set(TR_ERR_UNSUPPORTED, "the emulated NCCL takes at most %d ranks", EMU_MAX);
    if (env_names_rank("TRAINER_NCCL_EMU_INIT_DIE", rank)) _exit(9);
    if (env_names_rank("TRAINER_NCCL_EMU_INIT_FAIL", rank))
        return tr_error_set(TR_ERR_COMM, "emulated ncclCommInitRank failed on rank %d (TRAINER_NCCL_EMU_INIT_FAIL)",
                            rank);
    nc_comm *c = tr_calloc(1, sizeof *c);
    if (!c) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    c->rank = rank;
    c->world = size;
    c->compute = compute;
    c->span = deadline - tr_now() > 1.0 ? deadline - tr_now() : 1.0;
    c->deadline = deadline;
    c->stop = stop;
    c->stop_arg = stop_arg;
    const char *rs = getenv("TRAINER_NCCL_EMU_STREAM");
    c->require_stream = rs && *rs && *rs != '0';
    c->size = EMU_HEADER + (size_t)size * EMU_SLOT;
    snprintf(c->name, sizeof c->name, "/trainer-ncclemu-%.60s", (const char *)id);
    int fd = seg_open(c->name);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && (size_t)sb.st_size < c->size && ftruncate(fd, (off_t)c->size) != 0) {
        close(fd);
        fd = -1;
    }
    void *m = fd >= 0 ? mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd);
    if (m == MAP_FAILED) {
        tr_status st = tr_error_set(TR_ERR_IO, "emulated NCCL: cannot map %s: %s", c->name, strerror(errno));
        seg_unlink(c->name);
        tr_free(c);
        return st;
    }
    c->seg = m;
    atomic_fetch_add(&c->seg->joined, 1);
    /* NCCL's join waits for every rank; the driver polls it against the deadline and stop. */
    tr_status st = wait_one(c, &c->seg->joined, (uint64_t)size);
    if (st != TR_OK) { /* the name is of no use now: whoever leaves removes it */
        seg_unlink(c->name);
        c->unlinked = 1;
        nc_destroy(c, 1);
        return st;
    }
    if (rank == 0) {
        seg_unlink(c->name);
        c->unlinked = 1;
    }
    *out = c;
    return TR_OK;
}

/* Leaving as the driver does it (ncclCommFinalize, polled): done only once every rank is
 * leaving, bounded by the deadline and by the stop callback (a peer that aborted or died). A
 * rank still waiting at the deadline says so: the driver would abort its communicator there,
 * after a teardown as long as the join's time limit (a strategy that leaves its ranks one
 * after another, each waiting for the next). */
static void leave(nc_comm *c) {
    atomic_fetch_add(&c->seg->leaving, 1);
    double limit = c->span < 30.0 ? c->span : 30.0;
    c->deadline = tr_now() + limit;
    char msg[1024]; /* the thread's message stays the run's, as the driver keeps it */
    snprintf(msg, sizeof msg, "%s", tr_error_msg());
    tr_status st = wait_one(c, &c->seg->leaving, (uint64_t)c->world);
    if (st == TR_ERR_TIMEOUT)
        fprintf(stderr, "nccl_emu: rank %d waited %.0f s for the other ranks to leave NCCL (ncclCommFinalize would "
                        "abort at its deadline)\n", c->rank, limit);
    if (st != TR_OK) tr_error_set(TR_OK, "%s", msg);
}

void nc_destroy(nc_comm *c, int abort_first) {
    if (!c) return;
    if (!abort_first && c->seg && !atomic_load(&c->aborted)) leave(c);
    if (!c->unlinked && c->rank == 0) seg_unlink(c->name);
    if (c->seg) munmap(c->seg, c->size);
    tr_free(c->scratch);
    tr_free(c);
}

void nc_abort(nc_comm *c) {
    if (c) atomic_store(&c->aborted, 1);
}

tr_status nc_begin(nc_comm *c, double deadline, nc_stop_fn stop, void *stop_arg) {
    c->deadline = deadline;
    c->stop = stop;
    c->stop_arg = stop_arg;
    if (atomic_load(&c->aborted)) return tr_error_set(TR_ERR_ABORTED, "the communicator was aborted");
    return TR_OK;
}

tr_status nc_mark_ready(nc_comm *c, unsigned slot) {
    if (c->compute) atomic_store(&c->marked[slot], 1);
    return TR_OK;
}

tr_status nc_wait_compute(nc_comm *c, unsigned slot) {
    int marked = atomic_exchange(&c->marked[slot], 0);
    if (c->require_stream && !c->compute)
        return tr_error_set(TR_ERR_INVALID, "emulated NCCL: no compute stream was handed over to wait for "
                                            "(TRAINER_NCCL_EMU_STREAM)");
    if (c->require_stream && !marked)
        return tr_error_set(TR_ERR_INVALID, "emulated NCCL: operation slot %u on device buffers was not marked ready "
                                            "when it was issued (TRAINER_NCCL_EMU_STREAM)", slot);
    return TR_OK;
}

int nc_is_device(nc_comm *c, const void *p) {
    (void)c;
    (void)p;
    const char *h = getenv("TRAINER_NCCL_EMU_HOST");
    return !(h && *h && *h != '0');
}

tr_status nc_scratch(nc_comm *c, size_t bytes, void **p) {
    if (bytes > c->scratch_size) {
        tr_free(c->scratch);
        c->scratch = tr_malloc(bytes);
        c->scratch_size = c->scratch ? bytes : 0;
        if (!c->scratch) return tr_error_set(TR_ERR_NOMEM, "no room for %zu bytes of staging", bytes);
    }
    *p = c->scratch;
    return TR_OK;
}

tr_status nc_upload(nc_comm *c, void *dst, const void *src, size_t bytes) {
    (void)c;
    if (bytes) memmove(dst, src, bytes);
    return TR_OK;
}

static int overlap(const void *a, size_t an, const void *b, size_t bn) {
    const char *x = a, *y = b;
    return an && bn && x < y + bn && y < x + an;
}

/* NCCL's rule: send and recv are disjoint or in its in-place layout (send == recv + at for the
 * gathers, recv == send + at for reduce-scatter, at 0 for the others). */
static tr_status legal(const char *what, const void *send, size_t sb, const void *recv, size_t rb, int in_place) {
    if (!overlap(send, sb, recv, rb) || in_place) return TR_OK;
    return tr_error_set(TR_ERR_INTERNAL, "emulated NCCL: %s's send and recv overlap outside NCCL's in-place layout",
                        what);
}

tr_status nc_copy(nc_comm *c, void *dst, const void *src, size_t bytes) {
    if (dst != src && overlap(dst, bytes, src, bytes))
        return tr_error_set(TR_ERR_INTERNAL, "emulated CUDA: a device copy between overlapping ranges");
    return nc_upload(c, dst, src, bytes);
}
tr_status nc_download(nc_comm *c, void *dst, const void *src, size_t bytes) { return nc_upload(c, dst, src, bytes); }

/* One collective: my contribution into my slot, everyone's in, fn computes my result, everyone
 * done reading. */
typedef void (*result_fn)(nc_comm *c, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root);

static tr_status collective(nc_comm *c, const void *mine, size_t mine_bytes, result_fn fn, void *recv, size_t n,
                            tr_dtype dt, tr_red_op op, int root) {
    if (mine_bytes > EMU_SLOT)
        return tr_error_set(TR_ERR_UNSUPPORTED, "the emulated NCCL moves at most %zu MiB per rank per call",
                            EMU_SLOT >> 20);
    uint64_t s = ++c->seq;
    if (mine_bytes) memcpy(slot(c, c->rank), mine, mine_bytes);
    atomic_store(&c->seg->ranks[c->rank].arrive, s);
    TR_CHECK(wait_all(c, &c->seg->ranks[0].arrive, sizeof(emu_rank), s));
    fn(c, recv, n, dt, op, root);
    atomic_store(&c->seg->ranks[c->rank].depart, s);
    return wait_all(c, &c->seg->ranks[0].depart, sizeof(emu_rank), s);
}

/* recv = the reduction over ranks of the n elements at offset `at` of every slot. */
static void reduce_slots(nc_comm *c, void *recv, size_t n, tr_dtype dt, tr_red_op op, size_t at) {
    size_t b = n * tr_dtype_size(dt);
    if (!b) return;
    memcpy(recv, slot(c, 0) + at, b);
    for (int r = 1; r < c->world; r++) tr_reduce_into(recv, slot(c, r) + at, n, dt, op == TR_RED_AVG ? TR_RED_SUM : op);
    if (op == TR_RED_AVG) tr_scale_div(recv, n, dt, c->world);
}

static void r_all_reduce(nc_comm *c, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root) {
    (void)root;
    reduce_slots(c, recv, n, dt, op, 0);
}
static void r_reduce(nc_comm *c, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root) {
    if (c->rank == root) reduce_slots(c, recv, n, dt, op, 0);
}
static void r_reduce_scatter(nc_comm *c, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root) {
    (void)root;
    reduce_slots(c, recv, n, dt, op, (size_t)c->rank * n * tr_dtype_size(dt));
}
static void r_broadcast(nc_comm *c, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root) {
    (void)op;
    if (n && c->rank != root) memcpy(recv, slot(c, root), n * tr_dtype_size(dt));
}
static void r_all_gather(nc_comm *c, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root) {
    (void)op;
    (void)root;
    size_t b = n * tr_dtype_size(dt);
    for (int r = 0; b && r < c->world; r++) memcpy((char *)recv + (size_t)r * b, slot(c, r), b);
}

tr_status nc_all_reduce(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op) {
    size_t b = n * tr_dtype_size(dt);
    TR_CHECK(legal("all_reduce", send, b, recv, b, send == recv));
    return collective(c, send, b, r_all_reduce, recv, n, dt, op, 0);
}

tr_status nc_reduce(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root) {
    size_t b = n * tr_dtype_size(dt);
    if (c->rank == root) TR_CHECK(legal("reduce", send, b, recv, b, send == recv));
    return collective(c, send, b, r_reduce, recv, n, dt, op, root);
}

tr_status nc_broadcast(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, int root) {
    size_t b = n * tr_dtype_size(dt);
    if (c->rank == root) TR_CHECK(legal("broadcast", send, b, recv, b, send == recv));
    if (c->rank == root && b && send != recv) memcpy(recv, send, b);
    return collective(c, c->rank == root ? send : NULL, c->rank == root ? b : 0, r_broadcast, recv, n, dt, TR_RED_SUM,
                      root);
}

tr_status nc_reduce_scatter(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op) {
    size_t b = n * tr_dtype_size(dt);
    TR_CHECK(legal("reduce_scatter", send, (size_t)c->world * b, recv, b,
                   (const char *)recv == (const char *)send + (size_t)c->rank * b));
    return collective(c, send, (size_t)c->world * b, r_reduce_scatter, recv, n, dt, op, 0);
}

tr_status nc_all_gather(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt) {
    size_t b = n * tr_dtype_size(dt);
    TR_CHECK(legal("all_gather", send, b, recv, (size_t)c->world * b,
                   (const char *)send == (const char *)recv + (size_t)c->rank * b));
    return collective(c, send, b, r_all_gather, recv, n, dt, TR_RED_SUM, 0);
}

tr_status nc_send(nc_comm *c, const void *buf, size_t n, tr_dtype dt, int peer) {
    size_t b = n * tr_dtype_size(dt);
    if (b > EMU_SLOT) return tr_error_set(TR_ERR_UNSUPPORTED, "the emulated NCCL sends at most %zu MiB", EMU_SLOT >> 20);
    if (b) memcpy(slot(c, c->rank), buf, b);
    uint64_t k = atomic_fetch_add(&c->seg->sent[c->rank][peer], 1) + 1;
    return wait_one(c, &c->seg->acked[c->rank][peer], k);
}

tr_status nc_recv(nc_comm *c, void *buf, size_t n, tr_dtype dt, int peer) {
    uint64_t k = atomic_load(&c->seg->acked[peer][c->rank]) + 1;
    TR_CHECK(wait_one(c, &c->seg->sent[peer][c->rank], k));
    size_t b = n * tr_dtype_size(dt);
    if (b) memcpy(buf, slot(c, peer), b);
    atomic_store(&c->seg->acked[peer][c->rank], k);
    return TR_OK;
}

tr_status nc_group_start(nc_comm *c) {
    (void)c;
    return TR_OK;
}

tr_status nc_group_end(nc_comm *c) {
    (void)c;
    return TR_OK;
}

tr_status nc_finish(nc_comm *c) { /* every call ran to its end already */
    (void)c;
    return TR_OK;
}
