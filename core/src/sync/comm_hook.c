/* The comm hook a rank strategy names (`strategy.comm_hook`): a plugin of kind comm_hook
 * found in the registry, its ops table copied and its state created with its options'
 * defaults; the engine then calls it for every bucket instead of its own fp32 sum. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "sync_impl.h"

#include "plugin/plugin_impl.h"

tr_status sync_hook_open(tr_grad_sync *e, size_t numel) {
    const char *name = e->c.comm_hook;
    if (!name || !*name || !strcmp(name, "none")) return TR_OK;
    const char *who = e->c.name ? e->c.name : "gradient sync";
    if (!e->c.registry) return tr_error_set(TR_ERR_INVALID, "strategy.comm_hook: %s: no plugin registry", name);
    tr_status st = tr_registry_find(e->c.registry, TR_PLUGIN_COMM_HOOK, name, &e->hook_plugin);
    if (st != TR_OK) {
        tr_error_prefix("strategy.comm_hook: ");
        return st;
    }
    const tr_plugin *p = e->hook_plugin;
    TR_CHECK(plugin_copy_ops(p, &e->hook, sizeof e->hook, offsetof(tr_comm_hook_ops, reduce) + sizeof e->hook.reduce,
                             "comm hook", "create, destroy, reduce"));
    if (!e->hook.reduce) {
        memset(&e->hook, 0, sizeof e->hook);
        return tr_error_set(TR_ERR_PLUGIN, "%s: comm hook %s lacks the required operation 'reduce'", p->path, name);
    }
    tr_options *o = NULL;
    st = tr_options_create(&o, p->desc->options, p->desc->n_options, NULL, 0, "strategy.comm_hook");
    tr_comm_hook_env env = {.comm = e->c.comm, .numel = numel, .device = e->c.accel && !e->staged,
                            .reduce = e->c.reduce};
    if (st == TR_OK && e->hook.create) st = e->hook.create(&e->hook_state, o, &env);
    tr_options_destroy(o);
    if (st != TR_OK) {
        tr_error_prefix("%s: comm hook %s: ", who, name);
        memset(&e->hook, 0, sizeof e->hook);
        return st;
    }
    snprintf(e->hook_desc, sizeof e->hook_desc, ", comm hook %s", name);
    e->c.comm_hook = NULL; /* the option's string lives during the strategy's create only */
    return TR_OK;
}

void sync_hook_close(tr_grad_sync *e) {
    if (e->hook.destroy) e->hook.destroy(e->hook_state);
    memset(&e->hook, 0, sizeof e->hook);
    e->hook_state = NULL;
}
