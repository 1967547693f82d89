/* ReLU, max(x, 0); the gradient at 0 is 0 as in PyTorch. */
#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/relu.inc"
#include "ops/generic.h"

static void relu_backward(tr_graph *g, tr_node *n) {
    int acc;
    void *dx = op_grad_write(g, n->in[0], &acc);
    if (dx)
        OP_RUN(g, n->out->dtype, relu_backward, dx, n->out->grad, n->out->data,
                    tr_tensor_numel(n->out), acc);
}

tr_tensor *tr_relu(tr_graph *g, tr_tensor *x) {
    if (!op_check(g, "relu", 1, x)) return NULL;
    if (!OP_DEVICE(g, "relu", relu_forward, relu_backward)) return NULL;
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, relu_forward, y->data, x->data, tr_tensor_numel(x));
    if (op_needs_grad(g, 1, x) && !op_record(g, "relu", relu_backward, y, 1, x)) return NULL;
    return y;
}

void ops_kernels_relu(tr_kernels *k) {
    k->relu_forward = relu_forward_f32;
    k->relu_backward = relu_backward_f32;
}
