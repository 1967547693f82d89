/* Elementwise a + b, where b has a's shape or the shape of a's trailing dims (broadcast over
 * the leading ones, e.g. a (B, T, C) + b (T, C)). b's gradient is summed over the broadcast
 * dims. No general NumPy broadcasting: a is never the broadcast operand. */
#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/add.inc"
#include "ops/generic.h"

static void add_backward(tr_graph *g, tr_node *n) {
    int acc;
    void *da = op_grad_write(g, n->in[0], &acc), *db = op_grad(g, n->in[1]);
    OP_RUN(g, n->out->dtype, add_backward, da, db, n->out->grad, n->i[0], n->i[1], acc);
}

tr_tensor *tr_add(tr_graph *g, tr_tensor *a, tr_tensor *b) {
    if (!op_check(g, "add", 2, a, b)) return NULL;
    if (!OP_DEVICE(g, "add", add_forward, add_backward)) return NULL;
    int lead = a->ndim - b->ndim;
    int ok = lead >= 0;
    for (int i = 0; ok && i < b->ndim; i++) ok = b->shape[i] == a->shape[lead + i];
    if (!ok)
        return op_fail(g, TR_ERR_INVALID,
                       "add: b %s is neither a's shape %s nor its trailing dims", op_shape(b),
                       op_shape(a));
    int64_t R = tr_tensor_dims(a, 0, lead), M = tr_tensor_numel(b);
    tr_tensor *y = op_out(g, a->dtype, a->ndim, a->shape);
    if (!y) return NULL;
    OP_RUN(g, a->dtype, add_forward, y->data, a->data, b->data, R, M);
    if (op_needs_grad(g, 2, a, b)) {
        tr_node *n = op_record(g, "add", add_backward, y, 2, a, b);
        if (!n) return NULL;
        n->i[0] = R;
        n->i[1] = M;
    }
    return y;
}

void ops_kernels_add(tr_kernels *k) {
    k->add_forward = add_forward_f32;
    k->add_backward = add_backward_f32;
}
