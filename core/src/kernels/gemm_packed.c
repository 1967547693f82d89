/* f32 GEMM, C = alpha op(A) op(B) + beta C (row-major), blocked and packed for AVX-512, in
 * place of OpenBLAS's sgemm for the sizes the models run (tr_gemm_f32 and tr_gemm_linear_f32
 * send it everything gemm_small.c does not take, above a minimum size).
 *
 * The layout is the classic one (Goto; BLIS's five loops). For each block of NC columns of C
 * and KC of the depth: op(B)'s KC x NC block is packed into panels of 16 columns, depth-major
 * (a panel's 16 values for one k side by side); then for each block of MC rows, op(A)'s MC x KC
 * block into panels of 16 rows, depth-major too; then a 16 x 16 tile of C per pair of panels:
 * 16 accumulators (one zmm per row of the tile), and per k one load of B's 16 values, 16
 * broadcasts of A's and 16 multiply-adds. The kernel reaches 98% of a Zen 4 core's
 * multiply-add peak with its panels in L1 (115 of 117 GFLOP/s); packing is what it costs on
 * top. Panels read across rows of their source (A not transposed, B transposed) are packed 16
 * x 16 at a time through an in-register transpose, so every pack is vector loads and stores.
 *
 * Why not OpenBLAS (0.3.21 here, its Cooperlake kernels on Zen 4): at this framework's shapes
 * it spends 8-10% of a transformer's step packing, and on 2 threads it splits small-M GEMMs
 * badly. Speed-ups per GEMM (OpenBLAS's time over ours, 1 / 2 threads; docs/benchmarks.md,
 * eleventh round): the transformer's linear layers 0.99-1.07x / 1.04-1.31x, the MLP's at batch
 * 128 1.04-1.09x / 1.13-1.60x, attention's per-head products 1.03-1.08x on one thread (where
 * training runs them: one head per thread).
 *
 * Threads: when called outside a parallel region with more than one OpenMP thread, C is split
 * into one slab of whole 16-row (or 16-column) tiles per thread, along whichever of M and N is
 * longer, and each thread runs the whole blocked product on its slab with its own buffers (B's
 * or A's block packed once per thread: the price of no barrier). Each element of C is summed in
 * the same order whatever the split, the thread count or its place in a tile: k in blocks of
 * KC, each block's products chained in one register in k order, then alpha times the block's
 * sum added to C (the first block to beta C, or written when beta is 0), so results do not
 * depend on the thread count, and a tile of C computed alone equals the same tile of the whole
 * (unless memory runs out: a thread that cannot get its buffers leaves its slab to BLAS).
 * Inside a parallel region it runs on the calling thread. Pack buffers are per thread
 * (tr_malloc, held by a pthread key and freed when the thread exits), 2.2 MB, allocated on the
 * thread's first call. */
#include "kernels/gemm.h"
#include "trainer/memory.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>

#define PANEL 16 /* rows of an A panel, columns of a B panel, the tile's side */
#define KC 512   /* depth of a block: a 16-wide panel is 32 KiB */
#define MC 64    /* rows of op(A) packed at once (128 KiB, L2) */
#define NC 1024  /* columns of op(B) packed at once (2 MiB, L3) */

/* Smallest product sent here: below it OpenBLAS's unpacked paths win (a 100 x 37 x 45 GEMM
 * took 1.4-1.8x OpenBLAS's time). */
#define PACKED_MIN_DIM 16
#define PACKED_MIN_WORK (64 * 64 * 64)

/* Transposes 16 rows of 16 floats in registers: out[j] is column j of r. */
static inline __attribute__((always_inline)) void transpose16(const __m512 r[16], __m512 out[16]) {
    __m512 t[16], u[16], v[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++) {
            v[8 * h + j] = _mm512_shuffle_f32x4(u[8 * h + j], u[8 * h + 4 + j], 0x88);
            v[8 * h + 4 + j] = _mm512_shuffle_f32x4(u[8 * h + j], u[8 * h + 4 + j], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        out[j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88);
        out[8 + j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0xDD);
    }
}

static inline __mmask16 first_lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* One panel over depth kc: out[k * 16 + i] = entry i of the panel at depth k, for i < n
 * (n <= 16), zero beyond. x points at entry 0, depth 0; entry i, depth k is at x[i * ld + k]
 * when across (the panel's entries are rows of its source), else at x[k * ld + i]. */
static void pack_panel(const float *x, int64_t ld, int across, int64_t n, int64_t kc, float *out) {
    if (!across) {
        __mmask16 m = first_lanes(n);
        for (int64_t k = 0; k < kc; k++) _mm512_store_ps(out + k * PANEL, _mm512_maskz_loadu_ps(m, x + k * ld));
        return;
    }
    for (int64_t k = 0; k < kc; k += 16) {
        __m512 r[16], col[16];
        __mmask16 m = first_lanes(kc - k);
        for (int i = 0; i < 16; i++) r[i] = i < n ? _mm512_maskz_loadu_ps(m, x + i * ld + k) : _mm512_setzero_ps();
        transpose16(r, col);
        if (kc - k >= 16) { /* whole: stored from registers (gcc makes the loop below a memcpy) */
            for (int j = 0; j < 16; j++) _mm512_store_ps(out + (k + j) * PANEL, col[j]);
        } else {
            for (int64_t j = 0; j < kc - k; j++) _mm512_store_ps(out + (k + j) * PANEL, col[j]);
        }
    }
}

/* The 16 x 16 tile at C (mr rows and nr columns of it stored) from an A panel and a B panel
 * of depth kc >= 1: C = alpha sum + beta C, C not read when beta is 0. The first products
 * start the sums (the same bits as adding them to zero, without a zeroed array that gcc
 * would memset on the stack). */
static void tile(int64_t kc, const float *a, const float *b, float *C, int64_t ldc, int64_t mr, int64_t nr,
                 float alpha, float beta) {
    __m512 c[PANEL];
    __m512 b0 = _mm512_load_ps(b);
    for (int i = 0; i < PANEL; i++) c[i] = _mm512_mul_ps(_mm512_set1_ps(a[i]), b0);
    for (int64_t k = 1; k < kc; k++) {
        __m512 bv = _mm512_load_ps(b + k * PANEL);
        for (int i = 0; i < PANEL; i++) c[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[k * PANEL + i]), bv, c[i]);
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 m = first_lanes(nr);
    for (int64_t i = 0; i < mr; i++) {
        float *ci = C + i * ldc;
        __m512 r = _mm512_mul_ps(va, c[i]);
        if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, ci), r);
        _mm512_mask_storeu_ps(ci, m, r);
    }
}

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static int buf_key_ok;

static void make_key(void) { buf_key_ok = pthread_key_create(&buf_key, tr_free) == 0; }

#define BUF_FLOATS ((size_t)NC * KC + (size_t)MC * KC)

/* This thread's pack buffers, NULL when they cannot be had (the caller uses BLAS). */
static float *thread_buffers(void) {
    pthread_once(&buf_once, make_key);
    if (!buf_key_ok) return NULL;
    float *buf = pthread_getspecific(buf_key);
    if (!buf) {
        buf = tr_malloc(BUF_FLOATS * sizeof *buf);
        if (buf && pthread_setspecific(buf_key, buf) != 0) {
            tr_free(buf);
            buf = NULL;
        }
    }
    return buf;
}

/* The whole blocked product on the calling thread. */
static void gemm_one(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc, float *buf) {
    float *pb = buf, *pa = buf + (size_t)NC * KC;
    for (int64_t j0 = 0; j0 < N; j0 += NC) {
        int64_t nc = N - j0 < NC ? N - j0 : NC;
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
            int64_t kc = K - p0 < KC ? K - p0 : KC;
            float bk = p0 ? 1.0f : beta;
            for (int64_t jp = 0; jp < nc; jp += PANEL) {
                const float *x = tb ? B + (j0 + jp) * ldb + p0 : B + p0 * ldb + j0 + jp;
                pack_panel(x, ldb, tb, nc - jp, kc, pb + jp * kc);
            }
            for (int64_t i0 = 0; i0 < M; i0 += MC) {
                int64_t mc = M - i0 < MC ? M - i0 : MC;
                for (int64_t ip = 0; ip < mc; ip += PANEL) {
                    const float *x = ta ? A + p0 * lda + i0 + ip : A + (i0 + ip) * lda + p0;
                    pack_panel(x, lda, !ta, mc - ip, kc, pa + ip * kc);
                }
                for (int64_t jr = 0; jr < nc; jr += PANEL)
                    for (int64_t ir = 0; ir < mc; ir += PANEL)
                        tile(kc, pa + ir * kc, pb + jr * kc, C + (i0 + ir) * ldc + j0 + jr, ldc,
                             mc - ir < PANEL ? mc - ir : PANEL, nc - jr < PANEL ? nc - jr : PANEL, alpha, bk);
            }
        }
    }
}

/* Slab t of n: whole tiles [tiles t / n, tiles (t + 1) / n) of C's rows (by_rows) or columns,
 * computed on the calling thread; by BLAS when the thread has no pack buffers. */
static void slab(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int by_rows, int64_t tiles, int t,
                int n) {
    int64_t lo = tiles * t / n * PANEL, hi = tiles * (t + 1) / n * PANEL, len = by_rows ? M : N;
    if (hi > len) hi = len;
    if (by_rows)
        A = ta ? A + lo : A + lo * lda, C = C + lo * ldc, M = hi - lo;
    else
        B = tb ? B + lo * ldb : B + lo, C = C + lo, N = hi - lo;
    if (hi <= lo) return;
    float *buf = thread_buffers();
    if (buf)
        gemm_one(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, buf);
    else /* no memory for this thread's buffers */
        tr_gemm_blas_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int tr_gemm_packed_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    /* alpha 0 must not read A and B (BLAS): left to BLAS, as are the small products */
    if (alpha == 0.0f || M < PACKED_MIN_DIM || N < PACKED_MIN_DIM || K < PACKED_MIN_DIM ||
        (double)M * (double)N * (double)K < (double)PACKED_MIN_WORK)
        return 0;
    int by_rows = M >= N;
    int64_t tiles = ((by_rows ? M : N) + PANEL - 1) / PANEL;
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > tiles) threads = (int)tiles;
    if (threads <= 1) { /* alone: without buffers the whole product is left to the caller's BLAS */
        if (!thread_buffers()) return 0;
        slab(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, by_rows, tiles, 0, 1);
        return 1;
    }
#pragma omp parallel num_threads(threads)
    slab(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, by_rows, tiles, omp_get_thread_num(),
         omp_get_num_threads());
    return 1;
}

#else

int tr_gemm_packed_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return 0;
}

#endif
