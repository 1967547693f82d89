/* Device plugins: their checked ops table and the scan that asks each how many GPUs it sees
 * (the input of the selection rule in run/select.c). */
#include <stdio.h>
#include <string.h>

#include "device/backend_name.h"
#include "plugin/plugin_impl.h"
#include "trainer/devices.h"

const char *device_backend_name(const tr_plugin *p) { return p->desc->name; }

const char *device_backend_path(const tr_plugin *p) { return p->path; }

tr_status tr_device_ops_of(const tr_plugin *p, tr_device_ops *out) {
    TR_CHECK(plugin_copy_ops(p, out, sizeof *out, offsetof(tr_device_ops, info) + sizeof out->info, "device plugin",
                             "count, info"));
    if (!out->count || !out->info)
        return tr_error_set(TR_ERR_PLUGIN, "%s: device plugin %s lacks the required operation '%s'", p->path, p->desc->name,
                            !out->count ? "count" : "info");
    return TR_OK;
}

/* Appends "name: reason" to why, separated by "; ". */
static void add_reason(tr_gpu_scan *out, const char *name, const char *reason) {
    size_t n = strlen(out->why);
    snprintf(out->why + n, sizeof out->why - n, "%s%s: %s", n ? "; " : "", name, reason);
}

tr_status tr_gpu_scan_registry(const tr_registry *reg, const char *backend, tr_gpu_scan *out) {
    memset(out, 0, sizeof *out);
    int named = backend && strcmp(backend, "auto") != 0, seen = 0;
    if (named) {
        const tr_plugin *p;
        tr_status st = tr_registry_find(reg, TR_PLUGIN_DEVICE, backend, &p);
        if (st != TR_OK) {
            tr_error_prefix("trainer.gpu_backend: ");
            return st;
        }
    }
    for (int i = 0; i < tr_registry_count(reg); i++) {
        const tr_plugin *p = tr_registry_at(reg, i);
        if (p->desc->kind != TR_PLUGIN_DEVICE || (named && strcmp(p->desc->name, backend) != 0)) continue;
        seen++;
        tr_device_ops ops;
        if (tr_device_ops_of(p, &ops) != TR_OK) {
            if (named) return TR_ERR_PLUGIN; /* the message names the file */
            add_reason(out, p->desc->name, tr_error_msg());
            continue;
        }
        char why[256] = "";
        int n = ops.count(why, sizeof why);
        if (n > 0) {
            out->backend = p;
            out->count = n;
            out->why[0] = 0;
            return TR_OK;
        }
        add_reason(out, p->desc->name, why[0] ? why : "it sees no device (and did not say why)");
    }
    if (!seen)
        snprintf(out->why, sizeof out->why, "no GPU device plugin was found (the CUDA one is plugins/devices/cuda; "
                                            "`trainer plugins` lists what was found)");
    return TR_OK;
}
