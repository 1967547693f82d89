/* Row-major GEMM: gemm_small.c's kernels, gemm_packed.c's, or CBLAS (gemm.h). */
#include <cblas.h>

#include "kernels/gemm.h"

void tr_gemm_blas_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                B, (int)ldb, beta, C, (int)ldc);
}

void tr_gemm_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc) {
    if (M == 0 || N == 0) return;
    int64_t small = trans_a ? (trans_b ? TR_GEMM_SMALL_ANY + 1 : K) : M; /* the dimension gemm_small.c takes small */
    if (small <= TR_GEMM_SMALL_ANY && tr_gemm_small_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    if (tr_gemm_packed_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    tr_gemm_blas_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void tr_gemm_linear_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (tr_gemm_small_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    if (tr_gemm_packed_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    tr_gemm_blas_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void tr_gemm_f64(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                 const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                 double *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                B, (int)ldb, beta, C, (int)ldc);
}

int tr_gemm_nestable(void) { return openblas_get_parallel() == 2; }
