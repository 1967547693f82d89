/* The communication backend plugin interface (kind TR_PLUGIN_COMM): what `shm`, `mpi` and
 * `nccl` implement behind trainer/comm.h.
 *
 * The core owns the asynchronous machinery (the communicator thread, the queue, the works,
 * group start/end, AVG's division, the broken-after-failure rule); a backend only runs one
 * operation at a time, blocking, on that thread (alloc and free run on the issuing thread
 * while the communicator thread is idle):
 *
 *   static tr_status run(void *ctx, const tr_comm_op *op) {
 *       switch (op->call.kind) {
 *       case TR_COMM_ALL_REDUCE: return my_all_reduce(ctx, op);   // SUM/MAX/MIN/PROD
 *       ...
 *       }
 *   }
 *   static const tr_comm_backend_ops ops = {.create = create, .destroy = destroy,
 *                                           .run = run, .abort = abort_all};
 *
 * A backend waits no longer than op->deadline (tr_now() seconds): then it fails with
 * TR_ERR_TIMEOUT and a message naming the ranks that did not arrive when it can tell. A peer
 * that died fails the call with TR_ERR_COMM naming it. AVG arrives as SUM (the core divides),
 * except to a backend with TR_COMM_DEVICE_MEMORY, which gets AVG and divides itself (its
 * buffers may be device memory the core cannot touch). */
#ifndef TRAINER_COMM_BACKEND_H
#define TRAINER_COMM_BACKEND_H

#include "trainer/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_comm_op {
    tr_comm_call call;        /* AVG already turned into SUM (but see TR_COMM_DEVICE_MEMORY) */
    uint64_t seq;             /* 1, 2, ... per communicator, the same on every rank */
    double deadline;          /* tr_now() value past which the backend gives up */
} tr_comm_op;

typedef struct tr_comm_backend_ops {
    /* Joins the job described by env (all its ranks call create). */
    tr_status (*create)(void **ctx, const tr_options *opts, const tr_comm_env *env,
                        double deadline);
    void (*destroy)(void *ctx);
    /* Runs one operation to completion on the calling (communicator) thread. */
    tr_status (*run)(void *ctx, const tr_comm_op *op);
    /* From any thread: make this and every other rank's pending and later operations fail
     * with TR_ERR_ABORTED. Sets no error message (tr_comm_abort keeps the caller's). NULL:
     * the backend cannot (only this rank stops). */
    void (*abort)(void *ctx);
    /* Optional (NULL, or a plugin built before they existed: plain memory). Collective: every
     * rank calls alloc with the same bytes in the same order, on the thread that issues
     * operations, with none pending. *ptr: `bytes` of zeroed memory that the backend can reach
     * from every rank (shared memory, registered buffers), so that operations on buffers inside
     * it move less; *ptr NULL with TR_OK: the backend could not (on every rank alike), the core
     * gives plain memory. free releases it: every rank frees the same allocation at the same
     * point of the operation sequence, with no operation on it pending. Appended in ABI 0.6. */
    tr_status (*alloc)(void *ctx, size_t bytes, double deadline, void **ptr);
    void (*free)(void *ctx, void *ptr);
    /* TR_COMM_* capability bits. Appended in ABI 0.6 (an older plugin: 0). */
    unsigned flags;
    /* Optional (appended in ABI 0.6; NULL: nothing to do). Called by tr_comm_issue on the
     * issuing thread, in issue order, before the operation can reach run: the point where
     * its buffers are ready, as far as the work queued on that thread goes. A device
     * backend records there what run must wait for (nccl: an event on the compute stream,
     * right after the kernels that made a bucket's gradients, rather than wherever the
     * compute stream is when the communicator thread takes the operation). op->deadline is
     * not set yet. It runs with the communicator's lock held, while run may be running
     * earlier operations on the communicator thread: it must be short and call no tr_comm_*
     * function. A device backend may assume the issuing thread has the device bound (the
     * strategies issue from the thread that queued the kernels). At most
     * TR_COMM_MAX_PENDING operations are outstanding (issued, not yet waited), so
     * per-operation state can live in slot (op->seq - 1) % TR_COMM_MAX_PENDING. An error
     * fails the issue: nothing is queued. */
    tr_status (*issued)(void *ctx, const tr_comm_op *op);
} tr_comm_backend_ops;

/* run takes buffers in the memory of the GPU whose context was current on the thread that
 * called create (as well as host memory), orders itself after the work queued on that GPU
 * before the call, and has finished with the buffers when it returns (nccl). */
#define TR_COMM_DEVICE_MEMORY 1u

#ifdef __cplusplus
}
#endif
#endif
