/* tr_comm_open: the communicator a distributed strategy runs on, from its options;
 * tr_comm_probe: whether it could be opened here. */
#include <stddef.h>
#include <string.h>

#include "plugin/plugin_impl.h"
#include "trainer/comm_backend.h"

const char *tr_comm_resolve_backend(const tr_registry *registry, const char *backend, const char *gpu_plugin,
                                    int gpus_shared, const tr_comm_env *env) {
    if (strcmp(backend, "auto") != 0) return backend;
    const tr_plugin *p;
    if (gpu_plugin && !strcmp(gpu_plugin, "cuda") && !gpus_shared &&
        tr_registry_find(registry, TR_PLUGIN_COMM, "nccl", &p) == TR_OK)
        return "nccl";
    tr_error_clear();
    return env && env->local_size != env->size ? "mpi" : "shm";
}

tr_status tr_comm_probe(const tr_registry *registry, const char *backend) {
    backend = tr_comm_resolve_backend(registry, backend, NULL, 0, NULL);
    const tr_plugin *plugin;
    tr_status st = tr_registry_find(registry, TR_PLUGIN_COMM, backend, &plugin);
    if (st != TR_OK) tr_error_prefix("strategy.backend: ");
    return st;
}

tr_status tr_comm_probe_ranks(const tr_registry *registry, const char *backend, int on_gpus) {
    backend = tr_comm_resolve_backend(registry, backend, NULL, 0, NULL);
    TR_CHECK(tr_comm_probe(registry, backend));
    const tr_plugin *plugin;
    tr_comm_backend_ops ops;
    TR_CHECK(tr_registry_find(registry, TR_PLUGIN_COMM, backend, &plugin));
    TR_CHECK(plugin_copy_ops(plugin, &ops, sizeof ops, offsetof(tr_comm_backend_ops, abort), "comm backend",
                             "create, destroy, run"));
    if (!on_gpus && (ops.flags & TR_COMM_DEVICE_MEMORY))
        return tr_error_set(TR_ERR_UNSUPPORTED, "strategy.backend: %s joins GPU ranks (one GPU each); ranks on the CPU "
                            "use shm (one host) or mpi (hosts)", backend);
    return TR_OK;
}

tr_status tr_comm_open(tr_comm **out, const tr_registry *registry, const char *backend, double timeout_s,
                       tr_comm_env *env_out) {
    *out = NULL;
    tr_comm_env env;
    TR_CHECK(tr_comm_env_detect(&env));
    if (env.timeout_s <= 0) env.timeout_s = timeout_s; /* TRAINER_COMM_TIMEOUT wins */
    const tr_plugin *plugin;
    backend = tr_comm_resolve_backend(registry, backend, NULL, 0, &env);
    TR_CHECK(tr_comm_probe(registry, backend));
    TR_CHECK(tr_registry_find(registry, TR_PLUGIN_COMM, backend, &plugin));
    TR_CHECK(tr_comm_create(out, plugin, NULL, &env));
    if (env_out) *env_out = env;
    return TR_OK;
}
