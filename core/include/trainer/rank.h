/* A strategy with one process per rank over a communicator (ddp, sharded): the setup every
 * such strategy repeats, on the CPU and on GPUs alike.
 *
 *   tr_comm *comm;
 *   tr_accel *accel;      // this rank's GPU, or NULL on the CPU
 *   int shared;
 *   TR_CHECK(tr_rank_open(o, env, &comm, &accel, &shared));
 *   ...
 *   tr_comm_destroy(comm);
 *   tr_accel_close(accel);  // after everything that holds its memory
 *
 * probe: tr_rank_probe(o, env). The options are TR_RANK_STRATEGY_OPTIONS' (backend,
 * timeout_s). */
#ifndef TRAINER_RANK_H
#define TRAINER_RANK_H

#include "trainer/export.h"
#include "trainer/accel.h"
#include "trainer/comm.h"
#include "trainer/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* On GPUs (env->accelerator TR_ACCEL_GPU) opens the GPU at this rank's local rank
 * (env->gpu_ids[local_rank % n_gpu_ids]) and binds it to the calling thread, so that a device
 * backend's communicator takes that GPU; *shared says whether another rank of this host
 * opens it too (the one-GPU testing mode); on the CPU *accel is NULL and *shared 0. Then
 * opens the communicator for these ranks (tr_comm_open_ranks with the options backend and
 * timeout_s) and, unless trainer.threads says otherwise, gives each rank its share of the
 * host's cores. On failure nothing stays open. */
TR_API tr_status tr_rank_open(const tr_options *o, const tr_strategy_env *env, tr_comm **comm, tr_accel **accel,
                       int *shared);
/* Broadcasts root's n floats at dev (memory of a, or host memory when a is NULL): in place on
 * the host and over a backend that takes device memory (tr_comm_device_memory), else through
 * the n floats at host, which it overwrites (downloaded, broadcast, uploaded). */
TR_API tr_status tr_rank_broadcast(tr_comm *c, tr_accel *a, float *dev, float *host, size_t n, int root);
/* ABI 0.17. Rank 0's buffers of r (batch-norm running statistics) everywhere, as
 * tr_rank_broadcast moves them (through r's host copy on a device over a host backend). */
TR_API tr_status tr_rank_broadcast_buffers(tr_comm *c, tr_accel *a, tr_replica *r);
/* ABI 0.17. Sums n doubles over the ranks of comm (a tr_comm *) in place: a graph's stat reducer
 * (sync_batchnorm: tr_graph_set_stat_reducer(g, tr_rank_all_sum, comm)) and a strategy's all_sum. */
TR_API tr_status tr_rank_all_sum(void *comm, double *values, int n);
/* ABI 0.17. A rank strategy's `processes`: one per device asked for, at least one. */
TR_API int tr_rank_processes(const tr_options *opts, int devices);
/* For the strategy's probe: on GPUs the device plugin must run kernels (tr_accel_probe), and
 * the backend must exist and fit the ranks (tr_comm_probe_ranks). */
TR_API tr_status tr_rank_probe(const tr_options *o, const tr_strategy_probe *env);

#ifdef __cplusplus
}
#endif
#endif
