/* A convolution and the fused batch-norm, max-pool and ReLU after it (FashionCNN's blocks).
 *
 * Forward: the plane statistics a convolution notes for its output in training (ops/conv2d.c,
 * autograd/node.h: op_note_plane_stats), which the batch-norm that reads that output next
 * takes instead of reading it (ops/batch_norm.c: bn_compute). Checked:
 * - the noted sums and squared deviations of every plane against the test's own, in double;
 * - batch_norm and batch_norm_pool_relu after conv2d (noted statistics) against the same ops
 *   on a copy of the conv's output (statistics read from memory): outputs and running
 *   statistics equal bit for bit, and the running statistics match the test's two-pass mean
 *   and variance in double, also for a channel whose mean is 3000 times its spread;
 * - both conv paths (the direct one for a one-channel input, im2col + GEMM for three), f32 and
 *   f64, 1 and 2 threads, with and without a stat reducer (sync_batchnorm);
 * - notes are taken only where they stay true: none in eval mode, none used once another op
 *   has begun since the conv, nor for another tensor, even a reshape view of the conv's
 *   output taken by the very next op (a bogus note is then never read).
 *
 * Backward: the fused op hands its input gradient to the conv that made its input plane by
 * plane (ops/batch_norm_pool.c, conv2d_backward_from) and never writes it whole. Checked: the
 * conv's weight, bias and input gradients and the batch-norm's are bit for bit those of the
 * same graph with a reshape view between the two ops (which writes the whole gradient), and
 * the conv's output then has no gradient buffer; both conv paths (direct, and im2col + GEMM),
 * with and without an input gradient, sizes with a row and a column in no pooling window and
 * 16-lane tails and odd planes, 1 and 2 threads, with and without a stat reducer; a conv
 * output another op also reads keeps the whole gradient (and the same values). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "check.h"
#include "trainer/trainer.h"

enum { N = 6, OC = 4, H = 20, W = 29 }; /* past the sizes where the kernels go parallel */
enum { FUSED = 1, SYNC = 2 };

typedef struct conv_case {
    int64_t C, pad;
} conv_case;

/* A graph lent a tr_fusion, which keeps the plane statistics, as a replica lends its own. */
static tr_graph *graph_new(tr_fusion **f) {
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_fusion_create_(f);
    tr_graph_set_fusion_(g, *f);
    return g;
}

static void graph_free(tr_graph *g, tr_fusion *f) {
    tr_graph_destroy(g);
    tr_fusion_destroy_(f);
}

static void set(tr_tensor *t, int64_t i, double v) {
    if (t->dtype == TR_F64) ((double *)t->data)[i] = v;
    else ((float *)t->data)[i] = (float)v;
}

static double get(const tr_tensor *t, int64_t i) {
    return t->dtype == TR_F64 ? ((const double *)t->data)[i] : ((const float *)t->data)[i];
}

/* Input, weight and bias; channel 2's bias is 3000 (its outputs' spread is about 1). */
static tr_tensor *conv_of(tr_graph *g, tr_dtype dt, const conv_case *cc) {
    int64_t xs[4] = {N, cc->C, H, W}, ws[4] = {OC, cc->C, 3, 3}, bs[1] = {OC};
    tr_tensor *x = tr_graph_input(g, dt, 4, xs), *w = tr_graph_input(g, dt, 4, ws);
    tr_tensor *b = tr_graph_input(g, dt, 1, bs);
    if (!x || !w || !b) return NULL;
    for (int64_t i = 0; i < tr_tensor_numel(x); i++) set(x, i, test_value((uint64_t)i, 1));
    for (int64_t i = 0; i < tr_tensor_numel(w); i++) set(w, i, test_value((uint64_t)i, 2));
    for (int64_t o = 0; o < OC; o++) set(b, o, o == 2 ? 3000.0 : test_value((uint64_t)o, 3));
    return tr_conv2d(g, x, w, b, 1, (int)cc->pad);
}

static tr_status add_replica(void *user, double *values, int n) {
    (void)user;
    for (int i = 0; i < n; i++) values[i] = 2 * values[i] + 1;
    return TR_OK;
}

typedef struct outcome {
    double *z, rm[2 * OC], rv[2 * OC];
    int64_t nz;
} outcome;

/* BN (plain or fused) of y (OC channels, or 2 * OC with WIDE) with running statistics
 * starting at 0 and 1. */
enum { WIDE = 64 };
static int normalise(tr_graph *g, tr_tensor *y, int f, outcome *out) {
    int64_t C = f & WIDE ? 2 * OC : OC, cs[1] = {C};
    tr_tensor *rm = tr_graph_input(g, y->dtype, 1, cs), *rv = tr_graph_input(g, y->dtype, 1, cs);
    if (!rm || !rv) return 0;
    for (int64_t c = 0; c < C; c++) set(rm, c, 0), set(rv, c, 1);
    tr_tensor *z = f & FUSED ? tr_batch_norm_pool_relu(g, y, NULL, NULL, rm, rv, 0.5, 1e-5)
                             : tr_batch_norm(g, y, NULL, NULL, rm, rv, 0.5, 1e-5);
    if (!z) return 0;
    out->nz = tr_tensor_numel(z);
    out->z = calloc((size_t)out->nz, sizeof(double));
    for (int64_t i = 0; i < out->nz; i++) out->z[i] = get(z, i);
    for (int64_t c = 0; c < C; c++) out->rm[c] = get(rm, c), out->rv[c] = get(rv, c);
    return 1;
}

static int normalise8(tr_graph *g, tr_tensor *y, outcome *out) { return normalise(g, y, WIDE, out); }

static void run_case(tr_dtype dt, const conv_case *cc, int f) {
    const char *dn = dt == TR_F64 ? "f64" : "f32";
    double tol = dt == TR_F64 ? 1e-12 : 1e-5;
    tr_fusion *fu, *fu2;
    tr_graph *g = graph_new(&fu), *g2 = graph_new(&fu2);
    if (f & SYNC) tr_graph_set_stat_reducer(g, add_replica, NULL), tr_graph_set_stat_reducer(g2, add_replica, NULL);
    tr_tensor *y = conv_of(g, dt, cc);
    CHECK(y != NULL, "%s C=%lld: conv2d failed: %s", dn, (long long)cc->C, tr_error_msg());
    if (!y) {
        graph_free(g, fu);
        graph_free(g2, fu2);
        return;
    }
    int64_t S = y->shape[2] * y->shape[3];
    /* what the conv noted, as the next op sees it (a conv on g2 and op_begin: g stays as it is) */
    tr_tensor *y3 = conv_of(g2, dt, cc);
    op_begin(g2);
    const double *ps = y3 ? op_plane_stats(g2, y3) : NULL;
    CHECK(ps != NULL, "%s C=%lld: conv2d noted no plane statistics in training", dn, (long long)cc->C);
    /* the test's own: per plane in double, per channel two-pass */
    double mean[OC] = {0}, var[OC] = {0};
    for (int64_t p = 0; p < N * OC; p++) {
        double s = 0, q = 0;
        for (int64_t i = 0; i < S; i++) s += get(y, p * S + i);
        double c = dt == TR_F64 ? s / (double)S : (double)(float)(s / (double)S);
        for (int64_t i = 0; i < S; i++) q += (get(y, p * S + i) - c) * (get(y, p * S + i) - c);
        if (ps) {
            CHECK(fabs(ps[2 * p] - s) <= tol * (fabs(s) + S), "%s plane %lld: sum %.12g, expected %.12g", dn,
                  (long long)p, ps[2 * p], s);
            CHECK(fabs(ps[2 * p + 1] - q) <= tol * (q + 1e-3), "%s plane %lld: squared deviations %.12g, expected %.12g",
                  dn, (long long)p, ps[2 * p + 1], q);
        }
        mean[p % OC] += s;
    }
    double M = (double)(N * S);
    if (f & SYNC) /* the reducer's second replica: sums 2s + 1 over a count of 2M + 1 */
        for (int64_t c = 0; c < OC; c++) mean[c] = (2 * mean[c] + 1) / (2 * M + 1);
    else
        for (int64_t c = 0; c < OC; c++) mean[c] /= M;
    for (int64_t p = 0; p < N * OC; p++) {
        /* squared deviations from the mean the op normalises with (rounded to the dtype) */
        double m = dt == TR_F64 ? mean[p % OC] : (double)(float)mean[p % OC];
        for (int64_t i = 0; i < S; i++) var[p % OC] += (get(y, p * S + i) - m) * (get(y, p * S + i) - m);
    }
    double Mg = f & SYNC ? 2 * M + 1 : M;
    for (int64_t c = 0; c < OC; c++) var[c] = (f & SYNC ? 2 * var[c] + 1 : var[c]) / Mg;

    /* the same BN on a copy of y: statistics read from memory */
    tr_graph_reset(g2);
    tr_tensor *y2 = tr_graph_input(g2, dt, 4, y->shape);
    memcpy(y2->data, y->data, tr_tensor_bytes(y));
    CHECK(op_plane_stats(g2, y2) == NULL, "%s: a graph input has plane statistics", dn);
    outcome a = {0}, b = {0};
    int ok = normalise(g, y, f, &a) && normalise(g2, y2, f, &b);
    CHECK(ok, "%s C=%lld f=%d: batch-norm failed: %s", dn, (long long)cc->C, f, tr_error_msg());
    if (ok) {
        double zmax = 0, zd = 0;
        for (int64_t i = 0; i < a.nz; i++) zmax = fmax(zmax, fabs(b.z[i])), zd = fmax(zd, fabs(a.z[i] - b.z[i]));
        /* the same plane statistics (one function, the same data): the same bits */
        CHECK(zd == 0, "%s C=%lld f=%d: outputs differ by %g (max %g)", dn, (long long)cc->C, f, zd, zmax);
        for (int64_t c = 0; c < OC; c++) {
            double rm = 0.5 * mean[c], rv = 0.5 + 0.5 * var[c] * Mg / (Mg - 1);
            CHECK(fabs(a.rm[c] - rm) <= tol * (fabs(rm) + 1), "%s C=%lld f=%d ch %lld: running mean %.10g, expected %.10g",
                  dn, (long long)cc->C, f, (long long)c, a.rm[c], rm);
            CHECK(fabs(a.rv[c] - rv) <= 1e-4 * rv, "%s C=%lld f=%d ch %lld: running var %.10g, expected %.10g", dn,
                  (long long)cc->C, f, (long long)c, a.rv[c], rv);
            CHECK(a.rm[c] == b.rm[c] && a.rv[c] == b.rv[c],
                  "%s C=%lld f=%d ch %lld: running statistics (%.10g, %.10g) noted, (%.10g, %.10g) read", dn,
                  (long long)cc->C, f, (long long)c, a.rm[c], a.rv[c], b.rm[c], b.rv[c]);
        }
    }
    free(a.z), free(b.z);
    graph_free(g, fu);
    graph_free(g2, fu2);
}

/* Whether notes are taken and read only where they are true. Eval mode takes none. A bogus
 * note (every plane: sum 0, deviations 0) planted for the conv's output is read by the
 * batch-norm right after it (running mean 0: the note path is the one the cases above test),
 * and not once another op has begun since (running statistics as from memory). */
static void stale(void) {
    conv_case cc = {1, 1};
    tr_fusion *fu, *fu2;
    tr_graph *g = graph_new(&fu), *g2 = graph_new(&fu2);
    tr_graph_set_training(g, 0);
    tr_tensor *y = conv_of(g, TR_F32, &cc);
    op_begin(g);
    CHECK(y && op_plane_stats(g, y) == NULL, "eval mode: conv2d noted plane statistics");
    tr_graph_reset(g);
    tr_graph_set_training(g, 1);
    double *bogus = calloc((size_t)(2 * N * OC), sizeof(double));
    outcome a = {0}, b = {0}, c = {0};
    y = conv_of(g, TR_F32, &cc);
    if (y) op_note_plane_stats(g, y, bogus);
    int ok = y && normalise(g, y, 0, &a);
    CHECK(ok, "fresh note: batch-norm failed: %s", tr_error_msg());
    for (int64_t k = 0; ok && k < OC; k++)
        CHECK(a.rm[k] == 0, "fresh note: channel %lld running mean %g, expected the bogus note's 0", (long long)k,
              a.rm[k]);
    tr_graph_reset(g);
    y = conv_of(g, TR_F32, &cc);
    if (y) op_note_plane_stats(g, y, bogus);
    tr_tensor *r = y ? tr_relu(g, y) : NULL;
    ok = r && normalise(g, y, 0, &b) && normalise(g, r, 0, &c); /* y: stale; r: never noted */
    tr_tensor *y2 = ok ? tr_graph_input(g2, TR_F32, 4, y->shape) : NULL;
    if (y2) memcpy(y2->data, y->data, tr_tensor_bytes(y));
    outcome d = {0};
    ok = y2 && normalise(g2, y2, 0, &d);
    CHECK(ok, "stale note: batch-norm failed: %s", tr_error_msg());
    for (int64_t k = 0; ok && k < OC; k++) {
        CHECK(b.rm[k] == d.rm[k] && b.rv[k] == d.rv[k],
              "stale note read: channel %lld running statistics (%g, %g), expected (%g, %g)", (long long)k, b.rm[k],
              b.rv[k], d.rm[k], d.rv[k]);
        CHECK(c.rm[k] != 0, "relu's output took the conv's note: channel %lld running mean 0", (long long)k);
    }
    /* a reshape view of the conv's output, taken by the very next op: the same data, other
     * planes; the bogus note for y must not be read for it */
    tr_graph_reset(g);
    tr_graph_reset(g2);
    outcome e = {0}, h = {0};
    y = conv_of(g, TR_F32, &cc);
    if (y) op_note_plane_stats(g, y, bogus);
    int64_t vs[4] = {N, OC * 2, y ? y->shape[2] / 2 * y->shape[3] : 0, 1}; /* y's planes cut in halves */
    tr_tensor *v = y ? tr_reshape(g, y, 4, vs) : NULL;
    tr_tensor *v2 = v ? tr_graph_input(g2, TR_F32, 4, vs) : NULL;
    if (v2) memcpy(v2->data, v->data, tr_tensor_bytes(v));
    ok = v2 && y->shape[2] % 2 == 0 && normalise8(g, v, &e) && normalise8(g2, v2, &h);
    CHECK(ok, "view: batch-norm failed: %s", tr_error_msg());
    for (int64_t k = 0; ok && k < 2 * OC; k++)
        CHECK(e.rm[k] == h.rm[k] && e.rv[k] == h.rv[k],
              "a view took its base's note: channel %lld running statistics (%g, %g), expected (%g, %g)", (long long)k,
              e.rm[k], e.rv[k], h.rm[k], h.rv[k]);
    free(e.z), free(h.z);
    free(a.z), free(b.z), free(c.z), free(d.z), free(bogus);
    graph_free(g, fu);
    graph_free(g2, fu2);
    /* a graph lent no fusion keeps no note */
    tr_graph_create(&g, 0);
    y = conv_of(g, TR_F32, &cc);
    op_begin(g);
    CHECK(y && op_plane_stats(g, y) == NULL, "no fusion: conv2d's plane statistics were kept");
    tr_graph_destroy(g);
}

typedef struct grads {
    float *v; /* dw (OC*C*9) | db (OC) | dgamma (OC) | dbeta (OC) | dx (N*C*H*W, when the input has one) */
    int conv_out_grad; /* the conv's output got a gradient buffer */
} grads;

enum { VIEW = 1, XGRAD = 2, HSYNC = 4, TWO_USES = 8 };

static tr_tensor *leaf_of(tr_graph *g, int ndim, const int64_t *shape, uint64_t salt, double scale, double shift) {
    tr_tensor *t = tr_graph_leaf(g, TR_F32, ndim, shape);
    for (int64_t i = 0; t && i < tr_tensor_numel(t); i++) set(t, i, test_value((uint64_t)i, salt) * scale + shift);
    return t;
}

static grads handoff(int64_t ci, int64_t h, int64_t w, int64_t pad, int f) {
    grads r = {0};
    int64_t xs[4] = {N, ci, h, w}, ws[4] = {OC, ci, 3, 3}, cs[1] = {OC};
    tr_fusion *fu;
    tr_graph *g = graph_new(&fu);
    if (f & HSYNC) tr_graph_set_stat_reducer(g, add_replica, NULL);
    tr_tensor *x = f & XGRAD ? leaf_of(g, 4, xs, 11, 1, 0) : tr_graph_input(g, TR_F32, 4, xs);
    for (int64_t i = 0; !(f & XGRAD) && i < tr_tensor_numel(x); i++) set(x, i, test_value((uint64_t)i, 11));
    tr_tensor *cw = leaf_of(g, 4, ws, 12, 0.5, 0), *cb = leaf_of(g, 1, cs, 13, 0.5, 0);
    tr_tensor *gm = leaf_of(g, 1, cs, 14, 0.5, 1), *bt = leaf_of(g, 1, cs, 15, 0.5, 0);
    tr_tensor *rm = tr_graph_input(g, TR_F32, 1, cs), *rv = tr_graph_input(g, TR_F32, 1, cs);
    for (int64_t c = 0; c < OC; c++) set(rm, c, 0), set(rv, c, 1);
    tr_tensor *y = tr_conv2d(g, x, cw, cb, 1, (int)pad), *yb = y;
    if (y && (f & VIEW)) yb = tr_reshape(g, y, 4, y->shape);
    tr_tensor *z = tr_batch_norm_pool_relu(g, yb, gm, bt, rm, rv, 0.1, 1e-5);
    if (z && (f & TWO_USES)) z = tr_add(g, z, tr_max_pool2d(g, y, 2, 2, 0)); /* y read by a later op too */
    int64_t nz = z ? tr_tensor_numel(z) : 0;
    float *dout = malloc((size_t)(nz + 1) * sizeof(float));
    for (int64_t i = 0; i < nz; i++) dout[i] = (float)test_value((uint64_t)i, 16);
    tr_status st = z ? tr_backward(g, z, dout) : TR_ERR_INVALID;
    CHECK(st == TR_OK, "handoff %lldx%lld f=%d: backward failed: %s", (long long)h, (long long)w, f, tr_error_msg());
    if (st == TR_OK) {
        int64_t nx = f & XGRAD ? N * ci * h * w : 0;
        int64_t nw = OC * ci * 9;
        r.v = calloc((size_t)(nw + OC * 3 + nx), sizeof(float));
        memcpy(r.v, cw->grad, (size_t)nw * sizeof(float));
        memcpy(r.v + nw, cb->grad, OC * sizeof(float));
        memcpy(r.v + nw + OC, gm->grad, OC * sizeof(float));
        memcpy(r.v + nw + OC * 2, bt->grad, OC * sizeof(float));
        if (nx) memcpy(r.v + nw + OC * 3, x->grad, (size_t)nx * sizeof(float));
        r.conv_out_grad = y->grad != NULL;
    }
    free(dout);
    graph_free(g, fu);
    return r;
}

static void handoffs(void) {
    /* input channels (1: the direct path; 3: im2col + GEMM), h, w, padding */
    static const int64_t sizes[][4] = {{1, 28, 28, 1}, {1, 13, 11, 1}, {1, 27, 27, 1}, {1, 20, 37, 0}, {3, 14, 14, 0},
                                       {3, 15, 13, 1}}; /* 27x27: odd planes on two threads */
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        for (int f = 0; f < 16; f++) {
            if (f & VIEW) continue; /* each case against its own VIEW twin */
            int64_t ci = sizes[k][0], h = sizes[k][1], w = sizes[k][2], pad = sizes[k][3];
            grads a = handoff(ci, h, w, pad, f), b = handoff(ci, h, w, pad, f | VIEW);
            if (!a.v || !b.v) {
                free(a.v), free(b.v);
                continue;
            }
            int64_t n = OC * (ci * 9 + 3) + (f & XGRAD ? N * ci * h * w : 0), bad = 0;
            for (int64_t i = 0; i < n; i++) bad += memcmp(&a.v[i], &b.v[i], sizeof(float)) != 0;
            CHECK(bad == 0, "handoff %lldx%lld pad %lld f=%d: %lld of %lld gradient values differ from the view's", (long long)h,
                  (long long)w, (long long)pad, f, (long long)bad, (long long)n);
            int handed = !(f & TWO_USES);
#if defined(__AVX512F__)
            CHECK(a.conv_out_grad == !handed, "handoff %lldx%lld f=%d: conv output gradient %s", (long long)h, (long long)w,
                  f, a.conv_out_grad ? "written whole" : "never written");
#else
            (void)handed;
#endif
            CHECK(b.conv_out_grad, "handoff f=%d: the view's conv output has no gradient", f);
            free(a.v), free(b.v);
        }
    }
}

int main(void) {
    static const conv_case cases[] = {{1, 1}, {3, 0}}; /* direct (f32, AVX-512) and im2col + GEMM */
    for (int threads = 1; threads <= 2; threads++) {
        tr_set_num_threads(threads);
        for (int dt = 0; dt < 2; dt++)
            for (int k = 0; k < 2; k++)
                for (int f = 0; f < 4; f++) run_case(dt ? TR_F64 : TR_F32, &cases[k], f);
    }
    stale();
    for (int threads = 1; threads <= 2; threads++) {
        tr_set_num_threads(threads);
        handoffs();
    }
    return test_finish();
}
