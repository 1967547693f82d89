/* nccl_rt.h over libnccl.so.2 and the CUDA driver API, both opened with dlopen by the first
 * communicator: the plugin links neither, so it loads everywhere and says what is missing. The
 * communicator uses the GPU's primary context (the one the cuda device plugin and cuBLAS use),
 * its own non-blocking stream, and device scratch of its own. It is a non-blocking communicator
 * (NCCL 2.14 and later): its initialisation, and any call NCCL finishes in the background,
 * is polled against the deadline, the abort flag and the stop callback. */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cuda_api.h"
#include "nccl_rt.h"
#include "trainer/memory.h"
#include "trainer/plugin.h"
#include "trainer/runtime.h"

typedef int nccl_res;               /* ncclResult_t */
typedef void *nccl_comm;            /* ncclComm_t */
typedef struct { char internal[NC_ID_BYTES]; } nccl_id; /* ncclUniqueId */

enum { NCCL_OK = 0, NCCL_IN_PROGRESS = 7 };

/* ncclConfig_t as NCCL 2.14 laid it out: NCCL reads `size` bytes of it and, by `version`, takes
 * the fields a later release appended at their defaults. blocking 0: calls on the communicator
 * (its initialisation first) may return ncclInProgress and finish in the background, their
 * state polled with ncclCommGetAsyncError. */
typedef struct nccl_config_v21400 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
} nccl_config_v21400;
#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_VERSION_2_14 21400u

static struct {
    char why[256];
    const cu_api *cu; /* the driver (plugins/common/cuda_api.h) */
    nccl_res (*get_version)(int *);
    nccl_res (*get_unique_id)(nccl_id *);
    nccl_res (*init_rank)(nccl_comm *, int, nccl_id, int);
    nccl_res (*init_rank_config)(nccl_comm *, int, nccl_id, int, void *); /* NCCL 2.14+, else NULL */
    nccl_res (*destroy)(nccl_comm);
    nccl_res (*finalize)(nccl_comm); /* NCCL 2.14+, else NULL */
    nccl_res (*abort)(nccl_comm);
    nccl_res (*async_error)(nccl_comm, nccl_res *);
    const char *(*nccl_error)(nccl_res);
    nccl_res (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm, cu_stream);
    nccl_res (*reduce)(const void *, void *, size_t, int, int, int, nccl_comm, cu_stream);
    nccl_res (*broadcast)(const void *, void *, size_t, int, int, nccl_comm, cu_stream);
    nccl_res (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm, cu_stream);
    nccl_res (*all_gather)(const void *, void *, size_t, int, nccl_comm, cu_stream);
    nccl_res (*send)(const void *, size_t, int, int, nccl_comm, cu_stream);
    nccl_res (*recv)(void *, size_t, int, int, nccl_comm, cu_stream);
    nccl_res (*group_start)(void);
    nccl_res (*group_end)(void);
    int version;
} api;

static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void) {
    if (!(api.cu = cu_api_load(api.why, sizeof api.why))) return;
    void *nc = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!nc) {
        snprintf(api.why, sizeof api.why, "NCCL not found (libnccl.so.2: %s)", dlerror());
        return;
    }
    const tr_lib_symbol ns[] = {
        {(void **)&api.get_version, "ncclGetVersion"},
        {(void **)&api.get_unique_id, "ncclGetUniqueId"},
        {(void **)&api.init_rank, "ncclCommInitRank"},
        {(void **)&api.destroy, "ncclCommDestroy"},
        {(void **)&api.abort, "ncclCommAbort"},
        {(void **)&api.async_error, "ncclCommGetAsyncError"},
        {(void **)&api.nccl_error, "ncclGetErrorString"},
        {(void **)&api.all_reduce, "ncclAllReduce"},
        {(void **)&api.reduce, "ncclReduce"},
        {(void **)&api.broadcast, "ncclBroadcast"},
        {(void **)&api.reduce_scatter, "ncclReduceScatter"},
        {(void **)&api.all_gather, "ncclAllGather"},
        {(void **)&api.send, "ncclSend"},
        {(void **)&api.recv, "ncclRecv"},
        {(void **)&api.group_start, "ncclGroupStart"},
        {(void **)&api.group_end, "ncclGroupEnd"},
    };
    const char *missing = tr_lib_resolve(nc, ns, sizeof ns / sizeof ns[0]);
    if (missing) {
        snprintf(api.why, sizeof api.why, "libnccl.so.2 lacks %s (NCCL 2.10 or later is needed)", missing);
        return;
    }
    /* Non-blocking initialisation (bounded by the deadline) needs ncclCommInitRankConfig. */
    *(void **)&api.init_rank_config = dlsym(nc, "ncclCommInitRankConfig");
    /* and leaving it bounded, ncclCommFinalize (then ncclCommDestroy frees local state only) */
    *(void **)&api.finalize = dlsym(nc, "ncclCommFinalize");
    cu_res rc = api.cu->init(0);
    if (rc != 0) {
        snprintf(api.why, sizeof api.why, "cuInit failed (CUDA error %d)", rc);
        return;
    }
    api.get_version(&api.version);
    if (api.version < 21000) { /* ncclAvg and ncclBfloat16 came in 2.10 */
        int old = api.version < 10000; /* before 2.9 the code was X*1000 + Y*100 + Z */
        snprintf(api.why, sizeof api.why, "libnccl.so.2 is NCCL %d.%d; 2.10 or later is needed",
                 old ? api.version / 1000 : api.version / 10000, old ? api.version / 100 % 10 : api.version / 100 % 100);
        return;
    }
    api.why[0] = 0;
}

struct nc_comm {
    nccl_comm comm;
    int device, rank;
    cu_ctx ctx;
    cu_stream stream;
    cu_stream compute;  /* the device plugin's compute stream (NULL: unknown, wait for the device) */
    cu_event ready[NC_SLOTS]; /* per operation: recorded on compute at issue, waited by stream */
    _Atomic unsigned char marked[NC_SLOTS]; /* ready[slot] holds the mark of the operation in slot */
    void *scratch;
    size_t scratch_size;
    atomic_int abort_requested, aborted;
    int nonblocking; /* made by ncclCommInitRankConfig with blocking 0 */
    double span;     /* the join's time limit: finalizing gets as long */
    double deadline;
    nc_stop_fn stop;
    void *stop_arg;
    double stop_at;  /* when the stop callback said stop during this wait (0: it has not) */
};

static tr_status cu_fail(cu_res rc, const char *what) {
    const char *s = NULL;
    api.cu->error_string(rc, &s);
    return tr_error_set(TR_ERR_DEVICE, "%s: %s (CUDA error %d)", what, s ? s : "unknown", rc);
}

static tr_status nccl_fail(nc_comm *c, nccl_res rc, const char *what) {
    (void)c;
    return tr_error_set(TR_ERR_COMM, "%s: %s (NCCL error %d)", what, api.nccl_error(rc), rc);
}

#define CU(call, what)                                                                                                 \
    do {                                                                                                               \
        cu_res rc_ = (call);                                                                                           \
        if (rc_ != 0) return cu_fail(rc_, what);                                                                       \
    } while (0)
static tr_status settle(nc_comm *c, const char *what);
static void abort_now(nc_comm *c);
/* A call on the communicator: one that goes on in the background (ncclInProgress, a
 * non-blocking communicator) is waited for, bounded, before the next call may be made. */
#define NC(c, call, what)                                                                                              \
    do {                                                                                                               \
        nccl_res rc_ = (call);                                                                                         \
        if (rc_ == NCCL_IN_PROGRESS && (c)) TR_CHECK(settle((c), what));                                               \
        else if (rc_ != NCCL_OK && rc_ != NCCL_IN_PROGRESS) return nccl_fail(c, rc_, what);                            \
    } while (0)

tr_status nc_load(void) {
    pthread_once(&api_once, api_load);
    if (api.why[0]) return tr_error_set(TR_ERR_UNSUPPORTED, "cannot run NCCL here: %s", api.why);
    return TR_OK;
}

tr_status nc_unique_id(unsigned char id[NC_ID_BYTES]) {
    nccl_id u;
    NC(NULL, api.get_unique_id(&u), "ncclGetUniqueId");
    memcpy(id, u.internal, NC_ID_BYTES);
    return TR_OK;
}

tr_status nc_pick_device(int fallback, int *device, char key[NC_KEY_BYTES]) {
    cu_ctx cur = NULL;
    int dev = -1;
    if (api.cu->ctx_get_current(&cur) == 0 && cur) CU(api.cu->ctx_get_device(&dev), "cuCtxGetDevice");
    if (dev < 0) {
        int n = 0;
        CU(api.cu->device_count(&n), "cuDeviceGetCount");
        if (fallback >= n)
            return tr_error_set(TR_ERR_INVALID, "no GPU is bound on this thread and local rank %d has no GPU of its own "
                                "(%d visible)", fallback, n);
        CU(api.cu->device_get(&dev, fallback), "cuDeviceGet");
    }
    *device = dev;
    memset(key, 0, NC_KEY_BYTES);
    CU(api.cu->bus_id(key, NC_KEY_BYTES - 1, dev), "cuDeviceGetPCIBusId");
    return TR_OK;
}

tr_status nc_init(nc_comm **out, int size, int rank, const unsigned char id[NC_ID_BYTES], int device, void *compute,
                  double deadline, nc_stop_fn stop, void *stop_arg) {
    *out = NULL;
    nc_comm *c = tr_calloc(1, sizeof *c);
    if (!c) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    c->device = device;
    c->rank = rank;
    cu_res rc = api.cu->primary_retain(&c->ctx, device);
    if (rc != 0) {
        tr_free(c);
        return cu_fail(rc, "cuDevicePrimaryCtxRetain");
    }
    tr_status st = TR_OK;
    if ((rc = api.cu->ctx_set_current(c->ctx)) != 0) st = cu_fail(rc, "cuCtxSetCurrent");
    else if ((rc = api.cu->stream_create(&c->stream, CU_STREAM_NON_BLOCKING)) != 0) st = cu_fail(rc, "cuStreamCreate");
    for (int i = 0; compute && st == TR_OK && i < NC_SLOTS; i++)
        if ((rc = api.cu->event_create(&c->ready[i], CU_EVENT_DISABLE_TIMING)) != 0) st = cu_fail(rc, "cuEventCreate");
    c->compute = compute;
    c->span = deadline - tr_now() > 1.0 ? deadline - tr_now() : 1.0;
    c->deadline = deadline;
    c->stop = stop;
    c->stop_arg = stop_arg;
    nccl_id u;
    memcpy(u.internal, id, NC_ID_BYTES);
    if (st == TR_OK && api.init_rank_config) {
        /* Non-blocking: NCCL joins the ranks in the background while this thread watches the
         * deadline and the peers (a blocking ncclCommInitRank waits for a dead rank for ever). */
        nccl_config_v21400 cfg = {sizeof cfg, NCCL_CONFIG_MAGIC, NCCL_VERSION_2_14, 0};
        nccl_res nr = api.init_rank_config(&c->comm, size, u, rank, &cfg);
        c->nonblocking = 1;
        if (nr == NCCL_IN_PROGRESS && c->comm) st = settle(c, "ncclCommInitRankConfig");
        else if (nr != NCCL_OK) st = nccl_fail(c, nr, "ncclCommInitRankConfig");
    } else if (st == TR_OK) { /* before NCCL 2.14: blocking, unbounded */
        nccl_res nr = api.init_rank(&c->comm, size, u, rank);
        if (nr != NCCL_OK) {
            c->comm = NULL;
            st = nccl_fail(c, nr, "ncclCommInitRank");
        }
    }
    if (st != TR_OK) {
        nc_destroy(c, 1);
        return st;
    }
    *out = c;
    return TR_OK;
}

/* A non-blocking communicator's leaving: ncclCommFinalize flushes its work and leaves the
 * peers in the background, polled as a collective is (for the join's span from now, the stop
 * callback watching the peers, the abort flag); TR_OK once it finished, else it was aborted
 * (so that a dead peer cannot hang the ending job, as ncclCommDestroy alone would). */
static tr_status finalize(nc_comm *c) {
    c->deadline = tr_now() + c->span;
    nccl_res rc = api.finalize(c->comm);
    if (rc == NCCL_OK || rc == NCCL_IN_PROGRESS) return settle(c, "ncclCommFinalize");
    tr_status st = nccl_fail(c, rc, "ncclCommFinalize");
    abort_now(c);
    return st;
}

void nc_destroy(nc_comm *c, int abort_first) {
    if (!c) return;
    api.cu->ctx_set_current(c->ctx);
    if (c->comm && !atomic_load(&c->aborted)) {
        if (abort_first || atomic_load(&c->abort_requested)) api.abort(c->comm);
        else if (!c->nonblocking || !api.finalize) api.destroy(c->comm);
        else { /* a finalize that fails aborts; the thread's message stays the run's */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", tr_error_msg());
            if (finalize(c) == TR_OK) api.destroy(c->comm);
            else tr_error_set(TR_OK, "%s", msg);
        }
    }
    if (c->scratch) api.cu->mem_free((cu_ptr)(uintptr_t)c->scratch);
    for (int i = 0; i < NC_SLOTS; i++)
        if (c->ready[i]) api.cu->event_destroy(c->ready[i]);
    if (c->stream) api.cu->stream_destroy(c->stream);
    api.cu->primary_release(c->device);
    tr_free(c);
}

/* From any thread: only a flag (ncclCommAbort from here could race the communicator thread's
 * calls); the thread that runs operations aborts NCCL when it sees it. */
void nc_abort(nc_comm *c) {
    if (c) atomic_store(&c->abort_requested, 1);
}

static void abort_now(nc_comm *c) {
    int was = 0;
    if (atomic_compare_exchange_strong(&c->aborted, &was, 1)) api.abort(c->comm);
}

tr_status nc_begin(nc_comm *c, double deadline, nc_stop_fn stop, void *stop_arg) {
    c->deadline = deadline;
    c->stop = stop;
    c->stop_arg = stop_arg;
    if (atomic_load(&c->abort_requested) || atomic_load(&c->aborted))
        return tr_error_set(TR_ERR_ABORTED, "the communicator was aborted");
    CU(api.cu->ctx_set_current(c->ctx), "cuCtxSetCurrent");
    return TR_OK;
}

tr_status nc_mark_ready(nc_comm *c, unsigned slot) {
    if (!c->compute) return TR_OK;
    /* The issuing thread has the device bound: its context is the primary one, as ours. */
    CU(api.cu->event_record(c->ready[slot], c->compute), "cuEventRecord on the compute stream");
    atomic_store(&c->marked[slot], 1);
    return TR_OK;
}

tr_status nc_wait_compute(nc_comm *c, unsigned slot) {
    if (!c->compute) {
        CU(api.cu->ctx_sync(), "waiting for the device's work (cuCtxSynchronize)");
        return TR_OK;
    }
    /* The collective's stream waits on the device for the point marked at issue (else for
     * what the compute stream holds now); the host does not wait. */
    if (!atomic_exchange(&c->marked[slot], 0))
        CU(api.cu->event_record(c->ready[slot], c->compute), "cuEventRecord on the compute stream");
    CU(api.cu->stream_wait_event(c->stream, c->ready[slot], 0), "cuStreamWaitEvent");
    return TR_OK;
}

int nc_is_device(nc_comm *c, const void *p) {
    (void)c;
    unsigned type = 0;
    return api.cu->pointer_attr(&type, CU_PTR_MEMORY_TYPE, (cu_ptr)(uintptr_t)p) == 0 && type == CU_MEMTYPE_DEVICE;
}

tr_status nc_scratch(nc_comm *c, size_t bytes, void **p) {
    if (bytes > c->scratch_size) { /* the stream is idle between operations */
        if (c->scratch) api.cu->mem_free((cu_ptr)(uintptr_t)c->scratch);
        c->scratch = NULL;
        c->scratch_size = 0;
        cu_ptr d = 0;
        cu_res rc = api.cu->mem_alloc(&d, bytes);
        if (rc != 0) return tr_error_set(TR_ERR_NOMEM, "GPU %d: no room for %zu bytes of staging (CUDA error %d)",
                                         c->device, bytes, rc);
        c->scratch = (void *)(uintptr_t)d;
        c->scratch_size = bytes;
    }
    *p = c->scratch;
    return TR_OK;
}

tr_status nc_upload(nc_comm *c, void *dst, const void *src, size_t bytes) {
    CU(api.cu->htod_async((cu_ptr)(uintptr_t)dst, src, bytes, c->stream), "staging upload");
    return TR_OK;
}

tr_status nc_copy(nc_comm *c, void *dst, const void *src, size_t bytes) {
    CU(api.cu->dtod_async((cu_ptr)(uintptr_t)dst, (cu_ptr)(uintptr_t)src, bytes, c->stream), "device copy");
    return TR_OK;
}

tr_status nc_download(nc_comm *c, void *dst, const void *src, size_t bytes) {
    (void)c;
    CU(api.cu->dtoh(dst, (cu_ptr)(uintptr_t)src, bytes), "staging download");
    return TR_OK;
}

/* ncclDataType_t and ncclRedOp_t. */
static int nccl_type(tr_dtype dt) {
    switch (dt) {
    case TR_F32: return 7;
    case TR_F64: return 8;
    case TR_I32: return 2;
    case TR_I64: return 4;
    case TR_U8: return 1;
    case TR_F16: return 6;
    default: return 9; /* bf16 */
    }
}

static int nccl_op(tr_red_op op) {
    switch (op) {
    case TR_RED_PROD: return 1;
    case TR_RED_MAX: return 2;
    case TR_RED_MIN: return 3;
    case TR_RED_AVG: return 4;
    default: return 0;
    }
}

tr_status nc_all_reduce(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op) {
    NC(c, api.all_reduce(send, recv, n, nccl_type(dt), nccl_op(op), c->comm, c->stream), "ncclAllReduce");
    return TR_OK;
}

tr_status nc_reduce(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root) {
    NC(c, api.reduce(send, recv, n, nccl_type(dt), nccl_op(op), root, c->comm, c->stream), "ncclReduce");
    return TR_OK;
}

tr_status nc_broadcast(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, int root) {
    NC(c, api.broadcast(send, recv, n, nccl_type(dt), root, c->comm, c->stream), "ncclBroadcast");
    return TR_OK;
}

tr_status nc_reduce_scatter(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op) {
    NC(c, api.reduce_scatter(send, recv, n, nccl_type(dt), nccl_op(op), c->comm, c->stream), "ncclReduceScatter");
    return TR_OK;
}

tr_status nc_all_gather(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt) {
    NC(c, api.all_gather(send, recv, n, nccl_type(dt), c->comm, c->stream), "ncclAllGather");
    return TR_OK;
}

tr_status nc_send(nc_comm *c, const void *buf, size_t n, tr_dtype dt, int peer) {
    NC(c, api.send(buf, n, nccl_type(dt), peer, c->comm, c->stream), "ncclSend");
    return TR_OK;
}

tr_status nc_recv(nc_comm *c, void *buf, size_t n, tr_dtype dt, int peer) {
    NC(c, api.recv(buf, n, nccl_type(dt), peer, c->comm, c->stream), "ncclRecv");
    return TR_OK;
}

tr_status nc_group_start(nc_comm *c) {
    NC(c, api.group_start(), "ncclGroupStart");
    return TR_OK;
}

tr_status nc_group_end(nc_comm *c) {
    NC(c, api.group_end(), "ncclGroupEnd");
    return TR_OK;
}

/* How long a call may still finish after the stop callback said stop: a peer that did its
 * part and then exited (after the last collective of a job) is not a failure of the call. */
#define STOP_GRACE_S 0.2

/* Between two polls: TR_OK to poll again (after a yield for the first 2 ms since start, then
 * 50 us naps), or the communicator aborted because the abort flag, the deadline or the stop
 * callback said to stop (the callback STOP_GRACE_S after it said so, if the call did not finish
 * meanwhile). Each wait starts with stop_at 0. */
static tr_status pause_or_stop(nc_comm *c, double start) {
    if (atomic_load(&c->abort_requested)) {
        abort_now(c);
        return tr_error_set(TR_ERR_ABORTED, "the communicator was aborted");
    }
    double now = tr_now();
    if (c->stop_at == 0 && c->stop && c->stop(c->stop_arg)) c->stop_at = now;
    if (c->stop_at > 0 && now - c->stop_at > STOP_GRACE_S) {
        abort_now(c);
        return tr_error_set(TR_ERR_ABORTED, "stopped");
    }
    if (now > c->deadline) {
        abort_now(c);
        return tr_error_set(TR_ERR_TIMEOUT, "timed out");
    }
    if (now - start < 0.002) sched_yield();
    else nanosleep(&(struct timespec){0, 50000}, NULL);
    return TR_OK;
}

/* Waits for a call that went on in the background (ncclInProgress) to finish. */
static tr_status settle(nc_comm *c, const char *what) {
    double start = tr_now();
    c->stop_at = 0;
    for (;;) {
        nccl_res state = NCCL_OK, rc = api.async_error(c->comm, &state);
        if (rc == NCCL_OK && state == NCCL_OK) return TR_OK;
        if (rc != NCCL_OK || state != NCCL_IN_PROGRESS) {
            tr_status st = nccl_fail(c, rc != NCCL_OK ? rc : state, what);
            abort_now(c);
            return st;
        }
        TR_CHECK(pause_or_stop(c, start));
    }
}

/* Polls the stream and NCCL's asynchronous state (a call still in progress counts as queued
 * work), bounded as pause_or_stop says. */
tr_status nc_finish(nc_comm *c) {
    double start = tr_now();
    c->stop_at = 0;
    for (;;) {
        nccl_res async = NCCL_OK;
        api.async_error(c->comm, &async);
        if (async != NCCL_OK && async != NCCL_IN_PROGRESS) {
            tr_status st = nccl_fail(c, async, "NCCL");
            abort_now(c);
            return st;
        }
        if (async == NCCL_OK) {
            cu_res rc = api.cu->stream_query(c->stream);
            if (rc == 0) return TR_OK;
            if (rc != CU_NOT_READY) return cu_fail(rc, "the communication stream");
        }
        TR_CHECK(pause_or_stop(c, start));
    }
}
