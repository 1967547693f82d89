/* f32 GEMM, C = alpha op(A) op(B) + beta C (row-major), blocked and packed for AVX-512, in
 * place of OpenBLAS's sgemm for the sizes the models run (tr_gemm_f32 and tr_gemm_linear_f32
 * send it everything gemm_small.c does not take, above a minimum size).
 *
 * The layout is the classic one (Goto; BLIS's five loops). For each block of nc columns of C
 * and kc of the depth: op(B)'s kc x nc block is packed into panels nr columns wide,
 * depth-major (a panel's nr values for one k side by side); then for each block of mc rows,
 * op(A)'s mc x kc block into panels mr rows wide, depth-major too; then an mr x nr tile of C
 * per pair of panels, its accumulators in registers. Two tiles (`geometry`), chosen from the
 * CPU at run time (choose()):
 *
 * - 16 x 16: per k one load of B's 16 values, 16 broadcasts of A's, 16 multiply-adds. 98% of
 *   a Zen 4 core's peak with its panels in L1 (115 of 117 GFLOP/s); on an Intel core with two
 *   512-bit FMA units it is bound by its 17 loads per 16 FMAs (64-72% of an Emerald Rapids
 *   core's peak on MiniLM's products).
 * - 12 x 32 (BLIS's AVX-512 sgemm shape, turned to row-major C): per k two loads of B, 12
 *   broadcasts of A, 24 multiply-adds; one A panel (12 x 384, 18 KiB) stays in L1 while the
 *   B block (384 x 768, 1.1 MiB) streams from L2; C's lines are prefetched before a tile.
 *   80-90% of that core's peak on the same products (docs/benchmarks-history.md, issue 46).
 *
 * Panels read across rows of their source (A not transposed, B transposed) are packed 16 rows
 * at a time through an in-register transpose; the others a depth (a source row) at a time,
 * so every pack is vector loads and stores reading its source in order.
 *
 * Why not OpenBLAS (0.3.21 here, its Cooperlake kernels on Zen 4): at this framework's shapes
 * it spends 8-10% of a transformer's step packing, and on 2 threads it splits small-M GEMMs
 * badly. Speed-ups per GEMM (OpenBLAS's time over ours, 1 / 2 threads; docs/benchmarks-history.md,
 * eleventh round): the transformer's linear layers 0.99-1.07x / 1.04-1.31x, the MLP's at batch
 * 128 1.04-1.09x / 1.13-1.60x, attention's per-head products 1.03-1.08x on one thread (where
 * training runs them: one head per thread).
 *
 * Threads: when called outside a parallel region with more than one OpenMP thread, C is split
 * into one slab of whole tiles' rows (or columns) per thread, along whichever of M and N is
 * longer, and each thread runs the whole blocked product on its slab with its own buffers (B's
 * or A's block packed once per thread: the price of no barrier). Each element of C is summed in
 * the same order whatever the split, the thread count or its place in a tile: k in blocks of
 * kc, each block's products chained in one register in k order, then alpha times the block's
 * sum added to C (the first block to beta C, or written when beta is 0), so results do not
 * depend on the thread count (only on K and the geometry, which the CPU decides), and a tile
 * of C computed alone equals the same tile of the whole (unless memory runs out: a thread
 * that cannot get its buffers leaves its slab to BLAS).
 * Small products (at most 256 x 256 x 128 multiply-adds, K <= 384: attention's per-head ones)
 * skip the transposing packs (gemm_direct: A read in place but for a last short panel, B's rows
 * read in place), at 1.2-1.5x the packed path's rate on them, with the same bits.
 * Inside a parallel region it runs on the calling thread. Pack buffers are per thread
 * (tr_malloc, held by a pthread key and freed when the thread exits), 2.2 MB, allocated on the
 * thread's first call. */
#include <string.h>

#include "kernels/gemm.h"
#include "trainer/memory.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>

#include "kernels/transpose16.h"

/* A tile's kernel and the blocking it is run with: op(B)'s panels are nr columns wide, op(A)'s
 * mr rows; kc deep, mc rows of op(A) and nc columns of op(B) packed at once; b_outer: the tile
 * loop keeps one B panel while it walks A's panels (else one A panel across B's). */
typedef void (*tile_fn)(int64_t kc, const float *a, const float *b, float *C, int64_t ldc, int64_t mr, int64_t nr,
                        float alpha, float beta, const float *bias);
typedef struct geometry {
    tile_fn tile;
    int mr, nr, b_outer;
    int64_t kc, mc, nc;
} geometry;

/* A caller's epilogue (tr_gemm_epilogue) and where the product being computed lies in the
 * whole C: a slab's row or column offset; fin() calls it on a block that is final. */
typedef struct epi_at {
    const tr_gemm_epilogue *e; /* NULL: none */
    float *C;                  /* the whole C's origin */
    int64_t ldc, r_off, c_off;
} epi_at;

static inline void fin(const epi_at *ep, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (ep->e && r1 > r0 && c1 > c0)
        ep->e->fn(ep->e->ctx, ep->C, ep->ldc, ep->r_off + r0, ep->r_off + r1, ep->c_off + c0, ep->c_off + c1);
}

/* Smallest product sent here: below it OpenBLAS's unpacked paths win (a 100 x 37 x 45 GEMM
 * took 1.4-1.8x OpenBLAS's time). */
#define PACKED_MIN_DIM 16
#define PACKED_MIN_WORK (64 * 64 * 64)

static inline __mmask16 first_lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* One panel w entries wide over depth kc from rows of its source: out[k * w + i] = x[i * ld +
 * k] for i < n (n <= w), zero up to w. Done 16 rows at a time through a transpose. */
static void pack_panel(const float *x, int64_t ld, int64_t n, int64_t kc, int w, float *out) {
    for (int h = 0; h < w; h += 16) {
        __mmask16 lanes = first_lanes(w - h);
        float *o = out + h;
        const float *xh = x + h * ld;
        for (int64_t k = 0; k < kc; k += 16) {
            __m512 r[16], col[16];
            __mmask16 mk = first_lanes(kc - k);
            for (int i = 0; i < 16; i++)
                r[i] = i < n - h ? _mm512_maskz_loadu_ps(mk, xh + i * ld + k) : _mm512_setzero_ps();
            tr_transpose16(r, col);
            if (kc - k >= 16) { /* whole: stored from registers */
                for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(o + (k + j) * w, lanes, col[j]);
            } else {
                for (int64_t j = 0; j < kc - k; j++) _mm512_mask_storeu_ps(o + (k + j) * w, lanes, col[j]);
            }
        }
    }
}

/* C's rows as written by a tile: C = alpha sum (+ bias, a value per column, when not NULL) +
 * beta C, C not read when beta is 0; mr rows, nr columns of it stored, c holding each row's
 * accumulators, `vecs` vectors a row. alpha sum + bias is one rounding, as beta C + alpha sum
 * is where C held the bias. */
static inline __attribute__((always_inline)) void store_rows(const __m512 *c, int vecs, float *C, int64_t ldc,
                                                             int64_t mr, int64_t nr, float alpha, float beta,
                                                             const float *bias) {
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta), bv[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    if (bias)
        for (int v = 0; v < vecs; v++) bv[v] = _mm512_maskz_loadu_ps(first_lanes(nr - 16 * v), bias + 16 * v);
    for (int64_t i = 0; i < mr; i++)
        for (int v = 0; v < vecs; v++) {
            float *ci = C + i * ldc + 16 * v;
            __mmask16 m = first_lanes(nr - 16 * v);
            __m512 r = _mm512_mul_ps(va, c[i * vecs + v]);
            if (bias) r = _mm512_add_ps(r, bv[v]);
            if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, ci), r);
            _mm512_mask_storeu_ps(ci, m, r);
        }
}

/* The 16 x 16 tile at C (mr rows and nr columns of it stored) from an A panel and a B panel
 * of depth kc >= 1. The first products start the sums (the same bits as adding them to zero,
 * without a zeroed array that gcc would memset on the stack). Per k: one load of B, 16
 * broadcasts of A, 16 multiply-adds. */
static void tile16x16(int64_t kc, const float *a, const float *b, float *C, int64_t ldc, int64_t mr, int64_t nr,
                      float alpha, float beta, const float *bias) {
    __m512 c[16];
    __m512 b0 = _mm512_load_ps(b);
    for (int i = 0; i < 16; i++) c[i] = _mm512_mul_ps(_mm512_set1_ps(a[i]), b0);
    for (int64_t k = 1; k < kc; k++) {
        __m512 bv = _mm512_load_ps(b + k * 16);
        for (int i = 0; i < 16; i++) c[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[k * 16 + i]), bv, c[i]);
    }
    store_rows(c, 1, C, ldc, mr, nr, alpha, beta, bias);
}

#define WIDE_MR 12
/* The WIDE_MR x 32 tile: per k two loads of B, WIDE_MR broadcasts of A, 2 WIDE_MR
 * multiply-adds, each element's chain the same as tile16x16's. C's lines are prefetched first:
 * a store that misses would stall the next tile's start. */
static void tile_wide(int64_t kc, const float *a, const float *b, float *C, int64_t ldc, int64_t mr, int64_t nr,
                      float alpha, float beta, const float *bias) {
    for (int64_t i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(C + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + i * ldc + 31), _MM_HINT_T0);
    }
    __m512 c[2 * WIDE_MR];
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    for (int i = 0; i < WIDE_MR; i++) {
        __m512 ai = _mm512_set1_ps(a[i]);
        c[2 * i] = _mm512_mul_ps(ai, b0);
        c[2 * i + 1] = _mm512_mul_ps(ai, b1);
    }
#pragma GCC unroll 4
    for (int64_t k = 1; k < kc; k++) {
        b0 = _mm512_load_ps(b + k * 32), b1 = _mm512_load_ps(b + k * 32 + 16);
        const float *ak = a + k * WIDE_MR;
        for (int i = 0; i < WIDE_MR; i++) {
            __m512 ai = _mm512_set1_ps(ak[i]);
            c[2 * i] = _mm512_fmadd_ps(ai, b0, c[2 * i]);
            c[2 * i + 1] = _mm512_fmadd_ps(ai, b1, c[2 * i + 1]);
        }
    }
    store_rows(c, 2, C, ldc, mr, nr, alpha, beta, bias);
}

static const geometry geometries[] = {
    [TR_GEMM_TILE_16X16] = {tile16x16, 16, 16, 1, 512, 64, 1024},
    [TR_GEMM_TILE_WIDE] = {tile_wide, WIDE_MR, 32, 0, 384, 192, 768},
};

static _Atomic int forced_tile;

int tr_gemm_packed_tile(int tile) {
    int old = forced_tile;
    forced_tile = tile;
    return old;
}

/* The tile for this CPU, unless a test forced one: the 16 x 16 where it was measured near the
 * peak (AMD's Zen 4, one 512-bit multiply-add a cycle), else the wide one (Intel's cores with
 * two 512-bit FMA units, where the 16 x 16 is bound by its loads). */
static const geometry *choose(void) {
    int t = forced_tile;
    if (t != TR_GEMM_TILE_16X16 && t != TR_GEMM_TILE_WIDE) {
        __builtin_cpu_init();
        t = __builtin_cpu_is("amd") ? TR_GEMM_TILE_16X16 : TR_GEMM_TILE_WIDE;
    }
    return &geometries[t];
}

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static int buf_key_ok;

static void make_key(void) { buf_key_ok = pthread_key_create(&buf_key, tr_free) == 0; }

/* The larger geometry's: 16 x 16's B block of 1024 x 512 and A block of 64 x 512. */
#define BUF_FLOATS ((size_t)1024 * 512 + (size_t)64 * 512)
_Static_assert(768 * 384 + 192 * 384 <= BUF_FLOATS, "the 12 x 32 geometry's blocks fit the pack buffers");

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

/* n entries of a block (n > 0) in panels w wide (the last zero-padded), each kc deep, one after
 * another at out (panel p at out + p w kc). Entry i, depth k of the block is at x[i * ld + k]
 * when across (its entries are rows of the source), else at x[k * ld + i]. Across, panel by
 * panel (pack_panel); else depth by depth, so that each row of the source is read once from
 * start to end (panel by panel would read w entries from each of kc rows, strided), with the
 * row PACK_AHEAD below prefetched: the source is usually in L3, and the rows, a page or more
 * apart, are each a new stream to the hardware prefetcher (3-4% on dY^T X's products, whose
 * packing reads K = 4096 rows of both operands). */
#define PACK_AHEAD 4
static void pack_block(const float *x, int64_t ld, int across, int64_t n, int64_t kc, int w, float *out) {
    if (across) {
        for (int64_t p = 0; p < n; p += w) pack_panel(x + p * ld, ld, n - p < w ? n - p : w, kc, w, out + p * kc);
        return;
    }
    for (int64_t k = 0; k < kc; k++) {
        if (k + PACK_AHEAD < kc)
            for (int64_t i = 0; i < n; i += 16)
                _mm_prefetch((const char *)(x + (k + PACK_AHEAD) * ld + i), _MM_HINT_T0);
        for (int64_t p = 0; p < n; p += w)
            for (int h = 0; h < w; h += 16)
                _mm512_mask_storeu_ps(out + p * kc + k * w + h, first_lanes(w - h),
                                      _mm512_maskz_loadu_ps(first_lanes(n - p - h), x + k * ld + p + h));
    }
}

/* The whole blocked product on the calling thread; bias (NULL: none) added with the first
 * block of the depth; the epilogue called on each row panel (column panel, b_outer) of a
 * column block once the last block of the depth has been stored in it, while it is in cache. */
static void gemm_one(const geometry *g, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const float *bias,
                     float *buf, const epi_at *ep) {
    const int64_t MR = g->mr, NR = g->nr, KC = g->kc, MC = g->mc, NC = g->nc;
    float *pb = buf, *pa = buf + (size_t)NC * KC;
    for (int64_t j0 = 0; j0 < N; j0 += NC) {
        int64_t nc = N - j0 < NC ? N - j0 : NC;
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
            int64_t kc = K - p0 < KC ? K - p0 : KC;
            float bk = p0 ? 1.0f : beta;
            const float *bb = p0 ? NULL : bias;
            int last = p0 + kc == K;
            pack_block(tb ? B + j0 * ldb + p0 : B + p0 * ldb + j0, ldb, tb, nc, kc, (int)NR, pb);
            for (int64_t i0 = 0; i0 < M; i0 += MC) {
                int64_t mc = M - i0 < MC ? M - i0 : MC;
                pack_block(ta ? A + p0 * lda + i0 : A + i0 * lda + p0, lda, !ta, mc, kc, (int)MR, pa);
                if (g->b_outer) {
                    for (int64_t jr = 0; jr < nc; jr += NR) {
                        for (int64_t ir = 0; ir < mc; ir += MR)
                            g->tile(kc, pa + ir * kc, pb + jr * kc, C + (i0 + ir) * ldc + j0 + jr, ldc,
                                    mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR, alpha, bk,
                                    bb ? bb + j0 + jr : NULL);
                        if (last) fin(ep, i0, i0 + mc, j0 + jr, j0 + (nc - jr < NR ? nc : jr + NR));
                    }
                } else {
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        for (int64_t jr = 0; jr < nc; jr += NR)
                            g->tile(kc, pa + ir * kc, pb + jr * kc, C + (i0 + ir) * ldc + j0 + jr, ldc,
                                    mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR, alpha, bk,
                                    bb ? bb + j0 + jr : NULL);
                        if (last) fin(ep, i0 + ir, i0 + (mc - ir < MR ? mc : ir + MR), j0, j0 + nc);
                    }
                }
            }
        }
    }
}

/* Small products without the transposing packs (gemm_direct): the same WIDE_MR x 32 tile with
 * A read where it lies. A's rows (A not transposed) are read in place, lda apart: the twelve
 * broadcasts of a depth come from four pointers (rows 0, 3, 6, 9) with 0, 1 or 2 strides as an
 * index (direct_rows). A stored transposed is read in place too, its twelve values of a depth
 * side by side (direct_cols: value (i, k) at a[k * ak + i]). B's row k of the panel is at b +
 * k * bk: B's own rows (bk ldb) or a packed panel (bk 32: B stored transposed, or B's last
 * panel short of 32 columns, zero-padded). B takes plain loads: with masked ones gcc kept the
 * accumulators on the stack, storing them every step (half speed). Every element is the chain
 * of the packed tile with one depth block (K <= kc), so the bits are the packed GEMM's. Rows
 * read in place cost attention's products nothing where copying them (q's rows, and the
 * probabilities P for P v) took 2.3% of an all-MiniLM-L6-v2 embedding. */
#define DIRECT_KMAX 384
static inline __attribute__((always_inline)) void direct_body(int64_t kc, const float *a, int64_t ak, int64_t ai,
                                                              const float *b, int64_t bk, float *C, int64_t ldc,
                                                              int64_t mr, int64_t nr, float alpha, float beta,
                                                              const float *bias) {
    const float *p[4] = {a, a + 3 * ai, a + 6 * ai, a + 9 * ai};
    __m512 c[2 * WIDE_MR];
    __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    for (int i = 0; i < WIDE_MR; i++) {
        __m512 av = _mm512_set1_ps(p[i / 3][i % 3 * ai]);
        c[2 * i] = _mm512_mul_ps(av, b0);
        c[2 * i + 1] = _mm512_mul_ps(av, b1);
    }
#pragma GCC unroll 4
    for (int64_t k = 1; k < kc; k++) {
        b0 = _mm512_loadu_ps(b + k * bk), b1 = _mm512_loadu_ps(b + k * bk + 16);
        for (int i = 0; i < WIDE_MR; i++) {
            __m512 av = _mm512_set1_ps(p[i / 3][i % 3 * ai + k * ak]);
            c[2 * i] = _mm512_fmadd_ps(av, b0, c[2 * i]);
            c[2 * i + 1] = _mm512_fmadd_ps(av, b1, c[2 * i + 1]);
        }
    }
    store_rows(c, 2, C, ldc, mr, nr, alpha, beta, bias);
}

/* A's rows lda apart. */
static void direct_rows(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bk, float *C, int64_t ldc,
                        int64_t mr, int64_t nr, float alpha, float beta, const float *bias) {
    direct_body(kc, a, 1, lda, b, bk, C, ldc, mr, nr, alpha, beta, bias);
}

/* A's depths ak apart, a depth's twelve values side by side. */
static void direct_cols(int64_t kc, const float *a, int64_t ak, const float *b, int64_t bk, float *C, int64_t ldc,
                        int64_t mr, int64_t nr, float alpha, float beta, const float *bias) {
    direct_body(kc, a, ak, 1, b, bk, C, ldc, mr, nr, alpha, beta, bias);
}

/* Products this small (multiply-adds) with K within one depth block skip the transposing packs:
 * attention's per-head products (128 x 128 x 32 at all-MiniLM-L6-v2's heads) spent a third of
 * their time packing operands that a few tiles each then used. */
#define DIRECT_MAX_WORK ((double)256 * 256 * 128)

/* Floats of gemm_direct's buffers: B's panels (B stored transposed), one A panel, and B's last
 * panel zero-padded (B's own rows, its last panel short of 32 columns). */
static double direct_floats(int64_t N, int64_t K) {
    return (double)((N + 31) / 32 * 32) * (double)K + (double)WIDE_MR * DIRECT_KMAX + 32.0 * (double)K;
}

/* The whole product on the calling thread, the wide geometry's tile; buf: direct_floats. */
static void gemm_direct(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const float *bias,
                        float *buf, const epi_at *ep) {
    const int64_t NR = 32;
    float *pa = buf + (tb ? (N + NR - 1) / NR * NR * K : 0), *pt = pa + WIDE_MR * DIRECT_KMAX;
    if (tb) pack_block(B, ldb, 1, N, K, (int)NR, buf);
    else if (N % NR) pack_block(B + N / NR * NR, ldb, 0, N % NR, K, (int)NR, pt); /* the short last panel */
    for (int64_t ir = 0; ir < M; ir += WIDE_MR) {
        int64_t mr = M - ir < WIDE_MR ? M - ir : WIDE_MR;
        const float *a = pa;
        int64_t ak = WIDE_MR;
        if (!ta && mr == WIDE_MR) {
            a = A + ir * lda, ak = lda;
        } else if (!ta) { /* the last rows: copied K apart, the missing ones zero */
            for (int64_t i = 0; i < WIDE_MR; i++)
                for (int64_t k = 0; k < K; k += 16)
                    _mm512_mask_storeu_ps(pa + i * K + k, first_lanes(K - k),
                                          i < mr ? _mm512_maskz_loadu_ps(first_lanes(K - k), A + (ir + i) * lda + k)
                                                 : _mm512_setzero_ps());
            ak = K;
        } else if (mr == WIDE_MR) {
            a = A + ir, ak = lda;
        } else { /* the last columns: a packed panel, nothing read past them */
            pack_block(A + ir, lda, 0, mr, K, WIDE_MR, pa);
        }
        for (int64_t jr = 0; jr < N; jr += NR) {
            int64_t nr = N - jr < NR ? N - jr : NR;
            const float *b = tb ? buf + jr * K : nr < NR ? pt : B + jr, *bb = bias ? bias + jr : NULL;
            int64_t bk = tb || nr < NR ? NR : ldb;
            if (ta)
                direct_cols(K, a, ak, b, bk, C + ir * ldc + jr, ldc, mr, nr, alpha, beta, bb);
            else
                direct_rows(K, a, ak, b, bk, C + ir * ldc + jr, ldc, mr, nr, alpha, beta, bb);
        }
        fin(ep, ir, ir + mr, 0, N);
    }
}

/* Slab t of n: whole tiles [tiles t / n, tiles (t + 1) / n) of C's rows (by_rows) or columns,
 * computed on the calling thread; by BLAS when the thread has no pack buffers. */
static void slab(const geometry *g, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const float *bias,
                 int by_rows, int64_t tiles, int t, int n, int direct, const tr_gemm_epilogue *e) {
    int64_t side = by_rows ? g->mr : g->nr;
    int64_t lo = tiles * t / n * side, hi = tiles * (t + 1) / n * side, len = by_rows ? M : N;
    float *C0 = C;
    if (hi > len) hi = len;
    if (by_rows)
        A = ta ? A + lo : A + lo * lda, C = C + lo * ldc, M = hi - lo;
    else
        B = tb ? B + lo * ldb : B + lo, C = C + lo, N = hi - lo, bias = bias ? bias + lo : NULL;
    if (hi <= lo) return;
    const epi_at ep = {e, C0, ldc, by_rows ? lo : 0, by_rows ? 0 : lo};
    float *buf = thread_buffers();
    if (buf && direct) {
        gemm_direct(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, buf, &ep);
    } else if (buf) {
        gemm_one(g, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, buf, &ep);
    } else { /* no memory for this thread's buffers */
        if (bias) {
            for (int64_t i = 0; i < M; i++) memcpy(C + i * ldc, bias, (size_t)N * sizeof *C);
            beta = 1;
        }
        tr_gemm_blas_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        fin(&ep, 0, M, 0, N);
    }
}

static int packed(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const float *bias,
                  const tr_gemm_epilogue *e) {
    /* alpha 0 must not read A and B (BLAS): left to BLAS, as are the small products */
    if (alpha == 0.0f || M < PACKED_MIN_DIM || N < PACKED_MIN_DIM || K < PACKED_MIN_DIM ||
        (double)M * (double)N * (double)K < (double)PACKED_MIN_WORK)
        return 0;
    const geometry *g = choose();
    int direct = g->tile == tile_wide && K <= DIRECT_KMAX && (double)M * (double)N * (double)K <= DIRECT_MAX_WORK &&
                 direct_floats(N, K) <= (double)BUF_FLOATS;
    int by_rows = M >= N;
    int64_t side = by_rows ? g->mr : g->nr;
    int64_t tiles = ((by_rows ? M : N) + side - 1) / side;
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > tiles) threads = (int)tiles;
    if (threads <= 1) { /* alone: without buffers the whole product is left to the caller's BLAS */
        if (!thread_buffers()) return 0;
        slab(g, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, by_rows, tiles, 0, 1, direct, e);
        return 1;
    }
#pragma omp parallel num_threads(threads)
    slab(g, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, by_rows, tiles,
         omp_get_thread_num(), omp_get_num_threads(), direct, e);
    return 1;
}

int tr_gemm_packed_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

int tr_gemm_packed_linear_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                              int64_t ldb, const float *bias, float *C, int64_t ldc, const tr_gemm_epilogue *epi) {
    return packed(0, 1, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, bias, epi);
}

#else

int tr_gemm_packed_linear_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                              int64_t ldb, const float *bias, float *C, int64_t ldc, const tr_gemm_epilogue *epi) {
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)bias, (void)C, (void)ldc, (void)epi;
    return 0;
}

int tr_gemm_packed_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return 0;
}

#endif
