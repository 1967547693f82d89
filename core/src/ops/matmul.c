/* matmul: a (..., M, K) @ b (..., K, N) -> (..., M, N), f32 and f64. The batch dims of a and b
 * are equal (one GEMM per batch entry), or b is 2-D and shared by the whole batch (the batch
 * folds into M: one big GEMM). Limits: no 1-D operands and no general broadcasting; a is at
 * least 2-D. */
#include <string.h>

#include <omp.h>

#include "autograd/node.h"
#include "ops/gemm.h"

/* C = alpha op(A) op(B) + beta C in the tensor's dtype. */
static void gemm(tr_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A,
                 int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    /* BLAS wants leading dims >= 1 even when a dim is empty (K == 0). */
    lda = lda > 0 ? lda : 1;
    ldb = ldb > 0 ? ldb : 1;
    ldc = ldc > 0 ? ldc : 1;
    if (dt == TR_F64)
        tr_gemm_f64(ta, tb, M, N, K, 1.0, A, lda, B, ldb, beta, C, ldc);
    else
        tr_gemm_f32(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, (float)beta, C, ldc);
}

/* Whether the batch entries run on OpenMP threads. With OpenBLAS's OpenMP build (what the
 * core links) a GEMM inside a parallel region runs on the calling thread, so a batch of at
 * least as many entries as threads runs one entry per thread; a smaller batch runs its GEMMs
 * one after another, each threaded by OpenBLAS. */
static int parallel_batch(int64_t batch, int64_t M, int64_t K, int64_t N) {
    (void)M; (void)K; (void)N;
    return batch > 1 && batch >= omp_get_max_threads();
}

/* a (batch, M, K), b (batch, K, N) or, when shared, one (K, N) for all. */
static void matmul_forward(tr_dtype dt, void *out, const void *a, const void *b, int64_t batch,
                           int64_t M, int64_t K, int64_t N, int shared) {
    size_t es = tr_dtype_size(dt);
    if (K == 0) { /* an empty sum: zeros, without leaning on BLAS for the corner case */
        memset(out, 0, (size_t)(batch * M * N) * es);
        return;
    }
#pragma omp parallel for if (parallel_batch(batch, M, K, N)) schedule(static)
    for (int64_t i = 0; i < batch; i++)
        gemm(dt, 0, 0, M, N, K, (const char *)a + (size_t)(i * M * K) * es, K,
             (const char *)b + (shared ? 0 : (size_t)(i * K * N) * es), N, 0,
             (char *)out + (size_t)(i * M * N) * es, N);
}

static void matmul_backward_kernel(tr_dtype dt, void *da, void *db, const void *dout,
                                   const void *a, const void *b, int64_t batch, int64_t M,
                                   int64_t K, int64_t N, int shared) {
    size_t es = tr_dtype_size(dt);
    /* Batch i writes only block i of da and db (also when a and b are one tensor). */
#pragma omp parallel for if (parallel_batch(batch, M, K, N)) schedule(static)
    for (int64_t i = 0; i < batch; i++) {
        const char *ai = (const char *)a + (size_t)(i * M * K) * es;
        const char *bi = (const char *)b + (shared ? 0 : (size_t)(i * K * N) * es);
        const char *di = (const char *)dout + (size_t)(i * M * N) * es;
        if (da) gemm(dt, 0, 1, M, K, N, di, N, bi, N, 1, (char *)da + (ai - (const char *)a), K);
        if (db) gemm(dt, 1, 0, K, N, M, ai, K, di, N, 1, (char *)db + (bi - (const char *)b), N);
    }
}

static void matmul_backward(tr_graph *g, tr_node *n) {
    tr_tensor *a = n->in[0], *b = n->in[1];
    void *da = op_grad(g, a), *db = op_grad(g, b);
    matmul_backward_kernel(a->dtype, da, db, n->out->grad, a->data, b->data, n->i[0], n->i[1],
                           n->i[2], n->i[3], (int)n->i[4]);
}

tr_tensor *tr_matmul(tr_graph *g, tr_tensor *a, tr_tensor *b) {
    if (!op_check(g, "matmul", 2, a, b)) return NULL;
    if (!OP_HOST_ONLY(g, "matmul")) return NULL;
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
    matmul_forward(a->dtype, y->data, a->data, b->data, batch, M, K, N, shared);
    if (op_needs_grad(g, 2, a, b)) {
        tr_node *n = op_record(g, "matmul", matmul_backward, y, 2, a, b);
        if (!n) return NULL;
        n->i[0] = batch;
        n->i[1] = M;
        n->i[2] = K;
        n->i[3] = N;
        n->i[4] = shared;
    }
    return y;
}
