/* reshape and flatten: views. The output shares data with its input and, through
 * tensor.view_of, the gradient buffer of the input's base (op_grad follows view_of), so no tape
 * node is recorded: the gradient an op adds into the view lands in the base. Any dtype
 * (reshaping TR_I32 ids or targets is common). Limits: tensors are contiguous, so a view
 * is only a new shape of the same numel, never a strided window. */
#include "autograd/node.h"
#include "trainer/ops.h"

tr_tensor *tr_reshape(tr_graph *g, tr_tensor *x, int ndim, const int64_t *shape) {
    if (tr_graph_status(g) != TR_OK) return NULL;
    if (!x) return op_fail(g, TR_ERR_INVALID, "reshape: input is NULL (an earlier op failed?)");
    if (ndim < 0 || ndim > TR_MAX_DIMS || (ndim > 0 && !shape))
        return op_fail(g, TR_ERR_INVALID, "reshape: %d dims requested for %s (0 to %d)", ndim,
                       op_shape(x), TR_MAX_DIMS);
    int64_t dims[TR_MAX_DIMS], known = 1;
    int infer = -1;
    char want[96];
    tr_tensor tmp = tr_tensor_view(NULL, x->dtype, ndim, shape);
    tr_shape_str(&tmp, want, sizeof want);
    for (int i = 0; i < ndim; i++) {
        dims[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
        } else if (shape[i] < 0) {
            return op_fail(g, TR_ERR_INVALID,
                           "reshape: bad shape %s for %s (dims are >= 0, at most one -1)", want,
                           op_shape(x));
        } else {
            known *= shape[i];
        }
    }
    int64_t numel = tr_tensor_numel(x);
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return op_fail(g, TR_ERR_INVALID,
                           "reshape: cannot view %s (%lld elements) as %s: the -1 dim cannot "
                           "be inferred",
                           op_shape(x), (long long)numel, want);
        dims[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        return op_fail(g, TR_ERR_INVALID,
                       "reshape: cannot view %s (%lld elements) as %s (%lld elements)",
                       op_shape(x), (long long)numel, want, (long long)known);
    tr_tensor *base = x->view_of ? x->view_of : x;
    tr_tensor *y = op_alloc(g, sizeof *y);
    if (!y) return NULL;
    *y = tr_tensor_view(x->data, x->dtype, ndim, dims);
    y->device = x->device;
    y->requires_grad = x->requires_grad;
    y->view_of = base;
    /* A leaf's or parameter's buffer exists already; otherwise op_grad fetches it later. */
    y->grad = base->grad;
    return y;
}

tr_tensor *tr_flatten(tr_graph *g, tr_tensor *x, int start_dim) {
    if (tr_graph_status(g) != TR_OK) return NULL;
    if (!x) return op_fail(g, TR_ERR_INVALID, "flatten: input is NULL (an earlier op failed?)");
    int d = start_dim < 0 ? start_dim + x->ndim : start_dim;
    if (d < 0 || d >= x->ndim)
        return op_fail(g, TR_ERR_INVALID, "flatten: start_dim %d is out of range for %s",
                       start_dim, op_shape(x));
    int64_t shape[TR_MAX_DIMS];
    for (int i = 0; i < d; i++) shape[i] = x->shape[i];
    shape[d] = tr_tensor_dims(x, d, x->ndim);
    return tr_reshape(g, x, d + 1, shape);
}
