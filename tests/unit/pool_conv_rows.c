/* The vector paths of max_pool2d (2x2, stride 2) and conv2d (im2col and col2im rows; the
 * direct kernels for one input channel), which run in f32 only, against the same ops in f64,
 * which run the plain loops and BLAS: forward, input gradient and conv's weight and bias
 * gradients, written (the first gradient into the buffer) and accumulated (the input used
 * twice).
 * Widths cover one masked vector (6, 7, 14 outputs), full vectors plus a tail (17, 40) and
 * odd rows and columns that no pool window covers; pool inputs have ties and NaNs, whose
 * winner (the first in scan order; a NaN wins) the f32 path must pick as the loops do. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"


/* Pool inputs: values on a coarse grid (many ties within a window), some NaN. */
static double pool_value(uint64_t i, uint64_t salt) {
    double v = test_value(i, salt);
    if (salt == 1 && (i % 23 == 5 || i % 37 == 0)) return NAN;
    return salt == 1 ? floor(v * 3) : v;
}

static void fill(tr_tensor *t, uint64_t salt, int pool) {
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = pool ? pool_value((uint64_t)i, salt) : test_value((uint64_t)i, salt);
        if (t->dtype == TR_F64) ((double *)t->data)[i] = v;
        else ((float *)t->data)[i] = (float)v;
    }
}

/* f32 a equals f64 ref (NaN where ref is NaN) within tol relative to max |ref|. */
static int same(const float *a, const double *ref, int64_t n, double tol, double *err) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(ref[i]) || isnan(a[i])) {
            if (isnan(ref[i]) != isnan(a[i])) d = INFINITY;
            continue;
        }
        d = fmax(d, fabs((double)a[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    *err = m > 0 ? d / m : d;
    return *err <= tol;
}

#define MAX_N 7
#define MAX_HW (42 * 80)

typedef struct run {
    double y[MAX_N * 4 * MAX_HW * 2], dx[MAX_N * 3 * MAX_HW], dw[4 * 3 * 9 + 4];
} run;

/* out = op(x), or with `twice` op(x) + op(x) (pool) or op(x) + op(2x) (conv); the loss is
 * sum(out * r). kind 0: max-pool 2x2; 1: conv 3x3 stride 1 padding 1 to 4 channels, with
 * bias; 2: the same without padding; 3: padding 2. Returns op(x)'s numel, its values in y_out, x's gradient
 * in dx_out and conv's weight and bias gradients in dw_out. */
static int64_t forward_backward(int kind, tr_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                int twice, double *y_out, double *dx_out, double *dw_out) {
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_tensor *x = tr_graph_leaf(g, dt, 4, (int64_t[]){N, C, H, W});
    fill(x, 1 + (uint64_t)kind, kind == 0);
    tr_tensor *w = NULL, *b = NULL, *out, *out2 = NULL;
    if (kind) {
        w = tr_graph_leaf(g, dt, 4, (int64_t[]){4, C, 3, 3});
        b = tr_graph_leaf(g, dt, 1, (int64_t[]){4});
        fill(w, 7, 0), fill(b, 8, 0);
        int pad = kind == 1 ? 1 : kind == 2 ? 0 : 2;
        out = tr_conv2d(g, x, w, b, 1, pad);
        if (twice) out2 = tr_conv2d(g, tr_scale(g, x, 2.0), w, b, 1, pad);
    } else {
        out = tr_max_pool2d(g, x, 2, 2, 0);
        if (twice) out2 = tr_max_pool2d(g, x, 2, 2, 0);
    }
    CHECK(out != NULL, "forward: %s", tr_error_msg());
    tr_tensor *r = tr_graph_input(g, dt, out->ndim, out->shape);
    fill(r, 9, 0);
    tr_tensor *s = out2 ? tr_add(g, out, out2) : out;
    int64_t n = tr_tensor_numel(out), nx = tr_tensor_numel(x);
    CHECK(tr_backward(g, tr_sum(g, tr_mul(g, s, r)), NULL) == TR_OK, "backward: %s", tr_error_msg());
    for (int64_t i = 0; i < n; i++)
        y_out[i] = dt == TR_F64 ? ((double *)out->data)[i] : ((float *)out->data)[i];
    for (int64_t i = 0; i < nx; i++)
        dx_out[i] = dt == TR_F64 ? ((double *)x->grad)[i] : ((float *)x->grad)[i];
    for (int64_t i = 0; kind && i < 4 * C * 9 + 4; i++) {
        const void *gr = i < 4 * C * 9 ? w->grad : b->grad;
        int64_t k = i < 4 * C * 9 ? i : i - 4 * C * 9;
        dw_out[i] = dt == TR_F64 ? ((const double *)gr)[k] : ((const float *)gr)[k];
    }
    tr_graph_destroy(g);
    return n;
}

static void check_case(int kind, int64_t N, int64_t C, int64_t H, int64_t W, int twice) {
    static run R64, R32;
    static float y32[sizeof R32.y / sizeof(double)], dx32[sizeof R32.dx / sizeof(double)];
    static float dw32[sizeof R32.dw / sizeof(double)];
    int64_t n = forward_backward(kind, TR_F64, N, C, H, W, twice, R64.y, R64.dx, R64.dw);
    forward_backward(kind, TR_F32, N, C, H, W, twice, R32.y, R32.dx, R32.dw);
    int64_t nx = N * C * H * W, nw = kind ? 4 * C * 9 + 4 : 0;
    for (int64_t i = 0; i < n; i++) y32[i] = (float)R32.y[i];
    for (int64_t i = 0; i < nx; i++) dx32[i] = (float)R32.dx[i];
    for (int64_t i = 0; i < nw; i++) dw32[i] = (float)R32.dw[i];
    double tol = kind == 0 ? 1e-6 : 1e-5, ey, ex, ew = 0;
    int ok_y = same(y32, R64.y, n, tol, &ey), ok_x = same(dx32, R64.dx, nx, tol, &ex);
    int ok_w = same(dw32, R64.dw, nw, tol, &ew);
    static const char *names[] = {"max_pool2d 2x2", "conv2d 3x3 p1", "conv2d 3x3 p0", "conv2d 3x3 p2"};
    CHECK(ok_y && ok_x && ok_w,
          "%s, input (%lld, %lld, %lld, %lld)%s: f32 vs f64 y %.2g, dx %.2g, dw/db %.2g (tol %.1g)",
          names[kind], (long long)N, (long long)C, (long long)H, (long long)W,
          twice ? ", used twice" : "", ey, ex, ew, tol);
}

int main(void) {
    /* widths: one masked vector (pool outputs 6, 7, 8, 14; conv rows 12-16), full vectors and a
     * tail (17, 20, 35 pool outputs; 28-70 conv), exactly 16 pool outputs (32); unpadded 14x14
     * and 16x16 (outputs 12 and 14 wide) take im2col's permuted path */
    static const int64_t sizes[][2] = {{12, 12}, {13, 15}, {16, 16}, {28, 28}, {29, 34},
                                       {34, 35}, {42, 40}, {5, 41}, {9, 32}, {6, 70},
                                       {14, 14}};
    for (int t = 1; t <= 2; t++) {
        tr_set_num_threads(t);
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            for (int kind = 0; kind < 4; kind++)
                for (int64_t C = kind ? 1 : 3; C <= 3; C += 2) /* conv: direct (1), im2col (3) */
                    for (int twice = 0; twice < 2; twice++)
                        check_case(kind, 2, C, sizes[i][0], sizes[i][1], twice);
        /* one image (a thread with none), three (an uneven split), seven (several im2col
         * chunks of the three-channel input) */
        for (int64_t N = 1; N <= MAX_N; N += N == 1 ? 2 : 4)
            for (int kind = 0; kind < 4; kind++)
                for (int64_t C = kind ? 1 : 3; C <= 3; C += 2)
                    check_case(kind, N, C, 42, 40, 1);
        /* seven images of 42x80 make four chunks or more (f32) and seven (f64): with two
         * threads each takes whole chunks and sums its own weight gradient */
        for (int kind = 1; kind < 4; kind++) check_case(kind, MAX_N, 3, 42, 80, 1);
    }
    /* the chunks of each thread against one thread's: the f32 and f64 runs above split the
     * images between the threads alike, so a worker's lost or doubled sums could agree there */
    static run one, two;
    for (int kind = 1; kind < 4; kind++) {
        int64_t n = 0;
        for (int t = 1; t <= 2; t++) {
            tr_set_num_threads(t);
            run *r = t == 1 ? &one : &two;
            n = forward_backward(kind, TR_F32, MAX_N, 3, 42, 80, 1, r->y, r->dx, r->dw);
        }
        double ey = 0, ex = 0, ew = 0;
        for (int64_t i = 0; i < n; i++) ey = fmax(ey, fabs(one.y[i] - two.y[i]));
        for (int64_t i = 0; i < MAX_N * 3 * 42 * 80; i++) ex = fmax(ex, fabs(one.dx[i] - two.dx[i]));
        double mw = 0;
        for (int64_t i = 0; i < 4 * 3 * 9 + 4; i++) {
            ew = fmax(ew, fabs(one.dw[i] - two.dw[i]));
            mw = fmax(mw, fabs(one.dw[i]));
        }
        CHECK(ey == 0 && ex == 0 && ew <= 1e-5 * mw,
              "conv2d kind %d, 7 images of 42x80, 2 threads vs 1: y %.2g, dx %.2g, dw/db %.2g of %.2g",
              kind, ey, ex, ew, mw);
    }
    return test_finish();
}
