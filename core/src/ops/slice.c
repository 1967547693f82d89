/* slice: x[..., start:start+len, ...] along one dim, as a copy (tensors are contiguous);
 * backward adds the gradient into that window of dx. f32 and f64; a negative dim counts
 * from the end; start and len must lie inside the dim (no negative or clamped bounds). */
#include <string.h>

#include "autograd/node.h"
#include "ops/gemm.h" /* TR_PAR_MIN */

/* x seen as (outer, D, inner); the window is rows [start, start+len) of D. */
static void slice_forward(tr_dtype dt, void *out, const void *inp, int64_t outer, int64_t D,
                          int64_t inner, int64_t start, int64_t len) {
    size_t es = tr_dtype_size(dt), row = (size_t)(len * inner) * es;
#pragma omp parallel for if (outer * len * inner > TR_PAR_MIN) schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        const char *src = (const char *)inp + (size_t)((o * D + start) * inner) * es;
        memcpy((char *)out + (size_t)o * row, src, row);
    }
}

static void slice_backward_kernel(tr_dtype dt, void *dinp, const void *dout, int64_t outer,
                                  int64_t D, int64_t inner, int64_t start, int64_t len) {
    int64_t m = len * inner;
#pragma omp parallel for if (outer * m > TR_PAR_MIN) schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        int64_t di = (o * D + start) * inner, doff = o * m;
        if (dt == TR_F64) {
            double *d = (double *)dinp + di;
            const double *s = (const double *)dout + doff;
            for (int64_t j = 0; j < m; j++) d[j] += s[j];
        } else {
            float *d = (float *)dinp + di;
            const float *s = (const float *)dout + doff;
            for (int64_t j = 0; j < m; j++) d[j] += s[j];
        }
    }
}

static void slice_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx)
        slice_backward_kernel(n->out->dtype, dx, n->out->grad, n->i[0], n->i[1], n->i[2],
                              n->i[3], n->i[4]);
}

tr_tensor *tr_slice(tr_graph *g, tr_tensor *x, int dim, int64_t start, int64_t len) {
    if (!op_check(g, "slice", 1, x)) return NULL;
    if (!OP_HOST_ONLY(g, "slice")) return NULL;
    int d = dim < 0 ? dim + x->ndim : dim;
    if (d < 0 || d >= x->ndim)
        return op_fail(g, TR_ERR_INVALID, "slice: dim %d is out of range for %s", dim,
                       op_shape(x));
    int64_t D = x->shape[d];
    if (start < 0 || len < 0 || start > D || len > D - start)
        return op_fail(g, TR_ERR_INVALID,
                       "slice: [%lld, %lld) is outside dim %d (size %lld) of %s", (long long)start,
                       (long long)(start + len), d, (long long)D, op_shape(x));
    int64_t shape[TR_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = len;
    tr_tensor *y = op_out(g, x->dtype, x->ndim, shape);
    if (!y) return NULL;
    int64_t outer = tr_tensor_dims(x, 0, d), inner = tr_tensor_dims(x, d + 1, x->ndim);
    slice_forward(x->dtype, y->data, x->data, outer, D, inner, start, len);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, "slice", slice_backward, y, 1, x);
        if (!n) return NULL;
        n->i[0] = outer;
        n->i[1] = D;
        n->i[2] = inner;
        n->i[3] = start;
        n->i[4] = len;
    }
    return y;
}
