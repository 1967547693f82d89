/* conv2d, max/avg pooling, batch_norm and layer_norm against PyTorch
 * (tools/reference/cases/conv_norm.py), forward and backward in f32. Each case's options are
 * in its `cfg` tensor; batch_norm cases are also checked for the running statistics the
 * forward leaves behind. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "refio.h"
#include "reftest.h"
#include "trainer/ops.h"

#define TOL 1e-5

typedef struct cfg {
    const char *name;
    double v[4];
    int bias; /* conv2d: the case has a bias "b" */
} cfg;

static cfg read_cfg(const char *case_name) {
    cfg c = {.name = case_name};
    ref_file *rf = ref_open(case_name);
    const ref_tensor *t = ref_need(rf, "cfg");
    for (int64_t i = 0; i < t->numel && i < 4; i++) c.v[i] = ((const double *)t->data)[i];
    ref_close(rf);
    return c;
}

static tr_tensor *conv(tr_graph *g, tr_tensor **in, void *ctx) {
    const cfg *c = ctx;
    return tr_conv2d(g, in[0], in[1], c->bias ? in[2] : NULL, (int)c->v[0], (int)c->v[1]);
}
static tr_tensor *max_pool(tr_graph *g, tr_tensor **in, void *ctx) {
    const cfg *c = ctx;
    return tr_max_pool2d(g, in[0], (int)c->v[0], (int)c->v[1], (int)c->v[2]);
}
static tr_tensor *avg_pool(tr_graph *g, tr_tensor **in, void *ctx) {
    const cfg *c = ctx;
    return tr_avg_pool2d(g, in[0], (int)c->v[0], (int)c->v[1], (int)c->v[2]);
}
static tr_tensor *layer_norm(tr_graph *g, tr_tensor **in, void *ctx) {
    const cfg *c = ctx;
    return tr_layer_norm(g, in[0], in[1], in[2], c->v[0]);
}
static tr_tensor *layer_norm_noaffine(tr_graph *g, tr_tensor **in, void *ctx) {
    const cfg *c = ctx;
    return tr_layer_norm(g, in[0], NULL, NULL, c->v[0]);
}

/* The running statistics are buffers: no gradient (reftest_op made them leaves; the op must
 * not record them), updated in place by a training forward, which is checked here. */
static tr_tensor *batch_norm(tr_graph *g, tr_tensor **in, void *ctx) {
    const cfg *c = ctx;
    tr_graph_set_training(g, c->v[2] != 0);
    tr_tensor *y = tr_batch_norm(g, in[0], in[1], in[2], in[3], in[4], c->v[0], c->v[1]);
    if (!y) return NULL;
    ref_file *rf = ref_open(c->name);
    char label[160];
    const char *names[2] = {"running_mean", "running_var"};
    for (int i = 0; i < 2; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s.after", names[i]);
        const ref_tensor *r = ref_need(rf, key);
        snprintf(label, sizeof label, "%s: %s", c->name, key);
        check_tensor(label, in[3 + i]->data, r->data, r->numel, TOL);
    }
    ref_close(rf);
    return y;
}

int main(void) {
    const char *xwb[] = {"x", "w", "b", NULL}, *xw[] = {"x", "w", NULL}, *x[] = {"x", NULL};
    const char *bn[] = {"x", "gamma", "beta", "running_mean", "running_var", NULL};
    const char *ln[] = {"x", "gamma", "beta", NULL};
    const char *convs[] = {"conv2d_s1_p1",    "conv2d_s2_p0",    "conv2d_s1_p0_5x5",
                           "conv2d_1x1",      "conv2d_fashion1", "conv2d_fashion2"};
    for (size_t i = 0; i < sizeof convs / sizeof *convs; i++) {
        cfg c = read_cfg(convs[i]);
        c.bias = 1;
        reftest_op(convs[i], conv, &c, xwb, TOL);
    }
    cfg c = read_cfg("conv2d_s2_p1_nobias");
    reftest_op("conv2d_s2_p1_nobias", conv, &c, xw, TOL);

    const char *maxp[] = {"max_pool2d_k3_s2_p1", "max_pool2d_k2_s2_p0", "max_pool2d_k3_s1_p1"};
    const char *avgp[] = {"avg_pool2d_k3_s2_p1", "avg_pool2d_k2_s2_p0", "avg_pool2d_k4_s3_p2"};
    for (int i = 0; i < 3; i++) {
        c = read_cfg(maxp[i]);
        reftest_op(maxp[i], max_pool, &c, x, TOL);
        c = read_cfg(avgp[i]);
        reftest_op(avgp[i], avg_pool, &c, x, TOL);
    }

    const char *bns[] = {"batch_norm_2d_train", "batch_norm_4d_train", "batch_norm_2d_eval",
                         "batch_norm_4d_eval"};
    for (int i = 0; i < 4; i++) {
        c = read_cfg(bns[i]);
        reftest_op(bns[i], batch_norm, &c, bn, TOL);
    }

    c = read_cfg("layer_norm_3d");
    reftest_op("layer_norm_3d", layer_norm, &c, ln, TOL);
    c = read_cfg("layer_norm_noaffine");
    reftest_op("layer_norm_noaffine", layer_norm_noaffine, &c, x, TOL);
    return test_finish();
}
