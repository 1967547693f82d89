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

/* ---- linear: cuBLAS, row-major tensors as column-major transposes ---- */

static int gemm_dims_ok(cuda_device *d, int64_t B, int64_t C, int64_t OC) {
    if (B <= INT_MAX && C <= INT_MAX && OC <= INT_MAX) return 1;
    cuda_fail(d, tr_error_set(TR_ERR_UNSUPPORTED, "(%lld, %lld) x (%lld) is beyond cuBLAS's int dimensions",
                              (long long)B, (long long)C, (long long)OC), "linear");
    return 0;
}

/* cuBLAS wants every leading dimension >= 1 and refuses nothing to compute; k == 0 still
 * scales C by beta (zero with beta 0), as the CPU kernel leaves it. */
static void gemm(cuda_device *d, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (m == 0 || n == 0) return;
    lda = lda < 1 ? 1 : lda, ldb = ldb < 1 ? 1 : ldb;
    tr_status st = cu_sgemm(d->rt, ta, tb, (int)m, (int)n, (int)k, 1.0f, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
    if (st != TR_OK) cuda_fail(d, st, "linear (cublasSgemm)");
}

/* A row-major (r, c) matrix is the column-major (c x r) transpose, leading dimension c.
 * out (B, OC) = inp (B, C) W^T: out^T (OC x B) = W (C x OC)^T inp^T (C x B), gemm(T, N). */
static void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t B,
                           int64_t C, int64_t OC) {
    cuda_device *d = cuda_current();
    if (!d || !gemm_dims_ok(d, B, C, OC)) return;
    gemm(d, 1, 0, OC, B, C, weight, C, inp, C, 0.0f, out, OC);
    if (bias) LAUNCH("linear (bias)", k_add_fwd, blocks_for(B * OC), &out, &out, &bias, &B, &OC);
}

/* dinp (B, C) = dout W: column-major dinp^T (C x B) = W^T (C x OC) dout^T (OC x B).
 * dweight (OC, C) = dout^T inp: dweight^T (C x OC) = inp^T (C x B) dout (B x OC).
 * dbias += column sums of dout. */
static void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int64_t B, int64_t C, int64_t OC, int acc, int wacc) {
    cuda_device *d = cuda_current();
    if (!d || !gemm_dims_ok(d, B, C, OC)) return;
    if (dinp) gemm(d, 0, 0, C, B, OC, weight, C, dout, OC, acc ? 1.0f : 0.0f, dinp, C);
    if (dweight) gemm(d, 0, 1, C, OC, B, inp, C, dout, OC, wacc ? 1.0f : 0.0f, dweight, C);
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
    LAUNCH("softmax", k_softmax_fwd, blocks_rows(R), &out, &x, &R, &C);
}

static void softmax_backward(float *dx, const float *dout, const float *out, int64_t R, int64_t C) {
    LAUNCH("softmax backward", k_softmax_bwd, blocks_rows(R), &dx, &dout, &out, &R, &C);
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

/* The scalars exactly as core/src/optim/sgd.c and adam.c round them. */
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

static double sumsq(const float *g, size_t n) {
    cuda_device *d = cuda_current();
    if (!d) return NAN;
    int64_t nn = (int64_t)n;
    /* a block per 2048 values, at most CUDA_SUMSQ_PARTS (a small tensor is one block) */
    int64_t want = (nn + CUDA_BLOCK * 8 - 1) / (CUDA_BLOCK * 8);
    int parts = want < 1 ? 1 : want > CUDA_SUMSQ_PARTS ? CUDA_SUMSQ_PARTS : (int)want;
    double *part = d->scratch, *out = d->scratch + CUDA_SUMSQ_PARTS;
    LAUNCH("gradient sum of squares", k_sumsq_part, (unsigned)parts, &part, &g, &nn);
    LAUNCH("gradient sum of squares", k_sumsq_final, 1, &out, &part, &parts);
    tr_status st = cu_download(d->rt, d->scratch_host, out, sizeof(double));
    if (st != TR_OK) cuda_fail(d, st, "gradient sum of squares");
    /* after any failed call the result would be a previous one: not a number instead */
    return d->err == TR_OK ? d->scratch_host[0] : NAN;
}

static void scale_inplace(float *g, size_t n, float s) {
    int64_t nn = (int64_t)n;
    LAUNCH("gradient scaling", k_scale_inplace, blocks_for(nn), &g, &nn, &s);
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
};
