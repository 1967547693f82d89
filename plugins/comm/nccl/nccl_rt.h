/* Private to the nccl backend: the few things it asks of NCCL and CUDA, below nccl.c.
 *
 * driver.c implements them over libnccl.so.2 and the CUDA driver (libcuda.so.1), both opened
 * with dlopen when a communicator is made, so the plugin loads, and says why it cannot run,
 * where neither exists. The tests implement them again over host memory and shared memory
 * (tests/plugins/nccl_emu), which is how nccl.c is tested where no GPU is.
 *
 * Ordering: one communication stream per communicator. Collectives, copies and groups are
 * queued on it in call order; nc_finish waits for it. The emulator runs each call to the end
 * before returning (its waits honour nc_begin's deadline and stop callback); a real stream runs
 * them later, so nc_finish is where the deadline and the stop callback hold on a GPU (and in
 * nc_init, and in any call NCCL finishes in the background: ncclInProgress). */
#ifndef TR_NCCL_RT_H
#define TR_NCCL_RT_H

#include <stddef.h>

#include "trainer/comm.h"

#define NC_ID_BYTES 128
#define NC_KEY_BYTES 64

typedef struct nc_comm nc_comm;

/* Called now and then while waiting: nonzero stops the wait (then nc_finish and the emulator's
 * calls return TR_ERR_ABORTED with whatever message the callback set). */
typedef int (*nc_stop_fn)(void *arg);

/* Loads the libraries: TR_OK, or an error saying what is missing. */
tr_status nc_load(void);
/* A fresh unique id (rank 0 makes it; the others receive it). */
tr_status nc_unique_id(unsigned char id[NC_ID_BYTES]);
/* The GPU this process reduces on: the one whose context is current on the calling thread (a
 * strategy binds its device before it opens the communicator), else visible GPU `fallback`.
 * key: what tells GPUs apart on this host (the PCI bus id), for the one-rank-per-GPU check. */
tr_status nc_pick_device(int fallback, int *device, char key[NC_KEY_BYTES]);
/* Joins the communicator of `size` ranks named by id, on `device`, with its own stream;
 * compute: the native compute stream of the device plugin on that GPU (tr_accel_bound_stream),
 * or NULL. The join waits for every rank; the wait is bounded by deadline (tr_now() seconds)
 * and stop, as nc_finish's (NCCL's initialisation runs in the background and is polled):
 * TR_ERR_TIMEOUT, or TR_ERR_ABORTED when stop said so, the communicator then aborted. */
tr_status nc_init(nc_comm **out, int size, int rank, const unsigned char id[NC_ID_BYTES], int device, void *compute,
                  double deadline, nc_stop_fn stop, void *stop_arg);
/* Ends it; abort_first: after a failure (ncclCommAbort, nothing waited for). */
void nc_destroy(nc_comm *c, int abort_first);
/* Breaks its pending and later work (from any thread). */
void nc_abort(nc_comm *c);

/* Before each operation, on the thread that runs it: the device made current there, and the
 * deadline (tr_now() seconds) and stop callback that bound every wait until the next nc_begin. */
tr_status nc_begin(nc_comm *c, double deadline, nc_stop_fn stop, void *stop_arg);
/* Slots of per-operation events: the operation with sequence number seq uses slot
 * (seq - 1) % NC_SLOTS (at most that many are outstanding: TR_COMM_MAX_PENDING). */
#define NC_SLOTS TR_COMM_MAX_PENDING
/* On the thread that issues operation `slot`, when it is issued: marks the point of the
 * compute stream its buffers are ready at (an event recorded there). Nothing without a
 * compute stream. */
tr_status nc_mark_ready(nc_comm *c, unsigned slot);
/* Before operation `slot` queues work on device buffers: the communication stream waits, on
 * the device, for the point nc_mark_ready marked; unmarked, for the work queued on the compute
 * stream so far; without a compute stream the host waits for everything queued on the
 * device. */
tr_status nc_wait_compute(nc_comm *c, unsigned slot);
/* 1 when p is memory of the communicator's GPU that NCCL can use directly; 0: host memory. */
int nc_is_device(nc_comm *c, const void *p);
/* Device memory of at least `bytes`, the communicator's own, valid until the next call (it
 * grows, never shrinks; freed with the communicator). */
tr_status nc_scratch(nc_comm *c, size_t bytes, void **p);
/* Queued on the communication stream: host to device, device to device. */
tr_status nc_upload(nc_comm *c, void *dst, const void *src, size_t bytes);
tr_status nc_copy(nc_comm *c, void *dst, const void *src, size_t bytes);
/* Device to host, once nc_finish has returned TR_OK (the stream is idle: no unbounded wait). */
tr_status nc_download(nc_comm *c, void *dst, const void *src, size_t bytes);

/* Queued collectives, NCCL's semantics; op is SUM, AVG (integers: truncating), MAX, MIN or PROD. */
tr_status nc_all_reduce(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op);
tr_status nc_reduce(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op, int root);
tr_status nc_broadcast(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, int root);
tr_status nc_reduce_scatter(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt, tr_red_op op);
tr_status nc_all_gather(nc_comm *c, const void *send, void *recv, size_t n, tr_dtype dt);
/* Point to point, grouped between nc_group_start and nc_group_end (gather and scatter). */
tr_status nc_send(nc_comm *c, const void *buf, size_t n, tr_dtype dt, int peer);
tr_status nc_recv(nc_comm *c, void *buf, size_t n, tr_dtype dt, int peer);
tr_status nc_group_start(nc_comm *c);
tr_status nc_group_end(nc_comm *c);

/* Waits for everything queued: TR_OK; TR_ERR_TIMEOUT past the deadline; TR_ERR_ABORTED when the
 * stop callback said so; TR_ERR_COMM with NCCL's message on an error of its own. */
tr_status nc_finish(nc_comm *c);

#endif
