/* batch_norm, then a 2x2 stride-2 max-pool, then ReLU, as one op: the tail of a conv block
 * (FashionCNN's conv, BN, ReLU, pool: max-pooling and ReLU are both monotone, so pooling
 * first gives the same values and sends the gradient to the same pixel).
 *
 * Separately the three ops write the normalised tensor, read it back to pool it, and in
 * backward write its full-size gradient (zero but at the winners) and read it twice more for
 * batch-norm's sums and input gradient. Here each thread normalises one plane into scratch
 * that stays in cache and pools it from there, and backward rebuilds a plane's gradient in
 * cache from the pooled one and the winners: the passes over full-size memory are batch-norm's
 * statistics (none after a conv, which notes them: op_note_plane_stats), reading x once to
 * pool it, and reading x and writing dx in backward (dx not written whole where the conv that
 * made x takes it plane by plane: bnp_backward_into_conv). The statistics, the
 * running-statistics update and sync_batchnorm's reductions are batch_norm's own (bn_check,
 * bn_compute). The results equal the three ops': bit for bit in the plain loops,
 * and where the AVX-512 planes run (f32) the forward bit for bit and the gradients to rounding
 * (their sums take the winners' terms in another order). */
#include <omp.h>

#include "autograd/node.h"
#include "ops/batch_norm.h"
#include "ops/conv2d_direct.h"
#include "ops/pool.h"
#include "trainer/ops.h"

/* The planes of 2x2 windows on AVX-512, f32: a row of windows is a few masked vectors (the
 * two input rows deinterleaved into each window's four pixels with permutes), so a plane is
 * normalised, pooled and rectified in registers (each window's winning input value kept), and
 * backward sums over the winners from those values alone and writes dx without building the
 * plane's dense gradient. Each returns 0 where it does not apply
 * (double, or no AVX-512) and the template's plane loops run instead. The forward is the
 * same value for value; backward's sums take the winners' terms only (the other pixels' are
 * zero) in another order, so dx, dgamma and dbeta agree to rounding. */
#define BNP2_NO_PLANES(type, sfx)                                                              \
    static int bnp2_forward_plane_##sfx(type *y, int32_t *am, type *xw, const type *x, type a, \
                                        type b, const pool_dims *d) {                          \
        (void)y, (void)am, (void)xw, (void)x, (void)a, (void)b, (void)d;                       \
        return 0;                                                                              \
    }                                                                                          \
    static int bnp2_sums_plane_##sfx(double *sdy, double *sdyx, const type *dout,             \
                                     const type *out, const type *xw, type mu, type is,        \
                                     int64_t n) {                                              \
        (void)sdy, (void)sdyx, (void)dout, (void)out, (void)xw, (void)mu, (void)is, (void)n;  \
        return 0;                                                                              \
    }                                                                                          \
    static int bnp2_dx_plane_##sfx(type *dx, const type *dout, const type *out,                \
                                   const int32_t *am, const type *x, type mu, type is, type a, \
                                   type b, type q, const pool_dims *d, int acc) {              \
        (void)dx, (void)dout, (void)out, (void)am, (void)x, (void)mu, (void)is, (void)a;       \
        (void)b, (void)q, (void)d, (void)acc;                                                  \
        return 0;                                                                              \
    }
BNP2_NO_PLANES(double, f64)

#if defined(__AVX512F__)
static int bnp2_forward_plane_f32(float *y, int32_t *am, float *xw, const float *x, float a,
                                  float b, const pool_dims *d) {
    const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b), zero = _mm512_setzero_ps();
    int32_t W = (int32_t)d->W;
    for (int64_t oh = 0; oh < d->OH; oh++) {
        const float *r0 = x + 2 * oh * d->W;
        int32_t base = (int32_t)(2 * oh * d->W);
        for (int64_t o = 0; o < d->OW; o += 16) {
            pool2_quad p = pool2_load(r0 + 2 * o, r0 + d->W + 2 * o, d->OW - o);
            pool2_quad z = {_mm512_fmadd_ps(p.a, va, vb), _mm512_fmadd_ps(p.b, va, vb), _mm512_fmadd_ps(p.c, va, vb),
                            _mm512_fmadd_ps(p.e, va, vb)};
            __m512i best;
            __m512 win, mx = pool2_max(z, pool2_index(base + 2 * (int32_t)o), W, &best, &p, &win);
            /* relu: max(x, 0) with relu's rule (a NaN is not > 0: 0) */
            mx = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mx, zero, _CMP_GT_OQ), mx);
            __mmask16 m = pool2_mask(d->OW - o);
            _mm512_mask_storeu_ps(y + oh * d->OW + o, m, mx);
            _mm512_mask_storeu_epi32(am + oh * d->OW + o, m, best);
            _mm512_mask_storeu_ps(xw + oh * d->OW + o, m, win);
        }
    }
    return 1;
}

/* relu's gradient of 16 outputs: dout where out > 0, else 0. */
static inline __m512 bnp2_dz(const float *dout, const float *out, __mmask16 m) {
    __m512 g = _mm512_maskz_loadu_ps(m, dout), v = _mm512_maskz_loadu_ps(m, out);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), g);
}

/* The sums over a plane's n outputs: only the winners have a gradient, relu's (dout where
 * out > 0), at the input value xw the forward kept. */
static int bnp2_sums_plane_f32(double *sdy, double *sdyx, const float *dout, const float *out,
                               const float *xw, float mu, float is, int64_t n) {
    __m512 s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps();
    const __m512 vmu = _mm512_set1_ps(mu), vis = _mm512_set1_ps(is);
    for (int64_t o = 0; o < n; o += 16) {
        __mmask16 m = pool2_mask(n - o);
        __m512 dz = bnp2_dz(dout + o, out + o, m);
        __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xw + o), vmu), vis);
        s1 = _mm512_add_ps(s1, dz);
        s2 = _mm512_fmadd_ps(dz, xhat, s2);
    }
    *sdy += (double)_mm512_reduce_add_ps(s1);
    *sdyx += (double)_mm512_reduce_add_ps(s2);
    return 1;
}

/* dx = a * (dy - b - (x - mu) * is * q) over the plane, dy the winners' dz and 0 elsewhere. */
static inline __m512 bnp2_dx(__m512 dy, __m512 x, __m512 vmu, __m512 vis, __m512 va, __m512 vb,
                             __m512 vq) {
    __m512 xq = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(x, vmu), vis), vq);
    return _mm512_mul_ps(va, _mm512_sub_ps(_mm512_sub_ps(dy, vb), xq));
}

static int bnp2_dx_plane_f32(float *dx, const float *dout, const float *out, const int32_t *am,
                             const float *x, float mu, float is, float a, float b, float q,
                             const pool_dims *d, int acc) {
    const __m512 vmu = _mm512_set1_ps(mu), vis = _mm512_set1_ps(is), va = _mm512_set1_ps(a);
    const __m512 vb = _mm512_set1_ps(b), vq = _mm512_set1_ps(q);
    int64_t W = d->W;
    for (int64_t oh = 0; oh < d->OH; oh++) {
        int64_t row = oh * d->OW;
        for (int64_t o = 0; o < d->OW; o += 16) {
            int64_t n = d->OW - o;
            __mmask16 m = pool2_mask(n), lo = pool2_mask(2 * n), hi = pool2_mask(2 * n - 16);
            __m512 dy[4];
            pool2_spread(bnp2_dz(dout + row + o, out + row + o, m), am + row + o, (int32_t)(2 * oh * W + 2 * o),
                         (int32_t)W, m, dy);
            const float *xs[4] = {x + 2 * oh * W + 2 * o, x + 2 * oh * W + 2 * o + 16,
                                  x + (2 * oh + 1) * W + 2 * o, x + (2 * oh + 1) * W + 2 * o + 16};
            float *ds[4] = {dx + 2 * oh * W + 2 * o, dx + 2 * oh * W + 2 * o + 16,
                            dx + (2 * oh + 1) * W + 2 * o, dx + (2 * oh + 1) * W + 2 * o + 16};
            __mmask16 ms[4] = {lo, hi, lo, hi};
            for (int k = 0; k < 4; k++) {
                __m512 v = bnp2_dx(dy[k], _mm512_maskz_loadu_ps(ms[k], xs[k]), vmu, vis, va, vb, vq);
                if (acc) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(ms[k], ds[k]));
                _mm512_mask_storeu_ps(ds[k], ms[k], v);
            }
        }
    }
    /* an odd last column and row are in no window: dy = 0 */
    for (int64_t h = 0; h < d->H; h++) {
        for (int64_t i = h < 2 * d->OH ? 2 * d->OW : 0; i < W; i++) {
            float v = a * (0.0f - b - (x[h * W + i] - mu) * is * q);
            dx[h * W + i] = acc ? dx[h * W + i] + v : v;
        }
    }
    return 1;
}
#else
BNP2_NO_PLANES(float, f32)
#endif

#define TR_GENERIC "ops/batch_norm_pool.inc"
#include "ops/generic.h"

static pool_dims bnp_dims(const tr_tensor *x) {
    pool_dims d = {.H = x->shape[2], .W = x->shape[3], .k = 2, .S = 2, .P = 0};
    d.OH = d.H / 2;
    d.OW = d.W / 2;
    return d;
}

/* Reals of scratch per thread: the pooled gradient (padded to 16) and one plane. */
static int64_t bnp_per_thread(const pool_dims *d) {
    return (d->OH * d->OW + 15) / 16 * 16 + (d->H * d->W + 15) / 16 * 16;
}

/* Whether x's planes are done in registers (bnp2_*: f32 on AVX-512), which keep the winners'
 * input values for backward; the template's plane loops need none. */
static int bnp_in_registers(tr_dtype dtype) {
#if defined(__AVX512F__)
    return dtype == TR_F32;
#else
    (void)dtype;
    return 0;
#endif
}

static void *bnp_scratch(tr_graph *g, const tr_tensor *x, const pool_dims *d) {
    size_t threads = (size_t)omp_get_max_threads();
    return op_data(g, threads * (size_t)bnp_per_thread(d) * tr_dtype_size(x->dtype));
}

/* What bnp_make_dy needs to make one plane of the input gradient (f32, AVX-512 planes). */
typedef struct bnp_dy_maker {
    const float *dout, *out, *x, *mean, *invstd, *gamma;
    const int32_t *argmax;
    const double *sdy, *sdyx; /* the sums dx is made from */
    double M;
    int batch;
    int64_t C, S, OHW;
    const pool_dims *d;
} bnp_dy_maker;

/* Plane p of the input gradient into dy (S floats): bnp_backward_dx's plane, the same values
 * (acc 0: the gradient is set, nothing else has written it). */
static void bnp_make_dy(void *ctx, int64_t p, void *dyv) {
    const bnp_dy_maker *m = ctx;
    float *dy = dyv;
    int64_t c = p % m->C;
    float mu = m->mean[c], is = m->invstd[c], a = (m->gamma ? m->gamma[c] : 1) * is;
    float b = m->batch ? (float)(m->sdy[c] / m->M) : 0, q = m->batch ? (float)(m->sdyx[c] / m->M) : 0;
    bnp2_dx_plane_f32(dy, m->dout + p * m->OHW, m->out + p * m->OHW, m->argmax + p * m->OHW, m->x + p * m->S, mu,
                      is, a, b, q, m->d, 0);
}

/* Whether the input gradient can go to the convolution that made x plane by plane, never
 * written whole: f32 planes in registers; x is the output of the conv2d node recorded just
 * before this one (so that node's backward runs next, and no op between them reads x's
 * gradient); x's gradient not yet begun (no later op used x). */
static int bnp_hands_to_conv(const tr_node *n, const tr_tensor *x) {
    return bnp_in_registers(x->dtype) && x->param < 0 && !x->view_of && !x->grad && x->requires_grad &&
           n->prev && n->prev->out == x && conv2d_takes_planes(n->prev);
}

/* The conv's backward, from the input gradient's planes as bnp_make_dy makes them (from this
 * node's own data); the conv's node then has no output gradient and the backward pass skips
 * it. */
static void bnp_backward_into_conv(tr_graph *g, tr_node *n, const double *gs, const pool_dims *d) {
    tr_tensor *x = n->in[0], *gamma = n->in[1];
    bnp_dy_maker m = {.dout = n->out->grad, .out = n->out->data, .x = x->data, .mean = n->saved[1],
                      .invstd = n->saved[2], .gamma = gamma ? gamma->data : NULL, .argmax = n->saved[0],
                      .sdy = gs, .sdyx = gs + x->shape[1], .M = (double)n->i[1], .batch = (int)n->i[0],
                      .C = x->shape[1], .S = d->H * d->W, .OHW = d->OH * d->OW, .d = d};
    conv2d_backward_from(g, n->prev, bnp_make_dy, &m);
}

static void batch_norm_pool_relu_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    void *dgamma = op_grad(g, gamma), *dbeta = op_grad(g, beta);
    int acc = 0, sync = (int)n->i[2];
    int hand = bnp_hands_to_conv(n, x);
    void *dx = hand ? NULL : op_grad_write(g, x, &acc);
    /* A synchronised layer takes part in the replicas' reduction, gradients or not. */
    if (!dx && !hand && !dgamma && !dbeta && !sync) return;
    int64_t N = x->shape[0], C = x->shape[1];
    pool_dims d = bnp_dims(x);
    void *scratch = bnp_scratch(g, x, &d);
    /* host: the reducer reads the sums; this replica's (2C), the global ones (2C), per plane (2NC) */
    double *sums = op_alloc(g, (size_t)(4 * C + 2 * N * C) * sizeof(double));
    if (!scratch || !sums) return;
    const void *gm = gamma ? gamma->data : NULL;
    int64_t per = bnp_per_thread(&d);
    TR_DISPATCH(x->dtype, bnp_backward_sums, sums, sums + C, sums + 4 * C, n->out->grad,
                n->out->data, n->saved[0], n->saved[3], x->data, n->saved[1], n->saved[2], scratch,
                per, N, C, &d);
    const double *gs = sums; /* the sums dx is made from */
    double M = (double)n->i[1]; /* N H W, or the global count when synced */
    if (sync) {
        op_copy(g, sums + 2 * C, sums, (size_t)(2 * C) * sizeof(double));
        if (!bn_reduce(g, sums + 2 * C, NULL, 2 * C, NULL)) return;
        gs = sums + 2 * C;
    }
    if (hand) bnp_backward_into_conv(g, n, gs, &d);
    if (dx)
        TR_DISPATCH(x->dtype, bnp_backward_dx, dx, gs, gs + C, M, n->out->grad, n->out->data,
                    n->saved[0], x->data, n->saved[1], n->saved[2], gm, (int)n->i[0], scratch, per,
                    N, C, &d, acc);
    TR_DISPATCH(x->dtype, bnp_param_grads, dgamma, dbeta, sums, sums + C, C);
}

tr_tensor *tr_batch_norm_pool_relu(tr_graph *g, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
                                   tr_tensor *running_mean, tr_tensor *running_var,
                                   double momentum, double eps) {
    const char *op = "batch_norm_pool_relu";
    if (x && x->ndim != 4)
        return op_fail(g, TR_ERR_INVALID, "%s: input %s must be (N, C, H, W)", op, op_shape(x));
    if (x && (x->shape[2] < 2 || x->shape[3] < 2 || x->shape[2] * x->shape[3] > INT32_MAX))
        return op_fail(g, TR_ERR_INVALID,
                       "%s: input %s: the 2x2 pool needs planes of at least 2x2 and fewer "
                       "than 2^31 pixels",
                       op, op_shape(x));
    /* On a device: the three ops, each its device's kernels (the same values; the fusion
     * saves passes over host memory). Their errors name them, and one from relu or the pool
     * (out of device memory) comes after batch_norm updated the running statistics. */
    if (op_kernels(g))
        return tr_max_pool2d(g, tr_relu(g, tr_batch_norm(g, x, gamma, beta, running_mean, running_var, momentum, eps)),
                             2, 2, 0);
    bn_stats s;
    if (!bn_check(g, op, x, gamma, beta, running_mean, running_var, momentum, eps, &s))
        return NULL;
    pool_dims d = bnp_dims(x);
    int64_t NC = s.N * s.C;
    tr_tensor *y = op_out(g, x->dtype, 4, (int64_t[]){s.N, s.C, d.OH, d.OW});
    int32_t *argmax = op_data(g, (size_t)(NC * d.OH * d.OW) * sizeof(int32_t) + 1);
    int in_regs = bnp_in_registers(x->dtype);
    void *xw = in_regs ? op_data(g, (size_t)(NC * d.OH * d.OW) * tr_dtype_size(x->dtype) + 1) : NULL;
    void *scratch = bnp_scratch(g, x, &d);
    if (!y || !argmax || (in_regs && !xw) || !scratch) return NULL;
    if (!bn_compute(g, x, running_mean, running_var, momentum, eps, &s)) return NULL;
    TR_DISPATCH(x->dtype, bnp_forward, y->data, argmax, xw, x->data, s.mean, s.invstd,
                gamma ? gamma->data : NULL, beta ? beta->data : NULL, scratch,
                bnp_per_thread(&d), s.N, s.C, &d);
    if (op_needs_grad(g, 3, x, gamma, beta) || (s.sync && tr_graph_grad_enabled(g))) {
        tr_node *n = op_record(g, op, batch_norm_pool_relu_backward, y, 3, x, gamma, beta);
        if (!n) return NULL;
        n->i[0] = s.batch;
        n->i[1] = s.M;
        n->i[2] = s.sync;
        n->saved[0] = argmax;
        n->saved[1] = s.mean;
        n->saved[2] = s.invstd;
        n->saved[3] = xw;
    }
    return y;
}
