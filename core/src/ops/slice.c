/* slice: x[..., start:start+len, ...] along one dim, as a copy (tensors are contiguous);
 * backward adds the gradient into that window of dx. f32 and f64; a negative dim counts
 * from the end; start and len must lie inside the dim (no negative or clamped bounds). */
#include <string.h>

#include "autograd/node.h"
#include "ops/copy_rows.h"
#include "trainer/ops.h"

/* x seen as (outer, D, inner); the window is rows [start, start+len) of D: outer rows of
 * len * inner elements at start * inner of each row of D * inner. */
static void slice_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (!dx) return;
    int64_t outer = n->i[0], D = n->i[1], inner = n->i[2], start = n->i[3], len = n->i[4];
    void *at = (char *)dx + (size_t)(start * inner) * tr_dtype_size(n->out->dtype);
    OP_RUN(g, n->out->dtype, copy_rows, at, D * inner, n->out->grad, len * inner, outer, len * inner, 1);
}

tr_tensor *tr_slice(tr_graph *g, tr_tensor *x, int dim, int64_t start, int64_t len) {
    if (!op_check(g, "slice", 1, x)) return NULL;
    if (!OP_DEVICE(g, "slice", copy_rows)) return NULL;
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
    const void *from = (const char *)x->data + (size_t)(start * inner) * tr_dtype_size(x->dtype);
    OP_RUN(g, x->dtype, copy_rows, y->data, len * inner, from, D * inner, outer, len * inner, 0);
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
