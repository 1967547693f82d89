/* Mean-squared-error style loss: sum((pred - target)^2) / normaliser, a scalar (1). The
 * target is data: it gets no gradient even when it requires one. The sum is taken in double
 * in a thread-count independent order. */
#include <math.h>

#include "autograd/node.h"

#define TR_GENERIC "ops/mse.inc"
#include "ops/generic.h"

/* in[0] pred; saved[0] the target's data; f[0] normaliser. */
static void mse_backward(tr_graph *g, tr_node *n) {
    tr_tensor *p = n->in[0];
    void *dp = op_grad(g, p);
    if (!dp) return;
    double dout = p->dtype == TR_F64 ? *(const double *)n->out->grad
                                     : (double)*(const float *)n->out->grad;
    TR_DISPATCH(p->dtype, mse_backward, dp, p->data, n->saved[0], dout / n->f[0],
                tr_tensor_numel(p));
}

tr_tensor *tr_mse(tr_graph *g, tr_tensor *pred, tr_tensor *target, double normaliser) {
    if (!op_check(g, "mse", 2, pred, target)) return NULL;
    if (!OP_HOST_ONLY(g, "mse")) return NULL;
    if (!tr_tensor_same_shape(pred, target))
        return op_fail(g, TR_ERR_INVALID, "mse: target %s does not have pred's shape %s",
                       op_shape(target), op_shape(pred));
    if (!(normaliser > 0) || !isfinite(normaliser))
        return op_fail(g, TR_ERR_INVALID, "mse: normaliser %g must be positive", normaliser);
    tr_tensor *y = op_out(g, pred->dtype, 1, (int64_t[]){1});
    if (!y) return NULL;
    double s = TR_DISPATCH(pred->dtype, mse_forward, pred->data, target->data,
                           tr_tensor_numel(pred)) / normaliser;
    if (pred->dtype == TR_F64)
        *(double *)y->data = s;
    else
        *(float *)y->data = (float)s;
    if (op_needs_grad(g, 1, pred)) {
        tr_node *n = op_record(g, "mse", mse_backward, y, 1, pred);
        if (!n) return NULL;
        n->f[0] = normaliser;
        n->saved[0] = target->data;
    }
    return y;
}
