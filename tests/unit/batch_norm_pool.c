/* tr_batch_norm_pool_relu against the three ops it fuses, relu(max_pool2d(batch_norm(x), 2, 2,
 * 0)): the output, the running statistics it leaves, and the gradients of x, gamma and beta
 * are equal value for value (the fused kernels use the same formulas in the same order; only
 * the sign of a zero gradient may differ), except f32 gradients on AVX-512, whose sums take
 * only the winners' terms in another order: within 2e-6 of the largest value. Cases: f32 (the AVX-512 pool rows) and f64,
 * training and eval, with and without affine parameters and running statistics, odd sizes
 * (a row and a column in no window), ties and NaNs within windows (a NaN channel), gamma
 * negative and zero (every window's values equal), x used twice (the second gradient added),
 * statistics synchronised over replicas (a stat reducer that adds a second replica's sums),
 * grad mode off, eval mode without running statistics (batch statistics), 1 and 2 threads
 * (the largest shape is past the size where the kernels go parallel). Then its errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"

enum { TRAIN = 1, AFFINE = 2, RUNNING = 4, TWICE = 8, SYNC = 16, NAN_CHANNEL = 32, NO_GRAD = 64 };

typedef struct result {
    tr_dtype dt;
    int64_t ny, nx, C;
    double *y, *dx, *dgamma, *dbeta, *rm, *rv;
} result;

/* Values on a coarse grid (ties in most windows); channel 1 of image 0 gets a NaN with
 * NAN_CHANNEL. */
static void fill(tr_tensor *t, uint64_t salt, double scale, double shift) {
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = floor(test_value((uint64_t)i, salt) * 6) * scale + shift;
        if (t->dtype == TR_F64) ((double *)t->data)[i] = v;
        else ((float *)t->data)[i] = (float)v;
    }
}

static double get(const tr_tensor *t, const void *p, int64_t i) {
    return t->dtype == TR_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

static double *copy_out(const tr_tensor *t, const void *p, int64_t n) {
    double *v = calloc((size_t)n + 1, sizeof *v);
    for (int64_t i = 0; p && i < n; i++) v[i] = get(t, p, i);
    return v;
}

/* A second replica whose sums are the first's plus 1 (the count, one more value): global
 * statistics that differ from the local ones in every ratio, so an op that skipped a reduction,
 * or used the local count with the global sums, would not match. */
static tr_status add_replica(void *user, double *values, int n) {
    (void)user;
    for (int i = 0; i < n; i++) values[i] = 2 * values[i] + 1;
    return TR_OK;
}

static tr_tensor *block(tr_graph *g, int fused, tr_tensor *x, tr_tensor *gm, tr_tensor *bt,
                        tr_tensor *rm, tr_tensor *rv) {
    if (fused) return tr_batch_norm_pool_relu(g, x, gm, bt, rm, rv, 0.2, 1e-5);
    return tr_relu(g, tr_max_pool2d(g, tr_batch_norm(g, x, gm, bt, rm, rv, 0.2, 1e-5), 2, 2, 0));
}

static result run(int fused, tr_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W, int f) {
    tr_graph *g;
    result r = {.dt = dt, .C = C};
    if (tr_graph_create(&g, 0) != TR_OK) return r;
    tr_graph_set_training(g, (f & TRAIN) != 0);
    if (f & SYNC) tr_graph_set_stat_reducer(g, add_replica, NULL);
    tr_tensor *x = tr_graph_leaf(g, dt, 4, (int64_t[]){N, C, H, W});
    fill(x, 1, 0.5, 0.25);
    if (f & NAN_CHANNEL) {
        if (dt == TR_F64) ((double *)x->data)[H * W + 3] = NAN;
        else ((float *)x->data)[H * W + 3] = NAN;
    }
    tr_tensor *gm = NULL, *bt = NULL, *rm = NULL, *rv = NULL;
    if (f & AFFINE) {
        gm = tr_graph_leaf(g, dt, 1, &C);
        bt = tr_graph_leaf(g, dt, 1, &C);
        fill(gm, 2, 0.4, 0), fill(bt, 3, 0.3, 0.1); /* gamma: some negative, some zero */
    }
    if (f & RUNNING) {
        rm = tr_graph_input(g, dt, 1, &C);
        rv = tr_graph_input(g, dt, 1, &C);
        fill(rm, 4, 0.1, 0), fill(rv, 5, 0.1, 1.0);
    }
    if (f & NO_GRAD) tr_graph_set_grad_enabled(g, 0);
    tr_tensor *y = block(g, fused, x, gm, bt, rm, rv);
    tr_tensor *s = y && (f & TWICE) ? tr_add(g, y, block(g, fused, x, gm, bt, rm, rv)) : y;
    CHECK(s != NULL, "forward (%s): %s", fused ? "fused" : "three ops", tr_error_msg());
    if (!s) {
        tr_graph_destroy(g);
        return r;
    }
    if (!(f & NO_GRAD)) {
        tr_tensor *w = tr_graph_input(g, dt, s->ndim, s->shape);
        fill(w, 6, 0.5, 0);
        tr_status st = tr_backward(g, tr_sum(g, tr_mul(g, s, w)), NULL);
        CHECK(st == TR_OK, "backward (%s): %s", fused ? "fused" : "three ops", tr_error_msg());
    }
    r.ny = tr_tensor_numel(y), r.nx = tr_tensor_numel(x);
    r.y = copy_out(y, y->data, r.ny);
    r.dx = copy_out(x, x->grad, r.nx);
    r.dgamma = copy_out(x, gm ? gm->grad : NULL, C);
    r.dbeta = copy_out(x, bt ? bt->grad : NULL, C);
    r.rm = copy_out(x, rm ? rm->data : NULL, C);
    r.rv = copy_out(x, rv ? rv->data : NULL, C);
    tr_graph_destroy(g);
    return r;
}

static void free_result(result *r) {
    free(r->y), free(r->dx), free(r->dgamma), free(r->dbeta), free(r->rm), free(r->rv);
}

/* The first index where a and b differ by more than tol relative to max |b| (NaN only where
 * the other is NaN), or -1; *err gets the largest relative difference. */
static int64_t differ(const double *a, const double *b, int64_t n, double tol, double *err) {
    double m = 0, e = 0;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(b[i])) m = fmax(m, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (!(isnan(a[i]) && isnan(b[i])) && bad < 0) bad = i;
            continue;
        }
        double r = fabs(a[i] - b[i]) / (m > 0 ? m : 1);
        e = fmax(e, r);
        if (r > tol && bad < 0) bad = i;
    }
    *err = e;
    return bad;
}

static double worst; /* largest f32 gradient difference, relative */

static void check_case(tr_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W, int f) {
    result a = run(1, dt, N, C, H, W, f), b = run(0, dt, N, C, H, W, f);
    if (a.y && b.y) {
        const char *names[] = {"y", "dx", "dgamma", "dbeta", "running_mean", "running_var"};
        double *av[] = {a.y, a.dx, a.dgamma, a.dbeta, a.rm, a.rv};
        double *bv[] = {b.y, b.dx, b.dgamma, b.dbeta, b.rm, b.rv};
        int64_t n[] = {a.ny, a.nx, C, C, C, C};
        CHECK(a.ny == b.ny && a.ny == N * C * (H / 2) * (W / 2), "output sizes %lld, %lld",
              (long long)a.ny, (long long)b.ny);
        for (int k = 0; k < 6 && a.ny == b.ny; k++) {
            /* f32 gradients on AVX-512 sum the winners' terms in another order */
            double tol = dt == TR_F32 && k >= 1 && k <= 3 ? 2e-6 : 0, err;
            int64_t i = differ(av[k], bv[k], n[k], tol, &err);
            worst = k >= 1 && k <= 3 && dt == TR_F32 ? fmax(worst, err) : worst;
            CHECK(i < 0, "%s (%lld, %lld, %lld, %lld) flags 0x%x: %s[%lld] fused %.17g, three ops %.17g (tol %g)",
                  dt == TR_F64 ? "f64" : "f32", (long long)N, (long long)C, (long long)H,
                  (long long)W, f, names[k], (long long)i, i < 0 ? 0 : av[k][i],
                  i < 0 ? 0 : bv[k][i], tol);
        }
        /* a case that tests nothing would pass too: the gradients must be there */
        int any = 0;
        for (int64_t i = 0; i < a.nx; i++) any |= a.dx[i] != 0;
        CHECK(any || (f & NO_GRAD), "flags 0x%x: dx is all zero", f);
    }
    free_result(&a), free_result(&b);
}

/* Each case makes its tensors: a failed op resets the graph, whose arena holds them. */
static tr_tensor *leaf(tr_graph *g, tr_dtype dt, int ndim, const int64_t *shape) {
    tr_tensor *t = tr_graph_leaf(g, dt, ndim, shape);
    fill(t, 7, 0.5, 0);
    return t;
}

static void errors(void) {
    tr_graph *g;
    tr_graph_create(&g, 0);
    const int64_t x4[] = {2, 3, 4, 4}, c3[] = {3}, c4[] = {4};
    CHECK_OP_ERROR(g, tr_batch_norm_pool_relu(g, leaf(g, TR_F32, 3, (int64_t[]){2, 3, 4}), NULL, NULL,
                                              NULL, NULL, 0.1, 1e-5),
                   "batch_norm_pool_relu: input (2, 3, 4)", "(N, C, H, W)");
    CHECK_OP_ERROR(g, tr_batch_norm_pool_relu(g, leaf(g, TR_F32, 4, (int64_t[]){2, 3, 1, 4}), NULL,
                                              NULL, NULL, NULL, 0.1, 1e-5),
                   "batch_norm_pool_relu: input (2, 3, 1, 4)", "at least 2x2");
    CHECK_OP_ERROR(g, tr_batch_norm_pool_relu(g, leaf(g, TR_F32, 4, x4), leaf(g, TR_F32, 1, c4), NULL,
                                              NULL, NULL, 0.1, 1e-5),
                   "batch_norm_pool_relu: input (2, 3, 4, 4) has 3 channels", "gamma (4)");
    CHECK_OP_ERROR(g, tr_batch_norm_pool_relu(g, leaf(g, TR_F32, 4, x4), leaf(g, TR_F64, 1, c3), NULL,
                                              NULL, NULL, 0.1, 1e-5),
                   "batch_norm_pool_relu", "dtype");
    CHECK_OP_ERROR(g, tr_batch_norm_pool_relu(g, leaf(g, TR_F32, 4, x4), NULL, NULL, NULL, NULL,
                                              2.0, 1e-5),
                   "batch_norm_pool_relu: momentum 2", NULL);
    CHECK_OP_ERROR(g, tr_batch_norm_pool_relu(g, leaf(g, TR_F32, 4, x4), NULL, NULL,
                                              leaf(g, TR_F32, 1, c3), NULL, 0.1, 1e-5),
                   "batch_norm_pool_relu: give both running_mean and running_var", NULL);
    CHECK_OP_ERROR(g, tr_batch_norm_pool_relu(g, NULL, NULL, NULL, NULL, NULL, 0.1, 1e-5),
                   "batch_norm_pool_relu", NULL);
    tr_graph_destroy(g);
}

int main(void) {
    static const int64_t shapes[][4] = {{2, 3, 6, 8},   {3, 2, 7, 5},   {2, 2, 2, 2},
                                        {4, 3, 28, 28}, {1, 3, 13, 34}, {2, 2, 9, 40},
                                        {8, 8, 28, 29}};
    static const int flags[] = {TRAIN | AFFINE | RUNNING,
                                TRAIN | AFFINE,
                                TRAIN,
                                AFFINE | RUNNING, /* eval */
                                TRAIN | AFFINE | RUNNING | TWICE,
                                TRAIN | AFFINE | RUNNING | SYNC,
                                TRAIN | AFFINE | RUNNING | SYNC | TWICE,
                                TRAIN | AFFINE | RUNNING | NAN_CHANNEL,
                                AFFINE | RUNNING | TWICE,
                                TRAIN | AFFINE | RUNNING | NO_GRAD,
                                AFFINE};          /* eval, no running statistics */
    for (int t = 1; t <= 2; t++) {
        tr_set_num_threads(t);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (size_t f = 0; f < sizeof flags / sizeof *flags; f++)
                for (int d = 0; d < 2; d++)
                    check_case(d ? TR_F64 : TR_F32, shapes[s][0], shapes[s][1], shapes[s][2],
                               shapes[s][3], flags[f]);
    }
    printf("f32 gradients: largest difference %.2g of the tensor's largest value\n", worst);
    errors();
    return test_finish();
}
