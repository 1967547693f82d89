/* dataparallel on GPUs: the step through host memory or over a device backend (nccl) whose
 * ranks are the replicas' threads, and that backend chosen and joined. docs/strategies.md,
 * "dataparallel", 8. */
#define _GNU_SOURCE
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dp.h"
#include "trainer/log.h"

/* The primary's update on its device from the summed gradient (left out when the norm is not
 * finite: the trainer stops or skips the step). */
static tr_status update_primary(dp *d, double sumsq) {
    tr_replica *r = d->r[0];
    size_t n = tr_params_numel(tr_replica_host_params(r));
    if (!isfinite(sumsq)) return TR_OK;
    if (d->max_norm > 0) tr_accel_clip_grad_norm(d->accel[0], tr_replica_device_grad(r), n, d->max_norm, sumsq);
    return tr_optim_step_part(d->opt, tr_replica_device_data(r), tr_replica_device_grad(r), 0, n, d->lr);
}

/* The reduce on host copies of the gradients (each replica's host P): download, reduce this
 * replica's slice (as on the CPU), then the primary uploads the sum, clips and updates on its
 * device and downloads the result into its host P, which every other replica uploads. */
tr_status dp_step_gpu(dp *d, int i) {
    tr_params *P0 = tr_replica_host_params(d->r[0]);
    size_t n = tr_params_numel(P0), nb = tr_params_buffers_numel(P0);
    tr_replica *r = d->r[i];
    tr_accel *a = d->accel[i];
    float *h0 = tr_params_data(P0), *hb0 = tr_params_buffers_data(P0);
    TR_CHECK(tr_accel_download(a, tr_params_grad(tr_replica_host_params(r)), tr_replica_device_grad(r), n * sizeof(float)));
    TR_CHECK(dp_barrier(d));
    dp_reduce_slice(d, i);
    TR_CHECK(dp_barrier(d));
    if (i == 0) {
        double sumsq = 0;
        for (int k = 0; k < d->n; k++) sumsq += d->w[k].sumsq;
        d->sumsq = sumsq;
        /* the sum goes up even when the step is left out: nonfinite() looks at it */
        TR_CHECK(tr_accel_upload(a, tr_replica_device_grad(r), tr_params_grad(P0), n * sizeof(float)));
        TR_CHECK(update_primary(d, sumsq));
        if (isfinite(sumsq)) TR_CHECK(tr_accel_download(a, h0, tr_replica_device_data(r), n * sizeof(float)));
        if (nb) TR_CHECK(tr_accel_download(a, hb0, tr_replica_device_buffers(r), nb * sizeof(float)));
    }
    TR_CHECK(dp_barrier(d));
    if (i > 0) {
        if (isfinite(d->sumsq)) TR_CHECK(tr_accel_upload(a, tr_replica_device_data(r), h0, n * sizeof(float)));
        if (nb) TR_CHECK(tr_accel_upload(a, tr_replica_device_buffers(r), hb0, nb * sizeof(float)));
    }
    return tr_accel_sync(a);
}

/* Over a device backend: the gradients summed onto the primary in device memory, updated
 * there, the parameters and buffers broadcast to every replica. */
tr_status dp_step_comm(dp *d, int i) {
    tr_replica *r = d->r[i];
    tr_accel *a = d->accel[i];
    tr_comm *c = d->w[i].comm;
    size_t n = tr_params_numel(tr_replica_host_params(r)), nb = tr_params_buffers_numel(tr_replica_host_params(r));
    TR_CHECK(tr_comm_reduce(c, tr_replica_device_grad(r), tr_replica_device_grad(r), n, TR_F32, TR_RED_SUM, 0));
    if (i == 0) { /* the sum stays even when the step is left out: nonfinite() looks at it */
        d->sumsq = tr_accel_grad_sumsq(a, tr_replica_device_grad(r), n);
        TR_CHECK(update_primary(d, d->sumsq));
    }
    /* every rank joins, also after a step left out (the parameters are then unchanged) */
    TR_CHECK(tr_comm_broadcast(c, tr_replica_device_data(r), n, TR_F32, 0));
    if (nb) TR_CHECK(tr_comm_broadcast(c, tr_replica_device_buffers(r), nb, TR_F32, 0));
    return tr_accel_sync(a);
}

tr_status dp_join_comm(dp *d, int i) {
    tr_comm_env env = d->comm_env;
    env.rank = env.local_rank = i;
    tr_comm *c;
    TR_CHECK(tr_comm_create(&c, d->comm_plugin, NULL, &env));
    pthread_mutex_lock(&d->comm_mu); /* published whole: a failing replica aborts it */
    d->w[i].comm = c;
    pthread_mutex_unlock(&d->comm_mu);
    if (!tr_comm_device_memory(c))
        return tr_error_set(TR_ERR_INVALID, "strategy.backend: %s reduces host memory; GPU replicas use a backend "
                            "that takes device memory (nccl), or host", d->comm_plugin->desc->name);
    return TR_OK;
}

void dp_abort_comms(dp *d) {
    /* abort is for any thread; a rank still joining fails its create on the deadline */
    pthread_mutex_lock(&d->comm_mu);
    for (int i = 0; i < d->n; i++)
        if (d->w[i].comm) tr_comm_abort(d->w[i].comm);
    pthread_mutex_unlock(&d->comm_mu);
}

void dp_drop_comm(dp *d, int i) {
    worker *w = &d->w[i];
    if (!w->comm) return;
    if (d->accel) tr_accel_bind(d->accel[i]);
    tr_comm_destroy(w->comm);
    w->comm = NULL;
}

int dp_ids_repeat(const dp *d, int64_t *id) {
    for (int i = 0; i < d->n; i++)
        for (int k = 0; k < i; k++)
            if (d->ids[k] == d->ids[i]) {
                *id = d->ids[i];
                return 1;
            }
    return 0;
}

tr_status dp_choose_backend(dp *d, const tr_options *o, const tr_strategy_env *env) {
    const char *b = tr_options_string(o, "backend");
    int gpu = env->accelerator == TR_ACCEL_GPU, aut = !strcmp(b, "auto");
    d->comm_plugin = NULL;
    if (!gpu || !strcmp(b, "host")) return TR_OK; /* a named backend on the CPU: refused by probe() */
    int64_t twice;
    int shared = dp_ids_repeat(d, &twice);
    tr_comm_ranks ranks = {.gpu_plugin = env->gpu_backend->desc->name, .gpus_shared = shared};
    const char *name = tr_comm_resolve_backend(env->registry, b, &ranks, NULL);
    if (aut && strcmp(name, "nccl") != 0) return TR_OK; /* auto picked a host backend: host memory */
    if (shared)
        return tr_error_set(TR_ERR_INVALID, "strategy.backend: %s takes one replica per GPU, and GPU %lld is listed "
                            "twice (the one-GPU testing mode goes through host memory: backend host)", name,
                            (long long)twice);
    tr_status st = tr_registry_find(env->registry, TR_PLUGIN_COMM, name, &d->comm_plugin);
    if (st != TR_OK) tr_error_prefix("strategy.backend: ");
    return st;
}

/* Under auto a backend that cannot run here (no library: TR_ERR_UNSUPPORTED on every rank,
 * before any rendezvous) leaves the step in host memory, with a warning saying why. */
tr_status dp_join_backend(dp *d, const tr_options *o, int *fell_back) {
    static _Atomic unsigned instances;
    tr_comm_env detected; /* for TRAINER_COMM_TIMEOUT (a bad value is an error, as for ddp) */
    TR_CHECK(tr_comm_env_detect(&detected));
    d->comm_env = (tr_comm_env){.size = d->n, .local_size = d->n, .timeout_s = detected.timeout_s};
    snprintf(d->comm_env.job_id, sizeof d->comm_env.job_id, "dp%ld-%u", (long)getpid(), atomic_fetch_add(&instances, 1));
    tr_status st = dp_dispatch(d, JOB_COMM, d->n);
    if (st == TR_OK || strcmp(tr_options_string(o, "backend"), "auto") != 0) return st;
    for (int i = 0; i < d->n; i++)
        if (d->w[i].st != TR_ERR_UNSUPPORTED) return st;
    tr_log(TR_LOG_WARN, "dataparallel: backend auto: %s: %s; the GPU replicas reduce through host memory instead",
           d->comm_plugin->desc->name, d->w[0].msg);
    *fell_back = 1;
    d->comm_plugin = NULL;
    return TR_OK;
}
