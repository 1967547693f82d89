/* Private to the CUDA plugin's kernel table: what its family files (ops_*.c) share: grid
 * sizes, the launch macro, scratch memory, the GEMM helpers, and each family's entries. */
#ifndef TRAINER_CUDA_OPS_IMPL_H
#define TRAINER_CUDA_OPS_IMPL_H

#include <stdint.h>

#include "device.h"
#include "trainer/optim.h"

/* Blocks for n independent elements (grid-stride loops cover the rest). */
static inline unsigned blocks_for(int64_t n) {
    int64_t b = (n + CUDA_BLOCK - 1) / CUDA_BLOCK;
    return b < 1 ? 1u : b > 65535 * 8 ? 65535u * 8 : (unsigned)b;
}

/* Blocks for R rows (one block per row, rows beyond the grid loop). */
static inline unsigned blocks_rows(int64_t R) { return R < 1 ? 1u : R > 65535 * 8 ? 65535u * 8 : (unsigned)R; }

#define LAUNCH(what, k, grid, ...)                                              \
    do {                                                                        \
        cuda_device *d_ = cuda_current();                                       \
        void *args_[] = {__VA_ARGS__};                                          \
        if (!d_) break;                                                         \
        tr_status st_ = cu_launch(d_->rt, CUDA_##k, (grid), args_);             \
        if (st_ != TR_OK) cuda_fail(d_, st_, what);                             \
    } while (0)

/* bytes of scratch from the caching allocator for one call, given back with cuda_free after
 * the launches that use it (in stream order); NULL after recording the failure. */
void *cuda_scratch(cuda_device *d, size_t bytes, const char *what);
/* The GEMMs of ops_gemm.c and the double sums of ops_optim.c other families use. */
int cuda_gemm(cuda_device *d, const char *what, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
              int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void cuda_rgemm(cuda_device *d, const char *what, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB, float beta, float *C,
                int64_t ldc, int64_t sC, int64_t batch);
double *cuda_dsum_parts(cuda_device *d, const char *what, const float *x, const float *y, int64_t n, int mode,
                        int *parts);

/* Each family's entries of the table. */
void cuda_fill_gemm(tr_kernels *t);
void cuda_fill_elementwise(tr_kernels *t);
void cuda_fill_rows(tr_kernels *t);
void cuda_fill_optim(tr_kernels *t);
void cuda_fill_conv(tr_kernels *t);
void cuda_fill_norm(tr_kernels *t);
void cuda_fill_layout(tr_kernels *t);
void cuda_fill_attention(tr_kernels *t);

#endif
