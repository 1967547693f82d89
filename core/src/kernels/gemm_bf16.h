/* Private: the bf16 GEMM of trainer.precision bf16-mixed on the CPU (kernels/gemm_bf16.c), and
 * the switch that sends the CPU ops' GEMMs to it (kernels/cpu_precision.c).
 *
 *   tr_gemm_bf16(0, 1, M, N, K, 1, x, K, w, K, 0, y, N);   // y = bf16(x) bf16(w)^T, fp32 sums
 *
 * C (fp32) = alpha op(A) op(B) + beta C, row-major, with every element of A and B rounded to
 * bf16 (to nearest, ties to even; fp32 denormals read as zero, as vcvtneps2bf16 does), the
 * products summed in fp32. K = 0 or alpha 0: C = beta C (beta 0 zero-fills C, BLAS's rule). */
#ifndef TRAINER_OPS_GEMM_BF16_H
#define TRAINER_OPS_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* The rounding both paths apply to each operand: the bf16 bits of x, and their value. */
uint16_t tr_gemm_bf16_round(float x);
float tr_bf16_value(uint16_t b);

/* The kernel tr_gemm_bf16_kernel() names (chosen once per process), else the scalar path. */
void tr_gemm_bf16(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* The paths, for tests. The AVX512-BF16 kernels (blocked and packed, threaded like
 * gemm_packed.c; each returns 0 and writes nothing where the CPU lacks the instruction or
 * memory for its buffers runs out): vdpbf16ps on bf16 pairs, and fp32 multiply-adds on the
 * rounded values (the same exact products, summed in another order). The portable one: round,
 * multiply in fp32, sum in k order. */
int tr_gemm_bf16_fma(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
int tr_gemm_bf16_avx512(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void tr_gemm_bf16_scalar(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* Which kernel tr_gemm_bf16 runs here: "dpbf16", "fma" (AVX512-BF16 CPUs: fma on Intel's,
 * whose vdpbf16ps multiplies at half the fp32 rate, dpbf16 on others; TRAINER_CPU_BF16_KERNEL
 * overrides), or "scalar". */
const char *tr_gemm_bf16_kernel(void);
/* Whether a run may compute in bf16-mixed on this CPU: 1 when it executes vdpbf16ps (cpuid)
 * and TRAINER_CPU_NO_BF16 is unset or 0 (set, it stands for a CPU without: the tests' way to
 * reach the refusal), and TRAINER_CPU_BF16_KERNEL is unset, dpbf16 or fma; else 0, with the reason in why (n bytes) when why is not NULL. */
int tr_cpu_bf16_supported(char *why, size_t n);

/* The arithmetic of the CPU ops' GEMMs (linear, matmul, attention, conv2d), process-wide:
 * 1 routes them to tr_gemm_bf16, 0 (the default) keeps fp32. Set by a run on the CPU from
 * trainer.precision (run/job.c), like tr_set_precision for the devices. */
void tr_cpu_set_bf16(int on);
int tr_cpu_bf16(void);
/* ops/generic.h's GEMM and GEMM_LINEAR for f32: tr_gemm_f32 and tr_gemm_linear_f32, or
 * tr_gemm_bf16 when tr_cpu_bf16(). */
void tr_gemm_op_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void tr_gemm_op_linear_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

#endif
