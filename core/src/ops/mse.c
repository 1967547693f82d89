/* Mean-squared-error style loss: sum((pred - target)^2) / normaliser, a scalar (1). The
 * target is data: it gets no gradient even when it requires one. The sum is taken in double
 * in a thread-count independent order. */
#include <math.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/mse.inc"
#include "ops/generic.h"

void ops_kernels_mse(tr_kernels *k) {
    k->mse_forward = mse_forward_f32;
    k->mse_backward = mse_backward_f32;
}

/* in[0] pred; saved[0] the target's data; f[0] normaliser. */
static void mse_backward(tr_graph *g, tr_node *n) {
    tr_tensor *p = n->in[0];
    void *dp = op_grad(g, p);
    if (!dp) return;
    OP_RUN(g, p->dtype, mse_backward, dp, n->out->grad, p->data, n->saved[0], n->f[0], tr_tensor_numel(p));
}

tr_tensor *tr_mse(tr_graph *g, tr_tensor *pred, tr_tensor *target, double normaliser) {
    if (!op_check(g, "mse", 2, pred, target)) return NULL;
    if (!OP_DEVICE(g, "mse", mse_forward, mse_backward)) return NULL;
    if (!tr_tensor_same_shape(pred, target))
        return op_fail(g, TR_ERR_INVALID, "mse: target %s does not have pred's shape %s",
                       op_shape(target), op_shape(pred));
    if (!(normaliser > 0) || !isfinite(normaliser))
        return op_fail(g, TR_ERR_INVALID, "mse: normaliser %g must be positive", normaliser);
    tr_tensor *y = op_out(g, pred->dtype, 1, (int64_t[]){1});
    if (!y) return NULL;
    OP_RUN(g, pred->dtype, mse_forward, y->data, pred->data, target->data, tr_tensor_numel(pred), normaliser);
    if (op_needs_grad(g, 1, pred)) {
        tr_node *n = op_record(g, "mse", mse_backward, y, 1, pred);
        if (!n) return NULL;
        n->f[0] = normaliser;
        n->saved[0] = target->data;
    }
    return y;
}
