/* The bf16 GEMM of bf16-mixed on the CPU (kernels/gemm_bf16.h), each path forced: the scalar one
 * always; with the argument `avx512` the vdpbf16ps kernel, with `fma` the kernel of fp32
 * multiply-adds on rounded values (ctest unit_gemm_bf16_avx512 and unit_gemm_bf16_fma,
 * skipped with the reason where the CPU lacks AVX512-BF16).
 *
 * - The rounding: tr_bf16_round on ties, carries, the largest float, denormals, NaN; each
 *   path's packing (K = 1, B ones: C is the rounded A, both ways round) equal to it.
 * - Every transpose pair on odd shapes (M, N past the 16-wide tiles, K odd: the pairs' zero
 *   padding; K past the 512-deep block, N past the 1024-wide one), leading dimensions wider
 *   than the matrices: normalised error under 1e-5 from the product of the bf16-rounded
 *   operands summed in double, above 1e-4 from the unrounded product (it rounded); alpha 1,
 *   beta 0 (C filled with NaN: not read) and alpha 0.5, beta -2; C's padding untouched.
 * - The kernel: the same bits on 1 and 2 threads; K = 0 and alpha 0 give beta C.
 * - The switch (tr_cpu_set_bf16): the ops' GEMM is tr_gemm_bf16 when on, tr_gemm_f32 when off;
 *   TRAINER_CPU_NO_BF16=1, or a TRAINER_CPU_BF16_KERNEL other than dpbf16 and fma, makes
 *   tr_cpu_bf16_supported say no, naming it. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemm_check.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "trainer/trainer.h"


typedef void gemm_fn(int, int, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t,
                     float, float *, int64_t);

static int use_avx512; /* 1: the vdpbf16ps kernel, 2: the fma kernel, 0: scalar */

static void scalar_path(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    tr_gemm_bf16_scalar(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void avx_path(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    CHECK(tr_gemm_bf16_avx512(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 1,
          "the AVX512-BF16 kernel did not run");
}

static void fma_path(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    CHECK(tr_gemm_bf16_fma(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 1, "the fma kernel did not run");
}

static void gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (use_avx512 == 2 ? fma_path : use_avx512 ? avx_path : scalar_path)(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                                                       ldc);
}

static float rounded(float x) { return tr_bf16_value(tr_gemm_bf16_round(x)); }

static float bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void check_rounding(void) {
    const struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1 */
        {0x3f808000u, 0x3f80}, /* 1 + 2^-8: a tie, to the even 1 */
        {0x3f818000u, 0x3f82}, /* a tie up to the even neighbour */
        {0x3f808001u, 0x3f81}, /* just past the tie: up */
        {0xbf80ffffu, 0xbf81}, /* negative, rounds away */
        {0x3fffffffu, 0x4000}, /* the carry into the exponent */
        {0x7f7fffffu, 0x7f80}, /* the largest float: infinity */
        {0x7f800000u, 0x7f80}, /* infinity */
        {0x00400000u, 0x0000}, /* a denormal reads as zero */
        {0x80000001u, 0x8000}, /* a negative denormal: -0 */
        {0x00800000u, 0x0080}, /* the smallest normal stays */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = tr_gemm_bf16_round(bits(cases[i].in));
        CHECK(got == cases[i].out, "round(0x%08x) = 0x%04x, expected 0x%04x", cases[i].in, got, cases[i].out);
    }
    uint16_t nan = tr_gemm_bf16_round(bits(0x7f800001u));
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0, "a signalling NaN rounds to 0x%04x, not a NaN", nan);
}

/* The rounding as the path packs it: op(A) (n x 1) times ones (1 x 3) is bf16(A), both
 * storage orders of A (across / not in the packing), and the same with the roles swapped. */
static void check_pack_rounding(void) {
    enum { n = 300 };
    float x[n], ones[3 * n], c[n * 3], ct[3 * n];
    for (int i = 0; i < n; i++) {
        x[i] = (float)test_value((uint64_t)i, 5) * ldexpf(1.0f, (i % 40) - 20);
        if (i % 7 == 0) x[i] = bits(0x3f808000u + (uint32_t)(i % 3) * 0x10000u); /* ties */
        if (i % 11 == 0) x[i] = bits(0x00000100u + (uint32_t)i);                  /* denormals */
    }
    for (int i = 0; i < 3 * n; i++) ones[i] = 1.0f;
    for (int ta = 0; ta < 2; ta++) {
        /* A (n, 1) stored as n x 1 (lda 1) or, transposed, as 1 x n (lda n) */
        gemm(ta, 0, n, 3, 1, 1.0f, x, ta ? n : 1, ones, 3, 0.0f, c, 3);
        /* B: ones (3, 1) times x as (1, n): C^T, B stored (1, n) or transposed (n, 1) */
        gemm(0, ta, 3, n, 1, 1.0f, ones, 1, x, ta ? 1 : n, 0.0f, ct, n);
        int bad = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < 3; j++) {
                float want = rounded(x[i]);
                bad += memcmp(&c[i * 3 + j], &want, sizeof want) != 0 || memcmp(&ct[j * n + i], &want, sizeof want) != 0;
            }
        CHECK(bad == 0, "transposed %d: %d packed values differ from tr_bf16_round", ta, bad);
    }
}

static void reset_c(gemm_mats *m, float beta) { gemm_reset_c(m->C, m->M, m->N, m->ldc, beta != 0.0f, NAN); }

static double error(const gemm_mats *m, const double *ref, float alpha, float beta) {
    return gemm_error(m->C, m->ldc, ref, m->M, m->N, alpha, beta);
}

static int padding_kept(const gemm_mats *m) { return gemm_padding_kept(m->C, m->M, m->N, m->ldc); }

static void check_shape(int ta, int tb, int64_t M, int64_t N, int64_t K) {
    gemm_mats m;
    gemm_mats_make(&m, ta, tb, M, N, K, (uint64_t)(M * 7 + N * 3 + K + ta * 2 + tb), rounded);
    const struct { float alpha, beta; } cases[] = {{1.0f, 0.0f}, {0.5f, -2.0f}};
    for (int c = 0; c < 2; c++) {
        float alpha = cases[c].alpha, beta = cases[c].beta;
        tr_set_num_threads(1);
        reset_c(&m, beta);
        gemm(ta, tb, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
        double e = error(&m, m.ref, alpha, beta), e32 = error(&m, m.ref32, alpha, beta);
        printf("%d%d %5lld x %5lld x %5lld alpha %.1f beta %4.1f: error %.2e (from the fp32 product %.2e)\n", ta,
               tb, (long long)M, (long long)N, (long long)K, alpha, beta, e, e32);
        CHECK(e < 1e-5, "%d%d %lldx%lldx%lld alpha %g beta %g: error %.3g", ta, tb, (long long)M, (long long)N,
              (long long)K, alpha, beta, e);
        if (K >= 8 && beta == 0.0f)
            CHECK(e32 > 1e-4, "%d%d %lldx%lldx%lld: %.3g from the unrounded product: did it round?", ta, tb,
                  (long long)M, (long long)N, (long long)K, e32);
        CHECK(padding_kept(&m), "%d%d %lldx%lldx%lld: C's padding past N was written", ta, tb, (long long)M,
              (long long)N, (long long)K);
        if (!use_avx512) continue;
        float *one = malloc((size_t)(M * m.ldc) * sizeof(float));
        memcpy(one, m.C, (size_t)(M * m.ldc) * sizeof(float));
        tr_set_num_threads(2);
        reset_c(&m, beta);
        gemm(ta, tb, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
        CHECK(memcmp(one, m.C, (size_t)(M * m.ldc) * sizeof(float)) == 0, "%d%d %lldx%lldx%lld: 2 threads differ from 1",
              ta, tb, (long long)M, (long long)N, (long long)K);
        tr_set_num_threads(1);
        free(one);
    }
    gemm_mats_drop(&m);
}

/* K = 0 and alpha 0: C = beta C, A and B unread (NULL for K = 0). */
static void check_empty(void) {
    float C[6] = {1, 2, 3, 4, 5, 6}, A[6] = {1, 1, 1, 1, 1, 1};
    gemm(0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 2.0f, C, 3);
    CHECK(C[0] == 2 && C[5] == 12, "K = 0, beta 2: C = %g .. %g, expected 2 .. 12", C[0], C[5]);
    gemm(0, 0, 2, 3, 1, 0.0f, A, 1, A, 3, 0.0f, C, 3);
    CHECK(C[0] == 0 && C[5] == 0, "alpha 0, beta 0: C = %g .. %g, expected zeros", C[0], C[5]);
}

/* The ops' GEMM follows the switch; TRAINER_CPU_NO_BF16 turns the support off. */
static void check_switch(void) {
    gemm_mats m;
    gemm_mats_make(&m, 0, 1, 40, 50, 77, 3, rounded);
    float *want = malloc((size_t)(m.M * m.ldc) * sizeof(float));
    tr_set_num_threads(1);
    for (int on = 0; on < 2; on++) {
        reset_c(&m, 0.0f);
        (on ? tr_gemm_bf16 : tr_gemm_linear_f32)(0, 1, m.M, m.N, m.K, 1.0f, m.A, m.lda, m.B, m.ldb, 0.0f, m.C, m.ldc);
        memcpy(want, m.C, (size_t)(m.M * m.ldc) * sizeof(float));
        tr_cpu_set_bf16(on);
        CHECK(tr_cpu_bf16() == on, "tr_cpu_bf16() = %d after tr_cpu_set_bf16(%d)", tr_cpu_bf16(), on);
        gemm_fn *ops[] = {tr_gemm_op_f32, tr_gemm_op_linear_f32};
        for (int o = 0; o < 2; o++) {
            reset_c(&m, 0.0f);
            ops[o](0, 1, m.M, m.N, m.K, 1.0f, m.A, m.lda, m.B, m.ldb, 0.0f, m.C, m.ldc);
            if (!on && o == 0) { /* tr_gemm_f32: another summation, the same fp32 product */
                CHECK(error(&m, m.ref32, 1.0f, 0.0f) < 1e-6, "switch off: the op GEMM is not fp32's");
                continue;
            }
            CHECK(memcmp(want, m.C, (size_t)(m.M * m.ldc) * sizeof(float)) == 0, "switch %d: op GEMM %d is not %s", on,
                  o, on ? "tr_gemm_bf16" : "tr_gemm_linear_f32");
        }
    }
    tr_cpu_set_bf16(0);
    free(want);
    gemm_mats_drop(&m);
    char why[200] = "";
    setenv("TRAINER_CPU_NO_BF16", "1", 1);
    CHECK(!tr_cpu_bf16_supported(why, sizeof why) && strstr(why, "TRAINER_CPU_NO_BF16=1"),
          "TRAINER_CPU_NO_BF16=1: supported, or the reason '%s' does not name it", why);
    setenv("TRAINER_CPU_NO_BF16", "0", 1);
    setenv("TRAINER_CPU_BF16_KERNEL", "amx", 1);
    CHECK(!tr_cpu_bf16_supported(why, sizeof why) && strstr(why, "TRAINER_CPU_BF16_KERNEL=amx: expected dpbf16 or fma"),
          "TRAINER_CPU_BF16_KERNEL=amx: supported, or the reason '%s' does not name it", why);
    unsetenv("TRAINER_CPU_BF16_KERNEL");
    int have = tr_cpu_bf16_supported(why, sizeof why);
    CHECK(have || strstr(why, "no AVX512-BF16 (vdpbf16ps)"), "no support, and the reason '%s' does not say why", why);
    unsetenv("TRAINER_CPU_NO_BF16");
}

int main(int argc, char **argv) {
    use_avx512 = argc > 1 && strcmp(argv[1], "avx512") == 0 ? 1 : argc > 1 && strcmp(argv[1], "fma") == 0 ? 2 : 0;
    if (use_avx512) {
        float a = 1, c = 0;
        unsetenv("TRAINER_CPU_NO_BF16");
        unsetenv("TRAINER_CPU_BF16_KERNEL");
        char why[200] = "";
        if (!tr_cpu_bf16_supported(why, sizeof why) || !tr_gemm_bf16_avx512(0, 0, 1, 1, 1, 1.0f, &a, 1, &a, 1, 0.0f, &c, 1))
            test_skip(why[0] ? why : "the AVX512-BF16 kernel is not in this build");
    }
    printf("path: %s\n", use_avx512 == 2 ? "fp32 multiply-adds of the rounded values"
                          : use_avx512  ? "AVX512-BF16 (vdpbf16ps)"
                                        : "scalar");
    check_rounding();
    check_pack_rounding();
    check_empty();
    const int64_t shapes[][3] = {
        {1, 1, 1},    {3, 5, 7},     {17, 33, 1},    {16, 16, 16},  {37, 45, 63},     {100, 37, 71},
        {33, 70, 190}, {64, 200, 513}, {130, 17, 1025}, {20, 1100, 31}, {257, 129, 128},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) check_shape(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2]);
    if (!use_avx512) check_switch();
    return test_finish();
}
