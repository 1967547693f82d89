/* Communication between ranks: the torch.distributed / NCCL primitives behind one API, with
 * backends as plugins (docs/design.md "Communication"): `shm` (processes on one host over shared
 * memory), `mpi` (OpenMPI, many hosts), `nccl` (GPUs).
 *
 *   tr_comm_env env;
 *   TR_CHECK(tr_comm_env_detect(&env));              // RANK/WORLD_SIZE, OMPI_*, SLURM_*
 *   tr_comm *c;
 *   TR_CHECK(tr_comm_create(&c, shm_plugin, NULL, &env));
 *   TR_CHECK(tr_comm_all_reduce(c, grad, grad, n, TR_F32, TR_RED_SUM));   // in place
 *   tr_comm_work *w;
 *   TR_CHECK(tr_comm_iall_reduce(c, bucket, bucket, m, TR_F32, TR_RED_SUM, &w));
 *   ... backward goes on ...
 *   TR_CHECK(tr_comm_wait(w));
 *   tr_comm_destroy(c);
 *
 * Semantics (NCCL's): every rank issues the same collectives in the same order. Counts are
 * in elements. gather/all_gather: each rank contributes `count` elements and recv holds
 * size * count (rank r's at r * count); scatter/reduce_scatter: send holds size * count,
 * each rank receives its `count`. send == recv (in place) works everywhere, count 0 too.
 * AVG divides the sum by the world size (integers: truncating division). bf16/f16 reduce in
 * float and round to nearest even once per reduction step.
 *
 * Each operation runs on the communicator's own thread, in issue order, so the async forms
 * overlap communication with compute; the sync forms are issue + wait. Every operation has a
 * deadline (env.timeout_s, default 300 s): past it the call fails with TR_ERR_TIMEOUT and a
 * message naming the operation, its sequence number and the ranks that did not arrive. After
 * any failure the communicator is broken: later calls fail with the same message (as NCCL),
 * and tr_comm_last_error keeps it. tr_comm_abort makes every rank's pending and later calls
 * fail promptly. */
#ifndef TRAINER_COMM_H
#define TRAINER_COMM_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/plugin.h"
#include "trainer/status.h"
#include "trainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tr_red_op {
    TR_RED_SUM = 0,
    TR_RED_AVG = 1,
    TR_RED_MAX = 2,
    TR_RED_MIN = 3,
    TR_RED_PROD = 4,
    TR_RED_COUNT
} tr_red_op;

typedef enum tr_comm_kind {
    TR_COMM_BARRIER = 0,
    TR_COMM_SEND = 1,
    TR_COMM_RECV = 2,
    TR_COMM_BROADCAST = 3,
    TR_COMM_REDUCE = 4,
    TR_COMM_ALL_REDUCE = 5,
    TR_COMM_GATHER = 6,
    TR_COMM_SCATTER = 7,
    TR_COMM_ALL_GATHER = 8,
    TR_COMM_REDUCE_SCATTER = 9,
    TR_COMM_KIND_COUNT
} tr_comm_kind;

/* Who this process is in the job and how to meet the others. */
typedef struct tr_comm_env {
    int rank, size;               /* global */
    int local_rank, local_size;   /* on this host */
    char job_id[128];             /* rendezvous name shared by the job's ranks (shm segment) */
    double timeout_s;             /* per-operation deadline; <= 0: 300 s */
} tr_comm_env;

/* Fills env from the launcher's variables: trainer's/torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE, TRAINER_JOB_ID (or MASTER_PORT with torchrun's run id
 * and restart count), then mpirun's OMPI_COMM_WORLD_*, then srun's SLURM_PROCID,
 * SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), SLURM_LOCALID, this node's count in
 * SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_ID; none: a single rank (PMIX_RANK alone is an error). TRAINER_COMM_TIMEOUT (seconds) sets the deadline.
 * Inconsistent values (RANK >= WORLD_SIZE, several nodes with every rank on this one,
 * non-numbers) are errors naming the variable. */
TR_API tr_status tr_comm_env_detect(tr_comm_env *env);

typedef struct tr_comm tr_comm;
typedef struct tr_comm_work tr_comm_work;

/* A communicator over the backend plugin (kind comm). opts: the backend's resolved options
 * (NULL: its defaults). Blocks until every rank has joined or the deadline passes. */
TR_API tr_status tr_comm_create(tr_comm **out, const tr_plugin *backend, const tr_options *opts,
                         const tr_comm_env *env);
/* Where a rank strategy's ranks run, for choosing and checking its backend: gpu_plugin is the
 * device plugin of their GPUs (NULL: ranks on the CPU); gpus_shared is 1 when ranks share a
 * GPU (the one-GPU testing mode). */
typedef struct tr_comm_ranks {
    const char *gpu_plugin;
    int gpus_shared;
} tr_comm_ranks;
/* The backend a rank strategy's `backend` option names: "auto" is nccl for ranks on GPUs of
 * their own driven by the `cuda` device plugin when the registry holds nccl, else shm when
 * the job is on one host (env NULL: one host), else mpi; any other name is itself. ranks
 * NULL: ranks on the CPU. Sets no error. */
TR_API const char *tr_comm_resolve_backend(const tr_registry *registry, const char *backend, const tr_comm_ranks *ranks,
                                    const tr_comm_env *env);
/* For strategies: detects the job (tr_comm_env_detect), resolves `backend` for these ranks,
 * finds its plugin among the registry's comm plugins (a miss is an error prefixed
 * "strategy.backend: ") and creates the communicator with its default options. When auto
 * chose nccl and it cannot run here (no library: TR_ERR_UNSUPPORTED at create, alike on every
 * rank of the host, before any rendezvous), it says so in the log and opens what auto picks
 * for CPU ranks. timeout_s applies unless TRAINER_COMM_TIMEOUT is set. env_out (may be NULL)
 * receives the job. */
TR_API tr_status tr_comm_open_ranks(tr_comm **out, const tr_registry *registry, const char *backend,
                             const tr_comm_ranks *ranks, double timeout_s, tr_comm_env *env_out);
/* tr_comm_open_ranks for ranks on the CPU. */
TR_API tr_status tr_comm_open(tr_comm **out, const tr_registry *registry, const char *backend, double timeout_s,
                       tr_comm_env *env_out);
/* For a strategy's probe: TR_OK when the registry holds the comm plugin `backend` resolves to
 * for these ranks (NULL: on the CPU), and it fits them (a backend that joins GPU ranks, nccl,
 * is refused for ranks on the CPU, naming the ones that fit); else an error prefixed
 * "strategy.backend: " (a miss names the backends that were found). */
TR_API tr_status tr_comm_probe_ranks(const tr_registry *registry, const char *backend, const tr_comm_ranks *ranks);
/* tr_comm_probe_ranks for ranks on the CPU. */
TR_API tr_status tr_comm_probe(const tr_registry *registry, const char *backend);
/* Waits for pending operations, then leaves. */
TR_API void tr_comm_destroy(tr_comm *c);

TR_API int tr_comm_rank(const tr_comm *c);
TR_API int tr_comm_size(const tr_comm *c);
TR_API int tr_comm_local_rank(const tr_comm *c);
TR_API int tr_comm_local_size(const tr_comm *c);
TR_API const char *tr_comm_backend_name(const tr_comm *c);
/* The message of the failure that broke the communicator; "" while it works. */
TR_API const char *tr_comm_last_error(const tr_comm *c);
/* Breaks the communicator on every rank: their pending and later calls fail with
 * TR_ERR_ABORTED naming this rank. Safe from any thread and from a signal handler's
 * deferred context (not from the handler itself). Leaves the calling thread's error message
 * (tr_error_msg) as it was: a caller failing a step aborts and returns its own error. */
TR_API void tr_comm_abort(tr_comm *c);

/* Memory for buffers that collectives will use again and again (a flat gradient buffer): the
 * backend places it where every rank's backend can reach it directly, as NCCL's
 * ncclMemAlloc or MPI_Win_allocate_shared do, and collectives whose buffers lie in it on every
 * rank skip the staging copies (shm: an in-place all-reduce reads the peers' buffers and
 * writes the sums into them, about half the memory traffic). Collective: every rank calls it
 * with the same bytes in the same order, from the thread that issues operations; it first
 * waits for every pending operation. Where the backend cannot, the memory is plain (page-
 * backed, zeroed) and everything works the same (shm: for one rank, past 256 ranks, past 64
 * allocations in a communicator's life, or when /dev/shm is full). Freed by tr_comm_free or
 * with the communicator. */
TR_API tr_status tr_comm_alloc(tr_comm *c, size_t bytes, void **ptr);
/* Collective in the same sense: every rank frees the same allocation at the same point of
 * the operation sequence (a rank may not all-reduce in memory its peer has freed). Waits for
 * pending operations first; inside a group it does nothing (the memory goes with the
 * communicator). NULL does nothing. */
TR_API void tr_comm_free(tr_comm *c, void *ptr);
/* 1 when ptr came from tr_comm_alloc and the backend shares it (for tests and descriptions). */
TR_API int tr_comm_is_shared(const tr_comm *c, const void *ptr);
/* 1 when collectives take buffers in the GPU memory of the device bound (tr_accel_bind) on the
 * thread that created the communicator, and wait for the work queued there first (nccl): a
 * strategy then reduces its device gradients in place, with no staging through the host.
 * Host buffers work with every backend. */
TR_API int tr_comm_device_memory(const tr_comm *c);

/* ---- synchronous collectives ---- */
TR_API tr_status tr_comm_barrier(tr_comm *c);
TR_API tr_status tr_comm_send(tr_comm *c, const void *buf, size_t count, tr_dtype dtype, int peer);
TR_API tr_status tr_comm_recv(tr_comm *c, void *buf, size_t count, tr_dtype dtype, int peer);
TR_API tr_status tr_comm_broadcast(tr_comm *c, void *buf, size_t count, tr_dtype dtype, int root);
TR_API tr_status tr_comm_reduce(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype,
                         tr_red_op op, int root);
TR_API tr_status tr_comm_all_reduce(tr_comm *c, const void *send, void *recv, size_t count,
                             tr_dtype dtype, tr_red_op op);
TR_API tr_status tr_comm_gather(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype,
                         int root);
TR_API tr_status tr_comm_scatter(tr_comm *c, const void *send, void *recv, size_t count,
                          tr_dtype dtype, int root);
TR_API tr_status tr_comm_all_gather(tr_comm *c, const void *send, void *recv, size_t count,
                             tr_dtype dtype);
TR_API tr_status tr_comm_reduce_scatter(tr_comm *c, const void *send, void *recv, size_t count,
                                 tr_dtype dtype, tr_red_op op);

/* ---- asynchronous forms ----
 * Issue and return at once; buffers must stay valid and untouched until the work completes.
 * *work is owned by the communicator and valid until tr_comm_wait returns (a communicator
 * holds at most TR_COMM_MAX_PENDING unfinished works; issuing more blocks). */
#define TR_COMM_MAX_PENDING 256

typedef struct tr_comm_call {
    tr_comm_kind kind;
    const void *send;
    void *recv;
    size_t count;
    tr_dtype dtype;
    tr_red_op op;
    int root;                     /* root, or peer for send/recv */
} tr_comm_call;

TR_API tr_status tr_comm_issue(tr_comm *c, const tr_comm_call *call, tr_comm_work **work);
TR_API tr_status tr_comm_iall_reduce(tr_comm *c, const void *send, void *recv, size_t count,
                              tr_dtype dtype, tr_red_op op, tr_comm_work **work);
TR_API tr_status tr_comm_ireduce_scatter(tr_comm *c, const void *send, void *recv, size_t count,
                                  tr_dtype dtype, tr_red_op op, tr_comm_work **work);
TR_API tr_status tr_comm_iall_gather(tr_comm *c, const void *send, void *recv, size_t count,
                              tr_dtype dtype, tr_comm_work **work);
TR_API tr_status tr_comm_ibroadcast(tr_comm *c, void *buf, size_t count, tr_dtype dtype, int root,
                             tr_comm_work **work);
/* Blocks until the work is done; its status (a failure's message in tr_error_msg). Each work
 * is waited exactly once. */
TR_API tr_status tr_comm_wait(tr_comm_work *work);
/* *done = 1 when finished (then tr_comm_wait returns at once). */
TR_API tr_status tr_comm_test(tr_comm_work *work, int *done);

/* Operations issued between start and end are handed to the communicator thread together
 * (one wake-up; backends may fuse them). Nesting counts; works are waited after end. */
TR_API void tr_comm_group_start(tr_comm *c);
TR_API tr_status tr_comm_group_end(tr_comm *c);

/* ---- for backends and tests ---- */
TR_API const char *tr_comm_kind_name(tr_comm_kind kind);
TR_API const char *tr_red_op_name(tr_red_op op);
/* dst[i] = op(dst[i], src[i]) for count elements (AVG reduces as SUM). */
TR_API void tr_reduce_into(void *dst, const void *src, size_t count, tr_dtype dtype, tr_red_op op);
/* dst[i] = op(a[i], b[i]). */
TR_API void tr_reduce2(void *dst, const void *a, const void *b, size_t count, tr_dtype dtype,
                tr_red_op op);
/* buf[i] /= divisor (the AVG step). */
TR_API void tr_scale_div(void *buf, size_t count, tr_dtype dtype, int divisor);

#ifdef __cplusplus
}
#endif
#endif
