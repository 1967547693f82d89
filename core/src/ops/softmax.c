/* Softmax and log-softmax over the last dim, x (..., C), numerically stable (the row max is
 * subtracted before exponentiating). Rows run in parallel; each row is a max pass and one
 * fused exp-and-sum pass, with exactly one exp per element in forward and none (softmax) or
 * one (log-softmax) in backward. f32 uses a vectorisable exp (see fast_exp_f32). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#include "kernels/vmath.h"

#define TR_GENERIC "ops/softmax.inc"
#include "ops/generic.h"

static void softmax_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx)
        OP_RUN(g, n->out->dtype, softmax_backward, dx, n->out->grad, n->out->data, n->i[0],
                    n->i[1]);
}

static void log_softmax_backward(tr_graph *g, tr_node *n) {
    void *dx = op_grad(g, n->in[0]);
    if (dx)
        OP_RUN(g, n->out->dtype, log_softmax_backward, dx, n->out->grad, n->out->data,
                    n->i[0], n->i[1]);
}

static tr_tensor *softmax_op(tr_graph *g, tr_tensor *x, int log) {
    const char *name = log ? "log_softmax" : "softmax";
    if (!op_check(g, name, 1, x)) return NULL;
    if (!(log ? OP_DEVICE(g, name, log_softmax_forward, log_softmax_backward)
              : OP_DEVICE(g, name, softmax_forward, softmax_backward)))
        return NULL;
    if (x->ndim < 1)
        return op_fail(g, TR_ERR_INVALID, "%s: input %s has no dim to normalise over", name,
                       op_shape(x));
    int64_t C = x->shape[x->ndim - 1], R = tr_tensor_dims(x, 0, x->ndim - 1);
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y) return NULL;
    if (log)
        OP_RUN(g, x->dtype, log_softmax_forward, y->data, x->data, R, C);
    else
        OP_RUN(g, x->dtype, softmax_forward, y->data, x->data, R, C);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, name, log ? log_softmax_backward : softmax_backward, y, 1, x);
        if (!n) return NULL;
        n->i[0] = R;
        n->i[1] = C;
    }
    return y;
}

tr_tensor *tr_softmax(tr_graph *g, tr_tensor *x) { return softmax_op(g, x, 0); }
tr_tensor *tr_log_softmax(tr_graph *g, tr_tensor *x) { return softmax_op(g, x, 1); }

void ops_kernels_softmax(tr_kernels *k) {
    k->softmax_forward = softmax_forward_f32;
    k->softmax_backward = softmax_backward_f32;
    k->log_softmax_forward = log_softmax_forward_f32;
    k->log_softmax_backward = log_softmax_backward_f32;
}
