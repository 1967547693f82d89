/* libbench_gemm.so: the core's private GEMM entry points for tools/bench/gemm_vs_mkl.py, which
 * loads them through ctypes. libtrainer.so exports only its SDK (tr_ functions of the public
 * headers), so the benchmark links the core's objects statically here and re-exports the two
 * functions it times, under the names it has always called. */
#include "kernels/gemm.h"

#define BENCH_API __attribute__((visibility("default")))
BENCH_API void bench_gemm_linear_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                     int64_t ldc);
BENCH_API int bench_gemm_packed_tile(int tile);

void bench_gemm_linear_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    tr_gemm_linear_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int bench_gemm_packed_tile(int tile) { return tr_gemm_packed_tile(tile); }
