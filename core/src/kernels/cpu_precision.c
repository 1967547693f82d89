/* The CPU ops' GEMM precision (kernels/gemm_bf16.h): one process-wide switch, set by a run on the
 * CPU from trainer.precision, that sends the GEMMs of linear, matmul, attention and conv2d to
 * the bf16 GEMM. Every other kernel, and every GEMM outside those ops (the optimizer's), stays
 * fp32 (docs/gpu.md, Precision). */
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

static int cpu_bf16;

void tr_cpu_set_bf16(int on) { cpu_bf16 = on != 0; }
int tr_cpu_bf16(void) { return cpu_bf16; }

void tr_gemm_op_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (cpu_bf16)
        tr_gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        tr_gemm_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void tr_gemm_op_linear_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (cpu_bf16)
        tr_gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        tr_gemm_linear_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
