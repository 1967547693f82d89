/* The small and skinny f32 GEMMs (kernels/gemm_small.c) against the product summed in double,
 * through tr_gemm_linear_f32 as the linear layers call them:
 *
 * - Each kind at a small batch (nt and nn with M <= 32, tn with K <= 32) and each skinny one
 *   a classifier head makes at any batch (nt with N < 16: y = x W^T with 10 outputs; nn with
 *   K < 16: dx = dy W; tn with M < 16: dW = dy^T x, K up to 1024), odd sizes and tails,
 *   leading dimensions wider than the matrices: normalised error under 1e-5 for alpha 1,
 *   beta 0 (C filled with NaN first: not read) and alpha 0.5, beta -2; C's padding kept.
 * - tr_gemm_small_f32 takes exactly those (1) and leaves the rest (0, nothing written): tn
 *   with M < 16 but K over 1024, and products with no dimension that small.
 * - The same bits on 1 and 2 threads (the skinny kinds split rows or columns differently from
 *   the small ones), and a block of a tn product computed alone equals that block of the whole
 *   (every element is one chain of multiply-adds in k order, whatever the split). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemm_check.h"
#include "kernels/gemm.h"
#include "trainer/trainer.h"

static const char *kind(int ta, int tb) { return ta ? "tn" : tb ? "nt" : "nn"; }

/* One shape: want_small says whether gemm_small.c must take it. */
static void check_shape(int ta, int tb, int64_t M, int64_t N, int64_t K, int want_small) {
    gemm_mats m;
    gemm_mats_make(&m, ta, tb, M, N, K, (uint64_t)(M * 7 + N * 3 + K + ta * 2 + tb), NULL);
    const struct { float alpha, beta; } cases[] = {{1.0f, 0.0f}, {0.5f, -2.0f}};
    size_t bytes = (size_t)(M * m.ldc) * sizeof(float);
    float *one = malloc(bytes);
    CHECK(one != NULL, "out of memory");
    for (int c = 0; c < 2; c++) {
        float alpha = cases[c].alpha, beta = cases[c].beta;
        tr_set_num_threads(1);
        gemm_reset_c(m.C, M, N, m.ldc, beta != 0.0f, NAN);
        int ran = tr_gemm_small_f32(ta, tb, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
        CHECK(ran == want_small, "%s %lldx%lldx%lld: gemm_small took it %d, expected %d", kind(ta, tb), (long long)M,
              (long long)N, (long long)K, ran, want_small);
        if (!ran) {
            CHECK(gemm_error(m.C, m.ldc, m.ref, M, N, alpha, beta) == INFINITY || beta != 0.0f,
                  "%s %lldx%lldx%lld: left to BLAS, yet C was written", kind(ta, tb), (long long)M, (long long)N,
                  (long long)K);
        }
        /* the linear layers' entry computes it, whoever does */
        gemm_reset_c(m.C, M, N, m.ldc, beta != 0.0f, NAN);
        tr_gemm_linear_f32(ta, tb, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
        double e = gemm_error(m.C, m.ldc, m.ref, M, N, alpha, beta);
        printf("%s %5lld x %5lld x %5lld alpha %.1f beta %4.1f: %s, error %.2e\n", kind(ta, tb), (long long)M,
               (long long)N, (long long)K, alpha, beta, ran ? "gemm_small" : "elsewhere", e);
        CHECK(e < 1e-5, "%s %lldx%lldx%lld alpha %g beta %g: error %.3g", kind(ta, tb), (long long)M, (long long)N,
              (long long)K, alpha, beta, e);
        CHECK(gemm_padding_kept(m.C, M, N, m.ldc), "%s %lldx%lldx%lld: C's padding past N was written", kind(ta, tb),
              (long long)M, (long long)N, (long long)K);
        if (!ran) continue;
        memcpy(one, m.C, bytes);
        tr_set_num_threads(2);
        gemm_reset_c(m.C, M, N, m.ldc, beta != 0.0f, NAN);
        tr_gemm_linear_f32(ta, tb, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
        CHECK(memcmp(one, m.C, bytes) == 0, "%s %lldx%lldx%lld: 2 threads differ from 1", kind(ta, tb), (long long)M,
              (long long)N, (long long)K);
        tr_set_num_threads(1);
        if (ta && M > 2 && N > 3) { /* tn: rows [1, M), columns [3, N) alone */
            int64_t r0 = 1, c0 = 3;
            gemm_reset_c(m.C, M, N, m.ldc, beta != 0.0f, NAN);
            CHECK(tr_gemm_small_f32(1, 0, M - r0, N - c0, K, alpha, m.A + r0, m.lda, m.B + c0, m.ldb, beta,
                                    m.C + r0 * m.ldc + c0, m.ldc) == 1,
                  "tn block: gemm_small did not take it");
            int same = 1;
            for (int64_t i = r0; i < M; i++)
                same &= memcmp(one + i * m.ldc + c0, m.C + i * m.ldc + c0, (size_t)(N - c0) * sizeof(float)) == 0;
            CHECK(same, "tn %lldx%lldx%lld: the block from (1, 3) alone differs from the whole", (long long)M,
                  (long long)N, (long long)K);
        }
    }
    free(one);
    gemm_mats_drop(&m);
}

int main(void) {
    /* small batches, as before the skinny kinds */
    check_shape(0, 1, 8, 512, 784, 1);
    check_shape(0, 1, 32, 37, 100, 1);
    check_shape(0, 0, 8, 784, 512, 1);
    check_shape(0, 0, 31, 50, 77, 1);
    check_shape(1, 0, 512, 784, 8, 1);
    check_shape(1, 0, 70, 300, 32, 1);
    /* a 10-class head at batch 128: y = x W^T, dx = dy W, dW = dy^T x */
    check_shape(0, 1, 128, 10, 512, 1);
    check_shape(0, 0, 128, 512, 10, 1);
    check_shape(1, 0, 10, 512, 128, 1);
    /* skinny with tails: N, K or M of 1 and 15, rows not a multiple of the blocks */
    check_shape(0, 1, 1001, 1, 77, 1);
    check_shape(0, 1, 333, 15, 1030, 1);
    check_shape(0, 0, 257, 100, 1, 1);
    check_shape(0, 0, 301, 790, 15, 1);
    check_shape(1, 0, 1, 1000, 1000, 1);
    check_shape(1, 0, 15, 130, 1024, 1);
    check_shape(1, 0, 3, 2000, 300, 1);
    /* left to the packed GEMM or BLAS */
    check_shape(1, 0, 3, 200, 1025, 0);
    check_shape(0, 1, 64, 16, 100, 0);
    check_shape(0, 0, 64, 100, 16, 0);
    check_shape(1, 0, 16, 100, 64, 0);
    return test_finish();
}
