/* f32 GEMM for attention's per-head products (C = alpha op(A) op(B) + beta C, row-major), one
 * thread, without packing the operand that costs most to pack.
 *
 * A head's products are small (128 x 128 x 32 for all-MiniLM-L6-v2) and two of them take the
 * probabilities (T x S) as A: gemm_packed.c would transpose all of them into panels first,
 * a pass as long as a quarter of the product. Here the 12 x 32 tile broadcasts A's values
 * straight from its rows (or, transposed, from one row of A^T) and loads B's rows as they are;
 * only a transposed B (the q k^T and dout v^T products: B is k or v, S x D, small) is packed,
 * 32 columns a panel, into a buffer of the thread's (held by a pthread key, grown to the
 * largest B seen, freed when the thread exits). Each element of C is one chain of
 * multiply-adds in k order (the first a product), then C = alpha sum + beta C.
 * TRAINER_CPU_ATTN_KERNEL=gemm turns it off (tr_gemm_head_f32 returns 0: the caller's GEMM),
 * so that tests reach both paths. */
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "trainer/memory.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#include <pthread.h>

#include "kernels/transpose16.h"

#define MR 12
#define NR 32

static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* The tile: rows [0, mr) of C (mr <= MR), columns [0, nr) (nr <= NR). A's value (i, k) at
 * a[i * sa + k * sk], B's row k at b + k * ldb. */
static inline __attribute__((always_inline)) void tile(int64_t K, const float *a, int64_t sa, int64_t sk,
                                                       const float *b, int64_t ldb, float *C, int64_t ldc, int mr,
                                                       int64_t nr, float alpha, float beta) {
    __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
    const float *ar[MR];
    for (int i = 0; i < MR; i++) ar[i] = a + (i < mr ? i : mr - 1) * sa;
    __m512 c[2 * MR];
    __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
    for (int i = 0; i < MR; i++) {
        __m512 ai = _mm512_set1_ps(ar[i][0]);
        c[2 * i] = _mm512_mul_ps(ai, b0);
        c[2 * i + 1] = _mm512_mul_ps(ai, b1);
    }
#pragma GCC unroll 4
    for (int64_t k = 1; k < K; k++) {
        b0 = _mm512_maskz_loadu_ps(m0, b + k * ldb), b1 = _mm512_maskz_loadu_ps(m1, b + k * ldb + 16);
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(ar[i][k * sk]);
            c[2 * i] = _mm512_fmadd_ps(ai, b0, c[2 * i]);
            c[2 * i + 1] = _mm512_fmadd_ps(ai, b1, c[2 * i + 1]);
        }
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int i = 0; i < mr; i++) {
        float *ci = C + i * ldc;
        __m512 r0 = _mm512_mul_ps(va, c[2 * i]), r1 = _mm512_mul_ps(va, c[2 * i + 1]);
        if (beta != 0.0f) {
            r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), r0);
            r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), r1);
        }
        _mm512_mask_storeu_ps(ci, m0, r0);
        _mm512_mask_storeu_ps(ci + 16, m1, r1);
    }
}

/* The tile with A as stored (row i at a + i lda, its k-th value next) or transposed (A^T
 * stored: (i, k) at a + k lda + i): two instances, each with its strides known. */
static void tile_rows(int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb, float *C, int64_t ldc,
                      int mr, int64_t nr, float alpha, float beta) {
    if (mr == MR) tile(K, a, lda, 1, b, ldb, C, ldc, MR, nr, alpha, beta); /* the rows' pointers known */
    else tile(K, a, lda, 1, b, ldb, C, ldc, mr, nr, alpha, beta);
}
static void tile_cols(int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb, float *C, int64_t ldc,
                      int mr, int64_t nr, float alpha, float beta) {
    if (mr == MR) tile(K, a, 1, lda, b, ldb, C, ldc, MR, nr, alpha, beta); /* one pointer, 12 offsets */
    else tile(K, a, 1, lda, b, ldb, C, ldc, mr, nr, alpha, beta);
}

/* B^T's panels: B stored (N, K) (row j at b + j ldb); panel p holds columns [32 p, 32 p + 32)
 * of op(B), depth-major: out[p 32 K + k 32 + jj] = b[(32 p + jj) ldb + k], zero past N. */
static void pack_bt(const float *b, int64_t ldb, int64_t N, int64_t K, float *out) {
    for (int64_t j0 = 0; j0 < N; j0 += 16) {
        float *o = out + (j0 / NR) * NR * K + j0 % NR;
        for (int64_t k = 0; k < K; k += 16) {
            __m512 r[16], col[16];
            __mmask16 mk = lanes(K - k);
            for (int i = 0; i < 16; i++)
                r[i] = j0 + i < N ? _mm512_maskz_loadu_ps(mk, b + (j0 + i) * ldb + k) : _mm512_setzero_ps();
            tr_transpose16(r, col);
            for (int64_t j = 0; j < 16 && k + j < K; j++) _mm512_storeu_ps(o + (k + j) * NR, col[j]);
        }
    }
}

/* This thread's pack buffer of at least n floats: {capacity, floats...}; NULL without memory. */
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static int buf_key_ok;

static void make_key(void) { buf_key_ok = pthread_key_create(&buf_key, tr_free) == 0; }

static float *pack_buffer(size_t n) {
    pthread_once(&buf_once, make_key);
    if (!buf_key_ok) return NULL;
    size_t *buf = pthread_getspecific(buf_key);
    if (buf && buf[0] >= n) return (float *)(buf + 8);
    size_t *grown = tr_malloc(8 * sizeof(size_t) + n * sizeof(float));
    if (!grown || pthread_setspecific(buf_key, grown) != 0) {
        tr_free(grown);
        return NULL;
    }
    tr_free(buf);
    grown[0] = n;
    return (float *)(grown + 8);
}

static int enabled(void) {
    static _Atomic int on = -1;
    if (on < 0) {
        const char *e = getenv("TRAINER_CPU_ATTN_KERNEL");
        on = !(e && strcmp(e, "gemm") == 0);
    }
    return on;
}

int tr_gemm_head_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0 || K <= 0 || !enabled()) return 0;
    float *pack = NULL;
    if (trans_b) {
        if (!(pack = pack_buffer((size_t)((N + NR - 1) / NR * NR) * (size_t)K))) return 0;
        pack_bt(B, ldb, N, K, pack);
    }
    for (int64_t j0 = 0; j0 < N; j0 += NR) {
        int64_t nr = N - j0 < NR ? N - j0 : NR;
        const float *b = trans_b ? pack + j0 * K : B + j0;
        int64_t bs = trans_b ? NR : ldb;
        for (int64_t i0 = 0; i0 < M; i0 += MR) {
            int mr = M - i0 < MR ? (int)(M - i0) : MR;
            if (trans_a)
                tile_cols(K, A + i0, lda, b, bs, C + i0 * ldc + j0, ldc, mr, nr, alpha, beta);
            else
                tile_rows(K, A + i0 * lda, lda, b, bs, C + i0 * ldc + j0, ldc, mr, nr, alpha, beta);
        }
    }
    return 1;
}

#else

int tr_gemm_head_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return 0;
}

#endif
