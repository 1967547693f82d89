/* conv2d, pooling, batch_norm, layer_norm and dropout: bad input gives NULL with a clear
 * message naming the op and the shapes, errors are sticky; and exact values the PyTorch
 * comparisons do not pin down: max pooling's padding never wins (all-negative input), the
 * running statistics get no gradient, are left alone in eval mode and are updated by a
 * training forward even with grad mode off. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "trainer/ops.h"

static tr_graph *g;

#define EXPECT_ERROR(y, n1, n2) CHECK_OP_ERROR(g, (y), (n1), (n2))

static tr_tensor *t64(int ndim, const int64_t *shape) {
    tr_tensor *t = tr_graph_leaf(g, TR_F64, ndim, shape);
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ((double *)t->data)[i] = 0.5 + 0.1 * (double)(i % 7);
    return t;
}
static tr_tensor *t32(int ndim, const int64_t *shape) {
    tr_tensor *t = tr_graph_leaf(g, TR_F32, ndim, shape);
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = 0.5f + 0.1f * (float)(i % 7);
    return t;
}

static void conv_errors(void) {
    int64_t x4[] = {2, 3, 8, 8}, w4[] = {4, 2, 3, 3}, w43[] = {4, 3, 3, 3}, b4[] = {4},
            b5[] = {5}, x3[] = {3, 8, 8}, wbig[] = {4, 3, 11, 3}, w0[] = {0, 3, 3, 3};
    EXPECT_ERROR(tr_conv2d(g, t64(4, x4), t64(4, w4), NULL, 1, 0),
                 "conv2d: input (2, 3, 8, 8) has 3 channels, weight (4, 2, 3, 3) expects 2",
                 NULL);
    EXPECT_ERROR(tr_conv2d(g, t64(3, x3), t64(4, w43), NULL, 1, 0), "conv2d: input (3, 8, 8)",
                 "(N, C, H, W)");
    EXPECT_ERROR(tr_conv2d(g, t64(4, x4), t64(4, w43), t64(1, b5), 1, 0), "conv2d: bias (5)",
                 "weight (4, 3, 3, 3)");
    EXPECT_ERROR(tr_conv2d(g, t64(4, x4), t64(4, w43), t64(1, b4), 0, 0), "conv2d: stride 0",
                 NULL);
    EXPECT_ERROR(tr_conv2d(g, t64(4, x4), t64(4, w43), t64(1, b4), 1, -1), "padding -1", NULL);
    EXPECT_ERROR(tr_conv2d(g, t64(4, x4), t64(4, wbig), NULL, 1, 1),
                 "conv2d: kernel of weight (4, 3, 11, 3) does not fit input (2, 3, 8, 8)",
                 "padding 1");
    EXPECT_ERROR(tr_conv2d(g, t64(4, x4), t64(4, w0), NULL, 1, 1), "conv2d:", "empty dim");
    EXPECT_ERROR(tr_conv2d(g, t32(4, x4), t64(4, w43), NULL, 1, 0),
                 "conv2d: input 1 has dtype f64", "f32");
    tr_tensor *xi = tr_graph_input(g, TR_I32, 4, x4);
    EXPECT_ERROR(tr_conv2d(g, xi, t64(4, w43), NULL, 1, 0), "conv2d: input 0 has dtype i32",
                 NULL);
    /* sticky: a later op fails too, and the first message stays */
    tr_tensor *bad = tr_conv2d(g, t64(4, x4), t64(4, w4), NULL, 1, 0);
    tr_tensor *next = tr_max_pool2d(g, bad, 2, 2, 0);
    EXPECT_ERROR(next, "conv2d: input (2, 3, 8, 8) has 3 channels", NULL);
}

static void pool_errors(void) {
    int64_t x4[] = {2, 3, 8, 8}, x3[] = {3, 8, 8}, xs[] = {1, 1, 2, 2};
    EXPECT_ERROR(tr_max_pool2d(g, t64(3, x3), 2, 2, 0), "max_pool2d: input (3, 8, 8)",
                 "(N, C, H, W)");
    EXPECT_ERROR(tr_max_pool2d(g, t64(4, x4), 3, 2, 2), "max_pool2d: kernel 3", "padding 2");
    EXPECT_ERROR(tr_max_pool2d(g, t64(4, x4), 0, 1, 0), "max_pool2d: kernel 0", NULL);
    EXPECT_ERROR(tr_avg_pool2d(g, t64(4, x4), 2, 0, 0), "avg_pool2d: kernel 2 and stride 0",
                 NULL);
    EXPECT_ERROR(tr_avg_pool2d(g, t64(4, xs), 5, 1, 1),
                 "avg_pool2d: kernel 5 does not fit input (1, 1, 2, 2)", "padding 1");
    EXPECT_ERROR(tr_avg_pool2d(g, NULL, 2, 2, 0), "avg_pool2d: input 0 is NULL", NULL);
}

static void norm_errors(void) {
    int64_t x4[] = {2, 3, 4, 4}, x3[] = {2, 3, 4}, c3[] = {3}, c4[] = {4}, one[] = {1, 3};
    EXPECT_ERROR(tr_batch_norm(g, t64(3, x3), NULL, NULL, NULL, NULL, 0.1, 1e-5),
                 "batch_norm: input (2, 3, 4)", "(N, C) or (N, C, H, W)");
    EXPECT_ERROR(tr_batch_norm(g, t64(4, x4), t64(1, c4), t64(1, c3), NULL, NULL, 0.1, 1e-5),
                 "batch_norm: input (2, 3, 4, 4) has 3 channels", "gamma (4)");
    EXPECT_ERROR(tr_batch_norm(g, t64(4, x4), NULL, NULL, t64(1, c3), NULL, 0.1, 1e-5),
                 "batch_norm: give both running_mean and running_var", NULL);
    EXPECT_ERROR(tr_batch_norm(g, t64(4, x4), NULL, NULL, NULL, NULL, 1.5, 1e-5),
                 "batch_norm: momentum 1.5", NULL);
    EXPECT_ERROR(tr_batch_norm(g, t64(4, x4), t32(1, c3), NULL, NULL, NULL, 0.1, 1e-5),
                 "batch_norm: input 1 has dtype f32", NULL);
    EXPECT_ERROR(tr_batch_norm(g, t64(2, one), NULL, NULL, NULL, NULL, 0.1, 1e-5),
                 "batch_norm: input (1, 3) has one value per channel", NULL);
    /* ... which eval mode with running statistics accepts */
    tr_graph_set_training(g, 0);
    CHECK(tr_batch_norm(g, t64(2, one), NULL, NULL, t64(1, c3), t64(1, c3), 0.1, 1e-5) != NULL,
          "eval batch_norm of one sample: %s", tr_error_msg());
    tr_graph_set_training(g, 1);
    tr_graph_reset(g);
    EXPECT_ERROR(tr_layer_norm(g, t64(3, x3), t64(1, c3), NULL, 1e-5),
                 "layer_norm: gamma (3) and beta (null) must be (4)", "(2, 3, 4)");
    EXPECT_ERROR(tr_layer_norm(g, t64(3, x3), t64(1, c4), t32(1, c4), 1e-5),
                 "layer_norm: input 2 has dtype f32", NULL);
    EXPECT_ERROR(tr_layer_norm(g, t64(3, x3), NULL, NULL, -1), "layer_norm:", "eps -1");
    EXPECT_ERROR(tr_dropout(g, t64(3, x3), 1.0), "dropout: p = 1", "[0, 1)");
}

/* Padding is -inf for max pooling: with all-negative input the border outputs are the
 * largest real pixel, never 0. */
static void max_pool_padding(void) {
    int64_t s[] = {1, 1, 3, 3};
    tr_tensor *x = t64(4, s);
    for (int i = 0; i < 9; i++) ((double *)x->data)[i] = -1.0 - i; /* -1 .. -9 */
    tr_tensor *y = tr_max_pool2d(g, x, 3, 2, 1);                    /* (1, 1, 2, 2) */
    CHECK(y && y->shape[2] == 2 && y->shape[3] == 2, "max_pool2d shape %s", tr_error_msg());
    if (!y) return;
    const double *v = y->data, want[4] = {-1, -2, -4, -5};
    for (int i = 0; i < 4; i++)
        CHECK(v[i] == want[i], "max pool out[%d] = %g, want %g", i, v[i], want[i]);
    tr_tensor *a = tr_avg_pool2d(g, x, 3, 2, 1); /* corner: (-1-2-4-5) / 9 */
    CHECK(a && fabs(((double *)a->data)[0] - (-12.0 / 9.0)) < 1e-15, "avg pool corner %g",
          a ? ((double *)a->data)[0] : NAN);
    tr_graph_reset(g);
}

/* Running statistics: no gradient, untouched in eval mode, updated by every training forward
 * (grad mode on or off) with the unbiased variance. */
static void running_stats(void) {
    int64_t xs[] = {4, 2}, c2[] = {2};
    tr_tensor *x = t64(2, xs), *gm = t64(1, c2), *bt = t64(1, c2);
    tr_tensor *rm = t64(1, c2), *rv = t64(1, c2);
    const double *xv = x->data;
    double m0 = 0, v0 = 0; /* channel 0: batch mean and unbiased variance */
    for (int n = 0; n < 4; n++) m0 += xv[n * 2] / 4;
    for (int n = 0; n < 4; n++) v0 += (xv[n * 2] - m0) * (xv[n * 2] - m0) / 3;
    double rm0 = ((double *)rm->data)[0], rv0 = ((double *)rv->data)[0];
    tr_tensor *y = tr_batch_norm(g, x, gm, bt, rm, rv, 0.25, 1e-5);
    CHECK(y != NULL, "batch_norm: %s", tr_error_msg());
    CHECK_NEAR(((double *)rm->data)[0], 0.75 * rm0 + 0.25 * m0, 1e-14);
    CHECK_NEAR(((double *)rv->data)[0], 0.75 * rv0 + 0.25 * v0, 1e-14);
    CHECK(y && tr_backward(g, y, (double[]){1, -2, 3, 0.5, -1, 2, 0.25, 1}) == TR_OK,
          "backward: %s", tr_error_msg());
    int zero = 1;
    for (int i = 0; i < 2; i++)
        zero &= ((double *)rm->grad)[i] == 0 && ((double *)rv->grad)[i] == 0;
    CHECK(zero, "the running statistics got a gradient");
    CHECK(((double *)gm->grad)[0] != 0, "gamma got no gradient");
    /* eval mode leaves them alone */
    double keep_m = ((double *)rm->data)[1], keep_v = ((double *)rv->data)[1];
    tr_graph_set_training(g, 0);
    CHECK(tr_batch_norm(g, x, gm, bt, rm, rv, 0.25, 1e-5) != NULL, "eval: %s", tr_error_msg());
    tr_graph_set_training(g, 1);
    CHECK(((double *)rm->data)[1] == keep_m && ((double *)rv->data)[1] == keep_v,
          "eval mode changed the running statistics");
    /* grad mode off (e.g. a no-grad training forward) still updates them */
    tr_graph_set_grad_enabled(g, 0);
    CHECK(tr_batch_norm(g, x, gm, bt, rm, rv, 0.25, 1e-5) != NULL, "no-grad: %s",
          tr_error_msg());
    tr_graph_set_grad_enabled(g, 1);
    CHECK(((double *)rm->data)[1] != keep_m, "a no-grad training forward did not update");
    tr_graph_reset(g);
}

int main(void) {
    if (tr_graph_create(&g, 1 << 20) != TR_OK) return 1;
    conv_errors();
    pool_errors();
    norm_errors();
    max_pool_padding();
    running_stats();
    tr_graph_destroy(g);
    return test_finish();
}
