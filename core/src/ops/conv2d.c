/* 2-D convolution, NCHW, one stride and one zero padding for both dims; no dilation or
 * groups. Per image: im2col into a (C*KH*KW, OH*OW) buffer, then one GEMM with the weight;
 * backward recomputes the col buffer (cheaper than keeping it) and scatters the input
 * gradient back with col2im. A 1x1 stride-1 unpadded conv uses the input as its col buffer.
 *
 * Images are spread over the OpenMP threads, each with its own scratch (from the arena), and
 * the per-image GEMMs use a small register-blocked kernel of this file rather than OpenBLAS:
 * the per-image matrices (e.g. 64x288 @ 288x196) are small enough that it runs about as fast
 * as OpenBLAS's single-threaded kernel, and it stays single-threaded whichever OpenBLAS build
 * is linked (the pthreads one would start its own threads inside ours and oversubscribe the
 * cores). A batch smaller than the thread count leaves threads idle. */
#include <omp.h>
#include <string.h>

#include "autograd/node.h"
#include "ops/gemm.h"

/* Fused multiply-add for the GEMM kernel: ISO C mode turns off gcc's contraction. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

/* Vector width of the GEMM kernel: the widest the target has (generic x86-64 and NEON: 16). */
#if defined(__AVX512F__)
#define CONV_VEC_BYTES 64
#elif defined(__AVX__)
#define CONV_VEC_BYTES 32
#else
#define CONV_VEC_BYTES 16
#endif
/* Rows per register block: 8 x 2 vector accumulators fill AVX-512's 32 registers well; 6 x 2
 * fits the 16 of AVX2 and SSE. */
#if defined(__AVX512F__)
#define CONV_MR 8
#else
#define CONV_MR 6
#endif
#define CONV_NV 2  /* vectors per row of a block */
#define CONV_NR(elem) (CONV_NV * CONV_VEC_BYTES / (int64_t)(elem))

typedef struct conv_dims {
    int64_t N, C, H, W;   /* input */
    int64_t OC, KH, KW;   /* weight */
    int64_t S, P;         /* stride, padding */
    int64_t OH, OW;       /* output */
} conv_dims;

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

static int conv_pointwise(const conv_dims *d) {
    return d->KH == 1 && d->KW == 1 && d->S == 1 && d->P == 0;
}

static int64_t conv_max3(int64_t a, int64_t b, int64_t c) {
    int64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Reals of forward scratch per thread: col (CKK, P) and the GEMM's edge panel. */
static int64_t conv_scratch_fwd(const conv_dims *d, size_t elem) {
    int64_t CKK = d->C * d->KH * d->KW, P = d->OH * d->OW;
    return (conv_pointwise(d) ? 0 : CKK * P) + CKK * CONV_NR(elem);
}

/* Reals of backward scratch per thread (layout in conv2d_backward, conv2d.inc). */
static int64_t conv_scratch_bwd(const conv_dims *d, size_t elem) {
    int64_t CKK = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC;
    return 2 * CKK * P + P * OC + CKK * OC + OC + conv_max3(CKK, P, OC) * CONV_NR(elem);
}

/* Threads for a conv: all of them when there is enough work, one image per thread at least. */
static int conv_threads(const conv_dims *d) {
    int64_t work = d->N * d->OC * d->C * d->KH * d->KW * d->OH * d->OW;
    int64_t nthr = work > TR_PAR_MIN ? omp_get_max_threads() : 1;
    if (nthr > d->N) nthr = d->N;
    return nthr < 1 ? 1 : (int)nthr;
}

#define TR_GENERIC "ops/conv2d.inc"
#include "ops/generic.h"

static conv_dims conv_dims_of(const tr_tensor *x, const tr_tensor *w, int64_t S, int64_t P) {
    conv_dims d = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
                   .OC = w->shape[0], .KH = w->shape[2], .KW = w->shape[3], .S = S, .P = P};
    d.OH = (d.H + 2 * P - d.KH) / S + 1;
    d.OW = (d.W + 2 * P - d.KW) / S + 1;
    return d;
}

static void conv2d_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    conv_dims d = conv_dims_of(x, w, n->i[0], n->i[1]);
    void *dx = op_grad(g, x), *dw = op_grad(g, w), *db = b ? op_grad(g, b) : NULL;
    if ((!dx && !dw && !db) || d.N == 0) return;
    int nthr = conv_threads(&d);
    size_t elem = tr_dtype_size(x->dtype);
    int64_t reals = d.C * d.KH * d.KW * d.OC + nthr * conv_scratch_bwd(&d, elem);
    void *scratch = op_alloc(g, (size_t)reals * elem);
    if (!scratch) return;
    TR_DISPATCH(x->dtype, conv2d_backward, dx, dw, db, n->out->grad, x->data, w->data, scratch,
                nthr, &d);
}

tr_tensor *tr_conv2d(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, int stride,
                     int padding) {
    if (!op_check(g, "conv2d", b ? 3 : 2, x, w, b)) return NULL;
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
    if (d.N > 0) {
        int nthr = conv_threads(&d);
        size_t elem = tr_dtype_size(x->dtype);
        void *scratch = op_alloc(g, (size_t)(nthr * conv_scratch_fwd(&d, elem)) * elem);
        if (!scratch) return NULL;
        TR_DISPATCH(x->dtype, conv2d_forward, y->data, x->data, w->data, b ? b->data : NULL,
                    scratch, nthr, &d);
    }
    if (op_needs_grad(g, 3, x, w, b)) {
        tr_node *n = op_record(g, "conv2d", conv2d_backward, y, 3, x, w, b);
        if (!n) return NULL;
        n->i[0] = stride;
        n->i[1] = padding;
    }
    return y;
}
