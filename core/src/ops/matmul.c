/* matmul: a (..., M, K) @ b (..., K, N) -> (..., M, N), f32 and f64. The batch dims of a and b
 * are equal (one GEMM per batch entry), or b is 2-D and shared by the whole batch (the batch
 * folds into M: one big GEMM). Limits: no 1-D operands and no general broadcasting; a is at
 * least 2-D. */
#include <string.h>

#include <omp.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/matmul.inc"
#include "ops/generic.h"

void ops_kernels_matmul(tr_kernels *k) {
    k->matmul_forward = matmul_forward_f32;
    k->matmul_backward = matmul_backward_f32;
}

static void matmul_backward(tr_graph *g, tr_node *n) {
    tr_tensor *a = n->in[0], *b = n->in[1];
    void *da = op_grad(g, a), *db = op_grad(g, b);
    if (da || db) OP_RUN(g, a->dtype, matmul_backward, da, db, n->out->grad, a->data, b->data, n->i[0], n->i[1], n->i[2], n->i[3]);
}

tr_tensor *tr_matmul(tr_graph *g, tr_tensor *a, tr_tensor *b) {
    if (!op_check(g, "matmul", 2, a, b)) return NULL;
    if (!OP_DEVICE(g, "matmul", matmul_forward, matmul_backward)) return NULL;
    if (a->ndim < 2 || b->ndim < 2)
        return op_fail(g, TR_ERR_INVALID, "matmul: a %s and b %s must both be at least 2-D",
                       op_shape(a), op_shape(b));
    int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
    if (b->shape[b->ndim - 2] != K)
        return op_fail(g, TR_ERR_INVALID,
                       "matmul: a %s has %lld columns, b %s has %lld rows (inner dims differ)",
                       op_shape(a), (long long)K, op_shape(b), (long long)b->shape[b->ndim - 2]);
    int shared = b->ndim == 2;
    if (!shared) {
        int same = a->ndim == b->ndim;
        for (int i = 0; i < a->ndim - 2 && same; i++) same = a->shape[i] == b->shape[i];
        if (!same)
            return op_fail(g, TR_ERR_INVALID,
                           "matmul: batch dims of a %s and b %s differ (they must be equal, or "
                           "b 2-D)",
                           op_shape(a), op_shape(b));
    }
    int64_t batch = tr_tensor_dims(a, 0, a->ndim - 2);
    int64_t shape[TR_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
    shape[a->ndim - 1] = N;
    tr_tensor *y = op_out(g, a->dtype, a->ndim, shape);
    if (!y) return NULL;
    if (shared) { /* fold the batch into M: one (batch*M, K) @ (K, N) GEMM */
        M *= batch;
        batch = 1;
    }
    OP_RUN(g, a->dtype, matmul_forward, y->data, a->data, b->data, batch, M, K, N);
    if (op_needs_grad(g, 2, a, b)) {
        tr_node *n = op_record(g, "matmul", matmul_backward, y, 2, a, b);
        if (!n) return NULL;
        n->i[0] = batch;
        n->i[1] = M;
        n->i[2] = K;
        n->i[3] = N;
    }
    return y;
}
