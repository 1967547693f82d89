/* GEMMs with one small dimension (32 or less): a linear layer at a small batch, and the
 * skinny products of a layer with few outputs (a classifier's head: 10 classes) at any batch.
 *
 * OpenBLAS packs both operands into its panel layout before every call and, for beta 0,
 * zero-fills C first. With a batch of 8 the packing of the weight matrix and the zero fill
 * cost more than the arithmetic (an MLP step at batch 8 spent 30% of its time there). These
 * kernels read the operands in place, keep every partial sum in registers and write each
 * output once:
 *
 *   nt: C (M, N) = A (M, K) B^T, B stored (N, K), M <= 32    forward,  y = x W^T
 *   nn: C (M, N) = A (M, K) B,   B stored (K, N), M <= 32    backward, dx = dy W
 *   tn: C (M, N) = A^T B, A stored (K, M), B (K, N), K <= 32  backward, dW = dy^T x
 *
 * and, below 16 (SKINNY) where the packed GEMM never runs and OpenBLAS took them at 15-20
 * GFLOP/s (an MLP's 10-class head at batch 128 spent 5% of the step there), nt with N, nn with
 * K and tn with M under it (tn up to K = TN_KMAX).
 *
 * Up to 32 they beat OpenBLAS (packing included) on 1 and 2 threads for the MLP's shapes
 * (512 x 784 at batch 32, 1 thread, on a Sapphire Rapids core: nt 215 against 272 us, nn 185
 * against 214, tn 168 against 197; on a Zen 4 core: nt 260 against 322, nn 230 against 292,
 * tn 254 against 283); at 64 OpenBLAS's kernels win.
 *
 * nt sums each dot product in vector lanes and folds 16 of them at once (reduce16); tn can
 * also sum the squares of what it writes (tr_gemm_small_tn_sumsq_f32: a weight gradient's
 * share of the gradient norm, with no pass reading it back), and tr_gemm_small_tn_norm2_f32
 * gives that sum without forming the product at all (a deferred gradient's).
 *
 * Vectors are GCC vector extensions (16 floats: one AVX-512 register, two AVX ones), loaded
 * with memcpy (any alignment). Each output element is computed by one thread in a fixed
 * order, so results do not depend on the thread count. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/gemm.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define VL 16 /* floats per vector */
#if defined(__AVX512F__)
#define MR 8    /* nn: rows of A per block, MR x 2 accumulators in the 32 vector registers */
#define NT_MR 4 /* nt: rows of A and of B per block, 16 accumulators */
#define NT_NR 4
#else
#define MR 4
#define NT_MR 4
#define NT_NR 2
#endif
#define SMALL_PAR_MIN (1 << 18) /* multiply-adds above which the outer loop goes parallel */
#define SKINNY 16               /* below it a dimension is skinny: the packed GEMM's minimum */
#define TN_KMAX 1024            /* tn's depth at most (its A rows are gathered on the stack) */

/* Every function here is static: the vector calling convention never crosses a boundary
 * (core/CMakeLists.txt also passes -Wno-psabi: with immintrin.h included this is not enough). */
#pragma GCC diagnostic ignored "-Wpsabi"


typedef float vf __attribute__((vector_size(VL * sizeof(float))));

/* tn's multiply-adds, rounded once where the machine fuses them, spelled out rather than left
 * to contraction (which -ffp-contract, the tuning and the unrolling decide: gcc once contracted
 * a scalar tail only in some of its unrolled copies): every element of dW is the same chain of
 * fused multiply-adds from 0, the last columns too (a zero-padded vector), which
 * optim/adam_tn.c recomputes and must match bit for bit. VFMA_S(a, v, c) = a * v + c for a
 * scalar a. */
#if defined(__AVX512F__)
#define VFMA_S(a, v, c) ((vf)_mm512_fmadd_ps(_mm512_set1_ps(a), (__m512)(v), (__m512)(c)))
#else
#define VFMA_S(a, v, c) ((c) + (a) * (v))
#endif

static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* The value in a register from here on: the compiler may not fold its load into the multiply-
 * adds that use it. gcc folds a vector used by four multiply-adds into all four, four loads
 * where one does; Intel cores take two or three vector loads a cycle, AMD's Zen 4 one 512-bit
 * load, and there the tn and nt kernels ran at half the multiply-add rate. */
#if defined(__AVX512F__)
#define KEEP(v) __asm__("" : "+v"(v))
#else
#define KEEP(v) ((void)0) /* a vf spans several registers: the constraint cannot hold it */
#endif

static inline float vsum(vf v) {
    float s = 0;
    for (int i = 0; i < VL; i++) s += v[i];
    return s;
}

/* The first len (<= VL) floats at p, the other lanes zero. */
static inline __attribute__((always_inline)) vf vload_n(const float *p, int64_t len) {
    if (len == VL) return vload(p);
    vf v = {0};
    memcpy(&v, p, (size_t)len * sizeof(float));
    return v;
}

/* The same, 0 < len < VL, one masked load where the build has AVX-512 (for loads in a loop:
 * vload_n's copy through the stack costs more than the multiply-adds it feeds). */
static inline __attribute__((always_inline)) vf vload_part(const float *p, int64_t len) {
#if defined(__AVX512F__)
    return (vf)_mm512_maskz_loadu_ps((__mmask16)((1u << len) - 1), p);
#else
    return vload_n(p, len);
#endif
}

static inline float out(float acc, float alpha, float beta, const float *c) {
    return beta == 0 ? alpha * acc : alpha * acc + beta * *c;
}

/* r[s] = the sum of v[s]'s lanes, for 16 vectors at once: four levels of shuffles and adds,
 * each folding pairs of vectors into one that holds half of each one's partial sums (15
 * vector adds for the 16 sums, where one sum at a time takes 15 scalar adds). The inputs are
 * taken in bit-reversed order, which puts the sums in r in order. */
static inline __attribute__((always_inline)) vf reduce16(const vf v[16]) {
    /* __builtin_shufflevector (gcc >= 12, clang): lanes of a then b, indices 0..31 */
#define FOLD(a, b, ...) (__builtin_shufflevector(a, b, __VA_ARGS__) + __builtin_shufflevector(a, b, FOLD_HI_))
    static const int rev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    vf w[8], x[4], y[2];
    for (int i = 0; i < 8; i++) {
#define FOLD_HI_ 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
        w[i] = FOLD(v[rev[2 * i]], v[rev[2 * i + 1]], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
#undef FOLD_HI_
    }
    for (int i = 0; i < 4; i++) {
#define FOLD_HI_ 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
        x[i] = FOLD(w[2 * i], w[2 * i + 1], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
#undef FOLD_HI_
    }
    for (int i = 0; i < 2; i++) {
#define FOLD_HI_ 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
        y[i] = FOLD(x[2 * i], x[2 * i + 1], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
#undef FOLD_HI_
    }
#define FOLD_HI_ 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
    return FOLD(y[0], y[1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
#undef FOLD_HI_
#undef FOLD
}

/* nt_block's last len (< VL) of K from k, zero-padded: apart, so that its masked loads do not
 * change how gcc compiles the main loop (it ran 30% slower with them inline). */
static __attribute__((noinline)) void nt_tail(vf *acc, const float *const *b, const float *a0, int64_t lda, int mr,
                                              int64_t k, int64_t len) {
    vf x[NT_NR];
    for (int j = 0; j < NT_NR; j++) x[j] = vload_part(b[j] + k, len);
    for (int i = 0; i < mr; i++) {
        vf a = vload_part(a0 + i * lda, len);
        for (int j = 0; j < NT_NR; j++) acc[NT_NR * i + j] += a * x[j];
    }
}

/* C[m0..m0+mr) x [n0, n0+nr) of nt: dot products of NT_MR rows of A with NT_NR rows of B, each
 * load feeding several multiply-adds (AVX-512: 4 x 4, 8 loads for 16; a block of 8 x 2 took 10,
 * and with A's 8 rows, 25 KiB at batch 8, cycled through L1 for every pair it ran at half
 * speed where L1 holds 32 KiB). K's last partial vector is loaded zero-padded, so every
 * product goes through the vector sums. */
static inline __attribute__((always_inline)) void nt_block(int64_t m0, int mr, int64_t n0, int nr, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    vf acc[16] = {0}; /* acc[NT_NR i + j]: row m0 + i of A with row n0 + j of B */
    const float *b[NT_NR];
    for (int j = 0; j < NT_NR; j++) b[j] = B + (n0 + (j < nr ? j : nr - 1)) * ldb;
    int64_t k = 0;
    for (; k + VL <= K; k += VL) {
        vf x[NT_NR];
        for (int j = 0; j < NT_NR; j++) {
            x[j] = vload(b[j] + k);
            KEEP(x[j]);
        }
        for (int i = 0; i < NT_MR; i++) {
            if (i >= mr) break;
            vf a = vload(A + (m0 + i) * lda + k);
            KEEP(a);
            for (int j = 0; j < NT_NR; j++) acc[NT_NR * i + j] += a * x[j];
        }
    }
    if (k < K) nt_tail(acc, b, A + m0 * lda + k, lda, mr, k, K - k);
    vf r = reduce16(acc);
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *c = C + (m0 + i) * ldc + n0 + j;
            *c = out(r[NT_NR * i + j], alpha, beta, c);
        }
}

static void gemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M > TR_GEMM_SMALL_MAX) { /* few rows of B (skinny N), many of A: threads take A's rows */
        int64_t blocks = (M + NT_MR - 1) / NT_MR;
#pragma omp parallel for if (M * N * K > SMALL_PAR_MIN && !omp_in_parallel()) schedule(static)
        for (int64_t q = 0; q < blocks; q++) {
            int mr = NT_MR * q + NT_MR <= M ? NT_MR : (int)(M - NT_MR * q);
            for (int64_t n0 = 0; n0 < N; n0 += NT_NR)
                nt_block(NT_MR * q, mr, n0, N - n0 < NT_NR ? (int)(N - n0) : NT_NR, K, alpha, A, lda, B, ldb, beta, C,
                         ldc);
        }
        return;
    }
    int64_t groups = (N + NT_NR - 1) / NT_NR;
#pragma omp parallel for if (M * N * K > SMALL_PAR_MIN && !omp_in_parallel()) schedule(static)
    for (int64_t p = 0; p < groups; p++) {
        int nr = NT_NR * p + NT_NR <= N ? NT_NR : (int)(N - NT_NR * p);
        int64_t m0 = 0;
        for (; m0 + NT_MR <= M; m0 += NT_MR)
            nt_block(m0, NT_MR, NT_NR * p, nr, K, alpha, A, lda, B, ldb, beta, C, ldc);
        if (m0 < M) nt_block(m0, (int)(M - m0), NT_NR * p, nr, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
}

/* C[m0..m0+mr) x [n0, n0+nv VL) of nn (nv 1 or 2): rows of B scaled by A's entries, summed
 * over k. */
static inline __attribute__((always_inline)) void nn_block(int64_t m0, int mr, int64_t n0, const int nv, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    vf acc[MR][2];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < K; k++) {
        vf x0 = vload(B + k * ldb + n0), x1 = nv > 1 ? vload(B + k * ldb + n0 + VL) : x0;
        for (int i = 0; i < MR; i++) {
            if (i >= mr) break;
            float a = A[(m0 + i) * lda + k];
            acc[i][0] += a * x0;
            if (nv > 1) acc[i][1] += a * x1;
        }
    }
    for (int i = 0; i < mr; i++)
        for (int h = 0; h < nv; h++) {
            float *c = C + (m0 + i) * ldc + n0 + h * VL;
            vf r = alpha * acc[i][h];
            if (beta != 0) r += beta * vload(c);
            vstore(c, r);
        }
}

/* Rows of nn for the columns [n0, n0 + nv VL). */
static inline __attribute__((always_inline)) void nn_cols(int64_t M, int64_t n0, const int nv, int64_t K, float alpha,
                                                         const float *A, int64_t lda, const float *B, int64_t ldb,
                                                         float beta, float *C, int64_t ldc) {
    int64_t m0 = 0;
    for (; m0 + MR <= M; m0 += MR) nn_block(m0, MR, n0, nv, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (m0 < M) nn_block(m0, (int)(M - m0), n0, nv, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    int64_t blocks = N / (2 * VL);
#pragma omp parallel for if (M * N * K > SMALL_PAR_MIN && !omp_in_parallel()) schedule(static)
    for (int64_t p = 0; p < blocks; p++) nn_cols(M, p * 2 * VL, 2, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int64_t n = blocks * 2 * VL;
    if (N - n >= VL) { /* one vector more (784 = 24 x 32 + 16) */
        nn_cols(M, n, 1, K, alpha, A, lda, B, ldb, beta, C, ldc);
        n += VL;
    }
    /* The last N mod VL columns, element by element. */
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = n; j < N; j++) {
            float s = 0;
            for (int64_t k = 0; k < K; k++) s += A[m * lda + k] * B[k * ldb + j];
            float *c = C + m * ldc + j;
            *c = out(s, alpha, beta, c);
        }
}

#define TN_R 4 /* rows of C a block: each load of B feeds TN_R multiply-adds */

/* Rows [0, R) of a block of tn: c_r[n] = sum over k of a[r][k] B[k][n] (+ beta c_r[n]), W
 * vectors of each row at a time: R W independent multiply-add chains. Every element is the
 * same chain, s = 0, then s += a[k] b[k] for k in order, whichever loop computes it, so the
 * result does not depend on how C is split into blocks or tiles: from 0 each step has one
 * product to fuse, where a first product taken as the start (a0 b0 + a1 b1) lets the compiler
 * fuse either one, and it chose differently in different loops. K and R are
 * constants where the caller inlines them. sq: rows[r] = the sum of squares of row r as
 * written (in float, at most 16 vectors per lane, then in double). */
static inline __attribute__((always_inline)) void tn_block(int64_t N, const int64_t K, const int R, const float *a,
                                                           const float *B, int64_t ldb, float beta, float *C,
                                                           int64_t ldc, const int sq, double *rows) {
    enum { W_MAX = 8 };
    const int W = R == 1 ? 8 : 4;
    vf ss[TN_R] = {{0}};
    double sd[TN_R] = {0};
    int cnt = 0;
    int64_t n = 0;
#define TN_A(r, k) a[(r) * TN_KMAX + (k)]
#define TN_OUT(r, at, v)                                    \
    do {                                                    \
        float *c_ = C + (r) * ldc + (at);                   \
        if (beta != 0) (v) += beta * vload(c_);             \
        vstore(c_, v);                                      \
        if (sq) ss[r] += (v) * (v);                         \
    } while (0)
#define TN_COUNT()                                          \
    if (sq && ++cnt == 16) {                                \
        for (int r_ = 0; r_ < R; r_++) {                    \
            sd[r_] += (double)vsum(ss[r_]);                 \
            ss[r_] = (vf){0};                               \
        }                                                   \
        cnt = 0;                                            \
    }
    for (; n + W * VL <= N; n += W * VL) {
        vf s[TN_R][W_MAX];
        for (int r = 0; r < R; r++)
            for (int j = 0; j < W; j++) s[r][j] = (vf){0};
        for (int64_t k = 0; k < K; k++)
            for (int j = 0; j < W; j++) {
                vf b = vload(B + k * ldb + n + j * VL);
                KEEP(b);
                for (int r = 0; r < R; r++) s[r][j] = VFMA_S(TN_A(r, k), b, s[r][j]);
            }
        for (int j = 0; j < W; j++) {
            for (int r = 0; r < R; r++) TN_OUT(r, n + j * VL, s[r][j]);
            TN_COUNT()
        }
    }
    /* The rest a vector at a time, the R rows' chains side by side (one chain alone waits
     * out the multiply-add's latency at every k); the last N mod VL columns zero-padded. */
    for (; n + VL <= N; n += VL) {
        vf v[TN_R] = {{0}};
        for (int64_t k = 0; k < K; k++) {
            vf b = vload(B + k * ldb + n);
            KEEP(b);
            for (int r = 0; r < R; r++) v[r] = VFMA_S(TN_A(r, k), b, v[r]);
        }
        for (int r = 0; r < R; r++) TN_OUT(r, n, v[r]);
        TN_COUNT()
    }
    vf t[TN_R] = {{0}};
    if (n < N)
        for (int64_t k = 0; k < K; k++) {
            vf b = vload_part(B + k * ldb + n, N - n);
            KEEP(b);
            for (int r = 0; r < R; r++) t[r] = VFMA_S(TN_A(r, k), b, t[r]);
        }
    for (int r = 0; r < R; r++) {
        float *c = C + r * ldc;
        for (int64_t i = n; i < N; i++) {
            c[i] = out(t[r][i - n], 1, beta, c + i); /* alpha is in a[] */
            if (sq) sd[r] += (double)c[i] * (double)c[i];
        }
        if (sq) rows[r] = sd[r] + (double)vsum(ss[r]);
    }
#undef TN_A
#undef TN_OUT
#undef TN_COUNT
}

/* tn_block with K a constant for the batch sizes worth a loop of their own. */
static inline __attribute__((always_inline)) void tn_block_k(int64_t N, int64_t K, const int R, const float *a,
                                                             const float *B, int64_t ldb, float beta, float *C,
                                                             int64_t ldc, double *rows) {
    if (K == 8 && rows) tn_block(N, 8, R, a, B, ldb, beta, C, ldc, 1, rows);
    else if (K == 8) tn_block(N, 8, R, a, B, ldb, beta, C, ldc, 0, rows);
    else if (K == 16 && rows) tn_block(N, 16, R, a, B, ldb, beta, C, ldc, 1, rows);
    else if (K == 16) tn_block(N, 16, R, a, B, ldb, beta, C, ldc, 0, rows);
    else if (K == 32 && rows) tn_block(N, 32, R, a, B, ldb, beta, C, ldc, 1, rows);
    else if (K == 32) tn_block(N, 32, R, a, B, ldb, beta, C, ldc, 0, rows);
    else if (rows) tn_block(N, K, R, a, B, ldb, beta, C, ldc, 1, rows);
    else tn_block(N, K, R, a, B, ldb, beta, C, ldc, 0, rows);
}

static void tn_rows(int64_t m0, int64_t m1, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc, double *rows) {
    float a[TN_R * TN_KMAX]; /* a[r][k] = alpha A[k][m + r] */
    for (int64_t m = m0; m < m1;) {
        int R = m1 - m >= TN_R ? TN_R : 1;
        for (int r = 0; r < R; r++)
            for (int64_t k = 0; k < K; k++) a[r * TN_KMAX + k] = alpha * A[k * lda + m + r];
        if (R == TN_R)
            tn_block_k(N, K, TN_R, a, B, ldb, beta, C + m * ldc, ldc, rows ? rows + m : NULL);
        else
            tn_block_k(N, K, 1, a, B, ldb, beta, C + m * ldc, ldc, rows ? rows + m : NULL);
        m += R;
    }
}

/* rows, when given: rows[m] = the sum of squares of C's row m as written (a gradient's norm
 * taken while the values are in registers, instead of a pass reading them back). A call too
 * small for threads (or inside a parallel region) opens no parallel region: the optimizer
 * calls it for every 16 KiB tile of a deferred gradient. */
static void gemm_tn(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc, double *rows) {
    if (M * N * K <= SMALL_PAR_MIN || omp_in_parallel()) {
        tn_rows(0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rows);
        return;
    }
    if (M < SKINNY && !rows) { /* few rows of C: threads take its columns, 128 at a time (8 chains a row) */
        enum { COLS = 8 * VL };
        int64_t chunks = (N + COLS - 1) / COLS;
#pragma omp parallel for schedule(static)
        for (int64_t q = 0; q < chunks; q++) {
            int64_t n0 = q * COLS;
            tn_rows(0, M, N - n0 < COLS ? N - n0 : COLS, K, alpha, A, lda, B + n0, ldb, beta, C + n0, ldc, NULL);
        }
        return;
    }
    int64_t blocks = (M + TN_R - 1) / TN_R;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < blocks; i++)
        tn_rows(i * TN_R, (i + 1) * TN_R < M ? (i + 1) * TN_R : M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rows);
}

int tr_gemm_small_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                      int64_t ldc) {
    if (K == 0) return 0; /* BLAS: C = beta * C */
    if (!trans_a && trans_b && (M <= TR_GEMM_SMALL_MAX || N < SKINNY)) {
        gemm_nt(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return 1;
    }
    if (!trans_a && !trans_b && (M <= TR_GEMM_SMALL_MAX || K < SKINNY)) {
        gemm_nn(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return 1;
    }
    if (trans_a && !trans_b && (K <= TR_GEMM_SMALL_MAX || (M < SKINNY && K <= TN_KMAX))) {
        gemm_tn(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
        return 1;
    }
    return 0;
}

double tr_gemm_small_tn_sumsq_f32(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                  int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                  int64_t ldc, double *rows) {
    gemm_tn(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rows);
    double s = 0;
    for (int64_t m = 0; m < M; m++) s += rows[m]; /* in order: the same for any thread count */
    return s;
}

typedef float vf8 __attribute__((vector_size(8 * sizeof(float))));
typedef double vd8 __attribute__((vector_size(8 * sizeof(double))));

static inline vd8 vload8d(const float *p) {
    vf8 v;
    memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, vd8);
}

/* G[k][k'] for k <= k' (the upper triangle, K x K row-major): the dot products of X's rows of
 * length L, in double, row k against four rows at a time (each converted value of row k feeds
 * four multiply-adds). */
static void gram_rows(int64_t K, int64_t L, const float *X, int64_t ldx, double *G) {
    for (int64_t k = 0; k < K; k++) {
        const float *a = X + k * ldx;
        for (int64_t k2 = k; k2 < K; k2 += 4) {
            int nb = K - k2 < 4 ? (int)(K - k2) : 4;
            vd8 acc[4] = {{0}};
            double t[4] = {0};
            int64_t l = 0;
            for (; l + 8 <= L; l += 8) {
                vd8 x = vload8d(a + l);
                for (int j = 0; j < 4; j++) {
                    if (j >= nb) break;
                    acc[j] += x * vload8d(X + (k2 + j) * ldx + l);
                }
            }
            for (int j = 0; j < nb; j++) {
                for (int64_t i = l; i < L; i++) t[j] += (double)a[i] * (double)X[(k2 + j) * ldx + i];
                for (int i = 0; i < 8; i++) t[j] += acc[j][i];
                G[k * K + k2 + j] = t[j];
            }
        }
    }
}

double tr_gemm_small_tn_norm2_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                                  int64_t ldb) {
    double ga[TR_GEMM_SMALL_MAX * TR_GEMM_SMALL_MAX], gb[TR_GEMM_SMALL_MAX * TR_GEMM_SMALL_MAX];
    if (K > TR_GEMM_SMALL_MAX) return INFINITY;
    gram_rows(K, M, A, lda, ga);
    gram_rows(K, N, B, ldb, gb);
    double s = 0, ta = 0, tb = 0;
    for (int64_t k = 0; k < K; k++) {
        s += ga[k * K + k] * gb[k * K + k];
        for (int64_t k2 = k + 1; k2 < K; k2++) s += 2 * ga[k * K + k2] * gb[k * K + k2];
        ta += ga[k * K + k], tb += gb[k * K + k];
    }
    /* A NaN or infinity in A or B makes its Gram diagonal, and so s, not finite. Every product
     * and partial sum of the float GEMM is at most ||A|| ||B|| (Frobenius; Cauchy-Schwarz), the
     * square root of the traces' product. */
    if (!isfinite(s) || ta * tb > 1e74) return INFINITY;
    /* The terms' magnitudes add up to at most ta tb, and their rounding errors to about
     * K eps ta tb: where the sum cancels to below 1e-6 ta tb (samples whose contributions
     * nearly cancel), it would keep only a few digits, or come out negative. */
    if (!(s >= 1e-6 * ta * tb)) return INFINITY;
    return s;
}
