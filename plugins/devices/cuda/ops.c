/* The CUDA plugin's kernel table (trainer/kernels.h): each entry launches kernels.cu's kernel
 * (or cuBLAS) on the device bound to the calling thread, with the arguments the core's CPU
 * kernel of that name takes. Entries return nothing: a failed launch is kept for the next
 * sync (cuda_fail), which reports it naming the entry. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "device.h"
#include "trainer/optim.h"

/* Blocks for n independent elements (grid-stride loops cover the rest). */
static unsigned blocks_for(int64_t n) {
    int64_t b = (n + CUDA_BLOCK - 1) / CUDA_BLOCK;
    return b < 1 ? 1u : b > 65535 * 8 ? 65535u * 8 : (unsigned)b;
}

/* Blocks for R rows (one block per row, rows beyond the grid loop). */
static unsigned blocks_rows(int64_t R) { return R < 1 ? 1u : R > 65535 * 8 ? 65535u * 8 : (unsigned)R; }

#define LAUNCH(what, k, grid, ...)                                              \
    do {                                                                        \
        cuda_device *d_ = cuda_current();                                       \
        void *args_[] = {__VA_ARGS__};                                          \
        if (!d_) break;                                                         \
        tr_status st_ = cu_launch(d_->rt, CUDA_##k, (grid), args_);             \
        if (st_ != TR_OK) cuda_fail(d_, st_, what);                             \
    } while (0)

static void zero(void *p, size_t bytes) {
    cuda_device *d = cuda_current();
    if (!d || !bytes) return;
    tr_status st = cu_zero_async(d->rt, p, bytes);
    if (st != TR_OK) cuda_fail(d, st, "zero");
}

static void copy(void *dst, const void *src, size_t bytes) {
    cuda_device *d = cuda_current();
    if (!d || !bytes || dst == src) return;
    tr_status st = cu_copy_async(d->rt, dst, src, bytes);
    if (st != TR_OK) cuda_fail(d, st, "copy");
}

/* bytes of scratch from the caching allocator for one call, given back with cuda_free after
 * the launches that use it (in stream order); NULL after recording the failure. */
static void *scratch(cuda_device *d, size_t bytes, const char *what) {
    void *p = NULL;
    tr_status st = cuda_alloc(d, bytes, &p);
    if (st != TR_OK) cuda_fail(d, st, what);
    return st == TR_OK ? p : NULL;
}

/* ---- linear: cuBLAS, row-major tensors as column-major transposes ---- */

/* batch column-major products C = alpha op(A) op(B) + beta C (cuBLAS's convention; ta, tb: 1
 * transposes), entry i at A + i sA, B + i sB, C + i sC. cuBLAS wants int sizes and leading
 * dimensions >= 1, and nothing to compute is no call; k == 0 still scales C by beta (zeros
 * with beta 0), as the CPU kernels leave it. what names the op. 0 after recording a failure. */
static int cgemm(cuda_device *d, const char *what, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *A, int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB, float beta, float *C,
                 int64_t ldc, int64_t sC, int64_t batch) {
    if (m == 0 || n == 0 || batch == 0) return 1;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX) {
        cuda_fail(d, tr_error_set(TR_ERR_UNSUPPORTED, "a batch of %lld GEMMs of %lld x %lld x %lld is beyond cuBLAS's "
                                  "int dimensions", (long long)batch, (long long)m, (long long)n, (long long)k), what);
        return 0;
    }
    lda = lda < 1 ? 1 : lda, ldb = ldb < 1 ? 1 : ldb;
    tr_status st = cu_sgemm_batched(d->rt, ta, tb, (int)m, (int)n, (int)k, alpha, A, (int)lda, sA, B, (int)ldb, sB, beta,
                                    C, (int)ldc, sC, (int)batch, d->bf16);
    if (st != TR_OK) cuda_fail(d, st, what);
    return st == TR_OK;
}

/* One column-major product with alpha 1. */
static int gemm(cuda_device *d, const char *what, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
                int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return cgemm(d, what, ta, tb, m, n, k, 1.0f, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

/* A row-major (r, c) matrix is the column-major (c x r) transpose, leading dimension c.
 * out (B, OC) = inp (B, C) W^T: out^T (OC x B) = W (C x OC)^T inp^T (C x B), gemm(T, N). */
static void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t B,
                           int64_t C, int64_t OC) {
    cuda_device *d = cuda_current();
    if (!d || !gemm(d, "linear (cuBLAS)", 1, 0, OC, B, C, weight, C, inp, C, 0.0f, out, OC)) return;
    if (bias) LAUNCH("linear (bias)", k_add_fwd, blocks_for(B * OC), &out, &out, &bias, &B, &OC);
}

/* dinp (B, C) = dout W: column-major dinp^T (C x B) = W^T (C x OC) dout^T (OC x B).
 * dweight (OC, C) = dout^T inp: dweight^T (C x OC) = inp^T (C x B) dout (B x OC).
 * dbias += column sums of dout. */
static void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int64_t B, int64_t C, int64_t OC, int acc, int wacc) {
    cuda_device *d = cuda_current();
    if (!d) return;
    if (dinp && !gemm(d, "linear (cuBLAS)", 0, 0, C, B, OC, weight, C, dout, OC, acc ? 1.0f : 0.0f, dinp, C)) return;
    if (dweight && !gemm(d, "linear (cuBLAS)", 0, 1, C, OC, B, inp, C, dout, OC, wacc ? 1.0f : 0.0f, dweight, C)) return;
    const float *none = NULL;
    if (dbias) LAUNCH("linear (bias gradient)", k_colsum, blocks_for(OC), &dbias, &dout, &none, &B, &OC);
}

/* ---- elementwise ---- */

static void add_forward(float *out, const float *a, const float *b, int64_t R, int64_t M) {
    LAUNCH("add", k_add_fwd, blocks_for(R * M), &out, &a, &b, &R, &M);
}

static void add_backward(float *da, float *db, const float *dout, int64_t R, int64_t M, int acc) {
    int64_t n = R * M;
    float one = 1.0f;
    const float *none = NULL;
    if (da) LAUNCH("add backward", k_accum, blocks_for(n), &da, &dout, &n, &one, &acc);
    if (db) LAUNCH("add backward", k_colsum, blocks_for(M), &db, &dout, &none, &R, &M);
}

static void mul_forward(float *out, const float *a, const float *b, int64_t R, int64_t M) {
    LAUNCH("mul", k_mul_fwd, blocks_for(R * M), &out, &a, &b, &R, &M);
}

static void mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t R,
                         int64_t M) {
    if (da) LAUNCH("mul backward", k_mul_bwd_da, blocks_for(R * M), &da, &dout, &b, &R, &M);
    if (db) LAUNCH("mul backward", k_colsum, blocks_for(M), &db, &dout, &a, &R, &M);
}

static void bias_add_forward(float *out, const float *x, const float *bias, int64_t B, int64_t C) {
    LAUNCH("bias_add", k_add_fwd, blocks_for(B * C), &out, &x, &bias, &B, &C);
}

static void bias_add_backward(float *dx, float *dbias, const float *dout, int64_t B, int64_t C) {
    int64_t n = B * C;
    float one = 1.0f;
    int acc = 1;
    const float *none = NULL;
    if (dx) LAUNCH("bias_add backward", k_accum, blocks_for(n), &dx, &dout, &n, &one, &acc);
    if (dbias) LAUNCH("bias_add backward", k_colsum, blocks_for(C), &dbias, &dout, &none, &B, &C);
}

static void scale_forward(float *out, const float *x, double s, int64_t N) {
    float sf = (float)s;
    int acc = 0;
    LAUNCH("scale", k_accum, blocks_for(N), &out, &x, &N, &sf, &acc);
}

static void scale_backward(float *dx, const float *dout, double s, int64_t N) {
    float sf = (float)s;
    int acc = 1;
    LAUNCH("scale backward", k_accum, blocks_for(N), &dx, &dout, &N, &sf, &acc);
}

static void relu_forward(float *out, const float *inp, int64_t N) {
    LAUNCH("relu", k_relu_fwd, blocks_for(N), &out, &inp, &N);
}

static void relu_backward(float *dinp, const float *dout, const float *out, int64_t N, int acc) {
    LAUNCH("relu backward", k_relu_bwd, blocks_for(N), &dinp, &dout, &out, &N, &acc);
}

static void gelu_forward(float *out, const float *x, int64_t N, int approx) {
    LAUNCH("gelu", k_gelu_fwd, blocks_for(N), &out, &x, &N, &approx);
}

static void gelu_backward(float *dx, const float *dout, const float *x, int64_t N, int approx, int acc) {
    LAUNCH("gelu backward", k_gelu_bwd, blocks_for(N), &dx, &dout, &x, &N, &approx, &acc);
}

static void tanh_forward(float *out, const float *x, int64_t N) {
    LAUNCH("tanh", k_tanh_fwd, blocks_for(N), &out, &x, &N);
}

static void tanh_backward(float *dx, const float *dout, const float *out, int64_t N) {
    LAUNCH("tanh backward", k_tanh_bwd, blocks_for(N), &dx, &dout, &out, &N);
}

static void sigmoid_forward(float *out, const float *x, int64_t N) {
    LAUNCH("sigmoid", k_sigmoid_fwd, blocks_for(N), &out, &x, &N);
}

static void sigmoid_backward(float *dx, const float *dout, const float *out, int64_t N) {
    LAUNCH("sigmoid backward", k_sigmoid_bwd, blocks_for(N), &dx, &dout, &out, &N);
}

static void dropout_forward(float *out, uint8_t *mask, const float *x, int64_t N, uint64_t seed, uint64_t stream,
                            uint64_t first, uint32_t thr, double scale) {
    float sf = (float)scale;
    LAUNCH("dropout", k_dropout_fwd, blocks_for(N), &out, &mask, &x, &N, &seed, &stream, &first, &thr, &sf);
}

static void dropout_backward(float *dx, const float *dout, const uint8_t *mask, int64_t N, double scale, int acc) {
    float sf = (float)scale;
    LAUNCH("dropout backward", k_dropout_bwd, blocks_for(N), &dx, &dout, &mask, &N, &sf, &acc);
}

/* ---- rows ---- */

static void softmax_forward(float *out, const float *x, int64_t R, int64_t C) {
    int64_t one = 1;
    int causal = 0;
    LAUNCH("softmax", k_softmax_fwd, blocks_rows(R), &out, &x, &R, &one, &C, &causal);
}

static void softmax_backward(float *dx, const float *dout, const float *out, int64_t R, int64_t C) {
    int acc = 1;
    LAUNCH("softmax backward", k_softmax_bwd, blocks_rows(R), &dx, &dout, &out, &R, &C, &acc);
}

static void log_softmax_forward(float *out, const float *x, int64_t R, int64_t C) {
    LAUNCH("log_softmax", k_log_softmax_fwd, blocks_rows(R), &out, &x, &R, &C);
}

static void log_softmax_backward(float *dx, const float *dout, const float *out, int64_t R, int64_t C) {
    LAUNCH("log_softmax backward", k_log_softmax_bwd, blocks_rows(R), &dx, &dout, &out, &R, &C);
}

static void cross_entropy_forward(double *loss, float *stats, const float *x, const int32_t *targets, int64_t N,
                                  int64_t C, int ignore_index, double smoothing) {
    float e = (float)smoothing, invC = (float)(1.0 / (double)C);
    LAUNCH("cross_entropy", k_ce_fwd, blocks_rows(N), &loss, &stats, &x, &targets, &N, &C, &ignore_index, &e, &invC);
}

static void cross_entropy_backward(float *dx, const float *x, const float *stats, const int32_t *targets,
                                   double dscale, int64_t N, int64_t C, int ignore_index, double smoothing) {
    float gs = (float)dscale, ge = (float)(dscale * smoothing / (double)C), gt = (float)(dscale * (1 - smoothing));
    LAUNCH("cross_entropy backward", k_ce_bwd, blocks_for(N * C), &dx, &x, &stats, &targets, &N, &C, &ignore_index,
           &gs, &ge, &gt);
}

static void loss_total(float *out, const double *loss, int64_t n, double normaliser) {
    LAUNCH("loss total", k_loss_total, 1, &out, &loss, &n, &normaliser);
}

/* ---- optimizer and clipping ---- */

/* The scalars exactly as core/src/kernels/sgd.c and adam.c round them. */
static void optim_update(const tr_optim_config *cfg, int64_t steps, float *param, const float *grad,
                         float *const *state, size_t n, double lr) {
    int64_t nn = (int64_t)n;
    if (cfg->kind == TR_OPTIM_SGD) {
        int mode = cfg->momentum == 0.0 ? 0 : steps == 0 ? 1 : 2;
        float *buf = mode == 0 ? NULL : state[0];
        float neg_lr = (float)-lr, wd = (float)cfg->weight_decay, mom = (float)cfg->momentum;
        float damp1 = (float)(1.0 - cfg->dampening);
        int has_wd = cfg->weight_decay != 0.0, nesterov = cfg->nesterov;
        LAUNCH("optimizer update (sgd)", k_sgd, blocks_for(nn), &param, &grad, &buf, &nn, &neg_lr, &wd, &mom, &damp1,
               &has_wd, &mode, &nesterov);
        return;
    }
    double t = (double)(steps + 1), bc1 = 1.0 - pow(cfg->beta1, t), bc2 = 1.0 - pow(cfg->beta2, t);
    float neg_step = (float)-(lr / bc1), inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
    float decay = (float)(1.0 - lr * cfg->weight_decay), wd = (float)cfg->weight_decay;
    float b1 = (float)cfg->beta1, b1c = (float)(1.0 - cfg->beta1), b2 = (float)cfg->beta2;
    float b2c = (float)(1.0 - cfg->beta2), eps = (float)cfg->eps;
    int wd_mode = cfg->kind == TR_OPTIM_ADAMW ? 2 : cfg->weight_decay != 0.0 ? 1 : 0;
    float *m = state[0], *v = state[1];
    LAUNCH("optimizer update (adam)", k_adam, blocks_for(nn), &param, &grad, &m, &v, &nn, &decay, &wd, &b1, &b1c,
           &b2, &b2c, &inv_bc2_sqrt, &eps, &neg_step, &wd_mode);
}

/* A sum's first pass (k_dsum_part: mode 0 x, 1 x^2, 2 (x - y)^2) into the device's scratch:
 * one block per 2048 values, at most CUDA_SUMSQ_PARTS (a small tensor is one block); the
 * partial sums, *parts of them. */
static double *dsum_parts(cuda_device *d, const char *what, const float *x, const float *y, int64_t n, int mode,
                          int *parts) {
    int64_t want = (n + CUDA_BLOCK * 8 - 1) / (CUDA_BLOCK * 8);
    *parts = want < 1 ? 1 : want > CUDA_SUMSQ_PARTS ? CUDA_SUMSQ_PARTS : (int)want;
    double *part = d->scratch;
    LAUNCH(what, k_dsum_part, (unsigned)*parts, &part, &x, &y, &n, &mode);
    return part;
}

static void sumsq_to(double *out, const float *g, size_t n) {
    cuda_device *d = cuda_current();
    if (!d) return;
    int parts;
    double *part = dsum_parts(d, "gradient sum of squares", g, NULL, (int64_t)n, 1, &parts);
    LAUNCH("gradient sum of squares", k_sumsq_final, 1, &out, &part, &parts);
}

/* sumsq_to into the device's scratch, then waited for and downloaded. */
static double sumsq(const float *g, size_t n) {
    cuda_device *d = cuda_current();
    if (!d) return NAN;
    double *out = d->scratch + CUDA_SUMSQ_PARTS;
    sumsq_to(out, g, n);
    tr_status st = cu_download(d->rt, d->scratch_host, out, sizeof(double));
    if (st != TR_OK) cuda_fail(d, st, "gradient sum of squares");
    /* after any failed call the result would be a previous one: not a number instead */
    return d->err == TR_OK ? d->scratch_host[0] : NAN;
}

static void scale_inplace(float *g, size_t n, float s) {
    int64_t nn = (int64_t)n;
    LAUNCH("gradient scaling", k_scale_inplace, blocks_for(nn), &g, &nn, &s);
}

/* ---- 2-D convolution: per chunk of images, im2col, a cuBLAS GEMM with the weight, and
 * (backward) col2im; the chunk's col and y/dy are scratch of the caching allocator, taken
 * for the call and freed in stream order (the graph's arena would keep every conv's until
 * the step ends), so conv2d_work asks the core for none ---- */

/* Floats of scratch a chunk of images may take (col and y together): 64 MiB. */
#define CONV_WORK_FLOATS ((int64_t)16 << 20)

/* Images per chunk: as many as fit CONV_WORK_FLOATS, at least one, at most N. */
static int64_t conv_images(const tr_conv2d_dims *d) {
    int64_t per = (d->C * d->KH * d->KW + d->OC) * d->OH * d->OW, nc = per > 0 ? CONV_WORK_FLOATS / per : 1;
    if (nc > d->N) nc = d->N;
    return nc < 1 ? 1 : nc;
}

static size_t conv2d_work(const tr_conv2d_dims *d) {
    (void)d;
    return 0;
}

/* A conv entry's plan: the chunks' scratch, col (CKK, images * P) then y or dy (OC, images *
 * P), freed with cuda_free(d, col) after the launches that use it; images per chunk, the
 * sizes, and the dims as the kernels take them. */
typedef struct conv_plan {
    float *col, *second;
    int64_t nc_max, P, CKK, OC;
    tr_conv2d_dims k;
} conv_plan;

/* The start of a conv entry: 0 with nothing to do or after recording the failure (GEMMs
 * beyond cuBLAS's ints, or no memory). */
static int conv_begin(cuda_device *d, const tr_conv2d_dims *cd, const char *what, conv_plan *p) {
    *p = (conv_plan){.nc_max = conv_images(cd), .P = cd->OH * cd->OW, .CKK = cd->C * cd->KH * cd->KW, .OC = cd->OC,
                     .k = *cd};
    int64_t cols = p->nc_max * p->P;
    void *m;
    if (!d || cd->N == 0) return 0;
    if (cols > INT_MAX || p->CKK > INT_MAX || p->OC > INT_MAX) {
        cuda_fail(d, tr_error_set(TR_ERR_UNSUPPORTED, "GEMMs of %lld x %lld x %lld are beyond cuBLAS's int dimensions",
                                  (long long)p->OC, (long long)cols, (long long)p->CKK), what);
        return 0;
    }
    m = scratch(d, (size_t)((p->CKK + p->OC) * cols) * sizeof(float), what);
    p->col = m;
    p->second = m ? p->col + p->CKK * cols : NULL;
    return m != NULL;
}

/* Images in the chunk starting at image n0 (0 past the last). */
static int64_t conv_chunk(const conv_plan *p, int64_t n0) {
    int64_t left = p->k.N - n0;
    return left < p->nc_max ? left : p->nc_max;
}

/* y (OC, cols) = weight (OC, CKK) col (CKK, cols): column-major y^T (cols x OC) = col^T (cols x
 * CKK) weight^T (CKK x OC), both stored that way: gemm(N, N). */
static void conv2d_forward(float *out, const float *inp, const float *weight, const float *bias, void *work,
                           const tr_conv2d_dims *cd) {
    cuda_device *d = cuda_current();
    conv_plan p;
    (void)work;
    if (!conv_begin(d, cd, "conv2d", &p)) return;
    float *col = p.col, *y = p.second;
    for (int64_t n0 = 0, nc; (nc = conv_chunk(&p, n0)) > 0; n0 += nc) {
        int64_t cols = nc * p.P;
        LAUNCH("conv2d (im2col)", k_im2col, blocks_for(p.CKK * cols), &col, &inp, &p.k, &n0, &nc);
        gemm(d, "conv2d (cuBLAS)", 0, 0, cols, p.OC, p.CKK, col, cols, weight, p.CKK, 0.0f, y, cols);
        LAUNCH("conv2d (output)", k_conv_out, blocks_for(p.OC * cols), &out, &y, &bias, &p.OC, &p.P, &n0, &nc);
    }
    cuda_free(d, col);
}

/* dweight (OC, CKK) += dy (OC, cols) col^T: column-major dweight^T (CKK x OC) = col (CKK x cols,
 * stored transposed) dy^T (cols x OC): gemm(T, N), beta 1. dcol (CKK, cols) = weight^T dy:
 * column-major dcol^T (cols x CKK) = dy^T (cols x OC) weight (OC x CKK, stored transposed):
 * gemm(N, T). */
static void conv2d_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, void *work, const tr_conv2d_dims *cd, int acc) {
    cuda_device *d = cuda_current();
    conv_plan p;
    (void)work;
    if (!conv_begin(d, cd, "conv2d backward", &p)) return;
    float *col = p.col, *dy = p.second;
    const char *what = "conv2d backward (cuBLAS)";
    for (int64_t n0 = 0, nc; (nc = conv_chunk(&p, n0)) > 0; n0 += nc) {
        int64_t cols = nc * p.P;
        LAUNCH("conv2d backward (dy)", k_conv_dy, blocks_for(p.OC * cols), &dy, &dout, &p.OC, &p.P, &n0, &nc);
        if (dbias) LAUNCH("conv2d backward (bias)", k_rowsum, blocks_rows(p.OC), &dbias, &dy, &p.OC, &cols);
        if (dweight) {
            LAUNCH("conv2d backward (im2col)", k_im2col, blocks_for(p.CKK * cols), &col, &inp, &p.k, &n0, &nc);
            gemm(d, what, 1, 0, p.CKK, p.OC, cols, col, cols, dy, cols, 1.0f, dweight, p.CKK);
        }
        if (dinp) {
            gemm(d, what, 0, 1, cols, p.CKK, p.OC, dy, cols, weight, p.CKK, 0.0f, col, cols);
            LAUNCH("conv2d backward (col2im)", k_col2im, blocks_for(nc * cd->C * cd->H * cd->W), &dinp, &col, &p.k, &n0,
                   &nc, &acc);
        }
    }
    cuda_free(d, col);
}

/* ---- pooling ---- */

static void max_pool_forward(float *out, int32_t *argmax, const float *inp, int64_t NC, const tr_pool2d_dims *pd) {
    tr_pool2d_dims k = *pd;
    LAUNCH("max_pool2d", k_maxpool_fwd, blocks_for(NC * pd->OH * pd->OW), &out, &argmax, &inp, &NC, &k);
}

static void max_pool_backward(float *dinp, const float *dout, const int32_t *argmax, int64_t NC,
                              const tr_pool2d_dims *pd, int acc) {
    tr_pool2d_dims k = *pd;
    LAUNCH("max_pool2d backward", k_maxpool_bwd, blocks_for(NC * pd->H * pd->W), &dinp, &dout, &argmax, &NC, &k, &acc);
}

static void avg_pool_forward(float *out, const float *inp, int64_t NC, const tr_pool2d_dims *pd) {
    tr_pool2d_dims k = *pd;
    LAUNCH("avg_pool2d", k_avgpool_fwd, blocks_for(NC * pd->OH * pd->OW), &out, &inp, &NC, &k);
}

static void avg_pool_backward(float *dinp, const float *dout, int64_t NC, const tr_pool2d_dims *pd) {
    tr_pool2d_dims k = *pd;
    LAUNCH("avg_pool2d backward", k_avgpool_bwd, blocks_for(NC * pd->H * pd->W), &dinp, &dout, &NC, &k);
}

/* ---- batch-norm ---- */

/* A block per plane, or for planes shorter than a warp a thread per plane. */
static void batch_norm_planes(double *ps, const float *inp, int64_t NC, int64_t S) {
    if (S < 32) LAUNCH("batch_norm (plane statistics)", k_bn_planes_short, blocks_for(NC), &ps, &inp, &NC, &S);
    else LAUNCH("batch_norm (plane statistics)", k_bn_planes, blocks_rows(NC), &ps, &inp, &NC, &S);
}

static void batch_norm_plane_sums(double *s, const double *ps, int64_t N, int64_t C) {
    LAUNCH("batch_norm (sums)", k_bn_plane_sums, blocks_for(C), &s, &ps, &N, &C);
}

static void batch_norm_plane_sqdevs(double *q, const double *ps, const float *mean, int64_t N, int64_t C, int64_t S) {
    LAUNCH("batch_norm (squared deviations)", k_bn_plane_sqdevs, blocks_for(C), &q, &ps, &mean, &N, &C, &S);
}

static void batch_norm_divide(float *out, const double *s, double M, int64_t C) {
    LAUNCH("batch_norm (divide)", k_bn_divide, blocks_for(C), &out, &s, &M, &C);
}

static void batch_norm_finish(float *invstd, float *running_mean, float *running_var, const float *mean, int64_t C,
                              double momentum, int64_t M, double eps) {
    double unbias = running_mean ? (double)M / (double)(M - 1) : 0;
    LAUNCH("batch_norm (running statistics)", k_bn_finish, blocks_for(C), &invstd, &running_mean, &running_var, &mean,
           &C, &momentum, &unbias, &eps);
}

static void batch_norm_forward(float *out, const float *inp, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, int64_t N, int64_t C, int64_t S) {
    LAUNCH("batch_norm", k_bn_fwd, blocks_for(N * C * S), &out, &inp, &mean, &invstd, &gamma, &beta, &N, &C, &S);
}

static void batch_norm_dsums_all(double *sdy, double *sdyx, const float *dout, const float *inp, const float *mean,
                                 const float *invstd, int64_t N, int64_t C, int64_t S) {
    LAUNCH("batch_norm backward (sums)", k_bn_dsums, blocks_rows(C), &sdy, &sdyx, &dout, &inp, &mean, &invstd, &N, &C,
           &S);
}

/* The sums into scratch of the caching allocator (freed in stream order: a later kernel may
 * reuse it only after these ran). */
static void batch_norm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                const float *mean, const float *invstd, const float *gamma, int batch, int64_t N,
                                int64_t C, int64_t S, int acc) {
    cuda_device *d = cuda_current();
    if (!d) return;
    double *sums = scratch(d, (size_t)(2 * C) * sizeof(double), "batch_norm backward (scratch)");
    if (!sums) return;
    const double *sdy = sums, *sdyx = sums + C;
    batch_norm_dsums_all(sums, sums + C, dout, inp, mean, invstd, N, C, S);
    if (dgamma || dbeta) LAUNCH("batch_norm backward", k_bn_param_grads, blocks_for(C), &dgamma, &dbeta, &sdy, &sdyx, &C);
    double M = (double)(N * S);
    if (dinp)
        LAUNCH("batch_norm backward", k_bn_dx, blocks_for(N * C * S), &dinp, &dout, &inp, &mean, &invstd, &gamma, &sdy,
               &sdyx, &batch, &M, &N, &C, &S, &acc);
    cuda_free(d, sums);
}

static void batch_norm_sync_grads(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                  const float *mean, const float *invstd, const float *gamma, const double *lsdy,
                                  const double *lsdyx, const double *gsdy, const double *gsdyx, double M, int64_t N,
                                  int64_t C, int64_t S) {
    if (dgamma || dbeta)
        LAUNCH("batch_norm backward", k_bn_param_grads, blocks_for(C), &dgamma, &dbeta, &lsdy, &lsdyx, &C);
    int batch = 1, acc = 1;
    if (dinp)
        LAUNCH("batch_norm backward", k_bn_dx, blocks_for(N * C * S), &dinp, &dout, &inp, &mean, &invstd, &gamma, &gsdy,
               &gsdyx, &batch, &M, &N, &C, &S, &acc);
}

/* ---- copies and layouts ---- */

static void copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t W, int acc) {
    LAUNCH("copy_rows (slice, concat)", k_copy_rows, blocks_for(R * W), &dst, &dld, &src, &sld, &R, &W, &acc);
}

static void permute(float *out, float *inp, const tr_permute_dims *pd, int acc) {
    tr_permute_dims p = *pd;
    int64_t n = 1;
    for (int64_t i = 0; i < p.ndim; i++) n *= p.shape[i];
    LAUNCH(acc ? "permute backward" : "permute", k_permute, blocks_for(n), &out, &inp, &p, &n, &acc);
}

/* ---- batched GEMMs of row-major matrices: C (M x N) = op(A) op(B) is column-major C^T =
 * op(B)^T op(A)^T, so the operands swap; entry i of the batch at A + i sA, and so on ---- */

static void rgemm(cuda_device *d, const char *what, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB, float beta, float *C,
                  int64_t ldc, int64_t sC, int64_t batch) {
    cgemm(d, what, tb, ta, N, M, K, alpha, B, ldb, sB, A, lda, sA, beta, C, ldc, sC, batch);
}

static void matmul_forward(float *out, const float *a, const float *b, int64_t batch, int64_t M, int64_t K, int64_t N) {
    cuda_device *d = cuda_current();
    if (!d) return;
    rgemm(d, "matmul (cuBLAS)", 0, 0, M, N, K, 1.0f, a, K, M * K, b, N, K * N, 0.0f, out, N, M * N,
          batch);
}

static void matmul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t batch,
                            int64_t M, int64_t K, int64_t N) {
    cuda_device *d = cuda_current();
    if (!d) return;
    const char *what = "matmul backward (cuBLAS)";
    if (da) rgemm(d, what, 0, 1, M, K, N, 1.0f, dout, N, M * N, b, N, K * N, 1.0f, da, K, M * K, batch);
    if (db) rgemm(d, what, 1, 0, K, N, M, 1.0f, a, K, M * K, dout, N, M * N, 1.0f, db, N, K * N, batch);
}

/* ---- embedding ---- */

static void embedding_forward(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C) {
    LAUNCH("embedding", k_embed_fwd, blocks_for(N * C), &out, &ids, &table, &N, &C);
}

static void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N, int64_t C) {
    LAUNCH("embedding backward", k_embed_bwd, blocks_rows(N), &dtable, &dout, &ids, &N, &C);
}

/* ---- layer-norm ---- */

static void layer_norm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gamma,
                               const float *beta, double eps, int64_t R, int64_t C) {
    LAUNCH("layer_norm", k_ln_fwd, blocks_rows(R), &out, &mean, &rstd, &inp, &gamma, &beta, &eps, &R, &C);
}

static size_t layer_norm_work(int64_t R, int64_t C) {
    (void)R, (void)C;
    return 0;
}

static void layer_norm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                const float *mean, const float *rstd, const float *gamma, void *work, int64_t R,
                                int64_t C, int acc) {
    (void)work;
    if (dgamma || dbeta)
        LAUNCH("layer_norm backward (gamma, beta)", k_ln_params, blocks_rows((C + 31) / 32), &dgamma, &dbeta, &dout,
               &inp, &mean, &rstd, &R, &C);
    if (dinp)
        LAUNCH("layer_norm backward", k_ln_dx, blocks_rows(R), &dinp, &dout, &inp, &mean, &rstd, &gamma, &R, &C, &acc);
}

/* ---- attention: per head h, one batched GEMM over the batch for each product (head h of
 * batch b is q's columns [h D, (h + 1) D) of rows b T.., read in place with leading dimension
 * ld: C for q, k and v of their own, 3C for the blocks of one fused projection), and the
 * softmax over every row of att at once. Dropout on the probabilities (keep non-NULL) is
 * dropout's own kernel on att, into scratch P = att * keep * scale that the product with v
 * reads (the backward makes P again for dv, then scales the probabilities' gradient by keep
 * * scale in place) ---- */

static void attention_fwd(cuda_device *d, float *out, float *att, uint8_t *keep, const tr_dropout_draw *r,
                          const float *q, const float *k, const float *v, const int32_t *mask, int64_t ld, int64_t B,
                          int64_t T, int64_t S, int64_t C, int64_t NH, int causal) {
    int64_t D = C / NH, TS = T * S, R = B * NH * T, n = R * S;
    float scale = 1.0f / sqrtf((float)D);
    const char *what = "attention (cuBLAS)";
    for (int64_t h = 0; h < NH; h++) /* scores = q k^T / sqrt(D) */
        rgemm(d, what, 0, 1, T, S, D, scale, q + h * D, ld, T * ld, k + h * D, ld, S * ld, 0.0f, att + h * TS, S,
              NH * TS, B);
    if (mask) /* the key padding mask (B, S) */
        LAUNCH("attention (masked softmax)", k_softmax_mask_fwd, blocks_rows(R), &att, &att, &mask, &R, &T, &NH, &S,
               &causal);
    else
        LAUNCH("attention (softmax)", k_softmax_fwd, blocks_rows(R), &att, &att, &R, &T, &S, &causal);
    float *p = att;
    if (keep) {
        float sf = (float)r->scale;
        uint64_t seed = r->seed, stream = r->stream, first = r->first;
        uint32_t thr = r->thr;
        if (!(p = scratch(d, (size_t)n * sizeof(float), "attention (dropout scratch)"))) return;
        LAUNCH("attention (dropout)", k_dropout_fwd, blocks_for(n), &p, &keep, &att, &n, &seed, &stream, &first, &thr,
               &sf);
    }
    for (int64_t h = 0; h < NH; h++) /* out = P v */
        rgemm(d, what, 0, 0, T, D, S, 1.0f, p + h * TS, S, NH * TS, v + h * D, ld, S * ld, 0.0f, out + h * D, C,
              T * C, B);
    if (keep) cuda_free(d, p);
}

/* dq, dk, dv (each may be NULL, leading dimension ld) = (acc 0) or += (acc 1) the gradients:
 * each block of each is one GEMM's output. */
static void attention_bwd(cuda_device *d, float *dq, float *dk, float *dv, const float *dout, const float *att,
                          const uint8_t *keep, double dscale, const float *q, const float *k, const float *v,
                          int64_t ld, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH, int acc) {
    int64_t D = C / NH, TS = T * S, R = B * NH * T, n = R * S;
    float scale = 1.0f / sqrtf((float)D), beta = acc ? 1.0f : 0.0f, sf = (float)dscale;
    int set = 0;
    const char *what = "attention backward (cuBLAS)";
    if (!dq && !dk && !(dv && keep)) {
        for (int64_t h = 0; dv && h < NH; h++) /* dv = att^T dout */
            rgemm(d, what, 1, 0, S, D, T, 1.0f, att + h * TS, S, NH * TS, dout + h * D, C, T * C, beta, dv + h * D,
                  ld, S * ld, B);
        return;
    }
    float *ds = scratch(d, (size_t)n * sizeof(float), "attention backward (scratch)");
    if (!ds) return;
    const float *p = att;
    if (dv && keep) { /* the forward's P = att * keep * scale, again */
        LAUNCH("attention backward (dropout)", k_dropout_bwd, blocks_for(n), &ds, &att, &keep, &n, &sf, &set);
        p = ds;
    }
    for (int64_t h = 0; dv && h < NH; h++) /* dv = P^T dout */
        rgemm(d, what, 1, 0, S, D, T, 1.0f, p + h * TS, S, NH * TS, dout + h * D, C, T * C, beta, dv + h * D, ld,
              S * ld, B);
    if (dq || dk) {
        for (int64_t h = 0; h < NH; h++) /* dP = dout v^T */
            rgemm(d, what, 0, 1, T, S, D, 1.0f, dout + h * D, C, T * C, v + h * D, ld, S * ld, 0.0f, ds + h * TS, S,
                  NH * TS, B);
        if (keep) /* the probabilities' gradient: dP * keep * scale, in place */
            LAUNCH("attention backward (dropout)", k_dropout_bwd, blocks_for(n), &ds, &ds, &keep, &n, &sf, &set);
        /* the scores' gradient from the probabilities', in place */
        LAUNCH("attention backward (softmax)", k_softmax_bwd, blocks_rows(R), &ds, &ds, &att, &R, &S, &set);
        for (int64_t h = 0; h < NH; h++) {
            if (dq) /* dq = dscores k / sqrt(D) */
                rgemm(d, what, 0, 0, T, D, S, scale, ds + h * TS, S, NH * TS, k + h * D, ld, S * ld, beta, dq + h * D,
                      ld, T * ld, B);
            if (dk) /* dk = dscores^T q / sqrt(D) */
                rgemm(d, what, 1, 0, S, D, T, scale, ds + h * TS, S, NH * TS, q + h * D, ld, T * ld, beta, dk + h * D,
                      ld, S * ld, B);
        }
    }
    cuda_free(d, ds);
}

static void attention_forward(float *out, float *att, const float *q, const float *k, const float *v, int64_t B,
                              int64_t T, int64_t S, int64_t C, int64_t NH, int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, q, k, v, NULL, C, B, T, S, C, NH, causal);
}

static void attention_mask_forward(float *out, float *att, const float *q, const float *k, const float *v,
                                   const int32_t *mask, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH,
                                   int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, q, k, v, mask, C, B, T, S, C, NH, causal);
}

/* The scores' gradient (B, NH, T, S) is scratch of the caching allocator for the call (the
 * graph's arena would keep one per layer until the step ends). */
static size_t attention_work(int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH) {
    (void)B, (void)T, (void)S, (void)C, (void)NH;
    return 0;
}

static void attention_backward(float *dq, float *dk, float *dv, void *work, const float *dout, const float *att,
                               const float *q, const float *k, const float *v, int64_t B, int64_t T, int64_t S,
                               int64_t C, int64_t NH) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d) attention_bwd(d, dq, dk, dv, dout, att, NULL, 1, q, k, v, C, B, T, S, C, NH, 1);
}

static void attention_qkv_forward(float *out, float *att, const float *qkv, int64_t B, int64_t T, int64_t C,
                                  int64_t NH, int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, qkv, qkv + C, qkv + 2 * C, NULL, 3 * C, B, T, T, C, NH, causal);
}

static void attention_qkv_mask_forward(float *out, float *att, const float *qkv, const int32_t *mask, int64_t B,
                                       int64_t T, int64_t C, int64_t NH, int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, qkv, qkv + C, qkv + 2 * C, mask, 3 * C, B, T, T, C, NH, causal);
}

static void attention_qkv_backward(float *dqkv, void *work, const float *dout, const float *att, const float *qkv,
                                   int64_t B, int64_t T, int64_t C, int64_t NH, int acc) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d)
        attention_bwd(d, dqkv, dqkv + C, dqkv + 2 * C, dout, att, NULL, 1, qkv, qkv + C, qkv + 2 * C, 3 * C, B, T, T,
                      C, NH, acc);
}

static void attention_dropout_forward(float *out, float *att, uint8_t *keep, void *work, const float *q,
                                      const float *k, const float *v, const int32_t *mask, const tr_dropout_draw *r,
                                      int64_t ld, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH,
                                      int causal) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d) attention_fwd(d, out, att, keep, r, q, k, v, mask, ld, B, T, S, C, NH, causal);
}

static void attention_dropout_backward(float *dq, float *dk, float *dv, void *work, const float *dout,
                                       const float *att, const uint8_t *keep, double scale, const float *q,
                                       const float *k, const float *v, int64_t ld, int64_t B, int64_t T, int64_t S,
                                       int64_t C, int64_t NH, int acc) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d) attention_bwd(d, dq, dk, dv, dout, att, keep, scale, q, k, v, ld, B, T, S, C, NH, acc);
}

/* ---- reductions and losses: whole-tensor sums into the device's scratch partials, added in
 * order by one thread into the float result ---- */

static void sum_to(const char *what, float *out, const float *x, const float *y, int64_t n, int mode,
                   double normaliser) {
    cuda_device *d = cuda_current();
    if (!d) return;
    int parts;
    double *part = dsum_parts(d, what, x, y, n, mode, &parts);
    int64_t np = parts;
    LAUNCH(what, k_loss_total, 1, &out, &part, &np, &normaliser);
}

static void sum_all_forward(float *out, const float *x, int64_t N, double normaliser) {
    sum_to("sum", out, x, NULL, N, 0, normaliser);
}

static void sum_all_backward(float *dx, const float *dout, double scale, int64_t N) {
    LAUNCH("sum backward", k_sum_all_bwd, blocks_for(N), &dx, &dout, &scale, &N);
}

static void sum_dim_forward(float *out, const float *x, double scale, int64_t O, int64_t D, int64_t I) {
    LAUNCH("sum_dim", k_sum_dim_fwd, blocks_for(O * I), &out, &x, &scale, &O, &D, &I);
}

static void sum_dim_backward(float *dx, const float *dout, double scale, int64_t O, int64_t D, int64_t I) {
    float s = (float)scale;
    LAUNCH("sum_dim backward", k_sum_dim_bwd, blocks_for(O * D * I), &dx, &dout, &s, &O, &D, &I);
}

static void mse_forward(float *out, const float *pred, const float *target, int64_t N, double normaliser) {
    sum_to("mse", out, pred, target, N, 2, normaliser);
}

static void mse_backward(float *dpred, const float *dout, const float *pred, const float *target, double normaliser,
                         int64_t N) {
    LAUNCH("mse backward", k_mse_bwd, blocks_for(N), &dpred, &dout, &pred, &target, &normaliser, &N);
}

static void cosine_forward(float *out, const float *a, const float *b, int64_t N, int64_t E, double eps) {
    LAUNCH("cosine_similarity", k_cos_fwd, blocks_rows(N), &out, &a, &b, &N, &E, &eps);
}

static void cosine_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t N,
                            int64_t E, double eps) {
    LAUNCH("cosine_similarity backward", k_cos_bwd, blocks_rows(N), &da, &db, &dout, &a, &b, &N, &E, &eps);
}

const tr_kernels cuda_kernel_table = {
    .size = sizeof(tr_kernels),
    .zero = zero,
    .copy = copy,
    .linear_forward = linear_forward,
    .linear_backward = linear_backward,
    .add_forward = add_forward,
    .add_backward = add_backward,
    .mul_forward = mul_forward,
    .mul_backward = mul_backward,
    .bias_add_forward = bias_add_forward,
    .bias_add_backward = bias_add_backward,
    .scale_forward = scale_forward,
    .scale_backward = scale_backward,
    .relu_forward = relu_forward,
    .relu_backward = relu_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .tanh_forward = tanh_forward,
    .tanh_backward = tanh_backward,
    .sigmoid_forward = sigmoid_forward,
    .sigmoid_backward = sigmoid_backward,
    .dropout_forward = dropout_forward,
    .dropout_backward = dropout_backward,
    .softmax_forward = softmax_forward,
    .softmax_backward = softmax_backward,
    .log_softmax_forward = log_softmax_forward,
    .log_softmax_backward = log_softmax_backward,
    .cross_entropy_forward = cross_entropy_forward,
    .cross_entropy_backward = cross_entropy_backward,
    .loss_total = loss_total,
    .optim_update = optim_update,
    .sumsq = sumsq,
    .scale_inplace = scale_inplace,
    .sumsq_to = sumsq_to,
    .conv2d_work = conv2d_work,
    .conv2d_forward = conv2d_forward,
    .conv2d_backward = conv2d_backward,
    .max_pool_forward = max_pool_forward,
    .max_pool_backward = max_pool_backward,
    .avg_pool_forward = avg_pool_forward,
    .avg_pool_backward = avg_pool_backward,
    .batch_norm_planes = batch_norm_planes,
    .batch_norm_plane_sums = batch_norm_plane_sums,
    .batch_norm_plane_sqdevs = batch_norm_plane_sqdevs,
    .batch_norm_divide = batch_norm_divide,
    .batch_norm_finish = batch_norm_finish,
    .batch_norm_forward = batch_norm_forward,
    .batch_norm_backward = batch_norm_backward,
    .batch_norm_dsums_all = batch_norm_dsums_all,
    .batch_norm_sync_grads = batch_norm_sync_grads,
    .copy_rows = copy_rows,
    .permute = permute,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .layer_norm_forward = layer_norm_forward,
    .layer_norm_work = layer_norm_work,
    .layer_norm_backward = layer_norm_backward,
    .attention_forward = attention_forward,
    .attention_work = attention_work,
    .attention_backward = attention_backward,
    .attention_qkv_forward = attention_qkv_forward,
    .attention_qkv_backward = attention_qkv_backward,
    .attention_mask_forward = attention_mask_forward,
    .attention_qkv_mask_forward = attention_qkv_mask_forward,
    .attention_dropout_forward = attention_dropout_forward,
    .attention_dropout_backward = attention_dropout_backward,
    .sum_all_forward = sum_all_forward,
    .sum_all_backward = sum_all_backward,
    .sum_dim_forward = sum_dim_forward,
    .sum_dim_backward = sum_dim_backward,
    .mse_forward = mse_forward,
    .mse_backward = mse_backward,
    .cosine_forward = cosine_forward,
    .cosine_backward = cosine_backward,
};
