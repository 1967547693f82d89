/* The CUDA plugin's linear layers and batched matmuls on cuBLAS (row-major tensors as column-major transposes): the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- linear: cuBLAS, row-major tensors as column-major transposes ---- */

/* batch column-major products C = alpha op(A) op(B) + beta C (cuBLAS's convention; ta, tb: 1
 * transposes), entry i at A + i sA, B + i sB, C + i sC. cuBLAS wants int sizes and leading
 * dimensions >= 1, and nothing to compute is no call; k == 0 still scales C by beta (zeros
 * with beta 0), as the CPU kernels leave it. what names the op. 0 after recording a failure. */
static int cgemm(cuda_device *d, const char *what, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *A, int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB, float beta, float *C,
                 int64_t ldc, int64_t sC, int64_t batch) {
    if (m == 0 || n == 0 || batch == 0) return 1;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX) {
        cuda_fail(d, tr_error_set(TR_ERR_UNSUPPORTED, "a batch of %lld GEMMs of %lld x %lld x %lld is beyond cuBLAS's "
                                  "int dimensions", (long long)batch, (long long)m, (long long)n, (long long)k), what);
        return 0;
    }
    lda = lda < 1 ? 1 : lda, ldb = ldb < 1 ? 1 : ldb;
    tr_status st = cu_sgemm_batched(d->rt, ta, tb, (int)m, (int)n, (int)k, alpha, A, (int)lda, sA, B, (int)ldb, sB, beta,
                                    C, (int)ldc, sC, (int)batch, d->bf16);
    if (st != TR_OK) cuda_fail(d, st, what);
    return st == TR_OK;
}

/* One column-major product with alpha 1. */
int cuda_gemm(cuda_device *d, const char *what, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
              int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return cgemm(d, what, ta, tb, m, n, k, 1.0f, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

/* A row-major (r, c) matrix is the column-major (c x r) transpose, leading dimension c.
 * out (B, OC) = inp (B, C) W^T: out^T (OC x B) = W (C x OC)^T inp^T (C x B), cuda_gemm(T, N). */
static void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t B,
                           int64_t C, int64_t OC) {
    cuda_device *d = cuda_current();
    if (!d || !cuda_gemm(d, "linear (cuBLAS)", 1, 0, OC, B, C, weight, C, inp, C, 0.0f, out, OC)) return;
    if (bias) LAUNCH("linear (bias)", k_add_fwd, blocks_for(B * OC), &out, &out, &bias, &B, &OC);
}

/* dinp (B, C) = dout W: column-major dinp^T (C x B) = W^T (C x OC) dout^T (OC x B).
 * dweight (OC, C) = dout^T inp: dweight^T (C x OC) = inp^T (C x B) dout (B x OC).
 * dbias += column sums of dout. */
static void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int64_t B, int64_t C, int64_t OC, int acc, int wacc) {
    cuda_device *d = cuda_current();
    if (!d) return;
    if (dinp && !cuda_gemm(d, "linear (cuBLAS)", 0, 0, C, B, OC, weight, C, dout, OC, acc ? 1.0f : 0.0f, dinp, C)) return;
    if (dweight && !cuda_gemm(d, "linear (cuBLAS)", 0, 1, C, OC, B, inp, C, dout, OC, wacc ? 1.0f : 0.0f, dweight, C)) return;
    const float *none = NULL;
    if (dbias) LAUNCH("linear (bias gradient)", k_colsum, blocks_for(OC), &dbias, &dout, &none, &B, &OC);
}

/* ---- batched GEMMs of row-major matrices: C (M x N) = op(A) op(B) is column-major C^T =
 * op(B)^T op(A)^T, so the operands swap; entry i of the batch at A + i sA, and so on ---- */

void cuda_rgemm(cuda_device *d, const char *what, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB, float beta, float *C,
                int64_t ldc, int64_t sC, int64_t batch) {
    cgemm(d, what, tb, ta, N, M, K, alpha, B, ldb, sB, A, lda, sA, beta, C, ldc, sC, batch);
}

static void matmul_forward(float *out, const float *a, const float *b, int64_t batch, int64_t M, int64_t K, int64_t N) {
    cuda_device *d = cuda_current();
    if (!d) return;
    cuda_rgemm(d, "matmul (cuBLAS)", 0, 0, M, N, K, 1.0f, a, K, M * K, b, N, K * N, 0.0f, out, N, M * N,
          batch);
}

static void matmul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t batch,
                            int64_t M, int64_t K, int64_t N) {
    cuda_device *d = cuda_current();
    if (!d) return;
    const char *what = "matmul backward (cuBLAS)";
    if (da) cuda_rgemm(d, what, 0, 1, M, K, N, 1.0f, dout, N, M * N, b, N, K * N, 1.0f, da, K, M * K, batch);
    if (db) cuda_rgemm(d, what, 1, 0, K, N, M, 1.0f, a, K, M * K, dout, N, M * N, 1.0f, db, N, K * N, batch);
}

void cuda_fill_gemm(tr_kernels *t) {
    t->linear_forward = linear_forward;
    t->linear_backward = linear_backward;
    t->matmul_forward = matmul_forward;
    t->matmul_backward = matmul_backward;
}
