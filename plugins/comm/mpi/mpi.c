/* Communication backend `mpi`: every operation mapped onto MPI (OpenMPI from Debian), the
 * backend for CPU ranks across hosts. Run under mpirun (or srun with PMIx); the rank and size
 * MPI reports must agree with the environment the communicator was made from.
 *
 * Each operation is the non-blocking MPI call polled with MPI_Test until done, so the
 * per-operation deadline and abort hold (MPI cannot tell which ranks are missing: a timeout
 * says so). bf16 and fp16 travel as 16-bit words reduced by user-defined MPI operations
 * (float arithmetic, rounded once per pair, as the core's kernels). In-place calls in NCCL's
 * layout and send == recv are both turned into MPI_IN_PLACE or a staging copy in a buffer
 * that grows once and is reused. All-reduces of 64 KiB and more run as a ring of
 * point-to-point steps (ring_all_reduce). Ranks each alone on their host sleep between tests
 * while OpenMPI's TCP progress thread moves the data (create). Counts above INT_MAX are
 * refused. Abort calls MPI_Abort, which ends every rank of the job (MPI has no gentler way). */
#define _POSIX_C_SOURCE 200809L /* setenv, nanosleep */
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/comm_backend.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

typedef struct mpi_ctx {
    MPI_Comm comm;
    int rank, size;
    int we_initialized;
    int broken;
    MPI_Op half_ops[2][4];          /* [bf16, f16][sum, max, min, prod] */
    void *scratch;
    size_t scratch_size;
    volatile int abort_requested;
    int sleep_poll;                 /* OpenMPI's TCP progress thread moves the data: sleep between tests */
} mpi_ctx;

/* User reductions over 16-bit words: inout = in op inout. */
#define HALF_OP(name, dt, op)                                                                 \
    static void name(void *in, void *inout, int *len, MPI_Datatype *type) {                   \
        (void)type;                                                                           \
        tr_reduce_into(inout, in, (size_t)*len, dt, op);                                      \
    }
HALF_OP(bf16_sum, TR_BF16, TR_RED_SUM)
HALF_OP(bf16_max, TR_BF16, TR_RED_MAX)
HALF_OP(bf16_min, TR_BF16, TR_RED_MIN)
HALF_OP(bf16_prod, TR_BF16, TR_RED_PROD)
HALF_OP(f16_sum, TR_F16, TR_RED_SUM)
HALF_OP(f16_max, TR_F16, TR_RED_MAX)
HALF_OP(f16_min, TR_F16, TR_RED_MIN)
HALF_OP(f16_prod, TR_F16, TR_RED_PROD)

static MPI_Datatype mpi_type(tr_dtype dt) {
    switch (dt) {
    case TR_F32: return MPI_FLOAT;
    case TR_F64: return MPI_DOUBLE;
    case TR_I32: return MPI_INT32_T;
    case TR_I64: return MPI_INT64_T;
    case TR_U8: return MPI_UINT8_T;
    default: return MPI_UINT16_T; /* bf16, f16 */
    }
}

static MPI_Op mpi_op(const mpi_ctx *m, tr_dtype dt, tr_red_op op) {
    int k = op == TR_RED_MAX ? 1 : op == TR_RED_MIN ? 2 : op == TR_RED_PROD ? 3 : 0;
    if (dt == TR_BF16) return m->half_ops[0][k];
    if (dt == TR_F16) return m->half_ops[1][k];
    static const MPI_Op native[4] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
    return native[k];
}

static tr_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return tr_error_set(TR_ERR_COMM, "%s: %.*s", what, len, msg);
}

/* Polls the request to completion within the deadline. */
static tr_status finish(mpi_ctx *m, MPI_Request *req, double deadline, const char *what) {
    for (unsigned spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, what);
        if (done) return TR_OK;
        if (m->abort_requested) {
            fprintf(stderr, "comm mpi rank %d: aborting the job (MPI_Abort)\n", m->rank);
            MPI_Abort(m->comm, 134);
        }
        if (spins > 64) {
            if (m->sleep_poll) nanosleep(&(struct timespec){0, 50000}, NULL);
            else sched_yield();
            if (tr_now() > deadline)
                return tr_error_set(TR_ERR_TIMEOUT, "%s timed out (the mpi backend cannot tell which ranks are missing)",
                                    what);
        }
    }
}

static void *scratch(mpi_ctx *m, size_t bytes) {
    if (bytes > m->scratch_size) {
        tr_free(m->scratch);
        m->scratch = tr_malloc(bytes);
        m->scratch_size = m->scratch ? bytes : 0;
    }
    return m->scratch;
}

static int overlaps(const void *a, size_t an, const void *b, size_t bn) {
    const char *x = a, *y = b;
    return an && bn && x < y + bn && y < x + an;
}

/* All-reduce of RING_MIN_BYTES or more as a ring, as gloo and NCCL do it: a reduce-scatter,
 * then an all-gather, each W-1 steps of one block (1/W of the buffer) sent to the right and
 * one received from the left at once, so every rank sends and receives 2(W-1)/W of the buffer
 * with both directions of each link busy. OpenMPI's non-blocking all-reduce (libnbc, 4.1)
 * sends the whole buffer to one rank and back (a binomial tree) when called in place, as ddp
 * calls it, or with fewer than 4 ranks: twice the bytes per link on a network. Every rank
 * ends with the same bits (block b is reduced once, on one rank, and copied); the order of
 * the sum differs per block (rank b+1 first), within float tolerance of MPI's. Steps use
 * tag 1 (send/recv use 0), so they never match a user's message. */
#define RING_MIN_BYTES ((size_t)64 << 10)
static tr_status ring_step(mpi_ctx *m, const void *sbuf, size_t sn, void *rbuf, size_t rn, MPI_Datatype t,
                           double deadline, const char *what) {
    int right = (m->rank + 1) % m->size, left = (m->rank + m->size - 1) % m->size;
    MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_Irecv(rbuf, (int)rn, t, left, 1, m->comm, &rq[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(sbuf, (int)sn, t, right, 1, m->comm, &rq[1]);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, what); /* a pending receive: the caller marks broken */
    TR_CHECK(finish(m, &rq[0], deadline, what));
    return finish(m, &rq[1], deadline, what);
}

static tr_status ring_all_reduce(mpi_ctx *m, const tr_comm_call *k, double deadline, const char *what) {
    size_t es = tr_dtype_size(k->dtype), n = k->count, W = (size_t)m->size, r = (size_t)m->rank;
    char *buf = k->recv;
    if (k->send != k->recv) memmove(buf, k->send, n * es);
    char *tmp = scratch(m, (n / W + 1) * es);
    if (!tmp) return tr_error_set(TR_ERR_NOMEM, "all_reduce staging: out of memory");
    MPI_Datatype t = mpi_type(k->dtype);
#define BLOCK_AT(b) (n * ((b) % W) / W)
#define BLOCK_LEN(b) (n * ((b) % W + 1) / W - BLOCK_AT(b))
    for (size_t s = 0; s + 1 < W; s++) { /* reduce-scatter: rank r ends with block r+1 summed */
        size_t out = r + W - s, in = r + 2 * W - s - 1;
        TR_CHECK(ring_step(m, buf + BLOCK_AT(out) * es, BLOCK_LEN(out), tmp, BLOCK_LEN(in), t, deadline, what));
        tr_reduce_into(buf + BLOCK_AT(in) * es, tmp, BLOCK_LEN(in), k->dtype, k->op);
    }
    for (size_t s = 0; s + 1 < W; s++) { /* all-gather */
        size_t out = r + 1 + W - s, in = r + W - s;
        TR_CHECK(ring_step(m, buf + BLOCK_AT(out) * es, BLOCK_LEN(out), buf + BLOCK_AT(in) * es, BLOCK_LEN(in), t,
                           deadline, what));
    }
#undef BLOCK_AT
#undef BLOCK_LEN
    return TR_OK;
}

static tr_status run(void *ctx, const tr_comm_op *op) {
    mpi_ctx *m = ctx;
    const tr_comm_call *k = &op->call;
    size_t es = tr_dtype_size(k->dtype), n = k->count, W = (size_t)m->size, me = (size_t)m->rank;
    if (n > INT_MAX || (k->kind != TR_COMM_ALL_REDUCE && k->kind != TR_COMM_BROADCAST && n * W > INT_MAX))
        return tr_error_set(TR_ERR_UNSUPPORTED, "%zu elements exceed MPI's int counts", n);
    MPI_Datatype t = mpi_type(k->dtype);
    MPI_Op o = mpi_op(m, k->dtype, k->op);
    int c = (int)n, root = k->root, rc = MPI_SUCCESS;
    MPI_Request req = MPI_REQUEST_NULL;
    const void *send = k->send;
    void *recv = k->recv;
    const char *what = tr_comm_kind_name(k->kind);
    size_t after_copy = 0; /* scatter in place: bytes to move from send to recv at the end */
    switch (k->kind) {
    case TR_COMM_BARRIER: rc = MPI_Ibarrier(m->comm, &req); break;
    case TR_COMM_SEND: rc = MPI_Isend(send, c, t, root, 0, m->comm, &req); break;
    case TR_COMM_RECV: rc = MPI_Irecv(recv, c, t, root, 0, m->comm, &req); break;
    case TR_COMM_BROADCAST: rc = MPI_Ibcast(recv, c, t, root, m->comm, &req); break;
    case TR_COMM_ALL_REDUCE:
        if (W > 1 && n >= W && n * es >= RING_MIN_BYTES) {
            tr_status st = ring_all_reduce(m, k, op->deadline, what);
            if (st != TR_OK) m->broken = 1; /* a request may still be pending: no orderly MPI_Finalize */
            return st;
        }
        rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, c, t, o, m->comm, &req);
        break;
    case TR_COMM_REDUCE:
        if (m->rank == root) rc = MPI_Ireduce(send == recv ? MPI_IN_PLACE : send, recv, c, t, o, root, m->comm, &req);
        else rc = MPI_Ireduce(send, NULL, c, t, o, root, m->comm, &req);
        break;
    case TR_COMM_GATHER:
    case TR_COMM_ALL_GATHER: {
        int at_root = k->kind == TR_COMM_ALL_GATHER || m->rank == root;
        if (at_root && overlaps(send, n * es, recv, W * n * es)) {
            memmove((char *)recv + me * n * es, send, n * es); /* my part in place */
            send = MPI_IN_PLACE;
        }
        if (k->kind == TR_COMM_ALL_GATHER) rc = MPI_Iallgather(send, c, t, recv, c, t, m->comm, &req);
        else rc = MPI_Igather(send, c, t, at_root ? recv : NULL, c, t, root, m->comm, &req);
        break;
    }
    case TR_COMM_SCATTER:
        if (m->rank == root && overlaps(send, W * n * es, recv, n * es)) {
            after_copy = n * es;
            rc = MPI_Iscatter(send, c, t, MPI_IN_PLACE, c, t, root, m->comm, &req);
        } else {
            rc = MPI_Iscatter(send, c, t, recv, c, t, root, m->comm, &req);
        }
        break;
    case TR_COMM_REDUCE_SCATTER:
        if (overlaps(send, W * n * es, recv, n * es)) {
            void *tmp = scratch(m, W * n * es);
            if (!tmp) return tr_error_set(TR_ERR_NOMEM, "reduce_scatter staging: out of memory");
            memcpy(tmp, send, W * n * es);
            send = tmp;
        }
        rc = MPI_Ireduce_scatter_block(send, recv, c, t, o, m->comm, &req);
        break;
    default: return tr_error_set(TR_ERR_UNSUPPORTED, "operation %d", (int)k->kind);
    }
    tr_status st = rc == MPI_SUCCESS ? finish(m, &req, op->deadline, what) : mpi_fail(rc, what);
    if (st != TR_OK) {
        m->broken = 1; /* a request may still be pending: no orderly MPI_Finalize */
        return st;
    }
    if (after_copy) memmove(recv, (const char *)k->send + me * after_copy, after_copy);
    return TR_OK;
}

static void destroy(void *ctx) {
    mpi_ctx *m = ctx;
    if (!m) return;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++)
            if (m->half_ops[d][k] != MPI_OP_NULL) MPI_Op_free(&m->half_ops[d][k]);
    if (m->broken) { /* a request may still be pending: MPI_Finalize could hang */
        tr_free(m->scratch);
        tr_free(m);
        return;
    }
    if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (m->we_initialized && !finalized) MPI_Finalize();
    tr_free(m->scratch);
    tr_free(m);
}

static void abort_all(void *ctx) { ((mpi_ctx *)ctx)->abort_requested = 1; }

static tr_status create(void **ctx, const tr_options *opts, const tr_comm_env *env, double deadline) {
    (void)opts;
    (void)deadline;
    *ctx = NULL;
    mpi_ctx *m = tr_calloc(1, sizeof *m);
    if (!m) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    m->comm = MPI_COMM_NULL;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++) m->half_ops[d][k] = MPI_OP_NULL;
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* Ranks each alone on their host talk over TCP only: OpenMPI's TCP progress thread
         * then moves the data, woken by the kernel, while the polling thread sleeps between
         * tests, as gloo's I/O thread does. Spinning and yielding instead loses the core to
         * every other runnable thread on a busy host (docs/benchmarks-history.md, "mpi between
         * hosts"). Ranks sharing a host keep spinning: shared memory progresses only in the
         * polling thread's tests. A setting of the user's wins. */
        if (env->local_size == 1 && env->size > 1) setenv("OMPI_MCA_btl_tcp_progress_thread", "1", 0);
        const char *pt = getenv("OMPI_MCA_btl_tcp_progress_thread");
        m->sleep_poll = env->local_size == 1 && pt && !strcmp(pt, "1");
        /* Calls come from the communicator thread, create/destroy from the caller's. */
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            tr_free(m);
            return mpi_fail(rc, "MPI_Init_thread");
        }
        m->we_initialized = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    tr_status st = TR_OK;
    if (provided < MPI_THREAD_SERIALIZED)
        st = tr_error_set(TR_ERR_UNSUPPORTED, "this MPI provides thread level %d; the communicator thread needs "
                                              "MPI_THREAD_SERIALIZED", provided);
    if (st == TR_OK && MPI_Comm_dup(MPI_COMM_WORLD, &m->comm) != MPI_SUCCESS)
        st = tr_error_set(TR_ERR_COMM, "MPI_Comm_dup failed");
    if (st == TR_OK) {
        MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(m->comm, &m->rank);
        MPI_Comm_size(m->comm, &m->size);
        if (m->rank != env->rank || m->size != env->size)
            st = tr_error_set(TR_ERR_INVALID, "MPI says rank %d of %d, the environment says rank %d of %d (launch "
                                              "with mpirun, or unset RANK/WORLD_SIZE)", m->rank, m->size, env->rank,
                              env->size);
    }
    static MPI_User_function *const fns[2][4] = {{bf16_sum, bf16_max, bf16_min, bf16_prod},
                                                 {f16_sum, f16_max, f16_min, f16_prod}};
    for (int d = 0; d < 2 && st == TR_OK; d++)
        for (int k = 0; k < 4 && st == TR_OK; k++)
            if (MPI_Op_create(fns[d][k], 1, &m->half_ops[d][k]) != MPI_SUCCESS)
                st = tr_error_set(TR_ERR_COMM, "MPI_Op_create failed");
    if (st != TR_OK) {
        destroy(m);
        return st;
    }
    *ctx = m;
    return TR_OK;
}

static const tr_comm_backend_ops ops = {.create = create, .destroy = destroy, .run = run, .abort = abort_all};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_COMM, .name = "mpi", .version = "0.1.0",
    .description = "ranks across hosts over MPI (OpenMPI); run under mpirun or srun",
    .options = NULL, .n_options = 0, .ops = &ops, .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
