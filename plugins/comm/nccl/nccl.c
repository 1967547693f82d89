/* Communication backend `nccl`: the ranks' GPUs joined by NCCL, one rank per GPU.
 *
 * Rendezvous: NCCL's unique id is made by rank 0 and handed to the others. On one host it
 * goes through a small POSIX shared-memory segment named after the launcher's job id
 * (/trainer-<job id>-nccl: rank 0 creates it, the others open it, rank 0 unlinks the name once
 * all have mapped it, so nothing is left in /dev/shm whatever way the job ends). Across hosts
 * it goes over MPI (MPI_Bcast; a build with MPI, the job launched by mpirun). The segment
 * stays mapped for the communicator's life: it holds each rank's process id, GPU and current
 * operation, and an abort word, so that on one host a rank that died or aborted stops the
 * others within milliseconds and a timeout names the ranks that did not arrive (NCCL itself
 * would wait for ever). Two ranks on one GPU are refused at join, naming them (NCCL cannot
 * run them; the one-GPU testing mode is backend shm).
 *
 * The GPU is the one whose context is current on the thread that makes the communicator
 * (strategies bind their device first), else the GPU at the local rank. Each operation runs
 * on the communicator's own stream: with device buffers it is first ordered after the work
 * queued on the compute stream when it was issued (an event recorded, on the issuing thread,
 * on the stream of the device bound at creation, tr_accel_bound_stream; without one, a wait
 * for the whole device), since the gradients it reduces are computed there: a bucket's
 * all-reduce waits for the kernels that made its gradients, not for the rest of the backward
 * queued since; it runs, and the communicator thread waits for it, bounded by the deadline
 * and watching the abort word and the peers.
 *
 * Buffers may be device memory of that GPU (straight to NCCL) or host memory (staged through
 * the communicator's device scratch: uploaded, reduced, downloaded), so every caller of the
 * communicator API works, and a strategy that keeps its gradients on the GPU
 * (tr_comm_device_memory) moves no bytes through the host. In-place calls in the layout of
 * trainer/comm.h that NCCL does not take in place (send == recv for gather, all-gather,
 * scatter, reduce-scatter) copy the send buffer into the scratch first. gather and scatter
 * are grouped sends and receives. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef TR_NCCL_MPI
#include <mpi.h>
#endif

#include "nccl_rt.h"
#include "trainer/accel.h"
#include "trainer/comm_backend.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

#ifndef NCCL_PLUGIN_NAME
#define NCCL_PLUGIN_NAME "nccl"
#define NCCL_PLUGIN_DESCRIPTION "GPU ranks over NCCL, one GPU per rank (libnccl.so.2, opened at run time)"
#endif

#define BOOT_MAGIC 0x74726e63636c32ull /* "trnccl2" */

typedef struct boot_rank {
    _Atomic uint32_t pid;            /* 0 until the rank has joined */
    int32_t device;
    _Atomic uint64_t seq;            /* the operation it is in (or last finished) */
    char key[NC_KEY_BYTES];          /* its GPU's PCI bus id */
} boot_rank;

typedef struct boot_header {
    uint64_t magic;
    uint32_t world;
    uint32_t creator_pid;
    unsigned char id[NC_ID_BYTES];
    _Atomic uint32_t ready;          /* set by rank 0 once id is written */
    _Atomic int32_t aborted_by;      /* rank + 1 of the rank that aborted, 0 */
    _Atomic int32_t died;            /* rank + 1 of the first rank seen dead, 0 */
    boot_rank ranks[];
} boot_header;

typedef struct nccl_ctx {
    nc_comm *nc;
    int rank, world, device;
    char key[NC_KEY_BYTES];
    char name[200];                  /* the segment's; "" across hosts */
    boot_header *boot;
    size_t boot_size;
    int unlinked;
    atomic_int broken;               /* set by run's failures and by abort (any thread) */
    int mpi_initialized;             /* this communicator called MPI_Init (it finalizes) */
    double next_peer_check;
    tr_status stop_code;             /* why should_stop said stop: ABORTED or COMM (a peer died) */
    int stopped_by;                  /* the rank that aborted, or the one found dead */
    int watch;                       /* the ranks should_stop watches: -1 all, else a send/recv's peer */
} nccl_ctx;

/* The stop callback: another rank aborted, or died (checked every 20 ms): every other rank
 * in a collective, only the peer in a send or receive (the others may have finished and
 * exited). A rank found dead is published (the first named by all) only by stop_error, once
 * the call stayed unfinished past the driver's grace: a peer may do its part of the call and
 * exit before this rank's look (the last collective of a job). */
static int should_stop(void *arg) {
    nccl_ctx *x = arg;
    if (!x->boot) return 0;
    /* The first death any rank saw is the one named, before any abort: the ranks that stop
     * because of it exit (or abort) too, and are not the cause. */
    int dead = atomic_load(&x->boot->died) - 1;
    int by = atomic_load(&x->boot->aborted_by);
    if (by && dead < 0) {
        x->stop_code = TR_ERR_ABORTED;
        x->stopped_by = by - 1;
        return 1;
    }
    double now = tr_now();
    if (dead < 0 && now < x->next_peer_check) return 0;
    x->next_peer_check = now + 0.02;
    for (int r = 0; r < x->world && dead < 0; r++)
        if (r != x->rank && (x->watch < 0 || r == x->watch) && tr_process_gone((int)atomic_load(&x->boot->ranks[r].pid)))
            dead = r;
    if (dead < 0) return 0;
    x->stop_code = TR_ERR_COMM;
    x->stopped_by = dead;
    return 1;
}

/* The error of a wait that should_stop ended: why it said stop, then `where`. A death is
 * published here, and the first one published is named. */
static tr_status stop_error(nccl_ctx *x, const char *where) {
    if (x->stop_code == TR_ERR_ABORTED) return tr_error_set(x->stop_code, "rank %d aborted the job%s", x->stopped_by, where);
    int32_t none = 0;
    atomic_compare_exchange_strong(&x->boot->died, &none, x->stopped_by + 1);
    int dead = atomic_load(&x->boot->died) - 1;
    return tr_error_set(x->stop_code, "rank %d (pid %u) died%s", dead, (unsigned)atomic_load(&x->boot->ranks[dead].pid), where);
}

/* ---- rendezvous ---- */

static tr_status boot_create(nccl_ctx *x) {
    shm_unlink(x->name); /* a crashed run's */
    int fd = shm_open(x->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return tr_error_set(TR_ERR_IO, "cannot create %s: %s", x->name, strerror(errno));
    int e = ftruncate(fd, (off_t)x->boot_size) != 0 ? errno : 0;
    void *m = e ? MAP_FAILED : mmap(NULL, x->boot_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!e && m == MAP_FAILED) e = errno;
    close(fd);
    if (e) {
        shm_unlink(x->name);
        return tr_error_set(TR_ERR_IO, "cannot size or map %s: %s", x->name, strerror(e));
    }
    x->boot = m;
    return TR_OK;
}

/* Opens rank 0's segment once it is complete and its creator alive; 0 or EAGAIN. */
static int boot_open(nccl_ctx *x) {
    int fd = shm_open(x->name, O_RDWR, 0600);
    if (fd < 0) return EAGAIN;
    struct stat sb;
    void *m = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size == x->boot_size)
        m = mmap(NULL, x->boot_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return EAGAIN;
    boot_header *h = m;
    if (!atomic_load(&h->ready) || h->magic != BOOT_MAGIC || h->world != (uint32_t)x->world ||
        tr_process_gone((int)h->creator_pid)) { /* not ready yet, or a dead run's */
        munmap(m, x->boot_size);
        return EAGAIN;
    }
    x->boot = h;
    return 0;
}

static tr_status join_one_host(nccl_ctx *x, const tr_comm_env *env, double deadline, unsigned char id[NC_ID_BYTES]) {
    snprintf(x->name, sizeof x->name, "/trainer-%s-nccl", env->job_id[0] ? env->job_id : "job");
    x->boot_size = sizeof(boot_header) + (size_t)x->world * sizeof(boot_rank);
    if (x->rank == 0) {
        TR_CHECK(nc_unique_id(id));
        TR_CHECK(boot_create(x));
        x->boot->magic = BOOT_MAGIC;
        x->boot->world = (uint32_t)x->world;
        x->boot->creator_pid = (uint32_t)getpid();
        memcpy(x->boot->id, id, NC_ID_BYTES);
        atomic_store(&x->boot->ready, 1);
    } else {
        while (boot_open(x) != 0) {
            if (tr_now() > deadline)
                return tr_error_set(TR_ERR_TIMEOUT, "timed out joining %s: rank 0 never published NCCL's id", x->name);
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        memcpy(id, x->boot->id, NC_ID_BYTES);
    }
    boot_rank *me = &x->boot->ranks[x->rank];
    me->device = x->device;
    memcpy(me->key, x->key, NC_KEY_BYTES);
    atomic_store(&me->pid, (uint32_t)getpid());
    for (;;) { /* everyone mapped */
        char missing[256] = "";
        size_t len = 0;
        for (int r = 0; r < x->world && len < sizeof missing - 16; r++)
            if (!atomic_load(&x->boot->ranks[r].pid))
                len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", r);
        if (!len) break;
        if (tr_now() > deadline)
            return tr_error_set(TR_ERR_TIMEOUT, "timed out joining %s: these ranks never joined: %s", x->name, missing);
        if (should_stop(x)) return stop_error(x, " while the job was joining");
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (x->rank == 0) {
        shm_unlink(x->name);
        x->unlinked = 1;
    }
    for (int a = 0; a < x->world; a++) /* NCCL runs one rank per GPU */
        for (int b = a + 1; b < x->world; b++)
            if (!strncmp(x->boot->ranks[a].key, x->boot->ranks[b].key, NC_KEY_BYTES))
                return tr_error_set(TR_ERR_INVALID, "ranks %d and %d are both on GPU %d (%.64s): NCCL needs a GPU per "
                                    "rank (to test several ranks on one GPU, use backend shm)", a, b,
                                    x->boot->ranks[a].device, x->boot->ranks[a].key);
    return TR_OK;
}

static tr_status join_over_mpi(nccl_ctx *x, const tr_comm_env *env, unsigned char id[NC_ID_BYTES]) {
#ifdef TR_NCCL_MPI
    int inited = 0, rank = -1, size = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return tr_error_set(TR_ERR_COMM, "MPI_Init failed");
        x->mpi_initialized = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != env->rank || size != env->size)
        return tr_error_set(TR_ERR_INVALID, "MPI says rank %d of %d, the environment says rank %d of %d (launch with "
                            "mpirun)", rank, size, env->rank, env->size);
    if (rank == 0) TR_CHECK(nc_unique_id(id));
    if (MPI_Bcast(id, NC_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return tr_error_set(TR_ERR_COMM, "MPI_Bcast of NCCL's unique id failed");
    return TR_OK;
#else
    (void)x;
    (void)id;
    return tr_error_set(TR_ERR_UNSUPPORTED, "this job spans hosts (%d ranks, %d here): NCCL's id crosses hosts over "
                        "MPI, and this build has no MPI (install libopenmpi-dev and rebuild)", env->size,
                        env->local_size);
#endif
}

static void destroy(void *ctx) {
    nccl_ctx *x = ctx;
    if (!x) return;
    if (x->nc) nc_destroy(x->nc, x->broken);
    if (x->boot) {
        if (x->rank == 0 && !x->unlinked) shm_unlink(x->name);
        munmap(x->boot, x->boot_size);
    }
#ifdef TR_NCCL_MPI
    int finalized = 0;
    if (x->mpi_initialized && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
#endif
    tr_free(x);
}

/* Tells the ranks on this host that this one gave up (the first to say so is named). */
static void say_aborted(nccl_ctx *x) {
    if (!x->boot) return;
    int32_t none = 0;
    atomic_compare_exchange_strong(&x->boot->aborted_by, &none, x->rank + 1);
}

static void abort_all(void *ctx) {
    nccl_ctx *x = ctx;
    if (!x->stop_code) say_aborted(x); /* one stopped by a peer leaves the peer named */
    x->broken = 1;
    if (x->nc) nc_abort(x->nc);
}

static tr_status create(void **ctx, const tr_options *o, const tr_comm_env *env, double deadline) {
    *ctx = NULL;
    TR_CHECK(nc_load());
    nccl_ctx *x = tr_calloc(1, sizeof *x);
    if (!x) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    x->rank = env->rank;
    x->world = env->size;
    x->watch = -1;
    const char *how = tr_options_string(o, "bootstrap");
    int over_mpi = !strcmp(how, "mpi") || (!strcmp(how, "auto") && env->local_size != env->size);
    unsigned char id[NC_ID_BYTES];
    tr_status st = nc_pick_device(env->local_rank, &x->device, x->key);
    if (st == TR_OK) st = over_mpi ? join_over_mpi(x, env, id) : join_one_host(x, env, deadline, id);
    /* The bound device's compute stream (the GPU nc_pick_device took): collectives wait for it
     * with an event, not for the whole device. NCCL's join of the ranks is bounded as a
     * collective is: by the deadline, a peer's death and a peer's abort. */
    if (st == TR_OK) {
        st = nc_init(&x->nc, x->world, x->rank, id, x->device, tr_accel_bound_stream(), deadline, should_stop, x);
        if (st == TR_ERR_ABORTED && x->stop_code)
            st = stop_error(x, " while NCCL was joining the ranks");
        else if (st == TR_ERR_TIMEOUT)
            st = tr_error_set(st, "timed out in NCCL's join of the ranks (a rank stalled or failed in it)");
    }
    if (st != TR_OK) {
        /* A rank that fails once it has joined the segment tells the others, which would
         * otherwise wait in NCCL's join for it until their deadline. Not one stopped by a
         * peer (the peer stays named), nor one that timed out (the others will too, and
         * none of them is the cause). */
        if (!x->stop_code && st != TR_ERR_TIMEOUT) say_aborted(x);
        destroy(x);
        return st;
    }
    *ctx = x;
    return TR_OK;
}

/* ---- operations ---- */

/* Bytes each side of a call moves on this rank (0: the buffer is not used here). */
static void extents(const nccl_ctx *x, const tr_comm_call *k, size_t *sb, size_t *rb) {
    size_t b = k->count * tr_dtype_size(k->dtype), all = b * (size_t)x->world;
    int root = x->rank == k->root;
    *sb = *rb = 0;
    switch (k->kind) {
    case TR_COMM_SEND: *sb = b; break;
    case TR_COMM_RECV: *rb = b; break;
    case TR_COMM_BROADCAST: *sb = root ? b : 0; *rb = b; break; /* one buffer, the root's read */
    case TR_COMM_REDUCE: *sb = b; *rb = root ? b : 0; break;
    case TR_COMM_ALL_REDUCE: *sb = *rb = b; break;
    case TR_COMM_GATHER: *sb = b; *rb = root ? all : 0; break;
    case TR_COMM_ALL_GATHER: *sb = b; *rb = all; break;
    case TR_COMM_SCATTER: *sb = root ? all : 0; *rb = b; break;
    case TR_COMM_REDUCE_SCATTER: *sb = all; *rb = b; break;
    default: break;
    }
}

static int overlap(const char *a, size_t an, const char *b, size_t bn) { return an && bn && a < b + bn && b < a + an; }

/* Whether NCCL takes this overlap of send and recv as its own in-place form. */
static int nccl_in_place(const nccl_ctx *x, const tr_comm_call *k, const char *s, const char *r, size_t b) {
    size_t mine = (size_t)x->rank * b;
    switch (k->kind) {
    case TR_COMM_ALL_REDUCE:
    case TR_COMM_REDUCE:
    case TR_COMM_BROADCAST: return s == r;
    case TR_COMM_ALL_GATHER:
    case TR_COMM_GATHER: return s == r + mine;
    case TR_COMM_REDUCE_SCATTER:
    case TR_COMM_SCATTER: return r == s + mine;
    default: return 0;
    }
}

/* Ends a group whatever happened inside it (NCCL's group state is per thread): st, or the
 * end's own status. */
static tr_status group_end(nc_comm *c, tr_status st) {
    if (st == TR_OK) return nc_group_end(c);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tr_error_msg());
    (void)nc_group_end(c);
    return tr_error_set(st, "%s", msg);
}

/* The call on device pointers s (send) and r (recv). */
static tr_status queue(nccl_ctx *x, const tr_comm_call *k, const char *s, char *r) {
    nc_comm *c = x->nc;
    size_t n = k->count, b = n * tr_dtype_size(k->dtype), me = (size_t)x->rank;
    int root = k->root;
    tr_status st = TR_OK;
    switch (k->kind) {
    case TR_COMM_SEND: return nc_send(c, s, n, k->dtype, root);
    case TR_COMM_RECV: return nc_recv(c, r, n, k->dtype, root);
    case TR_COMM_BROADCAST: return nc_broadcast(c, r, r, n, k->dtype, root);
    case TR_COMM_REDUCE: return nc_reduce(c, s, x->rank == root ? r : NULL, n, k->dtype, k->op, root);
    case TR_COMM_ALL_REDUCE: return nc_all_reduce(c, s, r, n, k->dtype, k->op);
    case TR_COMM_ALL_GATHER: return nc_all_gather(c, s, r, n, k->dtype);
    case TR_COMM_REDUCE_SCATTER: return nc_reduce_scatter(c, s, r, n, k->dtype, k->op);
    case TR_COMM_GATHER:
        if (x->rank != root) return nc_send(c, s, n, k->dtype, root);
        if (s != r + me * b) TR_CHECK(nc_copy(c, r + me * b, s, b));
        TR_CHECK(nc_group_start(c));
        for (int q = 0; q < x->world && st == TR_OK; q++)
            if (q != root) st = nc_recv(c, r + (size_t)q * b, n, k->dtype, q);
        return group_end(c, st);
    case TR_COMM_SCATTER:
        if (x->rank != root) return nc_recv(c, r, n, k->dtype, root);
        TR_CHECK(nc_group_start(c));
        for (int q = 0; q < x->world && st == TR_OK; q++)
            if (q != root) st = nc_send(c, s + (size_t)q * b, n, k->dtype, q);
        TR_CHECK(group_end(c, st));
        return r != s + me * b ? nc_copy(c, r, s + me * b, b) : TR_OK;
    default: return tr_error_set(TR_ERR_UNSUPPORTED, "operation %d", (int)k->kind);
    }
}

/* Places the call's buffers on the device (host ones staged through the scratch, keeping
 * how send and recv overlap; a send NCCL cannot take in place copied aside), queues it,
 * and says which host result to bring back. Scratch layout: [send or the union | recv | send copy]. */
typedef struct pending_download {
    void *dst;
    const void *src;
    size_t bytes;
} pending_download;

static tr_status place_and_queue(nccl_ctx *x, const tr_comm_call *k, unsigned slot, pending_download *back) {
    nc_comm *c = x->nc;
    size_t sb, rb;
    extents(x, k, &sb, &rb);
    const char *s = sb ? k->send : NULL;
    char *r = rb ? k->recv : NULL;
    int hs = sb && !nc_is_device(c, s), hr = rb && !nc_is_device(c, r);
    if ((sb && !hs) || (rb && !hr)) TR_CHECK(nc_wait_compute(c, slot)); /* the buffers may be in the making */
    const char *lo = NULL;
    size_t span = 0, s_at = 0, r_at = 0, copy_at, need = 0;
    if (hs && hr && overlap(s, sb, r, rb)) { /* one window over both */
        lo = s < r ? s : r;
        const char *hi = s + sb > r + rb ? s + sb : r + rb;
        span = (size_t)(hi - lo);
        s_at = (size_t)(s - lo);
        r_at = (size_t)(r - lo);
        need = span;
    } else {
        if (hs) need = sb;
        r_at = need = (need + 255) & ~(size_t)255;
        if (hr) need += rb;
    }
    need = (need + 255) & ~(size_t)255;
    copy_at = need;
    int copy_send = sb && rb && overlap(s, sb, r, rb) && !nccl_in_place(x, k, s, r, k->count * tr_dtype_size(k->dtype));
    if (copy_send) need += sb;
    char *scratch = NULL;
    if (need) TR_CHECK(nc_scratch(c, need, (void **)&scratch));
    const char *ds = s;
    char *dr = r;
    if (span) {
        TR_CHECK(nc_upload(c, scratch, lo, span));
        ds = scratch + s_at;
        dr = scratch + r_at;
    } else {
        if (hs) {
            TR_CHECK(nc_upload(c, scratch, s, sb));
            ds = scratch;
        }
        if (hr) dr = scratch + r_at;
    }
    if (copy_send) {
        TR_CHECK(nc_copy(c, scratch + copy_at, ds, sb));
        ds = scratch + copy_at;
    }
    TR_CHECK(queue(x, k, ds, dr));
    if (hr) *back = (pending_download){r, dr, rb}; /* after nc_finish: a wait bounded by the deadline */
    return TR_OK;
}

static tr_status run(void *ctx, const tr_comm_op *op) {
    nccl_ctx *x = ctx;
    const tr_comm_call *k = &op->call;
    if (x->boot) atomic_store(&x->boot->ranks[x->rank].seq, op->seq);
    x->stop_code = TR_OK; /* a stop the last call outlived (its grace) is forgotten */
    x->watch = k->kind == TR_COMM_SEND || k->kind == TR_COMM_RECV ? k->root : -1;
    pending_download back = {0};
    tr_status st = nc_begin(x->nc, op->deadline, should_stop, x);
    if (st == TR_OK && k->kind == TR_COMM_BARRIER) {
        void *one;
        st = nc_scratch(x->nc, sizeof(float), &one);
        if (st == TR_OK) st = nc_all_reduce(x->nc, one, one, 1, TR_F32, TR_RED_SUM);
    } else if (st == TR_OK) {
        st = place_and_queue(x, k, (unsigned)((op->seq - 1) % NC_SLOTS), &back);
    }
    if (st == TR_OK) st = nc_finish(x->nc);
    if (st == TR_OK && back.bytes) st = nc_download(x->nc, back.dst, back.src, back.bytes);
    x->watch = -1; /* between calls (the join's end, finalizing) every rank is watched */
    if (st == TR_OK) return TR_OK;
    if (st == TR_ERR_ABORTED && x->stop_code) {
        st = stop_error(x, "");
    } else if (st == TR_ERR_TIMEOUT) { /* name who is behind, where the segment tells */
        char behind[256] = "";
        size_t len = 0;
        for (int r = 0; x->boot && r < x->world && len < sizeof behind - 16; r++)
            if (r != x->rank && atomic_load(&x->boot->ranks[r].seq) < op->seq)
                len += (size_t)snprintf(behind + len, sizeof behind - len, "%s%d", len ? ", " : "", r);
        if (!x->boot) tr_error_set(st, "timed out (across hosts NCCL cannot tell which ranks are missing)");
        else if (len) tr_error_set(st, "timed out; ranks that did not arrive: %s", behind);
        else tr_error_set(st, "timed out with every rank arrived (NCCL itself stalled)");
    }
    x->broken = 1; /* NCCL's state is unknown now: the communicator is aborted, never reused */
    nc_abort(x->nc);
    return st;
}

/* On the issuing thread (the one that queued the kernels making the buffers, its device bound):
 * the point of the compute stream the operation waits for if its buffers are device memory
 * (run tells; a mark it does not use costs one event record). Nothing for a barrier, nor once
 * the communicator broke (run reports that). */
static tr_status issued(void *ctx, const tr_comm_op *op) {
    nccl_ctx *x = ctx;
    if (x->broken || op->call.kind == TR_COMM_BARRIER) return TR_OK;
    return nc_mark_ready(x->nc, (unsigned)((op->seq - 1) % NC_SLOTS));
}

static const tr_option_spec opts[] = {
    {.key = "bootstrap", .type = TR_OPTION_CHOICE, .default_value = "auto", .choices = "auto|shm|mpi",
     .doc = "how NCCL's unique id reaches the ranks: auto (shared memory on one host, MPI across hosts), shm, mpi"},
};
static const tr_comm_backend_ops ops = {
    .create = create, .destroy = destroy, .run = run, .abort = abort_all, .flags = TR_COMM_DEVICE_MEMORY,
    .issued = issued};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_COMM, .name = NCCL_PLUGIN_NAME, .version = "0.1.0",
    .description = NCCL_PLUGIN_DESCRIPTION,
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops, .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
