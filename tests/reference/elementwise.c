/* add, mul, bias_add, scale, gelu, tanh, sigmoid, sum, mean, sum_dim and mean_dim against
 * PyTorch (tools/reference/cases/elementwise.py), forward and backward in f32. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "reftest.h"
#include "trainer/ops.h"

static tr_tensor *add(tr_graph *g, tr_tensor **in, void *ctx) { return tr_add(g, in[0], in[1]); }
static tr_tensor *mul(tr_graph *g, tr_tensor **in, void *ctx) { return tr_mul(g, in[0], in[1]); }
static tr_tensor *bias_add(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_bias_add(g, in[0], in[1]);
}
static tr_tensor *scale(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_scale(g, in[0], *(const double *)ctx);
}
static tr_tensor *gelu(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_gelu(g, in[0], ctx ? TR_GELU_TANH : TR_GELU_EXACT);
}
static tr_tensor *tanh_(tr_graph *g, tr_tensor **in, void *ctx) { return tr_tanh(g, in[0]); }
static tr_tensor *sigmoid(tr_graph *g, tr_tensor **in, void *ctx) { return tr_sigmoid(g, in[0]); }
static tr_tensor *sum(tr_graph *g, tr_tensor **in, void *ctx) {
    return ctx ? tr_mean(g, in[0]) : tr_sum(g, in[0]);
}
typedef struct dim_ctx {
    int dim, mean;
} dim_ctx;
static tr_tensor *sum_dim(tr_graph *g, tr_tensor **in, void *ctx) {
    const dim_ctx *c = ctx;
    return c->mean ? tr_mean_dim(g, in[0], c->dim) : tr_sum_dim(g, in[0], c->dim);
}

int main(void) {
    const char *ab[] = {"a", "b", NULL}, *xb[] = {"x", "b", NULL}, *x[] = {"x", NULL};
    const char *tags[] = {"same", "bcast", "bcast1", "scalar", "big", "big_same"};
    char name[64];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "add_%s", tags[i]);
        reftest_op(name, add, NULL, ab, 1e-5);
        snprintf(name, sizeof name, "mul_%s", tags[i]);
        reftest_op(name, mul, NULL, ab, 1e-5);
    }
    reftest_op("bias_add", bias_add, NULL, xb, 1e-5);
    reftest_op("bias_add_big", bias_add, NULL, xb, 1e-5);
    static const double s1 = -1.7, s2 = 0.3;
    reftest_op("scale", scale, (void *)&s1, x, 1e-5);
    reftest_op("scale_big", scale, (void *)&s2, x, 1e-5);
    const char *sfx[] = {"", "_big", "_wide"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "gelu_exact%s", sfx[i]);
        reftest_op(name, gelu, NULL, x, 1e-5);
        snprintf(name, sizeof name, "gelu_tanh%s", sfx[i]);
        reftest_op(name, gelu, (void *)1, x, 1e-5);
        snprintf(name, sizeof name, "tanh%s", sfx[i]);
        reftest_op(name, tanh_, NULL, x, 1e-5);
        snprintf(name, sizeof name, "sigmoid%s", sfx[i]);
        reftest_op(name, sigmoid, NULL, x, 1e-5);
    }
    reftest_op("sum", sum, NULL, x, 1e-5);
    reftest_op("mean", sum, (void *)1, x, 1e-5);
    reftest_op("sum_big", sum, NULL, x, 1e-5);
    reftest_op("mean_big", sum, (void *)1, x, 1e-5);
    static const int dims[] = {0, 1, 2, -1, -2};
    for (int i = 0; i < 5; i++) {
        for (int mean = 0; mean < 2; mean++) {
            dim_ctx c = {dims[i], mean};
            if (dims[i] < 0)
                snprintf(name, sizeof name, "%s_dimm%d", mean ? "mean" : "sum", -dims[i]);
            else
                snprintf(name, sizeof name, "%s_dim%d", mean ? "mean" : "sum", dims[i]);
            reftest_op(name, sum_dim, &c, x, 1e-5);
        }
    }
    dim_ctx d0 = {0, 0}, d1 = {1, 0}, m0 = {0, 1}, dm1 = {-1, 0};
    reftest_op("sum_dim_1d", sum_dim, &d0, x, 1e-5);
    reftest_op("sum_dim_big1", sum_dim, &d1, x, 1e-5);
    reftest_op("mean_dim_big0", sum_dim, &m0, x, 1e-5);
    reftest_op("sum_dim_bigm1", sum_dim, &dm1, x, 1e-5);
    return test_finish();
}
