/* bf16 GEMM for trainer.precision bf16-mixed on the CPU (kernels/gemm_bf16.h): fp32 in memory,
 * operands rounded to bf16 while packed, products summed in fp32.
 *
 * The blocking is gemm_packed.c's (Goto; blocks of NC columns and KC depth of op(B), MC rows
 * of op(A), 16 x 16 tiles of C with one zmm accumulator per row). Two kernels, both compiled
 * for AVX512-BF16 whatever -march says and run only where cpuid reports it:
 * - dpbf16: panels of bf16 pairs for vdpbf16ps (for each pair of depths, a B panel's 16
 *   columns' pairs side by side, an A panel's 16 rows' pairs each broadcast as one 32-bit
 *   value; an odd depth padded with a zero): half the bytes, two products per lane;
 * - fma: fp32 panels of the rounded values and fp32 multiply-adds. A product of two bf16 values
 *   is exact in fp32, so it computes the same thing (the sums in another order). On Sapphire
 *   and Emerald Rapids vdpbf16ps issues every 2 cycles against 2 FMAs a cycle: half the
 *   multiply-add rate of fp32 (docs/benchmarks-history.md, "bf16-mixed on the CPU"), so fma is the
 *   default on Intel CPUs, dpbf16 elsewhere; TRAINER_CPU_BF16_KERNEL=dpbf16|fma overrides.
 * The scalar path rounds the same way, for tests and CPUs without AVX512-BF16 (runs refuse
 * those). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_bf16.h"
#include "trainer/memory.h"

uint16_t tr_gemm_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);  /* zero, denormal: signed 0 */
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN: quiet */
    u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even; past the largest: infinity */
    return (uint16_t)(u >> 16);
}

float tr_bf16_value(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* C = beta C for an empty sum (K = 0 or alpha 0); beta 0 writes zeros. */
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

void tr_gemm_bf16_scalar(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float a = tr_bf16_value(tr_gemm_bf16_round(ta ? A[k * lda + i] : A[i * lda + k]));
                float b = tr_bf16_value(tr_gemm_bf16_round(tb ? B[j * ldb + k] : B[k * ldb + j]));
                s += a * b; /* exact product (8 x 8 significant bits), rounded sum */
            }
            float *c = C + i * ldc + j;
            *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
        }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>

#include "kernels/transpose16.h"

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,fma")))
#define PANEL 16 /* rows of an A panel, columns of a B panel, the tile's side */
#define KC 512   /* depth of a block (even): a panel is 16 KiB of bf16 pairs, 32 KiB for fma */
#define MC 128   /* rows of op(A) packed at once (128 or 256 KiB, L2) */
#define NC 1024  /* columns of op(B) packed at once (1 or 2 MiB) */

static int cpu_has_bf16(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
}

BF16_TARGET static inline __mmask16 first_lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* bf16 of lo's 16 floats in lanes 0-15 and of hi's in 16-31 (vcvtne2ps2bf16: to nearest
 * even, denormals read as zero, as tr_bf16_round). */
BF16_TARGET static inline __m512i to_bf16(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

/* One panel over depth kc, as pairs: out[p * 16 + i] holds entry i at depths 2p (low half)
 * and 2p + 1 (high half), for i < n (n <= 16), zero beyond and past kc. x points at entry 0,
 * depth 0; entry i, depth k is at x[i * ld + k] when across (the panel's entries are rows of
 * its source), else at x[k * ld + i]. */
BF16_TARGET static void pack_panel(const float *x, int64_t ld, int across, int64_t n, int64_t kc, uint32_t *out) {
    if (!across) { /* two rows of 16 entries, interleaved into 16 pairs */
        const __m512i mix = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                             22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        __mmask16 m = first_lanes(n);
        for (int64_t k = 0; k < kc; k += 2) {
            __m512 x0 = _mm512_maskz_loadu_ps(m, x + k * ld);
            __m512 x1 = k + 1 < kc ? _mm512_maskz_loadu_ps(m, x + (k + 1) * ld) : _mm512_setzero_ps();
            _mm512_store_si512((void *)(out + k / 2 * PANEL), _mm512_permutexvar_epi16(mix, to_bf16(x0, x1)));
        }
        return;
    }
    for (int64_t k = 0; k < kc; k += 32) { /* 16 entries' next 32 depths: 16 pairs each, transposed */
        __m512 r[16], col[16];
        __mmask16 m0 = first_lanes(kc - k), m1 = first_lanes(kc - k - 16);
        for (int i = 0; i < 16; i++)
            r[i] = i < n ? _mm512_castsi512_ps(to_bf16(_mm512_maskz_loadu_ps(m0, x + i * ld + k),
                                                       _mm512_maskz_loadu_ps(m1, x + i * ld + k + 16)))
                         : _mm512_setzero_ps();
        tr_transpose16(r, col);
        int64_t pairs = (kc - k + 1) / 2 < 16 ? (kc - k + 1) / 2 : 16;
        for (int64_t p = 0; p < pairs; p++) _mm512_store_ps((float *)(out + (k / 2 + p) * PANEL), col[p]);
    }
}

/* C = alpha c + beta C for the tile's mr rows and nr columns (C not read when beta is 0). */
BF16_TARGET static inline __attribute__((always_inline)) void store_tile(const __m512 c[PANEL], float *C, int64_t ldc,
                                                                        int64_t mr, int64_t nr, float alpha,
                                                                        float beta) {
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 m = first_lanes(nr);
    for (int64_t i = 0; i < mr; i++) {
        float *ci = C + i * ldc;
        __m512 r = _mm512_mul_ps(va, c[i]);
        if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, ci), r);
        _mm512_mask_storeu_ps(ci, m, r);
    }
}

/* The 16 x 16 tile at C (mr rows and nr columns of it stored) from an A panel and a B panel of
 * kp pairs: C = alpha sum + beta C, C not read when beta is 0. */
BF16_TARGET static void tile(int64_t kp, const uint32_t *a, const uint32_t *b, float *C, int64_t ldc, int64_t mr,
                             int64_t nr, float alpha, float beta) {
    __m512 c[PANEL];
    for (int i = 0; i < PANEL; i++) c[i] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++) {
        __m512bh bv = (__m512bh)_mm512_load_si512((const void *)(b + p * PANEL));
        for (int i = 0; i < PANEL; i++)
            c[i] = _mm512_dpbf16_ps(c[i], (__m512bh)_mm512_set1_epi32((int)a[p * PANEL + i]), bv);
    }
    store_tile(c, C, ldc, mr, nr, alpha, beta);
}

/* x's floats rounded to bf16 and back (exact: bf16 is fp32's upper half), the same rounding. */
BF16_TARGET static inline __m512 round_ps(__m512 x) {
    __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The FMA kernel's panel: gemm_packed.c's layout (out[k * 16 + i] = entry i at depth k, zero
 * past n), of the rounded values; across and not as pack_panel. */
BF16_TARGET static void pack_panel_fma(const float *x, int64_t ld, int across, int64_t n, int64_t kc, float *out) {
    if (!across) {
        __mmask16 m = first_lanes(n);
        for (int64_t k = 0; k < kc; k++) _mm512_store_ps(out + k * PANEL, round_ps(_mm512_maskz_loadu_ps(m, x + k * ld)));
        return;
    }
    for (int64_t k = 0; k < kc; k += 16) {
        __m512 r[16], col[16];
        __mmask16 m = first_lanes(kc - k);
        for (int i = 0; i < 16; i++) r[i] = i < n ? round_ps(_mm512_maskz_loadu_ps(m, x + i * ld + k)) : _mm512_setzero_ps();
        tr_transpose16(r, col);
        int64_t depths = kc - k < 16 ? kc - k : 16;
        for (int64_t j = 0; j < depths; j++) _mm512_store_ps(out + (k + j) * PANEL, col[j]);
    }
}

/* tile() by fp32 multiply-adds over kc depths of rounded values: each product of two bf16
 * values is exact in fp32, so only the order of the fp32 sums differs from vdpbf16ps's. */
BF16_TARGET static void tile_fma(int64_t kc, const float *a, const float *b, float *C, int64_t ldc, int64_t mr,
                                 int64_t nr, float alpha, float beta) {
    __m512 c[PANEL];
    __m512 b0 = _mm512_load_ps(b);
    for (int i = 0; i < PANEL; i++) c[i] = _mm512_mul_ps(_mm512_set1_ps(a[i]), b0);
    for (int64_t k = 1; k < kc; k++) {
        __m512 bv = _mm512_load_ps(b + k * PANEL);
        for (int i = 0; i < PANEL; i++) c[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[k * PANEL + i]), bv, c[i]);
    }
    store_tile(c, C, ldc, mr, nr, alpha, beta);
}

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static int buf_key_ok;

static void make_key(void) { buf_key_ok = pthread_key_create(&buf_key, tr_free) == 0; }

#define BUF_WORDS ((size_t)NC * KC + (size_t)MC * KC) /* 32-bit: the FMA kernel's floats, or twice the pairs */

/* This thread's pack buffers (64-byte aligned, tr_malloc), NULL when they cannot be had. */
static uint32_t *thread_buffers(void) {
    pthread_once(&buf_once, make_key);
    if (!buf_key_ok) return NULL;
    uint32_t *buf = pthread_getspecific(buf_key);
    if (!buf) {
        buf = tr_malloc(BUF_WORDS * sizeof *buf);
        if (buf && pthread_setspecific(buf_key, buf) != 0) {
            tr_free(buf);
            buf = NULL;
        }
    }
    return buf;
}

/* The whole blocked product on the calling thread (K >= 1, alpha not 0), by vdpbf16ps on
 * pairs or (fma) by fp32 multiply-adds on rounded floats; a panel is w 64-byte rows. */
BF16_TARGET static void gemm_one(int fma, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                 int64_t ldc, uint32_t *buf) {
    uint32_t *pb = buf, *pa = buf + (size_t)NC * KC;
    for (int64_t j0 = 0; j0 < N; j0 += NC) {
        int64_t nc = N - j0 < NC ? N - j0 : NC;
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
            int64_t kc = K - p0 < KC ? K - p0 : KC, kp = (kc + 1) / 2, w = fma ? kc : kp;
            float bk = p0 ? 1.0f : beta;
            for (int64_t jp = 0; jp < nc; jp += PANEL) {
                const float *x = tb ? B + (j0 + jp) * ldb + p0 : B + p0 * ldb + j0 + jp;
                if (fma)
                    pack_panel_fma(x, ldb, tb, nc - jp, kc, (float *)(pb + jp * w));
                else
                    pack_panel(x, ldb, tb, nc - jp, kc, pb + jp * w);
            }
            for (int64_t i0 = 0; i0 < M; i0 += MC) {
                int64_t mc = M - i0 < MC ? M - i0 : MC;
                for (int64_t ip = 0; ip < mc; ip += PANEL) {
                    const float *x = ta ? A + p0 * lda + i0 + ip : A + (i0 + ip) * lda + p0;
                    if (fma)
                        pack_panel_fma(x, lda, !ta, mc - ip, kc, (float *)(pa + ip * w));
                    else
                        pack_panel(x, lda, !ta, mc - ip, kc, pa + ip * w);
                }
                for (int64_t jr = 0; jr < nc; jr += PANEL)
                    for (int64_t ir = 0; ir < mc; ir += PANEL) {
                        float *c = C + (i0 + ir) * ldc + j0 + jr;
                        int64_t mr = mc - ir < PANEL ? mc - ir : PANEL, nr = nc - jr < PANEL ? nc - jr : PANEL;
                        if (fma)
                            tile_fma(kc, (const float *)(pa + ir * w), (const float *)(pb + jr * w), c, ldc, mr, nr,
                                     alpha, bk);
                        else
                            tile(kp, pa + ir * w, pb + jr * w, c, ldc, mr, nr, alpha, bk);
                    }
            }
        }
    }
}

/* Slab t of n: whole tiles [tiles t / n, tiles (t + 1) / n) of C's rows (by_rows) or columns;
 * by the scalar path when the thread has no pack buffers. */
static void slab(int fma, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int by_rows, int64_t tiles, int t,
                 int n) {
    int64_t lo = tiles * t / n * PANEL, hi = tiles * (t + 1) / n * PANEL, len = by_rows ? M : N;
    if (hi > len) hi = len;
    if (hi <= lo) return;
    if (by_rows)
        A = ta ? A + lo : A + lo * lda, C = C + lo * ldc, M = hi - lo;
    else
        B = tb ? B + lo * ldb : B + lo, C = C + lo, N = hi - lo;
    uint32_t *buf = thread_buffers();
    if (buf)
        gemm_one(fma, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, buf);
    else
        tr_gemm_bf16_scalar(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static int kernel(int fma, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (!cpu_has_bf16()) return 0;
    if (M <= 0 || N <= 0) return 1;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return 1;
    }
    int by_rows = M >= N;
    int64_t tiles = ((by_rows ? M : N) + PANEL - 1) / PANEL;
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > tiles) threads = (int)tiles;
    /* a product under 32^3 multiply-adds is not worth a fork */
    if ((double)M * (double)N * (double)K < 32.0 * 32 * 32) threads = 1;
    if (threads <= 1) {
        if (!thread_buffers()) return 0;
        slab(fma, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, by_rows, tiles, 0, 1);
        return 1;
    }
#pragma omp parallel num_threads(threads)
    slab(fma, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, by_rows, tiles, omp_get_thread_num(),
         omp_get_num_threads());
    return 1;
}

static int cpu_is_intel(void) { return __builtin_cpu_is("intel"); }

#else

static int cpu_has_bf16(void) { return 0; }
static int cpu_is_intel(void) { return 0; }
static int kernel(int fma, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)fma, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return 0;
}

#endif

int tr_cpu_bf16_supported(char *why, size_t n) {
    const char *k = getenv("TRAINER_CPU_BF16_KERNEL");
    if (k && *k && strcmp(k, "dpbf16") != 0 && strcmp(k, "fma") != 0) {
        if (why) snprintf(why, n, "TRAINER_CPU_BF16_KERNEL=%s: expected dpbf16 or fma", k);
        return 0;
    }
    const char *off = getenv("TRAINER_CPU_NO_BF16");
    if (off && *off && strcmp(off, "0") != 0) {
        if (why) snprintf(why, n, "TRAINER_CPU_NO_BF16=%s treats this CPU as one without AVX512-BF16 (vdpbf16ps)", off);
        return 0;
    }
    if (!cpu_has_bf16()) {
        if (why) snprintf(why, n, "this CPU has no AVX512-BF16 (vdpbf16ps)");
        return 0;
    }
    return 1;
}

int tr_gemm_bf16_avx512(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return kernel(0, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int tr_gemm_bf16_fma(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return kernel(1, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *tr_gemm_bf16_kernel(void) {
    if (!cpu_has_bf16()) return "scalar";
    const char *k = getenv("TRAINER_CPU_BF16_KERNEL");
    if (k && strcmp(k, "dpbf16") == 0) return "dpbf16";
    if (k && strcmp(k, "fma") == 0) return "fma";
    return cpu_is_intel() ? "fma" : "dpbf16";
}

void tr_gemm_bf16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    static int chosen = -1; /* 0 scalar, 1 dpbf16, 2 fma: once per process */
    int which = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (which < 0) {
        const char *k = tr_gemm_bf16_kernel();
        which = k[0] == 'd' ? 1 : k[0] == 'f' ? 2 : 0;
        __atomic_store_n(&chosen, which, __ATOMIC_RELAXED);
    }
    if (which && kernel(which == 2, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    tr_gemm_bf16_scalar(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
