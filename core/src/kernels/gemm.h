/* Private: row-major GEMM, C = alpha * op(A) op(B) + beta * C: small products by gemm_small.c,
 * most f32 ones by gemm_packed.c, the rest by OpenBLAS.
 * op(A) is (M, K), op(B) is (K, N); trans flags say A or B is stored transposed. With K = 0,
 * C = beta * C (BLAS semantics: beta 0 zero-fills C whatever it held), which a gradient that
 * is written rather than added to relies on for an empty batch. */
#ifndef TRAINER_OPS_GEMM_H
#define TRAINER_OPS_GEMM_H

#include <stdint.h>

void tr_gemm_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc);
void tr_gemm_f64(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                 const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                 double *C, int64_t ldc);

/* The f32 GEMMs with one dimension of TR_GEMM_SMALL_MAX or less that gemm_small.c computes
 * without BLAS (nt and nn with M <= it, tn with K <= it), and the skinny ones under 16 that
 * the packed GEMM never takes (nt with N, nn with K, tn with M under 16 and K <= 1024: a
 * classifier's head at any batch): returns 1 when it did, 0 to leave it to BLAS. tr_gemm_f32 sends them any GEMM whose small dimension is TR_GEMM_SMALL_ANY or less;
 * tr_gemm_linear_f32 (linear layers) up to TR_GEMM_SMALL_MAX, the sizes where they were
 * measured against OpenBLAS (docs/benchmarks-history.md, issue 12's sixth round). */
#define TR_GEMM_SMALL_MAX 32
#define TR_GEMM_SMALL_ANY 16
void tr_gemm_linear_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc);
int tr_gemm_small_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                      int64_t ldc);

/* tn of tr_gemm_small_f32 (C = alpha A^T B + beta C, A stored (K, M), K <= the max) that also
 * sums the squares of C as written: rows (M doubles, scratch) gets each row's, and it returns
 * their sum in row order (the same for any thread count). K must be 1..TR_GEMM_SMALL_MAX. Squares are summed
 * in float, at most 16 per lane, then in double: values past about 4e18 make the sum infinite
 * (a caller that needs the exact norm of such a gradient sums it again in double). */
double tr_gemm_small_tn_sumsq_f32(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                  int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                  int64_t ldc, double *rows);

/* The sum of squares of the tn product A^T B (A stored (K, M), B (K, N), K <= the max)
 * without forming it: ||A^T B||^2 = sum over k, k' of (A A^T)[k][k'] (B B^T)[k][k'], two
 * K x K Gram matrices of the rows, in double (K (K + 1) / 2 (M + N) multiply-adds where the
 * product takes M N K). +INFINITY when a value is not finite, or when computing the product
 * in float could overflow (||A|| ||B|| above 1e37, Frobenius norms, which bound every product
 * and partial sum), or when the sum cancels to below 1e-6 ||A||^2 ||B||^2 (it would then keep
 * few correct digits): then only the product itself tells. */
double tr_gemm_small_tn_norm2_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                                  int64_t ldb);

/* The f32 GEMM of gemm_packed.c (blocked, packed, AVX-512) for every product of at least
 * 16 in each dimension and 64^3 multiply-adds with alpha not 0: returns 1 when it did, 0 to
 * leave it to BLAS (smaller products, no AVX-512 in the build, no memory for its buffers).
 * Each element of C is summed in an order that depends on K alone, not on the thread count nor
 * on where the element lies in C. Runs on the calling thread inside a parallel region. */
int tr_gemm_packed_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* What a linear layer does to its product's final values while they are still in cache (a
 * residual added, an activation): fn(ctx, C, ldc, r0, r1, c0, c1) on rows [r0, r1) and
 * columns [c0, c1) of the whole C (C its origin) once each of them holds its final value.
 * Every element is in exactly one call; calls come from the threads that computed the
 * blocks (several at once), a block of whole tiles' rows or columns at a time. */
typedef struct tr_gemm_epilogue {
    void (*fn)(const void *ctx, float *C, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
    const void *ctx;
} tr_gemm_epilogue;

/* A linear layer's forward on gemm_packed.c: C (M x N) = A (M x K) B^T (B stored N x K) + bias
 * (N values, added to every row; NULL: none) written as the tiles are stored, the bits of C
 * filled with the bias and then C += A B^T; then epi (NULL: none) called on C's blocks as
 * they are finished. Returns 0, writing nothing and calling nothing, where tr_gemm_packed_f32
 * would. */
int tr_gemm_packed_linear_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                              int64_t ldb, const float *bias, float *C, int64_t ldc, const tr_gemm_epilogue *epi);

/* The packed GEMM's micro-kernel, a tile of C: what tr_gemm_packed_f32 runs is chosen from the
 * CPU (AUTO); tests and benchmarks force one. Returns the previous choice. */
enum { TR_GEMM_TILE_AUTO, TR_GEMM_TILE_16X16, TR_GEMM_TILE_WIDE };
int tr_gemm_packed_tile(int tile);

/* The product by OpenBLAS's sgemm alone (what the two above fall back to). */
void tr_gemm_blas_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                      int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* Whether GEMMs called on several OpenMP threads at once, inside a parallel region, each run
 * single-threaded (OpenBLAS's OpenMP build); its pthreads build would serialise such calls on
 * its own thread pool. */
int tr_gemm_nestable(void);

/* Element count above which an elementwise kernel goes parallel (OpenMP). */
#define TR_PAR_MIN 32768

#endif
