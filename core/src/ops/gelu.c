/* GELU, exact (x Phi(x) with erf) or PyTorch's approximate='tanh'. Backward reads the input.
 * f32 uses vectorisable erf, tanh and exp (below; a few ulp, like PyTorch's vectorised
 * ones), f64 libm. Either way the far negative tail, where x Phi(x) is tiny, is computed as
 * 1 + erf(...) and so keeps absolute, not relative, accuracy, as in PyTorch. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "ops/gelu.h"
#include "trainer/ops.h"

#include "kernels/vmath.h"

#define TR_GENERIC "ops/gelu.inc"
#include "ops/generic.h"

/* i[0] approx */
static void gelu_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0];
    int acc;
    void *dx = op_grad_write(g, x, &acc);
    if (dx)
        OP_RUN(g, x->dtype, gelu_backward, dx, n->out->grad, x->data, tr_tensor_numel(x),
                    (int)n->i[0], acc);
}

tr_tensor *tr_gelu(tr_graph *g, tr_tensor *x, tr_gelu_approx approx) {
    if (!op_check(g, "gelu", 1, x)) return NULL;
    if (!OP_DEVICE(g, "gelu", gelu_forward, gelu_backward)) return NULL;
    if (approx != TR_GELU_EXACT && approx != TR_GELU_TANH)
        return op_fail(g, TR_ERR_INVALID,
                       "gelu: approx %d is not TR_GELU_EXACT (0) or TR_GELU_TANH (1)",
                       (int)approx);
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, gelu_forward, y->data, x->data, tr_tensor_numel(x), (int)approx);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, "gelu", gelu_backward, y, 1, x);
        if (!n) return NULL;
        n->i[0] = approx;
    }
    return y;
}

void ops_gelu_span_f32(float *out, const float *x, int64_t n, int approx) { gelu_span_f32(out, x, n, approx); }

void ops_gelu_backward_f32(float *dx, const float *dout, const float *x, int64_t n, int approx, int acc) {
    gelu_backward_f32(dx, dout, x, n, approx, acc);
}

void ops_kernels_gelu(tr_kernels *k) {
    k->gelu_forward = gelu_forward_f32;
    k->gelu_backward = gelu_backward_f32;
}
