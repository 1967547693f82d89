/* An opened device: the device plugin's execution entries behind checked calls. */
#include "trainer/accel.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/backend_name.h"
#include "kernels/update.h"
#include "trainer/devices.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

struct tr_accel {
    tr_device_ops ops;  /* the plugin's table, full size */
    void *dev;          /* the plugin's handle */
    tr_kernels kern;    /* the plugin's kernels, full size */
    int index;          /* the GPU id */
    tr_precision precision; /* what its GEMMs compute in (tr_get_precision at open) */
    char name[96];
    size_t allocated, peak;
};

/* The device last bound on this thread (tr_accel_bound_stream). */
static _Thread_local tr_accel *tl_bound;

/* The execution entries a device needs, in table order; NULL when all are present. */
static const char *missing_entry(const tr_device_ops *o) {
    return !o->open ? "open" : !o->close ? "close" : !o->alloc ? "alloc" : !o->free ? "free"
           : !o->upload ? "upload" : !o->download ? "download" : !o->sync ? "sync" : !o->bind ? "bind"
           : !o->kernels ? "kernels" : NULL;
}

/* backend's table into ops, checked for every execution entry; its kernel table into kern,
 * full size (entries the plugin does not know are NULL; `size` the plugin's). */
static tr_status exec_ops(const tr_plugin *backend, tr_device_ops *ops, tr_kernels *kern) {
    if (!backend) return tr_error_set(TR_ERR_DEVICE, "no GPU device plugin to open a device with");
    TR_CHECK(tr_device_ops_of(backend, ops));
    const char *missing = missing_entry(ops), *name = device_backend_name(backend), *path = device_backend_path(backend);
    if (missing)
        return tr_error_set(TR_ERR_UNSUPPORTED, "device plugin %s (%s) can list its GPUs but not run on them: its table "
                            "has no '%s' entry (discovery only in this build)", name, path, missing);
    /* What every training loop needs besides the ops' own kernels (those are checked as ops
     * run): memory, the optimizer update, the gradient norm and clipping. */
    tr_kernels k = {0};
    memcpy(&k, ops->kernels, ops->kernels->size < sizeof k ? ops->kernels->size : sizeof k);
    /* size stays what the plugin knows (at most ours): a contract appended to an existing
     * entry is given only to tables that know it (TR_KERNELS_KNOW_PADDING). */
    k.size = ops->kernels->size < sizeof k ? ops->kernels->size : sizeof k;
    *kern = k;
    const char *need = !k.zero ? "zero" : !k.copy ? "copy" : !k.optim_update ? "optim_update" : !k.sumsq ? "sumsq"
                       : !k.scale_inplace ? "scale_inplace" : NULL;
    if (need)
        return tr_error_set(TR_ERR_PLUGIN, "device plugin %s (%s): its kernel table (%zu bytes) has no '%s' kernel",
                            name, path, ops->kernels->size, need);
    if (tr_get_precision() != TR_PRECISION_FP32 && !ops->set_precision)
        return tr_error_set(TR_ERR_UNSUPPORTED, "device plugin %s (%s) computes in fp32 only: its table has no "
                            "'set_precision' entry for trainer.precision %s", name, path,
                            tr_precision_name(tr_get_precision()));
    return TR_OK;
}

tr_status tr_accel_probe(const tr_plugin *backend) {
    tr_device_ops ops;
    tr_kernels kern;
    return exec_ops(backend, &ops, &kern);
}

tr_status tr_accel_open(const tr_plugin *backend, int index, tr_accel **out) {
    *out = NULL;
    tr_accel *a = tr_calloc(1, sizeof *a);
    if (!a) return TR_ERR_NOMEM;
    tr_status st = exec_ops(backend, &a->ops, &a->kern);
    if (st != TR_OK) {
        tr_free(a);
        return st;
    }
    snprintf(a->name, sizeof a->name, "%s:%d", device_backend_name(backend), index);
    a->index = index;
    char why[256] = "";
    int n = a->ops.count(why, sizeof why);
    if (index < 0 || index >= n) {
        tr_free(a);
        return tr_error_set(TR_ERR_DEVICE, "%s: no GPU %d (%d visible%s%s)", device_backend_name(backend), index, n,
                            why[0] ? ": " : "", why);
    }
    st = a->ops.open(index, &a->dev);
    if (st != TR_OK) {
        tr_error_prefix("%s: opening GPU %d: ", device_backend_name(backend), index);
        tr_free(a);
        return st;
    }
    a->precision = tr_get_precision();
    if (a->precision != TR_PRECISION_FP32 && (st = a->ops.set_precision(a->dev, (int)a->precision)) != TR_OK) {
        char msg[512]; /* closing may set errors of its own */
        snprintf(msg, sizeof msg, "%s", tr_error_msg());
        a->ops.close(a->dev);
        tr_free(a);
        return tr_error_set(st, "trainer.precision %s: %s", tr_precision_name(tr_get_precision()), msg);
    }
    *out = a;
    return TR_OK;
}

void tr_accel_close(tr_accel *a) {
    if (!a) return;
    if (tl_bound == a) tl_bound = NULL;
    a->ops.close(a->dev);
    tr_free(a);
}

const char *tr_accel_name(const tr_accel *a) { return a->name; }

const tr_kernels *tr_accel_kernels(const tr_accel *a) { return &a->kern; }
tr_precision tr_accel_precision(const tr_accel *a) { return a ? a->precision : TR_PRECISION_FP32; }
tr_device tr_accel_device(const tr_accel *a) { return (tr_device){.kind = TR_DEVICE_GPU, .index = a->index}; }

tr_status tr_accel_alloc(tr_accel *a, size_t bytes, void **p) {
    *p = NULL;
    if (!a) {
        if (!(*p = tr_malloc(bytes ? bytes : 1))) return tr_error_set(TR_ERR_NOMEM, "out of memory for %zu bytes", bytes);
        return TR_OK;
    }
    tr_status st = a->ops.alloc(a->dev, bytes ? bytes : 1, p);
    if (st != TR_OK) {
        tr_error_prefix("%s: ", a->name);
        return st;
    }
    a->allocated += bytes;
    if (a->allocated > a->peak) a->peak = a->allocated;
    return TR_OK;
}

void tr_accel_free(tr_accel *a, void *p, size_t bytes) {
    if (!p) return;
    if (!a) {
        tr_free(p);
        return;
    }
    a->ops.free(a->dev, p);
    a->allocated -= bytes < a->allocated ? bytes : a->allocated;
}

tr_status tr_accel_upload(tr_accel *a, void *dst, const void *src, size_t bytes) {
    if (!bytes) return TR_OK;
    if (!a) {
        memcpy(dst, src, bytes);
        return TR_OK;
    }
    tr_status st = a->ops.upload(a->dev, dst, src, bytes);
    if (st != TR_OK) tr_error_prefix("%s: upload of %zu bytes: ", a->name, bytes);
    return st;
}

int tr_accel_can_upload_after(const tr_accel *a) {
    return a && a->ops.mark && a->ops.mark_free && a->ops.upload_after;
}

tr_status tr_accel_mark(tr_accel *a, void **mark) {
    if (!tr_accel_can_upload_after(a)) return TR_OK;
    tr_status st = a->ops.mark(a->dev, mark);
    if (st != TR_OK) tr_error_prefix("%s: ", a->name);
    return st;
}

void tr_accel_mark_free(tr_accel *a, void *mark) {
    if (mark && tr_accel_can_upload_after(a)) a->ops.mark_free(a->dev, mark);
}

tr_status tr_accel_upload_after(tr_accel *a, void *dst, const void *src, size_t bytes, void *after) {
    if (!bytes || !tr_accel_can_upload_after(a)) return tr_accel_upload(a, dst, src, bytes);
    tr_status st = a->ops.upload_after(a->dev, dst, src, bytes, after);
    if (st != TR_OK) tr_error_prefix("%s: upload of %zu bytes beside the compute stream: ", a->name, bytes);
    return st;
}

tr_status tr_accel_download(tr_accel *a, void *dst, const void *src, size_t bytes) {
    if (!bytes) return TR_OK;
    if (!a) {
        memcpy(dst, src, bytes);
        return TR_OK;
    }
    tr_status st = a->ops.download(a->dev, dst, src, bytes);
    if (st != TR_OK) tr_error_prefix("%s: download of %zu bytes: ", a->name, bytes);
    return st;
}

void tr_accel_zero(tr_accel *a, void *p, size_t bytes) {
    if (!bytes) return;
    if (a) a->kern.zero(p, bytes);
    else memset(p, 0, bytes);
}

void tr_accel_copy(tr_accel *a, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    if (a) a->kern.copy(dst, src, bytes);
    else memcpy(dst, src, bytes);
}

tr_status tr_accel_can_add(const tr_accel *a) {
    if (a && !a->kern.copy_rows)
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: its kernel table has no 'copy_rows' kernel (a device plugin "
                            "older than the transformers' entries)", a->name);
    return TR_OK;
}

tr_status tr_accel_add(tr_accel *a, float *dst, const float *src, size_t n) {
    if (!n) return TR_OK;
    TR_CHECK(tr_accel_can_add(a));
    /* One row of n: dst += src, by the device's copy_rows or on the host. */
    if (a) a->kern.copy_rows(dst, (int64_t)n, src, (int64_t)n, 1, (int64_t)n, 1);
    else optim_add(dst, src, n);
    return TR_OK;
}

tr_status tr_accel_sync(tr_accel *a) {
    if (!a) return TR_OK;
    tr_status st = a->ops.sync(a->dev);
    if (st != TR_OK) tr_error_prefix("%s: ", a->name);
    return st;
}

tr_status tr_accel_bind(tr_accel *a) {
    tr_status st = a->ops.bind(a->dev);
    if (st != TR_OK) tr_error_prefix("%s: ", a->name);
    else tl_bound = a;
    return st;
}

void *tr_accel_bound_stream(void) {
    return tl_bound && tl_bound->ops.stream ? tl_bound->ops.stream(tl_bound->dev) : NULL;
}

double tr_accel_grad_sumsq(tr_accel *a, const float *g, size_t n) {
    return a ? a->kern.sumsq(g, n) : optim_sumsq(g, n);
}

tr_status tr_accel_grad_sumsq_to(tr_accel *a, double *out, const float *g, size_t n) {
    if (!a) {
        *out = optim_sumsq(g, n);
        return TR_OK;
    }
    if (a->kern.sumsq_to) {
        a->kern.sumsq_to(out, g, n);
        return TR_OK;
    }
    double v = a->kern.sumsq(g, n);
    return tr_accel_upload(a, out, &v, sizeof v);
}

double tr_accel_clip_grad_norm(tr_accel *a, float *g, size_t n, double max_norm, double sumsq) {
    if (!a) return optim_clip(g, n, max_norm, sumsq);
    double coef = optim_clip_coef(max_norm, sumsq);
    if (coef < 1.0) a->kern.scale_inplace(g, n, (float)coef);
    return sqrt(sumsq);
}

size_t tr_accel_allocated(const tr_accel *a) { return a->allocated; }
size_t tr_accel_peak(const tr_accel *a) { return a->peak; }
