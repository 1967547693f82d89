/* concat: n tensors joined along one dim (all other dims equal), as a copy; backward hands
 * each input requiring a gradient its window of dout. f32 and f64 (all inputs one dtype); a
 * negative dim counts from the end. The node keeps its inputs in node->ins (any n), an
 * arena copy of the caller's array. */
#include <string.h>

#include "autograd/node.h"
#include "ops/copy_rows.h"
#include "trainer/ops.h"

/* Each tensor seen as (outer, D_i, inner): out row o is the inputs' rows o side by side. */
static void concat_backward(tr_graph *g, tr_node *n) {
    int64_t outer = n->i[0], inner = n->i[1], Dout = n->i[2];
    const tr_tensor *y = n->out;
    size_t es = tr_dtype_size(y->dtype);
    int64_t off = 0;
    for (int k = 0; k < n->n_ins; k++) {
        tr_tensor *x = n->ins[k];
        int64_t m = x->shape[n->i[3]] * inner;
        void *dx = op_grad(g, x);
        if (dx) OP_RUN(g, y->dtype, copy_rows, dx, m, (void *)((char *)y->grad + (size_t)off * es), Dout * inner, outer, m, 1);
        off += m;
    }
}

tr_tensor *tr_concat(tr_graph *g, tr_tensor *const *xs, int n, int dim) {
    if (tr_graph_status(g) != TR_OK) return NULL;
    if (!OP_DEVICE(g, "concat", copy_rows)) return NULL;
    if (!xs || n < 1)
        return op_fail(g, TR_ERR_INVALID, "concat: %d inputs (at least 1 needed)", xs ? n : 0);
    op_begin(g);
    for (int k = 0; k < n; k++) {
        if (!xs[k])
            return op_fail(g, TR_ERR_INVALID, "concat: input %d is NULL (an earlier op failed?)",
                           k);
        if (!op_use(g, xs[k])) return NULL;
        if (xs[k]->dtype != TR_F32 && xs[k]->dtype != TR_F64)
            return op_fail(g, TR_ERR_UNSUPPORTED,
                           "concat: input %d has dtype %s; expected f32 or f64", k,
                           tr_dtype_name(xs[k]->dtype));
        if (xs[k]->dtype != xs[0]->dtype)
            return op_fail(g, TR_ERR_INVALID, "concat: input %d has dtype %s, input 0 has %s", k,
                           tr_dtype_name(xs[k]->dtype), tr_dtype_name(xs[0]->dtype));
    }
    const tr_tensor *x0 = xs[0];
    int d = dim < 0 ? dim + x0->ndim : dim;
    if (d < 0 || d >= x0->ndim)
        return op_fail(g, TR_ERR_INVALID, "concat: dim %d is out of range for %s", dim,
                       op_shape(x0));
    int64_t shape[TR_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[d] = 0;
    int need = 0;
    for (int k = 0; k < n; k++) {
        const tr_tensor *x = xs[k];
        int same = x->ndim == x0->ndim;
        for (int i = 0; i < x0->ndim && same; i++) same = i == d || x->shape[i] == x0->shape[i];
        if (!same)
            return op_fail(g, TR_ERR_INVALID,
                           "concat: input %d %s does not match input 0 %s outside dim %d", k,
                           op_shape(x), op_shape(x0), d);
        shape[d] += x->shape[d];
        need |= x->requires_grad;
    }
    tr_tensor *y = op_out(g, x0->dtype, x0->ndim, shape);
    if (!y) return NULL;
    int64_t outer = tr_tensor_dims(x0, 0, d), inner = tr_tensor_dims(x0, d + 1, x0->ndim);
    size_t es = tr_dtype_size(x0->dtype);
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        int64_t m = xs[k]->shape[d] * inner;
        OP_RUN(g, x0->dtype, copy_rows, (void *)((char *)y->data + (size_t)off * es), shape[d] * inner, xs[k]->data, m, outer, m, 0);
        off += m;
    }
    if (need && tr_graph_grad_enabled(g)) {
        tr_tensor **ins = op_alloc(g, (size_t)n * sizeof *ins);
        if (!ins) return NULL;
        memcpy(ins, xs, (size_t)n * sizeof *ins);
        tr_node *node = op_record(g, "concat", concat_backward, y, 0);
        if (!node) return NULL;
        op_record_ins(g, node, ins, n);
        node->i[0] = outer;
        node->i[1] = inner;
        node->i[2] = shape[d];
        node->i[3] = d;
    }
    return y;
}
