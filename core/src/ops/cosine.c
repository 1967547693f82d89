/* Cosine similarity over the last dim (torch.nn.functional.cosine_similarity): a and b of the
 * same shape (..., E) give (...). Embedding models score query/passage pairs with it. */
#include <math.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/cosine.inc"
#include "ops/generic.h"

void ops_kernels_cosine(tr_kernels *k) {
    k->cosine_forward = cosine_forward_f32;
    k->cosine_backward = cosine_backward_f32;
}

/* in[0] a, in[1] b; i[0] rows, i[1] E; f[0] eps. */
static void cosine_backward(tr_graph *g, tr_node *n) {
    tr_tensor *a = n->in[0], *b = n->in[1];
    void *da = op_grad(g, a), *db = op_grad(g, b);
    if (!da && !db) return;
    OP_RUN(g, a->dtype, cosine_backward, da, db, n->out->grad, a->data, b->data, n->i[0], n->i[1], n->f[0]);
}

tr_tensor *tr_cosine_similarity(tr_graph *g, tr_tensor *a, tr_tensor *b, double eps) {
    if (!op_check(g, "cosine_similarity", 2, a, b)) return NULL;
    if (!OP_DEVICE(g, "cosine_similarity", cosine_forward, cosine_backward)) return NULL;
    if (!tr_tensor_same_shape(a, b))
        return op_fail(g, TR_ERR_INVALID, "cosine_similarity: b %s does not have a's shape %s", op_shape(b), op_shape(a));
    if (a->ndim < 1 || a->shape[a->ndim - 1] < 1)
        return op_fail(g, TR_ERR_INVALID, "cosine_similarity: inputs %s have no last dim to compare over", op_shape(a));
    if (!(eps > 0) || !isfinite(eps))
        return op_fail(g, TR_ERR_INVALID, "cosine_similarity: eps %g must be positive", eps);
    int64_t E = a->shape[a->ndim - 1], N = tr_tensor_numel(a) / E, shape[TR_MAX_DIMS] = {1};
    int nd = a->ndim > 1 ? a->ndim - 1 : 1;
    for (int d = 0; d + 1 < a->ndim; d++) shape[d] = a->shape[d];
    tr_tensor *y = op_out(g, a->dtype, nd, shape);
    if (!y) return NULL;
    OP_RUN(g, a->dtype, cosine_forward, y->data, a->data, b->data, N, E, eps);
    if (op_needs_grad(g, 2, a, b)) {
        tr_node *n = op_record(g, "cosine_similarity", cosine_backward, y, 2, a, b);
        if (!n) return NULL;
        n->i[0] = N;
        n->i[1] = E;
        n->f[0] = eps;
    }
    return y;
}
