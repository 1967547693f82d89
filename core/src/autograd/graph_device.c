/* A graph on a device: batch inputs uploaded into two alternating halves while the previous
 * step runs, host copies kept of them, and host reads and writes of device memory. */
#include "autograd/graph_impl.h"

/* A copy between the host and the graph's data memory (plain memory on the CPU, where the
 * device layer copies with memcpy: dst and src never overlap). */
static int op_copy_host(tr_graph *g, void *dst, const void *src, size_t bytes, int upload) {
    tr_status st = upload ? tr_accel_upload(g->accel, dst, src, bytes) : tr_accel_download(g->accel, dst, src, bytes);
    if (st != TR_OK) op_fail(g, st, "%s", tr_error_msg());
    return st == TR_OK;
}

int op_read(tr_graph *g, void *dst, const void *src, size_t bytes) { return op_copy_host(g, dst, src, bytes, 0); }
int op_write(tr_graph *g, void *dst, const void *src, size_t bytes) { return op_copy_host(g, dst, src, bytes, 1); }

/* Whether t lies in the graph's memory: the host's on the CPU, its device's on a device. */
int tr_graph_in_memory_(const tr_graph *g, const tr_tensor *t) {
    if (!g->accel) return t->device.kind != TR_DEVICE_GPU;
    return t->device.kind == TR_DEVICE_GPU && t->device.index == tr_accel_device(g->accel).index;
}

/* The host's copy of [p, p + bytes) of device memory (tr_graph_input_from), or NULL. */
static const void *host_copy_of(const tr_graph *g, const void *p, size_t bytes) {
    const char *c = p;
    for (int i = 0; i < g->n_host_copies; i++) {
        const host_copy *h = &g->host_copies[i];
        if (c >= h->dev && bytes <= h->bytes && (size_t)(c - h->dev) <= h->bytes - bytes)
            return (const char *)h->host + (c - h->dev);
    }
    return NULL;
}

int op_read_grad_scalar(tr_graph *g, const tr_tensor *t, double *v) {
    if (g->accel && t == g->root && g->root_known) {
        *v = g->root_seed;
        return 1;
    }
    union { float f; double d; } u;
    if (!op_read(g, &u, t->grad, tr_dtype_size(t->dtype))) return 0;
    *v = t->dtype == TR_F64 ? u.d : (double)u.f;
    return 1;
}

const int32_t *op_host_indices(tr_graph *g, const char *op, const char *what, const tr_tensor *t,
                               const char *with_what, const tr_tensor *with) {
    if (!tr_graph_in_memory_(g, t)) {
        op_fail(g, TR_ERR_INVALID, "%s: %s %s are in %s memory, %s %s in %s memory", op, what, op_shape(t),
                t->device.kind == TR_DEVICE_GPU ? "device" : "host", with_what, op_shape(with),
                with->device.kind == TR_DEVICE_GPU ? "device" : "host");
        return NULL;
    }
    if (!g->accel) return t->data;
    size_t n = (size_t)tr_tensor_numel(t);
    const int32_t *known = host_copy_of(g, t->data, n * sizeof *known);
    if (known) return known; /* the batch's own host memory: no wait for the device */
    int32_t *copy = op_alloc(g, (n ? n : 1) * sizeof *copy);
    return copy && op_read(g, copy, t->data, n * sizeof *copy) ? copy : NULL;
}

void op_note_host_copy(tr_graph *g, const void *dev, const void *host, size_t bytes) {
    if (g->accel && g->n_host_copies < TR_GRAPH_HOST_COPIES)
        g->host_copies[g->n_host_copies++] = (host_copy){(const char *)dev, host, bytes};
}

int op_device_has(tr_graph *g, const char *op, int have) {
    if (!have) op_fail(g, TR_ERR_UNSUPPORTED, "%s: device %s has no kernel for this op (train this model on the CPU, "
                       "or on a device whose plugin has one)", op, tr_accel_name(g->accel));
    return have;
}
/* dst for `bytes` of this step's inputs in its half, uploaded beside the compute stream (the
 * half grown first where the last steps needed more); NULL: no room (the input goes to the
 * step's memory instead, and the half grows at its next use). */
static void *input_place(tr_graph *g, const void *src, size_t bytes) {
    input_half *h = &g->in[g->in_cur];
    size_t at = h->used, span = (bytes + 255) & ~(size_t)255;
    g->in_step += span;
    if (at == 0 && h->cap < g->in_need) {
        tr_accel_free(g->accel, h->p, h->cap);
        h->p = NULL;
        h->cap = 0;
        if (tr_accel_alloc(g->accel, g->in_need, (void **)&h->p) != TR_OK) return NULL;
        h->cap = g->in_need;
        h->fresh = 1;
    }
    if (!h->p || span > h->cap - at) return NULL;
    /* A fresh block's earlier work is ordered only on the compute stream: the upload is too. */
    tr_status st = h->fresh ? tr_accel_upload(g->accel, h->p + at, src, bytes)
                            : tr_accel_upload_after(g->accel, h->p + at, src, bytes, h->retired);
    if (st != TR_OK) {
        op_fail(g, st, "input of %zu bytes: %s", bytes, tr_error_msg());
        return NULL;
    }
    h->used = at + span;
    return h->p + at;
}

tr_tensor *tr_graph_input_from(tr_graph *g, void *data, tr_dtype dtype, int ndim, const int64_t *shape) {
    if (!g->accel) return tr_graph_view(g, data, dtype, ndim, shape);
    tr_tensor *t = tr_graph_new_header_(g, dtype, ndim, shape);
    if (!t) return NULL;
    size_t bytes = tr_tensor_bytes(t);
    t->data = bytes && tr_accel_can_upload_after(g->accel) ? input_place(g, data, bytes) : NULL;
    if (g->status != TR_OK) return NULL;
    if (!t->data) { /* in the step's memory, uploaded in stream order */
        t->data = op_data(g, bytes ? bytes : 1);
        if (!t->data || !op_write(g, t->data, data, bytes)) return NULL;
    }
    if (g->n_host_copies < TR_GRAPH_HOST_COPIES) /* more: their checks download, as before */
        g->host_copies[g->n_host_copies++] = (host_copy){t->data, data, bytes};
    return t;
}

const void *tr_graph_host_values(const tr_graph *g, const tr_tensor *t) {
    if (!t || !t->data) return NULL;
    if (t->device.kind != TR_DEVICE_GPU) return t->data;
    return g->accel ? host_copy_of(g, t->data, tr_tensor_bytes(t)) : NULL;
}
