/* Hyperbolic tangent. f32 uses a vectorisable rational approximation (below); f64 libm. */
#include <math.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#include "kernels/vmath.h"

#define TR_GENERIC "ops/tanh.inc"
#include "ops/generic.h"

static void tanh_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx)
        OP_RUN(g, n->out->dtype, tanh_backward, dx, n->out->grad, n->out->data,
                    tr_tensor_numel(n->out));
}

tr_tensor *tr_tanh(tr_graph *g, tr_tensor *x) {
    if (!op_check(g, "tanh", 1, x)) return NULL;
    if (!OP_DEVICE(g, "tanh", tanh_forward, tanh_backward)) return NULL;
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, tanh_forward, y->data, x->data, tr_tensor_numel(x));
    if (op_needs_grad(g, 1, x) && !op_record(g, "tanh", tanh_backward, y, 1, x)) return NULL;
    return y;
}

void ops_kernels_tanh(tr_kernels *k) {
    k->tanh_forward = tanh_forward_f32;
    k->tanh_backward = tanh_backward_f32;
}
