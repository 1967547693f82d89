/* Elementwise a * b, where b has a's shape or the shape of a's trailing dims (broadcast over
 * the leading ones). b's gradient is summed over the broadcast dims. No general NumPy
 * broadcasting: a is never the broadcast operand. */
#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/mul.inc"
#include "ops/generic.h"

static void mul_backward(tr_graph *g, tr_node *n) {
    tr_tensor *a = n->in[0], *b = n->in[1];
    void *da = op_grad(g, a), *db = op_grad(g, b);
    OP_RUN(g, n->out->dtype, mul_backward, da, db, n->out->grad, a->data, b->data, n->i[0],
                n->i[1]);
}

tr_tensor *tr_mul(tr_graph *g, tr_tensor *a, tr_tensor *b) {
    if (!op_check(g, "mul", 2, a, b)) return NULL;
    if (!OP_DEVICE(g, "mul", mul_forward, mul_backward)) return NULL;
    int lead = a->ndim - b->ndim;
    int ok = lead >= 0;
    for (int i = 0; ok && i < b->ndim; i++) ok = b->shape[i] == a->shape[lead + i];
    if (!ok)
        return op_fail(g, TR_ERR_INVALID,
                       "mul: b %s is neither a's shape %s nor its trailing dims", op_shape(b),
                       op_shape(a));
    int64_t R = tr_tensor_dims(a, 0, lead), M = tr_tensor_numel(b);
    tr_tensor *y = op_out(g, a->dtype, a->ndim, a->shape);
    if (!y) return NULL;
    OP_RUN(g, a->dtype, mul_forward, y->data, a->data, b->data, R, M);
    if (op_needs_grad(g, 2, a, b)) {
        tr_node *n = op_record(g, "mul", mul_backward, y, 2, a, b);
        if (!n) return NULL;
        n->i[0] = R;
        n->i[1] = M;
    }
    return y;
}

void ops_kernels_mul(tr_kernels *k) {
    k->mul_forward = mul_forward_f32;
    k->mul_backward = mul_backward_f32;
}
