/* Deferred weight gradients (autograd/fusion.h; ops/linear.c; tr_optim_step_tiles and _tn), piece by
 * piece; e2e_small_batch_step checks the whole cpu-strategy step against ddp x1.
 *
 * - tr_gemm_small_tn_norm2_f32 (the norm from Gram matrices) equals the sum of squares of the
 *   product computed in double (relative 1e-12), for K 1 to 16 and widths with vector tails;
 *   it is +inf for a NaN or infinity in either operand and when the float product could
 *   overflow (||A|| ||B|| above 1e37) or the sum cancels (a b^T - a b^T), and finite below
 *   that bound.
 * - The tn GEMM computed in row tiles and in column pieces gives the same bits as in one call.
 * - tr_optim_step_tiles gives the same bits as tr_optim_step_at on the stored gradient times
 *   the scale (Adam, AdamW, SGD with and without momentum and Nesterov, two steps each so
 *   momentum's first step and later ones both run), at an offset into the optimizer's slice,
 *   for shapes cut into whole-row tiles, row pieces (more than 4096 columns) and tiles run on
 *   two threads; every element is asked for exactly once; bad ranges are refused.
 * - tr_optim_step_tn gives the same bits as tr_optim_step_at on the product stored by the
 *   small-batch GEMM times the scale (Adam, AdamW with weight decay, Adam with L2, SGD with
 *   momentum through tiles; two steps each), for K 1 to 32, row counts with and without a
 *   tail of the 4-row blocks and widths with and without a masked 16-column tail, on one and
 *   two threads; a K outside 1..32, a range past the slice, a NULL operand and a bad lr are
 *   refused.
 * - In a graph that defers, a linear layer at batch 8 leaves its weight's gradient unwritten
 *   (the buffer keeps the NaN it was filled with) and notes its sum of squares; settled, the
 *   gradient is bit for bit the one a graph without deferral writes, and the note matches it
 *   (relative 1e-6). A weight used twice is settled when the second use adds to it. Nothing
 *   is deferred with notes off, for an accumulating backward, above batch 16, when x is a
 *   parameter or holds a NaN; a reset drops what is pending. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "autograd/node.h"
#include "check.h"
#include "kernels/gemm.h"
#include "optim/optim_impl.h"
#include "trainer/trainer.h"

static void fill_f(float *p, size_t n, uint64_t salt) {
    for (size_t i = 0; i < n; i++) p[i] = (float)test_value((uint64_t)i, salt);
}

/* ---- the norm from Gram matrices ---------------------------------------------------- */

static double norm2_exact(int64_t M, int64_t N, int64_t K, const float *A, const float *B) {
    double s = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double v = 0;
            for (int64_t k = 0; k < K; k++) v += (double)A[k * M + m] * (double)B[k * N + n];
            s += v * v;
        }
    return s;
}

static void norm2(void) {
    static float A[16 * 70], B[16 * 300];
    static const int64_t ks[] = {1, 2, 3, 7, 8, 9, 16};
    static const int64_t sizes[][2] = {{1, 1}, {5, 37}, {70, 300}, {33, 8}};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
            int64_t K = ks[i], M = sizes[j][0], N = sizes[j][1];
            fill_f(A, (size_t)(K * M), 1 + i), fill_f(B, (size_t)(K * N), 2 + j);
            double want = norm2_exact(M, N, K, A, B), got = tr_gemm_small_tn_norm2_f32(M, N, K, A, M, B, N);
            CHECK(fabs(got - want) <= 1e-12 * want, "norm2 M %lld N %lld K %lld: %.17g, want %.17g", (long long)M,
                  (long long)N, (long long)K, got, want);
        }
    fill_f(A, 8 * 70, 3), fill_f(B, 8 * 300, 4);
    A[100] = NAN;
    CHECK(tr_gemm_small_tn_norm2_f32(70, 300, 8, A, 70, B, 300) == INFINITY, "norm2: a NaN in A gives +inf");
    fill_f(A, 8 * 70, 3);
    B[299] = -INFINITY;
    CHECK(tr_gemm_small_tn_norm2_f32(70, 300, 8, A, 70, B, 300) == INFINITY, "norm2: an infinity in B gives +inf");
    /* ||A|| ||B|| above 1e37 is refused; sqrt(40 x 56) x 1e34 = 4.7e35 is not, nor 1e19 more. */
    for (int i = 0; i < 8 * 5; i++) A[i] = 1e17f;
    for (int i = 0; i < 8 * 7; i++) B[i] = -1e17f;
    double s = tr_gemm_small_tn_norm2_f32(5, 7, 8, A, 5, B, 7), e = (double)1e17f, want = 35 * 64 * e * e * e * e;
    CHECK(isfinite(s) && fabs(s - want) <= 1e-12 * want, "norm2: 1e17 entries: %.17g, want %.17g", s, want);
    A[3] = 1e19f;
    CHECK(isfinite(tr_gemm_small_tn_norm2_f32(5, 7, 8, A, 5, B, 7)), "norm2: one entry of 1e19 (norms' product 7.5e36): finite");
    /* dW = a b^T - a b^T = 0: the Gram sum cancels to rounding noise, refused rather than trusted */
    {
        float a2[2 * 37], b2[2 * 50];
        fill_f(a2, 37, 41), fill_f(b2, 50, 42);
        for (int i = 0; i < 37; i++) a2[37 + i] = -a2[i];
        memcpy(b2 + 50, b2, 50 * sizeof(float));
        CHECK(tr_gemm_small_tn_norm2_f32(37, 50, 2, a2, 37, b2, 50) == INFINITY, "norm2: a cancelling product: +inf");
    }
    A[3] = 1e20f;
    CHECK(tr_gemm_small_tn_norm2_f32(5, 7, 8, A, 5, B, 7) == INFINITY, "norm2: a product that may overflow float: +inf");
}

/* ---- the tn GEMM in pieces ------------------------------------------------------------ */

static void tn_pieces(int64_t M, int64_t N, int64_t K, int64_t rb, int64_t cb) {
    static float A[16 * 300], B[16 * 5000], C1[300 * 5000], C2[300 * 5000];
    fill_f(A, (size_t)(K * M), 5), fill_f(B, (size_t)(K * N), 6);
    tr_gemm_small_f32(1, 0, M, N, K, 1, A, M, B, N, 0, C1, N);
    for (int64_t r = 0; r < M; r += rb)
        for (int64_t c = 0; c < N; c += cb) {
            int64_t r1 = r + rb < M ? r + rb : M, c1 = c + cb < N ? c + cb : N;
            tr_gemm_small_f32(1, 0, r1 - r, c1 - c, K, 1, A + r, M, B + c, N, 0, C2 + r * N + c, N);
        }
    CHECK(memcmp(C1, C2, (size_t)(M * N) * sizeof(float)) == 0, "tn M %lld N %lld K %lld in %lld-row, %lld-column pieces differs",
          (long long)M, (long long)N, (long long)K, (long long)rb, (long long)cb);
}

/* ---- tr_optim_step_tiles -------------------------------------------------------------- */

typedef struct tiles_ctx {
    size_t cols;
    float scale_in;     /* the gradient's values are test_value * this */
    atomic_int *asked;  /* per element: how many times a tile held it */
} tiles_ctx;

static float grad_value(size_t i) { return (float)test_value((uint64_t)i, 77); }

static void tile_fn(const void *ctx, size_t r0, size_t r1, size_t c0, size_t c1, float *out) {
    const tiles_ctx *t = ctx;
    for (size_t r = r0; r < r1; r++)
        for (size_t c = c0; c < c1; c++) {
            out[(r - r0) * (c1 - c0) + (c - c0)] = grad_value(r * t->cols + c) * t->scale_in;
            atomic_fetch_add(&t->asked[r * t->cols + c], 1);
        }
}

/* The two optimizers and their parameters (n floats each) hold the same bits. */
static void same_steps(tr_optim *a, tr_optim *b, const float *pa, const float *pb, size_t n, const char *what) {
    CHECK(memcmp(pa, pb, n * sizeof *pa) == 0, "%s: parameters differ from the stored gradient's step", what);
    for (int s = 0; s < tr_optim_state_count(a); s++)
        CHECK(memcmp(tr_optim_state(a, s), tr_optim_state(b, s), n * sizeof(float)) == 0, "%s: state %s differs", what,
              tr_optim_state_name(a, s));
}

static void step_tiles(tr_optim_config oc, const char *name, size_t rows, size_t cols, float scale, int threads) {
    char what[128];
    snprintf(what, sizeof what, "%s %zu x %zu, scale %g, %d thread%s", name, rows, cols, (double)scale, threads,
             threads > 1 ? "s" : "");
    tr_set_num_threads(threads);
    size_t lo = 37, n = lo + rows * cols + 11;
    tr_optim *a, *b;
    CHECK(tr_optim_create(&a, &oc, n) == TR_OK && tr_optim_create(&b, &oc, n) == TR_OK, "%s: create", what);
    float *pa = tr_malloc(n * sizeof *pa), *pb = tr_malloc(n * sizeof *pb), *g = tr_malloc(n * sizeof *g);
    atomic_int *asked = tr_calloc(rows * cols, sizeof *asked);
    fill_f(pa, n, 9);
    memcpy(pb, pa, n * sizeof *pa);
    tiles_ctx ctx = {.cols = cols, .scale_in = 1.0f, .asked = asked};
    for (int step = 0; step < 2; step++) {
        for (size_t i = 0; i < rows * cols; i++) g[lo + i] = grad_value(i) * scale; /* what the stored path scales */
        CHECK(tr_optim_step_at(a, pa + lo, g + lo, lo, lo + rows * cols, 1e-2) == TR_OK, "%s: step_at", what);
        tr_optim_step_done(a);
        CHECK(tr_optim_step_tiles(b, pb + lo, lo, rows, cols, tile_fn, &ctx, scale, 1e-2) == TR_OK, "%s: tiles: %s",
              what, tr_error_msg());
        tr_optim_step_done(b);
    }
    same_steps(a, b, pa, pb, n, what);
    int once = 1;
    for (size_t i = 0; i < rows * cols; i++) once &= asked[i] == 2;
    CHECK(once, "%s: an element was not asked for exactly once a step", what);
    tr_free(asked), tr_free(g), tr_free(pb), tr_free(pa);
    tr_optim_destroy(b), tr_optim_destroy(a);
    tr_set_num_threads(1);
}

static void step_tiles_all(void) {
    tr_optim_config adamw = tr_optim_defaults(TR_OPTIM_ADAMW), adam = tr_optim_defaults(TR_OPTIM_ADAM);
    tr_optim_config sgd = tr_optim_defaults(TR_OPTIM_SGD), mom = sgd, nest = sgd;
    adam.weight_decay = 0.1;
    mom.momentum = 0.9, mom.weight_decay = 0.01, mom.dampening = 0.1;
    nest.momentum = 0.8, nest.nesterov = 1;
    static const size_t shapes[][2] = {{1, 1}, {5, 37}, {300, 70}, {3, 5000}, {70, 600}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        size_t r = shapes[i][0], c = shapes[i][1];
        step_tiles(adamw, "adamw", r, c, 1.0f, 1);
        step_tiles(adamw, "adamw", r, c, 0.37f, 2);
        step_tiles(adam, "adam", r, c, 0.37f, 1);
        step_tiles(sgd, "sgd", r, c, 1.0f, 2);
        step_tiles(mom, "sgd momentum", r, c, 0.5f, 1);
        step_tiles(nest, "sgd nesterov", r, c, 1.0f, 2);
    }
    tr_optim *o;
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    tr_optim_create(&o, &oc, 100);
    float p[100] = {0};
    atomic_int asked[100];
    tiles_ctx ctx = {.cols = 10, .scale_in = 1, .asked = asked};
    CHECK(tr_optim_step_tiles(o, p + 10, 10, 10, 10, tile_fn, &ctx, 1, 1e-3) == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "not within"),
          "tiles past the slice refused: %s", tr_error_msg());
    CHECK(tr_optim_step_tiles(o, p, 0, 2, 5, NULL, &ctx, 1, 1e-3) == TR_ERR_INVALID, "a NULL tile function refused");
    CHECK(tr_optim_step_tiles(o, p, 0, 2, 5, tile_fn, &ctx, 1, NAN) == TR_ERR_INVALID, "a NaN lr refused");
    CHECK(tr_optim_step_tiles(o, p, 0, 0, 5, tile_fn, &ctx, 1, 1e-3) == TR_OK, "no rows: nothing to do");
    tr_optim_destroy(o);
}

/* ---- tr_optim_step_tn ------------------------------------------------------------------ */

/* The product computed by the small-batch GEMM and stored, then tr_optim_step_at on it times
 * scale, against tr_optim_step_tn (fused for Adam on AVX-512 hosts, tiles elsewhere). */
static void step_tn(tr_optim_config oc, const char *name, size_t rows, size_t cols, size_t K, float scale, int threads) {
    char what[128];
    snprintf(what, sizeof what, "%s %zu x %zu, K %zu, scale %g, %d thread%s", name, rows, cols, K, (double)scale,
             threads, threads > 1 ? "s" : "");
    tr_set_num_threads(threads);
    size_t lo = 21, n = lo + rows * cols + 16; /* a guard past the end as wide as a vector's stores */
    tr_optim *a, *b;
    CHECK(tr_optim_create(&a, &oc, n) == TR_OK && tr_optim_create(&b, &oc, n) == TR_OK, "%s: create", what);
    float *pa = tr_malloc(n * sizeof *pa), *pb = tr_malloc(n * sizeof *pb), *g = tr_malloc(n * sizeof *g);
    float *A = tr_malloc(K * rows * sizeof *A), *B = tr_malloc(K * cols * sizeof *B);
    fill_f(pa, n, 5);
    memcpy(pb, pa, n * sizeof *pa);
    for (int step = 0; step < 2; step++) {
        fill_f(A, K * rows, 40 + (uint64_t)step), fill_f(B, K * cols, 50 + (uint64_t)step);
        tr_gemm_linear_f32(1, 0, (int64_t)rows, (int64_t)cols, (int64_t)K, 1, A, (int64_t)rows, B, (int64_t)cols, 0,
                           g + lo, (int64_t)cols);
        if (scale != 1.0f)
            for (size_t i = 0; i < rows * cols; i++) g[lo + i] *= scale;
        CHECK(tr_optim_step_at(a, pa + lo, g + lo, lo, lo + rows * cols, 3e-2) == TR_OK, "%s: step_at", what);
        tr_optim_step_done(a);
        CHECK(tr_optim_step_tn(b, pb + lo, lo, rows, cols, K, A, B, scale, 3e-2) == TR_OK, "%s: tn: %s", what,
              tr_error_msg());
        tr_optim_step_done(b);
    }
    same_steps(a, b, pa, pb, n, what);
    int moved = 0;
    for (size_t i = lo; i < lo + rows * cols; i++) moved += pb[i] != (float)test_value((uint64_t)i, 5);
    CHECK(moved > (int)(rows * cols) / 2, "%s: only %d of %zu parameters moved", what, moved, rows * cols);
    tr_free(B), tr_free(A), tr_free(g), tr_free(pb), tr_free(pa);
    tr_optim_destroy(b), tr_optim_destroy(a);
    tr_set_num_threads(1);
}

static void step_tn_all(void) {
    printf("tr_optim_step_tn: %s\n", optim_adam_tn_fused() ? "fused Adam kernel" : "tiles (no AVX-512 in this build)");
#if defined(__AVX512F__) && defined(__FMA__)
    CHECK(optim_adam_tn_fused(), "built for AVX-512, yet tr_optim_step_tn has no fused kernel");
#endif
    tr_optim_config adamw = tr_optim_defaults(TR_OPTIM_ADAMW), adam = tr_optim_defaults(TR_OPTIM_ADAM);
    tr_optim_config l2 = adam, sgd = tr_optim_defaults(TR_OPTIM_SGD);
    l2.weight_decay = 0.1, sgd.momentum = 0.9;
    adamw.weight_decay = 0.05;
    /* rows: whole blocks of 4 and a tail; cols: whole vectors of 16, a masked tail, under 16 */
    static const size_t shapes[][2] = {{1, 1}, {4, 16}, {7, 37}, {70, 300}, {9, 5}, {130, 784}};
    static const size_t ks[] = {1, 3, 8, 16, 32};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t j = 0; j < sizeof ks / sizeof *ks; j++) {
            size_t r = shapes[i][0], c = shapes[i][1], K = ks[j];
            step_tn(adamw, "adamw", r, c, K, 1.0f, 1);
            step_tn(adam, "adam", r, c, K, 0.37f, 1);
            step_tn(l2, "adam l2", r, c, K, j % 2 ? 0.37f : 1.0f, 1);
        }
    step_tn(adamw, "adamw", 130, 784, 8, 0.5f, 2); /* above OPTIM_PAR_MIN: blocks on two threads */
    step_tn(sgd, "sgd momentum", 70, 300, 8, 0.37f, 2);
    tr_optim *o;
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    tr_optim_create(&o, &oc, 100);
    float p[100] = {0}, A[33 * 10] = {0}, B[33 * 10] = {0};
    CHECK(tr_optim_step_tn(o, p, 0, 10, 10, 33, A, B, 1, 1e-3) == TR_ERR_INVALID && strstr(tr_error_msg(), "K = 33"),
          "K 33 refused: %s", tr_error_msg());
    CHECK(tr_optim_step_tn(o, p, 0, 10, 10, 0, A, B, 1, 1e-3) == TR_ERR_INVALID, "K 0 refused");
    CHECK(tr_optim_step_tn(o, p + 10, 10, 10, 10, 8, A, B, 1, 1e-3) == TR_ERR_INVALID && strstr(tr_error_msg(), "not within"),
          "a product past the slice refused: %s", tr_error_msg());
    CHECK(tr_optim_step_tn(o, p, 0, 2, 5, 8, NULL, B, 1, 1e-3) == TR_ERR_INVALID, "a NULL operand refused");
    CHECK(tr_optim_step_tn(o, p, 0, 2, 5, 8, A, B, 1, INFINITY) == TR_ERR_INVALID, "an infinite lr refused");
    tr_optim_destroy(o);
}

/* ---- deferral in the graph ------------------------------------------------------------ */

enum { C_ = 300, OC_ = 70 };

typedef struct net {
    tr_params *P;
    tr_graph *g;
    tr_fusion *f; /* lent to g, as the cpu strategy's step lends its own */
    double noted;  /* the weight's note, seen from the ready hook; NaN: none */
} net;

static void hook(void *user, int p) {
    net *n = user;
    if (p == 0 && !tr_fusion_grad_sumsq_(n->f, 0, &n->noted)) n->noted = NAN;
}

/* Parameters w (OC_, C_), b (OC_) and, with xparam, a parameter x (B, C_); gradients NaN. */
static void net_make(net *n, int64_t B, int defer, int xparam) {
    memset(n, 0, sizeof *n);
    int i;
    tr_params_create(&n->P);
    tr_params_add(n->P, "w", 2, (int64_t[]){OC_, C_}, TR_INIT_ZEROS, 0, &i);
    tr_params_add(n->P, "b", 1, (int64_t[]){OC_}, TR_INIT_ZEROS, 0, &i);
    if (xparam) tr_params_add(n->P, "x", 2, (int64_t[]){B, C_}, TR_INIT_ZEROS, 0, &i);
    tr_params_finalize(n->P, 1);
    fill_f(tr_params_data(n->P), tr_params_numel(n->P), 21);
    float *g = tr_params_grad(n->P);
    for (size_t k = 0; k < tr_params_numel(n->P); k++) g[k] = NAN;
    tr_graph_create(&n->g, 0);
    tr_graph_set_params(n->g, n->P);
    tr_graph_set_grad_hook(n->g, hook, n);
    n->noted = NAN;
    CHECK(tr_fusion_create_(&n->f) == TR_OK, "fusion: %s", tr_error_msg());
    tr_graph_set_fusion_(n->g, n->f);
    CHECK(tr_fusion_note_grad_sumsq_(n->f, n->P, 1) == TR_OK && tr_fusion_defer_grads_(n->f, n->P, defer) == TR_OK,
          "graph setup");
}

static void net_free(net *n) {
    tr_graph_destroy(n->g);
    tr_fusion_destroy_(n->f);
    tr_params_destroy(n->P);
}

static tr_tensor *x_input(net *n, int64_t B, uint64_t salt) {
    tr_tensor *x = tr_graph_input(n->g, TR_F32, 2, (int64_t[]){B, C_});
    fill_f(x->data, (size_t)(B * C_), salt);
    return x;
}

/* sum(linear(x, w, b) * r), or with twice: that plus the same with a second x */
static tr_status net_backward(net *n, int64_t B, int twice, int first, tr_tensor *x) {
    tr_graph *g = n->g;
    tr_tensor *w = tr_params_get(n->P, 0), *b = tr_params_get(n->P, 1);
    tr_tensor *r = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, OC_});
    fill_f(r->data, (size_t)(B * OC_), 31);
    tr_tensor *loss = tr_sum(g, tr_mul(g, tr_linear(g, x ? x : x_input(n, B, 30), w, b), r));
    if (twice) loss = tr_add(g, loss, tr_sum(g, tr_mul(g, tr_linear(g, x_input(n, B, 32), w, NULL), r)));
    if (first) TR_CHECK(tr_graph_write_param_grads(g));
    return tr_backward(g, loss, NULL);
}

static int all_nan(const float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isnan(p[i])) return 0;
    return 1;
}

static void deferred_equals_written(int twice) {
    const char *what = twice ? "w used twice" : "w used once";
    net d, s;
    net_make(&d, 8, 1, 0), net_make(&s, 8, 0, 0);
    CHECK(net_backward(&d, 8, twice, 1, NULL) == TR_OK && net_backward(&s, 8, twice, 1, NULL) == TR_OK, "%s: backward: %s",
          what, tr_error_msg());
    tr_tensor *wd = tr_params_get(d.P, 0), *ws = tr_params_get(s.P, 0);
    size_t nw = (size_t)OC_ * C_;
    if (!twice) {
        CHECK(tr_fusion_deferred_(d.f, 0) && !tr_fusion_deferred_(d.f, 1) && tr_fusion_deferred_any_(d.f),
              "%s: the weight deferred, the bias not", what);
        CHECK(all_nan(wd->grad, nw), "%s: a deferred gradient's buffer is left alone", what);
        CHECK(!tr_fusion_deferred_(s.f, 0), "%s: nothing deferred with deferral off", what);
        tr_fusion_settle_deferred_(d.f, d.P);
        CHECK(!tr_fusion_deferred_any_(d.f), "%s: settled, nothing pending", what);
    } else { /* the later use's backward deferred, the earlier one's settled it and added (noting the total) */
        CHECK(!tr_fusion_deferred_any_(d.f), "%s: the second use settled it and added", what);
    }
    double truth = tr_grad_sumsq(wd->grad, nw);
    CHECK(fabs(d.noted - truth) <= 1e-6 * truth, "%s: noted %.9g, the gradient's sum %.9g", what, d.noted, truth);
    CHECK(memcmp(wd->grad, ws->grad, nw * sizeof(float)) == 0, "%s: the gradient differs from the written one", what);
    CHECK(memcmp(tr_params_get(d.P, 1)->grad, tr_params_get(s.P, 1)->grad, OC_ * sizeof(float)) == 0, "%s: bias", what);
    net_free(&d), net_free(&s);
}

static void not_deferred(void) {
    net n;
    /* notes off */
    net_make(&n, 8, 1, 0);
    tr_fusion_note_grad_sumsq_(n.f, n.P, 0);
    CHECK(net_backward(&n, 8, 0, 1, NULL) == TR_OK && !tr_fusion_deferred_any_(n.f), "notes off: not deferred");
    net_free(&n);
    /* an accumulating backward (not fresh) */
    net_make(&n, 8, 1, 0);
    CHECK(net_backward(&n, 8, 0, 0, NULL) == TR_OK && !tr_fusion_deferred_any_(n.f), "accumulating: not deferred");
    net_free(&n);
    /* batch 17: above the deferral limit (the recomputation would cost more than it saves) */
    net_make(&n, 17, 1, 0);
    CHECK(net_backward(&n, 17, 0, 1, NULL) == TR_OK && !tr_fusion_deferred_any_(n.f), "batch 17: not deferred");
    net_free(&n);
    /* x a parameter (the step would change it under the recomputation) */
    net_make(&n, 8, 1, 1);
    CHECK(net_backward(&n, 8, 0, 1, tr_params_get(n.P, 2)) == TR_OK && !tr_fusion_deferred_any_(n.f),
          "x a parameter: not deferred");
    net_free(&n);
    /* a NaN in x: written, and the hook's own sum says NaN */
    net_make(&n, 8, 1, 0);
    tr_tensor *x = x_input(&n, 8, 30);
    ((float *)x->data)[5] = NAN;
    CHECK(net_backward(&n, 8, 0, 1, x) == TR_OK && !tr_fusion_deferred_any_(n.f) && isnan(n.noted),
          "a NaN in x: not deferred, nothing noted");
    net_free(&n);
    /* a reset drops what is pending */
    net_make(&n, 8, 1, 0);
    CHECK(net_backward(&n, 8, 0, 1, NULL) == TR_OK && tr_fusion_deferred_any_(n.f), "deferred before the reset");
    tr_graph_reset(n.g);
    CHECK(!tr_fusion_deferred_any_(n.f) && !tr_fusion_deferred_(n.f, 0), "a reset drops deferred gradients");
    net_free(&n);
}

int main(void) {
    norm2();
    static const int64_t tn[][5] = {{300, 120, 8, 34, 120}, {70, 300, 8, 13, 300}, {33, 5000, 16, 1, 4096},
                                    {37, 100, 7, 3, 100}, {37, 100, 1, 5, 48}, {5, 37, 16, 2, 16}};
    for (size_t i = 0; i < sizeof tn / sizeof *tn; i++) tn_pieces(tn[i][0], tn[i][1], tn[i][2], tn[i][3], tn[i][4]);
    step_tiles_all();
    step_tn_all();
    deferred_equals_written(0);
    deferred_equals_written(1);
    not_deferred();
    return test_finish();
}
