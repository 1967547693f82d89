/* The setup of a strategy with one process per rank (see trainer/rank.h). */
#include "trainer/rank.h"

#include "trainer/runtime.h"

tr_status tr_rank_open(const tr_options *o, const tr_strategy_env *env, tr_comm **comm, tr_accel **accel,
                       int *shared) {
    *comm = NULL;
    *accel = NULL;
    *shared = 0;
    tr_comm_env ce;
    TR_CHECK(tr_comm_env_detect(&ce));
    tr_comm_ranks ranks = {0};
    if (env->accelerator == TR_ACCEL_GPU) { /* bound before the communicator, which takes the bound GPU */
        if (!env->gpu_backend || env->n_gpu_ids < 1)
            return tr_error_set(TR_ERR_INVALID, "accelerator gpu without a GPU chosen");
        int id = env->gpu_ids[(ce.local_rank > 0 ? ce.local_rank : 0) % env->n_gpu_ids], same = 0;
        for (int i = 0; i < env->n_gpu_ids; i++) same += env->gpu_ids[i] == id;
        *shared = same > 1 || env->n_gpu_ids < ce.local_size;
        TR_CHECK(tr_accel_open(env->gpu_backend, id, accel));
        tr_status st = tr_accel_bind(*accel);
        if (st != TR_OK) {
            tr_accel_close(*accel);
            *accel = NULL;
            return st;
        }
        ranks = (tr_comm_ranks){.gpu_plugin = env->gpu_backend->desc->name, .gpus_shared = *shared};
    }
    tr_status st = tr_comm_open_ranks(comm, env->registry, tr_options_string(o, "backend"), &ranks,
                                      tr_options_float(o, "timeout_s"), &ce);
    if (st != TR_OK) {
        tr_accel_close(*accel);
        *accel = NULL;
        return st;
    }
    if (env->threads == 0) { /* each rank's share of the cores */
        int t = tr_cpu_count() / (ce.local_size > 0 ? ce.local_size : 1);
        tr_set_num_threads(t > 0 ? t : 1);
    }
    return TR_OK;
}

tr_status tr_rank_broadcast(tr_comm *c, tr_accel *a, float *dev, float *host, size_t n, int root) {
    if (!n) return TR_OK;
    if (!a || tr_comm_device_memory(c)) return tr_comm_broadcast(c, dev, n, TR_F32, root);
    TR_CHECK(tr_accel_download(a, host, dev, n * sizeof(float)));
    TR_CHECK(tr_comm_broadcast(c, host, n, TR_F32, root));
    return tr_accel_upload(a, dev, host, n * sizeof(float));
}

tr_status tr_rank_broadcast_buffers(tr_comm *c, tr_accel *a, tr_replica *r) {
    tr_params *host = tr_replica_host_params(r);
    return tr_rank_broadcast(c, a, tr_params_buffers_data(tr_replica_params(r)), tr_params_buffers_data(host),
                             tr_params_buffers_numel(host), 0);
}

tr_status tr_rank_all_sum(void *comm, double *values, int n) {
    return tr_comm_all_reduce(comm, values, values, (size_t)n, TR_F64, TR_RED_SUM);
}

int tr_rank_processes(const tr_options *opts, int devices) {
    (void)opts;
    return devices > 1 ? devices : 1;
}

tr_status tr_rank_probe(const tr_options *o, const tr_strategy_probe *env) {
    tr_comm_ranks ranks = {0};
    if (env->accelerator == TR_ACCEL_GPU) {
        TR_CHECK(tr_accel_probe(env->gpu_backend));
        ranks.gpu_plugin = env->gpu_backend->desc->name;
    }
    return tr_comm_probe_ranks(env->registry, tr_options_string(o, "backend"), &ranks);
}
