/* Elementwise, softmax, loss and reduction ops: bad input gives NULL with a clear message
 * (shapes, dtypes, targets, dims, options), errors are sticky, and a few exact values that
 * the PyTorch comparisons do not pin down (ignored samples, no gradient to an mse target,
 * -inf masks, small probabilities, the shape of a 1-D sum_dim). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "trainer/ops.h"

static tr_graph *g;

#define EXPECT_ERROR(y, n1, n2) CHECK_OP_ERROR(g, (y), (n1), (n2))

static tr_tensor *f64(int ndim, const int64_t *shape, const double *v) {
    tr_tensor *t = tr_graph_leaf(g, TR_F64, ndim, shape);
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ((double *)t->data)[i] = v ? v[i] : 0.1 * (double)i;
    return t;
}
static tr_tensor *f32(int ndim, const int64_t *shape) {
    tr_tensor *t = tr_graph_leaf(g, TR_F32, ndim, shape);
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = 0.1f * (float)i;
    return t;
}
static tr_tensor *i32(int ndim, const int64_t *shape, const int32_t *v) {
    tr_tensor *t = tr_graph_input(g, TR_I32, ndim, shape);
    memcpy(t->data, v, (size_t)tr_tensor_numel(t) * sizeof *v);
    return t;
}

static void shape_errors(void) {
    int64_t s234[] = {2, 3, 4}, s34[] = {3, 4}, s43[] = {4, 3}, s5[] = {5}, s4[] = {4};
    EXPECT_ERROR(tr_add(g, f64(3, s234, NULL), f64(2, s43, NULL)), "add: b (4, 3)",
                 "(2, 3, 4)");
    EXPECT_ERROR(tr_mul(g, f64(2, s34, NULL), f64(3, s234, NULL)), "mul: b (2, 3, 4)",
                 "trailing dims");
    EXPECT_ERROR(tr_add(g, f64(3, s234, NULL), f32(2, s34)), "add: input 1 has dtype f32",
                 "f64");
    EXPECT_ERROR(tr_bias_add(g, f64(3, s234, NULL), f64(1, s5, NULL)), "bias_add: bias (5)",
                 "(2, 3, 4)");
    EXPECT_ERROR(tr_bias_add(g, f64(3, s234, NULL), f64(2, s34, NULL)), "bias_add: bias (3, 4)",
                 NULL);
    EXPECT_ERROR(tr_gelu(g, f64(1, s4, NULL), (tr_gelu_approx)7), "gelu: approx 7", NULL);
    EXPECT_ERROR(tr_softmax(g, f64(0, NULL, NULL)), "softmax: input ()", NULL);
    EXPECT_ERROR(tr_log_softmax(g, f64(0, NULL, NULL)), "log_softmax: input ()", NULL);
    EXPECT_ERROR(tr_sum_dim(g, f64(3, s234, NULL), 3), "sum_dim: dim 3", "(2, 3, 4)");
    EXPECT_ERROR(tr_mean_dim(g, f64(3, s234, NULL), -4), "mean_dim: dim -4", "(2, 3, 4)");
    EXPECT_ERROR(tr_mse(g, f64(2, s34, NULL), f64(2, s43, NULL), 1), "mse: target (4, 3)",
                 "(3, 4)");
    EXPECT_ERROR(tr_mse(g, f64(2, s34, NULL), f64(2, s34, NULL), 0), "mse: normaliser 0",
                 NULL);
    tr_tensor *bad = tr_graph_input(g, TR_I32, 1, s4);
    EXPECT_ERROR(tr_tanh(g, bad), "tanh: input 0 has dtype i32", NULL);
    EXPECT_ERROR(tr_sum(g, NULL), "sum: input 0 is NULL", NULL);

    /* Sticky: the first error is kept, later ops pass NULL through. */
    tr_tensor *y = tr_scale(g, tr_add(g, f64(3, s234, NULL), f64(1, s5, NULL)), 2.0);
    CHECK(y == NULL && tr_graph_status(g) == TR_ERR_INVALID, "sticky error lost");
    CHECK(strstr(tr_error_msg(), "add: b (5)") != NULL, "first error replaced: %s",
          tr_error_msg());
    tr_graph_reset(g);
}

static void cross_entropy_errors(void) {
    int64_t s35[] = {3, 5}, s3[] = {3}, s2[] = {2}, s30[] = {3, 0};
    static const int32_t ok[3] = {0, 4, 2}, big[3] = {0, 1, 7}, neg[3] = {0, -1, 2};
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), i32(1, s3, big), 3, -100, 0),
                 "cross_entropy: target 7 at index 2", "[0, 5)");
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), i32(1, s3, neg), 3, -100, 0),
                 "target -1 at index 1", "ignore_index (-100)");
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), i32(1, s2, ok), 3, -100, 0),
                 "cross_entropy: targets (2) do not match logits (3, 5)", NULL);
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), f64(1, s3, NULL), 3, -100, 0),
                 "cross_entropy: targets have dtype f64; expected i32", NULL);
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), NULL, 3, -100, 0),
                 "cross_entropy: targets are NULL", NULL);
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), i32(1, s3, ok), 0, -100, 0),
                 "cross_entropy: normaliser 0", NULL);
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), i32(1, s3, ok), 3, -100, 1.5),
                 "cross_entropy: label_smoothing 1.5", NULL);
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s30, NULL), i32(1, s3, ok), 3, -100, 0),
                 "cross_entropy: logits (3, 0)", "at least one class");
    EXPECT_ERROR(tr_cross_entropy(g, f64(2, s35, NULL), i32(1, s3, ok), 3, -100, NAN),
                 "label_smoothing", NULL);
}

static void values(void) {
    /* logits [[1, 2, 3]], target 2: log(e + e^2 + e^3) - 3. */
    int64_t s13[] = {1, 3}, s1[] = {1}, s23[] = {2, 3};
    static const double l[3] = {1, 2, 3};
    static const int32_t t2[1] = {2};
    tr_tensor *x = f64(2, s13, l);
    tr_tensor *loss = tr_cross_entropy(g, x, i32(1, s1, t2), 2, -100, 0);
    CHECK(loss && loss->ndim == 1 && loss->shape[0] == 1, "cross_entropy: not shape (1)");
    if (loss) CHECK_NEAR(((double *)loss->data)[0], 0.40760596444438 / 2, 1e-12);
    tr_graph_reset(g);

    /* All samples ignored: loss 0 and no gradient anywhere. */
    static const int32_t ign[2] = {-100, -100};
    x = f64(2, s23, NULL);
    loss = tr_cross_entropy(g, x, i32(1, (int64_t[]){2}, ign), 2, -100, 0.3);
    CHECK(loss && ((double *)loss->data)[0] == 0, "all-ignored loss is not 0");
    CHECK(tr_backward(g, loss, NULL) == TR_OK, "backward: %s", tr_error_msg());
    for (int i = 0; i < 6; i++) CHECK(((double *)x->grad)[i] == 0, "ignored grad %d != 0", i);
    tr_graph_reset(g);

    /* mse: the target gets no gradient even though it requires one. */
    static const double p[3] = {1, 2, 3}, q[3] = {0, 2, 5};
    tr_tensor *pt = f64(1, (int64_t[]){3}, p), *qt = f64(1, (int64_t[]){3}, q);
    loss = tr_mse(g, pt, qt, 2);
    CHECK(loss && ((double *)loss->data)[0] == 2.5, "mse value");
    CHECK(tr_backward(g, loss, NULL) == TR_OK, "backward: %s", tr_error_msg());
    CHECK(((double *)pt->grad)[0] == 1 && ((double *)pt->grad)[2] == -2, "mse pred grad");
    for (int i = 0; i < 3; i++) CHECK(((double *)qt->grad)[i] == 0, "mse target grad %d", i);
    tr_graph_reset(g);

    /* -inf logits (attention masks) get probability exactly 0 and gradient 0, in f32. */
    tr_tensor *m = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){1, 4});
    float *mv = m->data;
    mv[0] = 1;
    mv[1] = -INFINITY;
    mv[2] = 2;
    mv[3] = -INFINITY;
    tr_tensor *sm = tr_softmax(g, m);
    CHECK(sm && ((float *)sm->data)[1] == 0 && ((float *)sm->data)[3] == 0, "masked prob != 0");
    if (sm) CHECK_NEAR(((float *)sm->data)[2], 1 / (1 + exp(-1.0)), 1e-7);
    CHECK(tr_backward(g, sm, NULL) == TR_OK, "backward: %s", tr_error_msg());
    CHECK(((float *)m->grad)[1] == 0 && ((float *)m->grad)[3] == 0, "masked grad != 0");
    tr_graph_reset(g);

    /* f32 softmax / log_softmax of [0, v] over a wide range: small probabilities keep their
     * relative accuracy (the vectorised exp is within a few ulp). */
    double worst_p = 0, worst_l = 0;
    for (int k = 0; k <= 160; k++) {
        double v = -80 + k;
        tr_tensor *r = tr_graph_input(g, TR_F32, 2, (int64_t[]){1, 2});
        ((float *)r->data)[0] = 0;
        ((float *)r->data)[1] = (float)v;
        tr_tensor *ps = tr_softmax(g, r), *ls = tr_log_softmax(g, r);
        if (!ps || !ls) break;
        double lse = v > 0 ? v + log1p(exp(-v)) : log1p(exp(v));
        double p1 = exp(v - lse), l1 = v - lse;
        double ep = fabs(((float *)ps->data)[1] - p1) / p1;
        double el = fabs(((float *)ls->data)[1] - l1) / fmax(1, fabs(l1));
        worst_p = fmax(worst_p, ep);
        worst_l = fmax(worst_l, el);
        tr_graph_reset(g);
    }
    CHECK(worst_p < 1e-6, "softmax small-probability relative error %.3g", worst_p);
    CHECK(worst_l < 1e-6, "log_softmax relative error %.3g", worst_l);

    /* The f32 kernels' vectorised tanh, sigmoid and erf keep relative accuracy: tanh near 0
     * and near +-1, sigmoid down its far tail, gelu over the usual range. */
    enum { NV = 2001 };
    tr_tensor *w = tr_graph_input(g, TR_F32, 1, (int64_t[]){NV});
    float *wv = w->data;
    for (int k = 0; k < NV; k++) /* -80 .. 0 evenly, then 1e-6 .. 2e-2 geometrically */
        wv[k] = (float)(k < 1000 ? -80 + 0.08 * k : 1e-6 * pow(1.01, k - 1000));
    tr_tensor *th = tr_tanh(g, w), *sg = tr_sigmoid(g, w), *ge = tr_gelu(g, w, TR_GELU_EXACT);
    double et = 0, es = 0, eg = 0;
    for (int k = 0; th && sg && ge && k < NV; k++) {
        double v = wv[k], t = tanh(v), sref = 1 / (1 + exp(-v));
        double gref = 0.5 * v * erfc(-v / sqrt(2.0));
        et = fmax(et, fabs(((float *)th->data)[k] - t) / fabs(t));
        es = fmax(es, fabs(((float *)sg->data)[k] - sref) / sref);
        if (fabs(v) < 3) eg = fmax(eg, fabs(((float *)ge->data)[k] - gref));
    }
    CHECK(th && sg && ge, "activations failed: %s", tr_error_msg());
    printf("f32 tanh rel %.3g, sigmoid rel %.3g, gelu abs %.3g\n", et, es, eg);
    CHECK(et < 5e-7, "tanh relative error %.3g", et);
    CHECK(es < 1e-6, "sigmoid relative error %.3g", es);
    CHECK(eg < 1e-6, "gelu absolute error %.3g", eg);
    tr_graph_reset(g);

    /* Reducing a 1-D tensor gives the scalar shape (1); negative dims count from the end. */
    tr_tensor *v1 = tr_sum_dim(g, f64(1, (int64_t[]){4}, NULL), -1);
    CHECK(v1 && v1->ndim == 1 && v1->shape[0] == 1, "1-D sum_dim shape");
    if (v1) CHECK_NEAR(((double *)v1->data)[0], 0.6, 1e-12);
    tr_tensor *md = tr_mean_dim(g, f64(2, s23, NULL), -2);
    CHECK(md && md->ndim == 1 && md->shape[0] == 3, "mean_dim(-2) shape");
    if (md) CHECK_NEAR(((double *)md->data)[2], 0.35, 1e-12);
    tr_graph_reset(g);

    /* No tape without a gradient: an eval-mode loss records nothing. */
    tr_graph_set_grad_enabled(g, 0);
    x = f64(2, s13, l);
    loss = tr_cross_entropy(g, x, i32(1, s1, t2), 1, -100, 0.1);
    CHECK(loss != NULL && tr_graph_nodes(g) == 0, "grad-off cross_entropy recorded a node");
    tr_graph_set_grad_enabled(g, 1);
    tr_graph_reset(g);
}

int main(void) {
    if (tr_graph_create(&g, 1 << 20) != TR_OK) return 1;
    shape_errors();
    cross_entropy_errors();
    values();
    tr_graph_destroy(g);
    return test_finish();
}
