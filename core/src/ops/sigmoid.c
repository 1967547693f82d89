/* Logistic sigmoid 1 / (1 + exp(-x)), computed without overflow for large |x| and with full
 * relative accuracy in both tails. f32 uses a vectorisable exp (below); f64 libm. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#include "kernels/vmath.h"

#define TR_GENERIC "ops/sigmoid.inc"
#include "ops/generic.h"

static void sigmoid_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx)
        OP_RUN(g, n->out->dtype, sigmoid_backward, dx, n->out->grad, n->out->data,
                    tr_tensor_numel(n->out));
}

tr_tensor *tr_sigmoid(tr_graph *g, tr_tensor *x) {
    if (!op_check(g, "sigmoid", 1, x)) return NULL;
    if (!OP_DEVICE(g, "sigmoid", sigmoid_forward, sigmoid_backward)) return NULL;
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, sigmoid_forward, y->data, x->data, tr_tensor_numel(x));
    if (op_needs_grad(g, 1, x) && !op_record(g, "sigmoid", sigmoid_backward, y, 1, x))
        return NULL;
    return y;
}

void ops_kernels_sigmoid(tr_kernels *k) {
    k->sigmoid_forward = sigmoid_forward_f32;
    k->sigmoid_backward = sigmoid_backward_f32;
}
