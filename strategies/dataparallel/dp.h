/* Private to the dataparallel strategy: its state, shared by the strategy (dataparallel.c)
 * and the GPU replicas' step and device backend (gpu_step.c). */
#ifndef TRAINER_DATAPARALLEL_DP_H
#define TRAINER_DATAPARALLEL_DP_H

#include <pthread.h>

#include "trainer/accel.h"
#include "trainer/comm.h"
#include "trainer/strategy.h"
#include "trainer/team.h"

enum { DP_MAX_REPLICAS = 256, DP_MSG = 512 };
/* The jobs the team runs on every replica's thread (replica i is member i; 0, the primary, is
 * the caller's thread). */
enum { JOB_INIT, JOB_TRAIN, JOB_STEP, JOB_FORWARD, JOB_COMM, JOB_DROP };

typedef struct dp dp;

typedef struct worker {
    dp *d;
    int i;                   /* replica index; 0 is the primary */
    tr_status st;            /* of its last job */
    char msg[DP_MSG];        /* its message, unprefixed */
    double loss;
    tr_model_out out;
    double sumsq;            /* of its gradient slice (JOB_STEP) */
    double *stats;           /* sync batch-norm: this replica's sums, read by all */
    int n_stats;
    tr_comm *comm;           /* GPUs over a device backend: this replica's rank (made and
                              * destroyed on its thread) */
} worker;

struct dp {
    int n;
    int per_threads;
    int64_t ids[DP_MAX_REPLICAS];
    tr_replica **r;
    worker *w;
    tr_optim *opt;
    tr_team *team;           /* a thread per replica but the primary */
    /* the job and its arguments */
    int kind, active;
    const tr_micro_batch *mb;
    const tr_host_batch *hb;
    int with_y;
    double lr, max_norm, sumsq;
    /* gathered outputs */
    float *logits, *embedding;
    size_t logits_cap, embedding_cap;
    float loss_value;
    tr_tensor t_loss, t_logits, t_embedding;
    /* On GPUs (else NULL): each replica's opened device. Each replica's host P holds its
     * gradient's host copy, and the primary's the updated parameters the others upload. */
    tr_accel **accel;
    /* GPUs over a device backend (else NULL): its plugin, and the job the replicas' ranks
     * join (JOB_COMM); then every worker's comm is set, published under comm_mu. */
    const tr_plugin *comm_plugin;
    tr_comm_env comm_env;
    pthread_mutex_t comm_mu;
};

/* Runs a job on the first `active` replicas' threads (every replica's for training and the
 * step) and waits for all; the error of the replica that failed, named. */
tr_status dp_dispatch(dp *d, int kind, int active);
/* Waits for the job's active replicas; fails when one of them failed. */
tr_status dp_barrier(dp *d);
/* Replica w's slice of the gradient summed onto the primary's, in replica order, and its sum
 * of squares into w->sumsq (the host buffers). */
void dp_reduce_slice(dp *d, int i);

/* gpu_step.c: the step of GPU replicas, through host memory or over a device backend. */
tr_status dp_step_gpu(dp *d, int i);
tr_status dp_step_comm(dp *d, int i);
/* Joins replica i's rank of the device backend (its device bound on this thread). */
tr_status dp_join_comm(dp *d, int i);
/* Destroys replica i's communicator, if any, with its device bound. */
void dp_drop_comm(dp *d, int i);
/* Aborts every replica's communicator (a replica failed: the others' collectives end now). */
void dp_abort_comms(dp *d);
/* Whether a GPU id repeats among the replicas' (the one-GPU testing mode); *id: which. */
int dp_ids_repeat(const dp *d, int64_t *id);
/* The option `backend`: d->comm_plugin, or NULL (through host memory). */
tr_status dp_choose_backend(dp *d, const tr_options *o, const tr_strategy_env *env);
/* The replicas' ranks of the device backend, each joined on its replica's thread; *fell_back:
 * auto found the backend unable to run here and left the step in host memory. */
tr_status dp_join_backend(dp *d, const tr_options *o, int *fell_back);

#endif
