/* tr_comm_open(_ranks): the communicator a distributed strategy runs on, from its options;
 * tr_comm_probe(_ranks): whether it could be opened here; tr_comm_resolve_backend: what
 * `backend: auto` means for the ranks. */
#include <string.h>

#include "comm/comm_impl.h"
#include "comm/env.h"
#include "trainer/comm_backend.h"
#include "trainer/log.h"

/* The registry's comm plugin `name`, without setting an error on a miss. */
static const tr_plugin *comm_plugin(const tr_registry *registry, const char *name) {
    for (int i = 0; i < tr_registry_count(registry); i++) {
        const tr_plugin *p = tr_registry_at(registry, i);
        if (p->desc->kind == TR_PLUGIN_COMM && !strcmp(p->desc->name, name)) return p;
    }
    return NULL;
}

const char *tr_comm_resolve_backend(const tr_registry *registry, const char *backend, const tr_comm_ranks *ranks,
                                    const tr_comm_env *env) {
    if (strcmp(backend, "auto") != 0) return backend;
    if (ranks && ranks->gpu_plugin && !strcmp(ranks->gpu_plugin, "cuda") && !ranks->gpus_shared &&
        comm_plugin(registry, "nccl"))
        return "nccl";
    return env && env->local_size != env->size ? "mpi" : "shm";
}

/* Ranks on several hosts: only engines that cross hosts, with ranks that can use them.
 * torchrun's ranks have none (shm is one host's; mpi, and nccl's id exchange, need ranks that
 * mpirun or srun started), so they are refused whatever the backend, at once rather than at
 * a rendezvous that never completes. */
static tr_status check_hosts(const tr_comm_env *env, const char *name) {
    if (!env || env->local_size == env->size) return TR_OK;
    char hosts[512];
    tr_comm_env_hosts(env, hosts, sizeof hosts);
    const char *launcher = tr_comm_env_launcher();
    if (launcher && !strcmp(launcher, "torchrun"))
        return tr_error_set(TR_ERR_UNSUPPORTED, "torchrun started this job's %d ranks on %s: across hosts without "
                            "MPI nothing carries the collectives (shm joins the ranks of one host; mpi, and nccl's id "
                            "exchange, need ranks that mpirun or srun started); launch on several hosts with mpirun "
                            "(mpirun -np %d --hostfile HOSTS trainer run CONFIG) or srun (srun -N NODES "
                            "--ntasks-per-node %d trainer run CONFIG), or run torchrun on one host (--nnodes=1)",
                            env->size, hosts, env->size, env->local_size);
    if (!strcmp(name, "shm"))
        return tr_error_set(TR_ERR_UNSUPPORTED, "strategy.backend: shm joins the ranks of one host, but %s started "
                            "this job's %d ranks on %s: use strategy.backend: mpi (auto picks it when ranks span "
                            "hosts)", launcher ? launcher : "the launcher", env->size, hosts);
    return TR_OK;
}

/* The plugin `backend` resolves to, checked against the ranks; *name: the resolved name. */
static tr_status find_backend(const tr_registry *registry, const char *backend, const tr_comm_ranks *ranks,
                              const tr_comm_env *env, const tr_plugin **plugin, const char **name) {
    *name = tr_comm_resolve_backend(registry, backend, ranks, env);
    TR_CHECK(check_hosts(env, *name));
    tr_status st = tr_registry_find(registry, TR_PLUGIN_COMM, *name, plugin);
    if (st != TR_OK) {
        tr_error_prefix("strategy.backend: ");
        return st;
    }
    tr_comm_backend_ops ops;
    TR_CHECK(comm_backend_ops(*plugin, &ops));
    if (!(ranks && ranks->gpu_plugin) && (ops.flags & TR_COMM_DEVICE_MEMORY))
        return tr_error_set(TR_ERR_UNSUPPORTED, "strategy.backend: %s joins GPU ranks (one GPU each); ranks on the CPU "
                            "use shm (one host) or mpi (hosts)", *name);
    return TR_OK;
}

tr_status tr_comm_probe_ranks(const tr_registry *registry, const char *backend, const tr_comm_ranks *ranks) {
    const tr_plugin *plugin;
    const char *name;
    /* Under a launcher, its hosts decide (a broken environment is reported where the job reads it). */
    tr_comm_env env;
    int launched = tr_comm_env_launcher() && tr_comm_env_detect(&env) == TR_OK;
    return find_backend(registry, backend, ranks, launched ? &env : NULL, &plugin, &name);
}

tr_status tr_comm_probe(const tr_registry *registry, const char *backend) {
    return tr_comm_probe_ranks(registry, backend, NULL);
}

tr_status tr_comm_open_ranks(tr_comm **out, const tr_registry *registry, const char *backend,
                             const tr_comm_ranks *ranks, double timeout_s, tr_comm_env *env_out) {
    *out = NULL;
    tr_comm_env env;
    TR_CHECK(tr_comm_env_detect(&env));
    if (env.timeout_s <= 0) env.timeout_s = timeout_s; /* TRAINER_COMM_TIMEOUT wins */
    const tr_plugin *plugin;
    const char *name;
    TR_CHECK(find_backend(registry, backend, ranks, &env, &plugin, &name));
    tr_status st = tr_comm_create(out, plugin, NULL, &env);
    if (st == TR_ERR_UNSUPPORTED && !strcmp(backend, "auto") && ranks && ranks->gpu_plugin) {
        tr_comm_ranks staged = {.gpu_plugin = NULL};
        const char *fallback = tr_comm_resolve_backend(registry, backend, &staged, &env);
        tr_log(TR_LOG_WARN, "strategy.backend auto: %s; the GPU ranks go over %s instead, through host memory",
               tr_error_msg(), fallback);
        TR_CHECK(tr_registry_find(registry, TR_PLUGIN_COMM, fallback, &plugin));
        st = tr_comm_create(out, plugin, NULL, &env);
    }
    TR_CHECK(st);
    if (env_out) *env_out = env;
    return TR_OK;
}

tr_status tr_comm_open(tr_comm **out, const tr_registry *registry, const char *backend, double timeout_s,
                       tr_comm_env *env_out) {
    return tr_comm_open_ranks(out, registry, backend, NULL, timeout_s, env_out);
}
