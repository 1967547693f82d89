/* The attention heads' f32 GEMM (kernels/gemm_head.c) against the product summed in double:
 * every transpose pair, shapes with tails of its 12-row and 32-column tiles (a head of 40
 * values: one tile of 32 columns and one of 8) and all-MiniLM-L6-v2's per-head products
 * (128 x 128 x 32 and 128 x 32 x 128), leading dimensions wider than the matrices; normalised
 * error under 1e-5 for alpha 1, beta 0 (C filled with NaN first: not read) and alpha 0.5,
 * beta -2 (C read and scaled); the padding of C past each row's end is left as it was. The
 * same bits from two threads of a parallel region at once (each with its own pack buffer).
 * With TRAINER_CPU_ATTN_KERNEL=gemm (the test's second run) it returns 0 and writes nothing:
 * the attention op then takes the GEMM (tests reference_shape_attn_gemm, unit_attention_dropout_gemm). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemm_check.h"
#include "kernels/gemm.h"
#include "trainer/trainer.h"

static void check_shape(int ta, int tb, int64_t M, int64_t N, int64_t K, int want) {
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int64_t lda = ac + 3, ldb = bc + 5, ldc = N + 7;
    float *A = malloc((size_t)(ar * lda) * sizeof(float)), *B = malloc((size_t)(br * ldb) * sizeof(float));
    float *C = malloc((size_t)(M * ldc) * sizeof(float)), *C2 = malloc((size_t)(2 * M * ldc) * sizeof(float));
    double *ref = malloc((size_t)(M * N) * sizeof(double));
    CHECK(A && B && C && C2 && ref, "out of memory");
    if (!A || !B || !C || !C2 || !ref) return;
    for (int64_t i = 0; i < ar * lda; i++) A[i] = (float)test_value((uint64_t)i, (uint64_t)(M + N));
    for (int64_t i = 0; i < br * ldb; i++) B[i] = (float)test_value((uint64_t)i, (uint64_t)(K + 3));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            ref[i * N + j] = s;
        }
    const struct { float alpha, beta; } cases[] = {{1.0f, 0.0f}, {0.5f, -2.0f}};
    for (int c = 0; c < 2; c++) {
        float alpha = cases[c].alpha, beta = cases[c].beta;
        gemm_reset_c(C, M, N, ldc, beta != 0.0f, NAN);
        int ran = tr_gemm_head_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        CHECK(ran == want, "%d%d %lldx%lldx%lld: head GEMM ran %d, expected %d", ta, tb, (long long)M, (long long)N,
              (long long)K, ran, want);
        if (!ran) {
            int untouched = gemm_padding_kept(C, M, N, ldc);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    untouched &= beta != 0.0f ? C[i * ldc + j] == gemm_c0(i, j, N) : isnan(C[i * ldc + j]);
            CHECK(untouched, "%d%d %lldx%lldx%lld: declined but wrote C", ta, tb, (long long)M, (long long)N,
                  (long long)K);
            continue;
        }
        double e = gemm_error(C, ldc, ref, M, N, alpha, beta);
        printf("%d%d %5lld x %5lld x %5lld alpha %.1f beta %4.1f: error %.2e\n", ta, tb, (long long)M, (long long)N,
               (long long)K, alpha, beta, e);
        CHECK(e < 1e-5, "%d%d %lldx%lldx%lld alpha %g beta %g: error %.3g", ta, tb, (long long)M, (long long)N,
              (long long)K, alpha, beta, e);
        CHECK(gemm_padding_kept(C, M, N, ldc), "%d%d %lldx%lldx%lld: C's padding past N was written", ta, tb,
              (long long)M, (long long)N, (long long)K);
        int both = 0;
#pragma omp parallel for num_threads(2) reduction(+ : both)
        for (int t = 0; t < 2; t++) {
            float *out = C2 + (size_t)t * (size_t)(M * ldc);
            gemm_reset_c(out, M, N, ldc, beta != 0.0f, NAN);
            both += tr_gemm_head_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, out, ldc);
        }
        size_t bytes = (size_t)(M * ldc) * sizeof(float);
        CHECK(both == 2 && memcmp(C, C2, bytes) == 0 && memcmp(C, C2 + M * ldc, bytes) == 0,
              "%d%d %lldx%lldx%lld: two threads at once differ", ta, tb, (long long)M, (long long)N, (long long)K);
    }
    free(A), free(B), free(C), free(C2), free(ref);
}

int main(void) {
    const char *e = getenv("TRAINER_CPU_ATTN_KERNEL");
    int off = e && strcmp(e, "gemm") == 0;
#if defined(TEST_EXPECT_AVX512) && defined(__AVX512F__) && defined(__FMA__)
    const int have = !off;
#else
    float a = 1, b = 2, c = 0;
    const int have = tr_gemm_head_f32(0, 0, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
    printf("head GEMM %s in this build\n", have ? "present" : "absent");
#endif
    const int64_t shapes[][3] = {{128, 128, 32}, {128, 32, 128}, {1, 1, 1},    {13, 40, 7},
                                 {40, 2100, 16}, {37, 70, 130},  {12, 33, 2}, {130, 17, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) check_shape(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], have);
    return test_finish();
}
