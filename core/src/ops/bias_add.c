/* Bias add over the last dim: x (..., C) + b (C). The same result as tr_add with a 1-D b,
 * kept as its own op because it is the shape models use and reads clearer in profiles. */
#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/bias_add.inc"
#include "ops/generic.h"

static void bias_add_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]), *db = op_grad(g, n->in[1]);
    OP_RUN(g, n->out->dtype, bias_add_backward, dx, db, n->out->grad, n->i[0], n->i[1]);
}

tr_tensor *tr_bias_add(tr_graph *g, tr_tensor *x, tr_tensor *b) {
    if (!op_check(g, "bias_add", 2, x, b)) return NULL;
    if (!OP_DEVICE(g, "bias_add", bias_add_forward, bias_add_backward)) return NULL;
    if (x->ndim < 1 || b->ndim != 1 || b->shape[0] != x->shape[x->ndim - 1])
        return op_fail(g, TR_ERR_INVALID,
                       "bias_add: bias %s does not match the last dim of input %s (..., C)",
                       op_shape(b), op_shape(x));
    int64_t C = b->shape[0], B = tr_tensor_dims(x, 0, x->ndim - 1);
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, bias_add_forward, y->data, x->data, b->data, B, C);
    if (op_needs_grad(g, 2, x, b)) {
        tr_node *n = op_record(g, "bias_add", bias_add_backward, y, 2, x, b);
        if (!n) return NULL;
        n->i[0] = B;
        n->i[1] = C;
    }
    return y;
}

void ops_kernels_bias_add(tr_kernels *k) {
    k->bias_add_forward = bias_add_forward_f32;
    k->bias_add_backward = bias_add_backward_f32;
}
