/* The packed f32 GEMM (kernels/gemm_packed.c) against the product summed in double, and its
 * promises (kernels/gemm.h):
 *
 * - Each of its tiles (16 x 16 and 12 x 32, forced, then the one the CPU gets), every
 *   transpose pair, shapes with and without tails of its panels (16 or 12 rows, 16 or 32
 *   columns) and of its 512- or 384-deep blocks (K up to 1100: three blocks), more rows than
 *   its 64- or 192-row block, more columns than its 1024- or 768-column block,
 *   leading dimensions wider than the matrices: normalised error under 1e-5 for alpha 1, beta
 *   0 (C filled with NaN first: not read), and alpha 0.5, beta -2 (C read and scaled); the
 *   padding of C past each row's end is left as it was.
 * - The same bits on 1 and 2 threads (slabs of rows when M >= N, of columns otherwise), called
 *   from two threads of a parallel region at once (each then runs on its own thread), and a
 *   tile of C computed alone equals that tile of the whole product.
 * - Sizes it leaves to BLAS (a dimension under 16, fewer than 64^3 multiply-adds, alpha 0):
 *   it returns 0 and writes nothing; tr_gemm_f32 still computes them.
 * - A linear layer's bias added as its tiles are stored (tr_gemm_packed_linear_f32): the bits of
 *   C filled with the bias and then added to, on each tile and 1 or 2 threads.
 * - Its epilogue (the same function's last argument): every element of C in exactly one call, holding
 *   its final value when called, and what the epilogue writes there kept (no later tile
 *   stores over it), on each tile, 1 and 2 threads (slabs of rows and of columns), products
 *   packed or read in place (gemm_direct), one or more depth and column blocks.
 *
 * Where the build has no AVX-512 it returns 0 for everything (the test then checks only that);
 * a test compiled for the same CPU as libtrainer insists that it runs (tests/CMakeLists.txt). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemm_check.h"
#include "kernels/gemm.h"
#include "trainer/trainer.h"


static void reset_c(gemm_mats *m, float fill, int from_values) { gemm_reset_c(m->C, m->M, m->N, m->ldc, from_values, fill); }

static int packed(gemm_mats *m, float alpha, float beta) {
    return tr_gemm_packed_f32(m->ta, m->tb, m->M, m->N, m->K, alpha, m->A, m->lda, m->B, m->ldb, beta, m->C, m->ldc);
}

static double error(const gemm_mats *m, float alpha, float beta) { return gemm_error(m->C, m->ldc, m->ref, m->M, m->N, alpha, beta); }

static int padding_kept(const gemm_mats *m) { return gemm_padding_kept(m->C, m->M, m->N, m->ldc); }

static void check_shape(int ta, int tb, int64_t M, int64_t N, int64_t K, int want_packed) {
    gemm_mats m;
    gemm_mats_make(&m, ta, tb, M, N, K, (uint64_t)(M * 7 + N * 3 + K + ta * 2 + tb), NULL);
    const struct { float alpha, beta; } cases[] = {{1.0f, 0.0f}, {0.5f, -2.0f}};
    for (int c = 0; c < 2; c++) {
        float alpha = cases[c].alpha, beta = cases[c].beta;
        tr_set_num_threads(1);
        reset_c(&m, NAN, beta != 0.0f);
        int ran = packed(&m, alpha, beta);
        CHECK(ran == want_packed, "%d%d %lldx%lldx%lld: packed GEMM ran %d, expected %d", ta, tb, (long long)M,
              (long long)N, (long long)K, ran, want_packed);
        if (!ran) continue;
        double e = error(&m, alpha, beta);
        printf("%d%d %5lld x %5lld x %5lld alpha %.1f beta %4.1f: error %.2e\n", ta, tb, (long long)M, (long long)N,
               (long long)K, alpha, beta, e);
        CHECK(e < 1e-5, "%d%d %lldx%lldx%lld alpha %g beta %g: error %.3g", ta, tb, (long long)M, (long long)N,
              (long long)K, alpha, beta, e);
        CHECK(padding_kept(&m), "%d%d %lldx%lldx%lld: C's padding past N was written", ta, tb, (long long)M,
              (long long)N, (long long)K);
        /* 2 threads: the same bits */
        float *one = malloc((size_t)(M * m.ldc) * sizeof(float));
        memcpy(one, m.C, (size_t)(M * m.ldc) * sizeof(float));
        tr_set_num_threads(2);
        reset_c(&m, NAN, beta != 0.0f);
        CHECK(packed(&m, alpha, beta) == 1, "2 threads: packed GEMM did not run");
        CHECK(memcmp(one, m.C, (size_t)(M * m.ldc) * sizeof(float)) == 0,
              "%d%d %lldx%lldx%lld: 2 threads differ from 1", ta, tb, (long long)M, (long long)N, (long long)K);
        /* inside a parallel region: each of 2 threads computes the whole product into its own C */
        float *twice = malloc((size_t)(2 * M * m.ldc) * sizeof(float));
        int ran_both = 0;
#pragma omp parallel for num_threads(2) reduction(+ : ran_both)
        for (int t = 0; t < 2; t++) {
            float *out = twice + (size_t)t * (size_t)(M * m.ldc);
            memcpy(out, m.C, (size_t)(M * m.ldc) * sizeof(float));
            if (beta != 0.0f)
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) out[i * m.ldc + j] = (float)test_value((uint64_t)(i * N + j), 99);
            ran_both += tr_gemm_packed_f32(ta, tb, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, beta, out, m.ldc);
        }
        CHECK(ran_both == 2 && memcmp(one, twice, (size_t)(M * m.ldc) * sizeof(float)) == 0 &&
                  memcmp(one, twice + M * m.ldc, (size_t)(M * m.ldc) * sizeof(float)) == 0,
              "%d%d %lldx%lldx%lld: inside a parallel region the result differs", ta, tb, (long long)M, (long long)N,
              (long long)K);
        free(twice);
        tr_set_num_threads(1);
        /* a tile alone: rows [r0, M), columns [c0, N) from an offset into every operand */
        int64_t r0 = M / 3, c0 = N / 5;
        if ((M - r0) * (N - c0) * K >= 64 * 64 * 64 && M - r0 >= 16 && N - c0 >= 16) {
            reset_c(&m, NAN, beta != 0.0f);
            const float *a = ta ? m.A + r0 : m.A + r0 * m.lda, *b = tb ? m.B + c0 * m.ldb : m.B + c0;
            CHECK(tr_gemm_packed_f32(ta, tb, M - r0, N - c0, K, alpha, a, m.lda, b, m.ldb, beta,
                                     m.C + r0 * m.ldc + c0, m.ldc) == 1, "tile: packed GEMM did not run");
            int same = 1;
            for (int64_t i = r0; i < M; i++)
                same &= memcmp(one + i * m.ldc + c0, m.C + i * m.ldc + c0, (size_t)(N - c0) * sizeof(float)) == 0;
            CHECK(same, "%d%d %lldx%lldx%lld: the tile from (%lld, %lld) alone differs from the whole", ta, tb,
                  (long long)M, (long long)N, (long long)K, (long long)r0, (long long)c0);
        }
        free(one);
    }
    gemm_mats_drop(&m);
}

/* A product it leaves to BLAS: returns 0 and C is untouched; tr_gemm_f32 computes it. */
static void check_declined(int64_t M, int64_t N, int64_t K, float alpha) {
    gemm_mats m;
    gemm_mats_make(&m, 0, 1, M, N, K, 7, NULL);
    reset_c(&m, 1.0f, 0);
    CHECK(packed(&m, alpha, 0.0f) == 0, "%lldx%lldx%lld alpha %g: packed GEMM ran", (long long)M, (long long)N,
          (long long)K, alpha);
    int untouched = 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) untouched &= m.C[i * m.ldc + j] == 1.0f;
    CHECK(untouched, "%lldx%lldx%lld: declined but wrote C", (long long)M, (long long)N, (long long)K);
    tr_gemm_f32(0, 1, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, 0.0f, m.C, m.ldc);
    double e = error(&m, alpha, 0.0f);
    CHECK(e < 1e-5, "%lldx%lldx%lld by tr_gemm_f32: error %.3g", (long long)M, (long long)N, (long long)K, e);
    gemm_mats_drop(&m);
}

/* Forcing a tile takes effect: at K = 1100 the 16 x 16 (blocks of 512) and the 12 x 32 (of 384)
 * sum in different orders, so some bits differ, and the CPU's choice is bit for bit one of them. */
static void check_forced(void) {
    gemm_mats m;
    gemm_mats_make(&m, 0, 1, 100, 70, 1100, 5, NULL);
    float *got[3];
    const int tiles[3] = {TR_GEMM_TILE_16X16, TR_GEMM_TILE_WIDE, TR_GEMM_TILE_AUTO};
    size_t bytes = (size_t)(m.M * m.ldc) * sizeof(float);
    for (int t = 0; t < 3; t++) {
        tr_gemm_packed_tile(tiles[t]);
        reset_c(&m, 0.0f, 0);
        CHECK(packed(&m, 1.0f, 0.0f) == 1, "forced tile %d: packed GEMM did not run", tiles[t]);
        got[t] = malloc(bytes);
        CHECK(got[t] != NULL, "out of memory");
        memcpy(got[t], m.C, bytes);
    }
    CHECK(memcmp(got[0], got[1], bytes) != 0,
          "the 16 x 16 and 12 x 32 tiles gave the same bits: forcing had no effect");
    CHECK(memcmp(got[2], got[0], bytes) == 0 || memcmp(got[2], got[1], bytes) == 0,
          "the CPU's tile matches neither forced tile");
    printf("forced tiles differ in the last bits; the CPU's is the %s\n",
           memcmp(got[2], got[1], bytes) == 0 ? "12 x 32" : "16 x 16");
    for (int t = 0; t < 3; t++) free(got[t]);
    gemm_mats_drop(&m);
}

/* A linear layer's bias added as the tiles are stored (tr_gemm_packed_linear_f32): the bits of C
 * filled with the bias and then C += A B^T, on 1 and 2 threads; declined where the product is. */
static void check_bias(int64_t M, int64_t N, int64_t K, int want) {
    gemm_mats m;
    gemm_mats_make(&m, 0, 1, M, N, K, (uint64_t)(M + N + K), NULL);
    float *bias = malloc((size_t)N * sizeof(float)), *filled = malloc((size_t)(M * m.ldc) * sizeof(float));
    CHECK(bias && filled, "out of memory");
    for (int64_t j = 0; j < N; j++) bias[j] = (float)test_value((uint64_t)j, 77);
    size_t bytes = (size_t)(M * m.ldc) * sizeof(float);
    for (int threads = 1; threads <= 2; threads++) {
        tr_set_num_threads(threads);
        reset_c(&m, 0.0f, 0);
        for (int64_t i = 0; i < M; i++) memcpy(m.C + i * m.ldc, bias, (size_t)N * sizeof(float));
        int ran = packed(&m, 1.0f, 1.0f);
        memcpy(filled, m.C, bytes);
        reset_c(&m, NAN, 0);
        int ran_bias = tr_gemm_packed_linear_f32(M, N, K, m.A, m.lda, m.B, m.ldb, bias, m.C, m.ldc, NULL);
        CHECK(ran_bias == (want && ran), "%lldx%lldx%lld bias: ran %d, expected %d", (long long)M, (long long)N,
              (long long)K, ran_bias, want && ran);
        if (ran_bias)
            CHECK(memcmp(filled, m.C, bytes) == 0, "%lldx%lldx%lld, %d thread(s): the bias as stored differs from C "
                  "filled with it", (long long)M, (long long)N, (long long)K, threads);
        else
            CHECK(isnan(m.C[0]) && padding_kept(&m), "%lldx%lldx%lld: declined but wrote C", (long long)M,
                  (long long)N, (long long)K);
    }
    tr_set_num_threads(1);
    free(bias), free(filled);
    gemm_mats_drop(&m);
}

/* The epilogue's view: the final C (from a run without it), a count per element, and the
 * elements that were not final when called. It negates what it is given. */
typedef struct epi_seen {
    const float *final;
    int *count, *early;
} epi_seen;

static void epi_negate(const void *ctx, float *C, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const epi_seen *e = ctx;
    for (int64_t i = r0; i < r1; i++)
        for (int64_t j = c0; j < c1; j++) {
            e->count[i * ldc + j]++;
            if (memcmp(&C[i * ldc + j], &e->final[i * ldc + j], sizeof(float))) e->early[i * ldc + j] = 1;
            C[i * ldc + j] = -C[i * ldc + j];
        }
}

static void check_epilogue(int64_t M, int64_t N, int64_t K, int want) {
    gemm_mats m;
    gemm_mats_make(&m, 0, 1, M, N, K, (uint64_t)(M * 5 + N + K), NULL);
    size_t cells = (size_t)(M * m.ldc);
    float *bias = malloc((size_t)N * sizeof(float)), *final = malloc(cells * sizeof(float));
    int *count = calloc(cells, sizeof(int)), *early = calloc(cells, sizeof(int));
    CHECK(bias && final && count && early, "out of memory");
    for (int64_t j = 0; j < N; j++) bias[j] = (float)test_value((uint64_t)j, 78);
    for (int threads = 1; threads <= 2; threads++) {
        tr_set_num_threads(threads);
        reset_c(&m, 0.0f, 0);
        int ran = tr_gemm_packed_linear_f32(M, N, K, m.A, m.lda, m.B, m.ldb, bias, m.C, m.ldc, NULL);
        memcpy(final, m.C, cells * sizeof(float));
        memset(count, 0, cells * sizeof(int)), memset(early, 0, cells * sizeof(int));
        reset_c(&m, NAN, 0);
        epi_seen seen = {final, count, early};
        tr_gemm_epilogue ep = {epi_negate, &seen};
        int ran_epi = tr_gemm_packed_linear_f32(M, N, K, m.A, m.lda, m.B, m.ldb, bias, m.C, m.ldc, &ep);
        CHECK(ran_epi == (want && ran), "%lldx%lldx%lld epilogue: ran %d, expected %d", (long long)M, (long long)N,
              (long long)K, ran_epi, want && ran);
        if (!ran_epi) {
            CHECK(isnan(m.C[0]) && padding_kept(&m), "%lldx%lldx%lld: declined but wrote C", (long long)M,
                  (long long)N, (long long)K);
            continue;
        }
        int64_t twice = 0, never = 0, not_final = 0, lost = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                size_t at = (size_t)(i * m.ldc + j);
                twice += count[at] > 1, never += count[at] == 0, not_final += early[at];
                lost += memcmp(&m.C[at], &(float){-final[at]}, sizeof(float)) != 0;
            }
        CHECK(!twice && !never && !not_final && !lost && padding_kept(&m),
              "%lldx%lldx%lld, %d thread(s): epilogue calls: %lld elements twice, %lld never, %lld before their final "
              "value, %lld of its writes lost", (long long)M, (long long)N, (long long)K, threads, (long long)twice,
              (long long)never, (long long)not_final, (long long)lost);
    }
    tr_set_num_threads(1);
    free(bias), free(final), free(count), free(early);
    gemm_mats_drop(&m);
}

int main(void) {
#if defined(TEST_EXPECT_AVX512) && defined(__AVX512F__) && defined(__FMA__)
    const int have = 1;
#else
    /* not built for the kernels' CPU: whether they run is the library's business */
    gemm_mats probe;
    gemm_mats_make(&probe, 0, 0, 64, 64, 64, 1, NULL);
    reset_c(&probe, 0.0f, 0);
    const int have = packed(&probe, 1.0f, 0.0f);
    gemm_mats_drop(&probe);
    printf("packed GEMM %s in this build\n", have ? "present" : "absent");
#endif
    const int64_t shapes[][3] = {
        {64, 64, 64},     {16, 4096, 16}, {4096, 16, 16}, {100, 37, 71},  {33, 70, 190},  {128, 512, 784},
        {257, 129, 1100}, {48, 1030, 65}, {1030, 48, 65}, {17, 17, 1000}, {300, 300, 17}, {25, 47, 385},
        {385, 33, 100},   {18, 800, 769},
        /* read in place (gemm_direct, up to 256 x 256 x 128 with K <= 384): attention's per-head
         * shapes; and a product packed whole whose tile alone is read in place (the same bits) */
        {128, 128, 32},   {128, 32, 128}, {300, 300, 120},
    };
    /* each tile the dispatcher can choose, forced, then the CPU's own choice */
    const struct { int tile; const char *name; } tiles[] = {
        {TR_GEMM_TILE_16X16, "16 x 16"}, {TR_GEMM_TILE_WIDE, "12 x 32"}, {TR_GEMM_TILE_AUTO, "the CPU's"}};
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        printf("tile %s\n", tiles[t].name);
        tr_gemm_packed_tile(tiles[t].tile);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) check_shape(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], have);
    }
    for (size_t t = 0; t < 2; t++) { /* the bias with each tile */
        tr_gemm_packed_tile(tiles[t].tile);
        check_bias(100, 70, 1100, have), check_bias(4096 / 8, 1536, 384, have), check_bias(33, 40, 17, have);
        check_bias(50, 50, 10, have);
        /* packed with 1 or 3 depth blocks, 2 column blocks; slabs of columns; read in place */
        check_epilogue(100, 70, 1100, have), check_epilogue(4096 / 8, 1536, 384, have);
        check_epilogue(48, 1030, 65, have), check_epilogue(100, 70, 64, have), check_epilogue(50, 50, 10, have);
    }
    tr_gemm_packed_tile(TR_GEMM_TILE_AUTO);
    if (have) check_forced();
    check_declined(15, 512, 512, 1.0f);
    check_declined(512, 512, 15, 1.0f);
    check_declined(60, 60, 60, 1.0f);
    check_declined(128, 128, 128, 0.0f);
    return test_finish();
}
