/* The linear layer in f32 at every batch size the small-batch GEMMs take (1..32 rows, their
 * own kernels) and a few above (OpenBLAS), against the same layer in f64: forward, the input
 * gradient and the weight and bias gradients, each written (beta 0, into buffers holding NaN)
 * and accumulated (beta 1), on 1 and 2 threads. Widths cover the vector tails (C and OC not
 * multiples of 16 or 32) and a size that runs the kernels' parallel loops. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"


/* max |a - ref| / max |ref| over n values; a is f32 (scaled by k), ref f64 */
static double nerr(const float *a, const double *ref, int64_t n, double k) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - k * ref[i]);
        d = fmax(d, isnan(e) ? INFINITY : e);
        m = fmax(m, fabs(k * ref[i]));
    }
    return m > 0 ? d / m : d;
}

typedef struct ref64 {
    double y[16 * 8 * 64], dx[64 * 320], dw[128 * 320], db[128];
} ref64;

/* loss = sum(linear(x, w, b) * r): dy = r. */
static void reference(int64_t B, int64_t C, int64_t OC, ref64 *R) {
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_tensor *x = tr_graph_leaf(g, TR_F64, 2, (int64_t[]){B, C});
    tr_tensor *w = tr_graph_leaf(g, TR_F64, 2, (int64_t[]){OC, C});
    tr_tensor *b = tr_graph_leaf(g, TR_F64, 1, (int64_t[]){OC});
    tr_tensor *r = tr_graph_input(g, TR_F64, 2, (int64_t[]){B, OC});
    test_fill(x, 1), test_fill(w, 2), test_fill(b, 3), test_fill(r, 4);
    tr_tensor *y = tr_linear(g, x, w, b);
    CHECK(tr_backward(g, tr_sum(g, tr_mul(g, y, r)), NULL) == TR_OK, "f64 backward: %s", tr_error_msg());
    memcpy(R->y, y->data, (size_t)(B * OC) * sizeof(double));
    memcpy(R->dx, x->grad, (size_t)(B * C) * sizeof(double));
    memcpy(R->dw, w->grad, (size_t)(OC * C) * sizeof(double));
    memcpy(R->db, b->grad, (size_t)OC * sizeof(double));
    tr_graph_destroy(g);
}

static void check_shape(int64_t B, int64_t C, int64_t OC, const char *threads) {
    static ref64 R;
    reference(B, C, OC, &R);
    tr_params *P;
    int iw, ib;
    tr_params_create(&P);
    tr_params_add(P, "w", 2, (int64_t[]){OC, C}, TR_INIT_ZEROS, 0, &iw);
    tr_params_add(P, "b", 1, (int64_t[]){OC}, TR_INIT_ZEROS, 0, &ib);
    tr_params_finalize(P, 1);
    tr_tensor *w = tr_params_get(P, iw), *b = tr_params_get(P, ib);
    test_fill(w, 2), test_fill(b, 3);
    float *gw = w->grad, *gb = b->grad;
    for (int64_t i = 0; i < OC * C; i++) gw[i] = NAN; /* a written gradient must not read these */
    for (int64_t i = 0; i < OC; i++) gb[i] = NAN;
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, P);
    double tol = 2e-6 * sqrt((double)C + (double)OC);
    /* Step 1, written: dW (tn, beta 0) into NaN; dx of an intermediate (nn, beta 0); forward
     * with the bias preloaded (nt, beta 1). */
    tr_tensor *x = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){B, C});
    tr_tensor *r = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, OC});
    test_fill(x, 1), test_fill(r, 4);
    tr_tensor *y = tr_linear(g, tr_scale(g, x, 1.0), w, b);
    tr_tensor *loss = tr_sum(g, tr_mul(g, y, r));
    CHECK(tr_graph_write_param_grads(g) == TR_OK && tr_backward(g, loss, NULL) == TR_OK, "backward: %s", tr_error_msg());
    double ey = y ? nerr(y->data, R.y, B * OC, 1) : INFINITY;
    double ex = nerr(x->grad, R.dx, B * C, 1), ew = nerr(gw, R.dw, OC * C, 1), eb = nerr(gb, R.db, OC, 1);
    CHECK(ey <= tol && ex <= tol && ew <= tol && eb <= tol,
          "B %lld C %lld OC %lld (%s), written: y %.2g dx %.2g dW %.2g db %.2g (tol %.2g)", (long long)B,
          (long long)C, (long long)OC, threads, ey, ex, ew, eb, tol);
    /* Step 2, accumulated: x used twice (the second dx adds, nn beta 1), dW adds (tn, beta 1),
     * a forward without bias (nt, beta 0): gradients 1 + 2 = 3 times step 1's. */
    tr_graph_reset(g);
    x = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){B, C});
    r = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, OC});
    test_fill(x, 1), test_fill(r, 4);
    tr_tensor *y2 = tr_add(g, tr_linear(g, x, w, b), tr_linear(g, x, w, NULL));
    CHECK(tr_backward(g, tr_sum(g, tr_mul(g, y2, r)), NULL) == TR_OK, "backward 2: %s", tr_error_msg());
    ex = nerr(x->grad, R.dx, B * C, 2), ew = nerr(gw, R.dw, OC * C, 3), eb = nerr(gb, R.db, OC, 2);
    CHECK(ex <= tol && ew <= tol && eb <= tol, "B %lld C %lld OC %lld (%s), accumulated: dx %.2g dW %.2g db %.2g",
          (long long)B, (long long)C, (long long)OC, threads, ex, ew, eb);
    tr_graph_destroy(g);
    tr_params_destroy(P);
}

int main(void) {
    static const int64_t batches[] = {1, 2, 7, 8, 9, 16, 17, 24, 32, 33, 40};
    static const int64_t widths[][2] = {{3, 1}, {16, 5}, {37, 32}, {100, 33}, {64, 70}, {300, 128}};
    for (int t = 1; t <= 2; t++) {
        tr_set_num_threads(t);
        for (size_t i = 0; i < sizeof batches / sizeof *batches; i++)
            for (size_t j = 0; j < sizeof widths / sizeof *widths; j++)
                check_shape(batches[i], widths[j][0], widths[j][1], t == 1 ? "1 thread" : "2 threads");
    }
    return test_finish();
}
