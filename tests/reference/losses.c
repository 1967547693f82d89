/* softmax, log_softmax, cross_entropy, cosine_similarity and mse against PyTorch
 * (tools/reference/cases/losses.py), forward and backward in f32. Loss cases store their
 * arguments in a `cfg` tensor (normaliser, ignore_index, label_smoothing). */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "refio.h"
#include "reftest.h"
#include "trainer/ops.h"

typedef struct loss_cfg {
    double normaliser;
    int ignore_index;
    double smoothing;
} loss_cfg;

static loss_cfg read_cfg(const char *case_name) {
    ref_file *rf = ref_open(case_name);
    const ref_tensor *c = ref_need(rf, "cfg");
    const double *v = c->data;
    loss_cfg cfg = {v[0], (int)v[1], v[2]};
    ref_close(rf);
    return cfg;
}

static tr_tensor *softmax(tr_graph *g, tr_tensor **in, void *ctx) {
    return ctx ? tr_log_softmax(g, in[0]) : tr_softmax(g, in[0]);
}
static tr_tensor *ce(tr_graph *g, tr_tensor **in, void *ctx) {
    const loss_cfg *c = ctx;
    return tr_cross_entropy(g, in[0], in[1], c->normaliser, c->ignore_index, c->smoothing);
}
static tr_tensor *mse(tr_graph *g, tr_tensor **in, void *ctx) {
    const loss_cfg *c = ctx;
    return tr_mse(g, in[0], in[1], c->normaliser);
}

static tr_tensor *cosine(tr_graph *g, tr_tensor **in, void *ctx) {
    (void)ctx;
    return tr_cosine_similarity(g, in[0], in[1], 1e-8);
}

int main(void) {
    const char *x[] = {"x", NULL}, *xt[] = {"x", "t", NULL}, *pt[] = {"p", "t", NULL};
    const char *sfx[] = {"", "_3d", "_big", "_large", "_one"};
    char name[64];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "softmax%s", sfx[i]);
        reftest_op(name, softmax, NULL, x, 1e-5);
        snprintf(name, sizeof name, "log_softmax%s", sfx[i]);
        reftest_op(name, softmax, (void *)1, x, 1e-5);
    }
    reftest_op("softmax_masked", softmax, NULL, x, 1e-5);
    const char *ces[] = {"ce_basic",         "ce_ignore",      "ce_ignore_class", "ce_smooth",
                         "ce_smooth_ignore", "ce_smooth_full", "ce_3d",           "ce_large",
                         "ce_big",           "ce_big_smooth"};
    for (size_t i = 0; i < sizeof ces / sizeof *ces; i++) {
        loss_cfg c = read_cfg(ces[i]);
        reftest_op(ces[i], ce, &c, xt, 1e-5);
    }
    const char *mses[] = {"mse", "mse_norm", "mse_big"};
    for (int i = 0; i < 3; i++) {
        loss_cfg c = read_cfg(mses[i]);
        reftest_op(mses[i], mse, &c, pt, 1e-5);
    }
    const char *ab[] = {"a", "b", NULL}, *coss[] = {"cosine", "cosine_3d", "cosine_big"};
    for (int i = 0; i < 3; i++) reftest_op(coss[i], cosine, NULL, ab, 1e-5);
    return test_finish();
}
