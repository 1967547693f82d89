/* Multiplication by a constant, y = s * x (s is not differentiated). */
#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/scale.inc"
#include "ops/generic.h"

static void scale_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx)
        OP_RUN(g, n->out->dtype, scale_backward, dx, n->out->grad, n->f[0],
                    tr_tensor_numel(n->out));
}

tr_tensor *tr_scale(tr_graph *g, tr_tensor *x, double s) {
    if (!op_check(g, "scale", 1, x)) return NULL;
    if (!OP_DEVICE(g, "scale", scale_forward, scale_backward)) return NULL;
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, scale_forward, y->data, x->data, s, tr_tensor_numel(x));
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, "scale", scale_backward, y, 1, x);
        if (!n) return NULL;
        n->f[0] = s;
    }
    return y;
}

void ops_kernels_scale(tr_kernels *k) {
    k->scale_forward = scale_forward_f32;
    k->scale_backward = scale_backward_f32;
}
