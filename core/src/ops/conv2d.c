/* 2-D convolution, NCHW, one stride and one zero padding for both dims; no dilation or
 * groups. Images go in chunks: im2col of a chunk into one (C*KH*KW, chunk*OH*OW) buffer, then
 * one BLAS GEMM with the weight; backward recomputes the col buffer (cheaper than keeping it),
 * makes the weight gradient with one GEMM per chunk and sums the input gradient back from the
 * GEMM's dcol (col2im). Chunks are sized to stay in L2 (below) yet give a GEMM a few hundred
 * columns or more, and the buffers (from the arena) stay small whatever the batch. Inputs
 * with few channels at stride 1 skip im2col for the output and the parameter gradients
 * (ops/conv2d_direct.c). */
#include <assert.h>
#include <omp.h>
#include <string.h>

#include "autograd/node.h"
#include "kernels/gemm.h"
#include "ops/batch_norm.h"
#include "ops/conv2d_direct.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

/* A chunk's buffers, col (C*KH*KW, cols) and y (OC, cols), are sized to stay in a core's L2
 * cache (about CONV_CHUNK_BYTES) while im2col writes them and the GEMM reads them, with at
 * least CONV_CHUNK_MIN_COLS GEMM columns. Larger chunks (4096 columns: 4.6 MB for a 32-channel
 * 3x3 input) made every im2col store miss L2: FashionCNN trained 10% slower. */
#define CONV_CHUNK_BYTES (1 << 20)
#define CONV_CHUNK_MIN_COLS 256

/* Output columns [lo, hi) whose tap kw reads a real input column (not padding). */
static void conv_valid_range(int64_t *lo, int64_t *hi, int64_t kw, int64_t W, int64_t OW,
                             int64_t S, int64_t P) {
    /* iw = ow*S - P + kw must lie in [0, W) */
    int64_t a = P - kw, b = W - 1 + P - kw;
    int64_t l = a <= 0 ? 0 : (a + S - 1) / S;
    int64_t h = b < 0 ? 0 : b / S + 1;
    if (h > OW) h = OW;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Images per chunk: at least one. */
static int64_t conv_chunk(const conv_dims *d, size_t elem) {
    int64_t P = d->OH * d->OW, rows = d->C * d->KH * d->KW + d->OC;
    int64_t cols = CONV_CHUNK_BYTES / (rows * (int64_t)elem);
    if (cols < CONV_CHUNK_MIN_COLS) cols = CONV_CHUNK_MIN_COLS;
    int64_t nc = P > 0 ? cols / P : 1;
    if (nc < 1) nc = 1;
    return nc < d->N ? nc : (d->N > 0 ? d->N : 1);
}

/* Reals of scratch per worker, forward and backward: col (CKK, chunk) and y or dy (OC,
 * chunk), then a worker's own weight and bias gradients (OC, CKK + 1). */
static int64_t conv_worker_reals(const conv_dims *d, size_t elem) {
    int64_t CKK = d->C * d->KH * d->KW;
    return (CKK + d->OC) * conv_chunk(d, elem) * d->OH * d->OW + d->OC * (CKK + 1);
}

/* Threads that each take whole chunks: all of them when every one gets two chunks or more
 * (their GEMMs then run single-threaded, without BLAS's per-call thread hand-offs, which at
 * these sizes cost more than they save), else 1 (BLAS threads each chunk's GEMMs). */
static int64_t conv_workers(const conv_dims *d, size_t elem) {
    int64_t T = omp_in_parallel() || !tr_gemm_nestable() ? 1 : omp_get_max_threads();
    int64_t nc = conv_chunk(d, elem), chunks = (d->N + nc - 1) / nc;
    return T > 1 && chunks >= 2 * T ? T : 1;
}

/* The step's scratch for `*workers` threads (conv_workers, decided once per call). */
static void *conv_scratch(tr_graph *g, const conv_dims *d, size_t elem, int64_t *workers) {
    *workers = conv_workers(d, elem);
    return op_data(g, (size_t)(*workers * conv_worker_reals(d, elem)) * elem);
}

#define CONV_LANES 16  /* lanes of the bias gradient's sums */

/* Short rows: im2col and col2im move rows of OW values (12 to 28 in small CNNs), where a
 * plain loop spends more on its vector prologue and scalar tail than on the copy. Plain
 * loops serve f64 always (a dtype for gradient checks, and the reference the f32 vector paths
 * are tested against) and f32 without AVX-512; with AVX-512, f32 copies a row as full vectors
 * and one masked one (masked-off lanes are neither read nor written), and col2im at stride 1
 * runs in gather form, so that f32 never adds rows one by one there. */
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* What the vector im2col (conv_im2col_vec) needs besides the dims: it depends on OH and OW
 * only, so it is worked out once per chunk of images (conv_vec_plan), not per image. */
#define CONV_VEC_MAX 16
typedef struct conv_vec_plan {
    int ok; /* 0: im2col copies row by row */
#if defined(__AVX512F__)
    int64_t nv, r0[CONV_VEC_MAX];
    __m512i idx[CONV_VEC_MAX];
    __mmask16 rowm, last;
#endif
} conv_vec_plan;

#define CONV_ROW_ADD(type, sfx)                                                               \
    static inline void conv_row_add_##sfx(type *dst, const type *src, int64_t n) {          \
        for (int64_t i = 0; i < n; i++) dst[i] += src[i];                                     \
    }
#define CONV_PLAIN_ROWS(type, sfx)                                                            \
    static inline void conv_row_copy_##sfx(type *dst, const type *src, int64_t n) {         \
        for (int64_t i = 0; i < n; i++) dst[i] = src[i];                                      \
    }                                                                                         \
    static int conv_col2im_gather_##sfx(type *dx, const type *dcol, int64_t ld,             \
                                        const conv_dims *d, int acc) {                        \
        (void)dx, (void)dcol, (void)ld, (void)d, (void)acc;                                   \
        return 0; /* not in gather form: the caller scatters with conv_row_add */            \
    }                                                                                         \
    static void conv_vec_plan_##sfx(conv_vec_plan *pl, const conv_dims *d) {                \
        (void)d;                                                                              \
        pl->ok = 0; /* row by row: im2col copies with conv_row_copy */                        \
    }                                                                                         \
    static int conv_im2col_vec_##sfx(type *col, int64_t ld, const type *x,                   \
                                     const conv_dims *d, const conv_vec_plan *pl) {           \
        (void)col, (void)ld, (void)x, (void)d, (void)pl;                                      \
        return 0;                                                                             \
    }
CONV_ROW_ADD(float, f32)
CONV_ROW_ADD(double, f64)
CONV_PLAIN_ROWS(double, f64)

#if defined(__AVX512F__)
static inline void conv_row_copy_f32(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
    }
}

/* Lanes [a, b) of a 16-lane mask. */
static inline __mmask16 conv_lanes16(int64_t a, int64_t b) {
    if (a < 0) a = 0;
    if (b > 16) b = 16;
    if (a >= b) return 0;
    return (__mmask16)(((1u << b) - 1u) & ~((1u << a) - 1u));
}

/* col2im at stride 1 in gather form: each row of dx is summed in registers from the dcol
 * values that land on it and stored once (set, or added to when acc), where the scatter form
 * adds row after row into overlapping stretches of dx and each load waits on the previous
 * row's store (a failed store-to-load forward: 75% of col2im's time). Lane iw of a vector
 * reads dcol row (c, kh, kw) at output (ih + P - kh, iw + P - kw), masked to the outputs that
 * exist; masked-off lanes are never read. Returns 1, or 0 where it does not apply. */
static int conv_col2im_gather_f32(float *dx, const float *dcol, int64_t ld, const conv_dims *d,
                                  int acc) {
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH,
                  OW = d->OW, P = d->P;
    if (d->S != 1) return 0;
    for (int64_t c = 0; c < C; c++) {
        for (int64_t ih = 0; ih < H; ih++) {
            float *xr = dx + (c * H + ih) * W;
            for (int64_t iw0 = 0; iw0 < W; iw0 += 16) {
                __mmask16 mrow = conv_lanes16(0, W - iw0);
                __m512 s = acc ? _mm512_maskz_loadu_ps(mrow, xr + iw0) : _mm512_setzero_ps();
                for (int64_t kh = 0; kh < KH; kh++) {
                    int64_t oh = ih + P - kh;
                    if (oh < 0 || oh >= OH) continue;
                    for (int64_t kw = 0; kw < KW; kw++) {
                        /* lane l is output column ow = iw0 + l + P - kw */
                        int64_t ow0 = iw0 + P - kw;
                        __mmask16 m = mrow & conv_lanes16(-ow0, OW - ow0);
                        if (!m) continue;
                        const float *r = dcol + ((c * KH + kh) * KW + kw) * ld + oh * OW;
                        s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, r + ow0));
                    }
                }
                _mm512_mask_storeu_ps(xr + iw0, mrow, s);
            }
        }
    }
    return 1;
}
/* im2col at stride 1 without padding, for outputs at most 16 wide and at most 256 per
 * image (FashionCNN's second conv: 12x12): a col row (c, kh, kw) is the OH x OW window of
 * channel c at (kh, kw), flattened. Row by row that is OH masked stores of OW values, half
 * of them split over two cache lines; here every 16 outputs are one full store, permuted
 * from the two input rows they come from (this holds when no 16 consecutive outputs span
 * three rows). Masked loads read only the window's OW columns of a row. conv_vec_plan_f32
 * works out the permutations (ok 0 where this does not apply); conv_im2col_vec_f32 returns
 * 1, or 0 without a plan. */
static void conv_vec_plan_f32(conv_vec_plan *pl, const conv_dims *d) {
    const int64_t OH = d->OH, OW = d->OW, P = OH * OW, nv = (P + 15) / 16;
    pl->ok = 0;
    if (d->S != 1 || d->P != 0 || OW > 16 || nv > CONV_VEC_MAX) return;
    int32_t lanes[16];
    for (int64_t j = 0; j < nv; j++) {
        pl->r0[j] = 16 * j / OW;
        for (int64_t l = 0; l < 16; l++) {
            int64_t e = 16 * j + l, r = e / OW - pl->r0[j];
            if (e < P && r > 1) return;
            lanes[l] = e < P ? (int32_t)(r * 16 + e % OW) : 0;
        }
        pl->idx[j] = _mm512_loadu_si512(lanes);
    }
    pl->nv = nv;
    pl->rowm = (__mmask16)((1u << OW) - 1u);
    pl->last = conv_lanes16(0, P - 16 * (nv - 1));
    pl->ok = 1;
}

static int conv_im2col_vec_f32(float *col, int64_t ld, const float *x, const conv_dims *d, const conv_vec_plan *pl) {
    if (!pl->ok) return 0;
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, nv = pl->nv;
    for (int64_t c = 0; c < C; c++) {
        for (int64_t kh = 0; kh < KH; kh++) {
            for (int64_t kw = 0; kw < KW; kw++) {
                const float *src = x + (c * H + kh) * W + kw;
                float *dst = col + ((c * KH + kh) * KW + kw) * ld;
                for (int64_t j = 0; j < nv; j++) {
                    __m512 a = _mm512_maskz_loadu_ps(pl->rowm, src + pl->r0[j] * W);
                    __m512 b = pl->r0[j] + 1 < OH ? _mm512_maskz_loadu_ps(pl->rowm, src + (pl->r0[j] + 1) * W)
                                                  : _mm512_setzero_ps();
                    __m512 v = _mm512_permutex2var_ps(a, pl->idx[j], b);
                    if (j + 1 < nv) _mm512_storeu_ps(dst + 16 * j, v);
                    else _mm512_mask_storeu_ps(dst + 16 * j, pl->last, v);
                }
            }
        }
    }
    return 1;
}
#else
CONV_PLAIN_ROWS(float, f32)
#endif

#define TR_GENERIC "ops/conv2d.inc"
#include "ops/generic.h"

static conv_dims conv_dims_of(const tr_tensor *x, const tr_tensor *w, int64_t S, int64_t P) {
    conv_dims d = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
                   .OC = w->shape[0], .KH = w->shape[2], .KW = w->shape[3], .S = S, .P = P};
    d.OH = (d.H + 2 * P - d.KH) / S + 1;
    d.OW = (d.W + 2 * P - d.KW) / S + 1;
    return d;
}

/* conv2d's backward, the output gradient read from n->out->grad, or (make not NULL) made plane
 * by plane by make into the kernels' scratch (conv2d_backward_from). */
static void conv2d_backward_with(tr_graph *g, tr_node *n, conv_dy_plane_fn make, void *ctx) {
    tr_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    conv_dims d = conv_dims_of(x, w, n->i[0], n->i[1]);
    const void *dout = make ? NULL : n->out->grad;
    int acc;
    void *dx = op_grad_write(g, x, &acc), *dw = op_grad(g, w), *db = b ? op_grad(g, b) : NULL;
    if ((!dx && !dw && !db) || d.N == 0) return;
    const tr_kernels *k = op_kernels(g);
    if (k) { /* a device's kernels, with their scratch (no plane producer: conv2d_takes_planes) */
        assert(!make);
        void *work;
        if (op_work(g, k->conv2d_work(&d), &work)) k->conv2d_backward(dx, dw, db, dout, x->data, w->data, work, &d, acc);
        return;
    }
    size_t elem = tr_dtype_size(x->dtype), direct = conv_direct_scratch(&d, elem);
    if (direct && (dw || db)) { /* few input channels: weight and bias gradients directly */
        float *sc = op_data(g, direct * sizeof(float));
        if (!sc) return;
        conv_direct_backward_params_f32(dw, db, dout, make, ctx, x->data, sc, &d);
        dw = db = NULL;
        if (!dx) return;
    }
    int64_t workers;
    void *scratch = conv_scratch(g, &d, elem, &workers);
    if (!scratch) return;
    TR_DISPATCH(x->dtype, conv2d_backward, dx, dw, db, dout, make, ctx, x->data, w->data, scratch, &d,
                acc, workers);
}

static void conv2d_backward(tr_graph *g, tr_node *n) { conv2d_backward_with(g, n, NULL, NULL); }

int conv2d_takes_planes(const tr_node *n) {
    return n && n->backward == conv2d_backward && n->in[0]->dtype == TR_F32 && !n->in[0]->device.kind;
}

void conv2d_backward_from(tr_graph *g, tr_node *n, conv_dy_plane_fn make, void *ctx) {
    for (int i = 0; i < TR_NODE_MAX_IN; i++)
        if (n->in[i] && !op_use(g, n->in[i])) return;
    conv2d_backward_with(g, n, make, ctx);
}

tr_tensor *tr_conv2d(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, int stride,
                     int padding) {
    if (!op_check(g, "conv2d", b ? 3 : 2, x, w, b)) return NULL;
    if (!OP_DEVICE(g, "conv2d", conv2d_work, conv2d_forward, conv2d_backward)) return NULL;
    if (x->ndim != 4 || w->ndim != 4)
        return op_fail(g, TR_ERR_INVALID,
                       "conv2d: input %s must be (N, C, H, W) and weight %s (OC, C, KH, KW)",
                       op_shape(x), op_shape(w));
    if (x->shape[1] != w->shape[1])
        return op_fail(g, TR_ERR_INVALID,
                       "conv2d: input %s has %lld channels, weight %s expects %lld",
                       op_shape(x), (long long)x->shape[1], op_shape(w),
                       (long long)w->shape[1]);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return op_fail(g, TR_ERR_INVALID, "conv2d: bias %s does not match weight %s (OC = %lld)",
                       op_shape(b), op_shape(w), (long long)w->shape[0]);
    if (stride < 1 || padding < 0)
        return op_fail(g, TR_ERR_INVALID,
                       "conv2d: stride %d must be >= 1 and padding %d >= 0", stride, padding);
    if (x->shape[1] < 1 || w->shape[0] < 1 || w->shape[2] < 1 || w->shape[3] < 1)
        return op_fail(g, TR_ERR_INVALID, "conv2d: input %s or weight %s has an empty dim",
                       op_shape(x), op_shape(w));
    if (x->shape[2] + 2 * padding < w->shape[2] || x->shape[3] + 2 * padding < w->shape[3])
        return op_fail(g, TR_ERR_INVALID,
                       "conv2d: kernel of weight %s does not fit input %s with padding %d",
                       op_shape(w), op_shape(x), padding);
    conv_dims d = conv_dims_of(x, w, stride, padding);
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){d.N, d.OC, d.OH, d.OW});
    if (!y) return NULL;
    const tr_kernels *k = op_kernels(g);
    if (d.N > 0 && k) { /* a device's kernels, with their scratch */
        void *work;
        if (!op_work(g, k->conv2d_work(&d), &work)) return NULL;
        k->conv2d_forward(y->data, x->data, w->data, b ? b->data : NULL, work, &d);
    } else if (d.N > 0) {
        size_t elem = tr_dtype_size(x->dtype), direct = conv_direct_scratch(&d, elem);
        float *dsc = direct ? op_data(g, direct * sizeof(float)) : NULL;
        /* in training, the output's plane statistics for a batch-norm that may follow */
        int want_ps = op_wants_plane_stats(g);
        double *ps = want_ps ? op_data(g, (size_t)(2 * d.N * d.OC) * sizeof(double)) : NULL;
        if ((direct && !dsc) || (want_ps && !ps)) return NULL;
        if (!direct || !conv_direct_forward_f32(y->data, x->data, w->data, b ? b->data : NULL, dsc, ps, &d)) {
            int64_t workers;
            void *scratch = conv_scratch(g, &d, elem, &workers);
            if (!scratch) return NULL;
            TR_DISPATCH(x->dtype, conv2d_forward, y->data, x->data, w->data, b ? b->data : NULL,
                        scratch, ps, &d, workers);
        }
        if (ps) op_note_plane_stats(g, y, ps);
    }
    if (op_needs_grad(g, 3, x, w, b)) {
        tr_node *n = op_record(g, "conv2d", conv2d_backward, y, 3, x, w, b);
        if (!n) return NULL;
        n->i[0] = stride;
        n->i[1] = padding;
    }
    return y;
}

/* The kernel table's conv2d (tr_cpu_kernels: the fake test device, and the reference a
 * device's kernels are tested against): the op's own kernels, direct where they apply, with
 * one worker in the caller's scratch. */
static size_t conv2d_work_f32(const conv_dims *d) {
    size_t direct = conv_direct_scratch(d, sizeof(float)), gemm = (size_t)conv_worker_reals(d, sizeof(float));
    return (direct > gemm ? direct : gemm) * sizeof(float);
}

static void conv2d_forward_table_f32(float *out, const float *inp, const float *weight, const float *bias, void *work,
                                     const conv_dims *d) {
    if (d->N == 0) return;
    if (conv_direct_scratch(d, sizeof(float)) && conv_direct_forward_f32(out, inp, weight, bias, work, NULL, d)) return;
    conv2d_forward_f32(out, inp, weight, bias, work, NULL, d, 1);
}

static void conv2d_backward_table_f32(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                      const float *weight, void *work, const conv_dims *d, int acc) {
    if (d->N == 0) return;
    if (conv_direct_scratch(d, sizeof(float)) && (dweight || dbias) &&
        conv_direct_backward_params_f32(dweight, dbias, dout, NULL, NULL, inp, work, d))
        dweight = dbias = NULL;
    if (dinp || dweight || dbias)
        conv2d_backward_f32(dinp, dweight, dbias, dout, NULL, NULL, inp, weight, work, d, acc, 1);
}

void ops_kernels_conv2d(tr_kernels *k) {
    k->conv2d_work = conv2d_work_f32;
    k->conv2d_forward = conv2d_forward_table_f32;
    k->conv2d_backward = conv2d_backward_table_f32;
}
