/* Finite-difference gradient checks (f64): softmax, log_softmax, cross_entropy (plain,
 * ignore_index, label smoothing, both, leading dims), mse and cosine_similarity. */
#include "check.h"
#include "gradcheck.h"
#include "trainer/ops.h"

typedef struct ce_ctx {
    double normaliser;
    int ignore_index;
    double smoothing;
} ce_ctx;

static tr_tensor *softmax(tr_graph *g, tr_tensor **in, void *ctx) { return tr_softmax(g, in[0]); }
static tr_tensor *log_softmax(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_log_softmax(g, in[0]);
}
static tr_tensor *ce(tr_graph *g, tr_tensor **in, void *ctx) {
    const ce_ctx *c = ctx;
    return tr_cross_entropy(g, in[0], in[1], c->normaliser, c->ignore_index, c->smoothing);
}
static tr_tensor *mse(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_mse(g, in[0], in[1], 7.0);
}
static tr_tensor *cosine(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_cosine_similarity(g, in[0], in[1], 1e-8);
}
/* The loss of a softmax: gradients flow through two row ops. */
static tr_tensor *mse_softmax(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_mse(g, tr_softmax(g, in[0]), in[1], 2.0);
}

int main(void) {
    gc_input x[1] = {{.dtype = TR_F64, .ndim = 3, .shape = {2, 3, 5}, .lo = -3, .hi = 3}};
    gradcheck("softmax", softmax, NULL, 1, x, 1e-6);
    gradcheck("log_softmax", log_softmax, NULL, 1, x, 1e-6);

    static const int32_t t[6] = {0, 4, 2, 3, 1, 4};
    static const int32_t t_ign[6] = {0, -100, 2, -100, 1, 4};
    static const int32_t t_cls[6] = {0, 4, 2, 3, 4, 4}; /* ignore_index 4, a real class */
    gc_input in[2] = {{.dtype = TR_F64, .ndim = 2, .shape = {6, 5}, .lo = -2, .hi = 2},
                      {.dtype = TR_I32, .ndim = 1, .shape = {6}, .ivalues = t}};
    ce_ctx plain = {6, -100, 0}, smooth = {4, -100, 0.2}, full = {3, -100, 1.0};
    gradcheck("cross_entropy", ce, &plain, 2, in, 1e-6);
    gradcheck("cross_entropy_smooth", ce, &smooth, 2, in, 1e-6);
    gradcheck("cross_entropy_smooth_full", ce, &full, 2, in, 1e-6);
    in[1].ivalues = t_ign;
    gradcheck("cross_entropy_ignore", ce, &plain, 2, in, 1e-6);
    gradcheck("cross_entropy_ignore_smooth", ce, &smooth, 2, in, 1e-6);
    in[1].ivalues = t_cls;
    ce_ctx cls = {5, 4, 0.1};
    gradcheck("cross_entropy_ignore_class", ce, &cls, 2, in, 1e-6);
    /* (2, 3, 5) logits with (2, 3) targets. */
    gc_input in3[2] = {x[0], {.dtype = TR_I32, .ndim = 2, .shape = {2, 3}, .ivalues = t}};
    gradcheck("cross_entropy_3d", ce, &smooth, 2, in3, 1e-6);

    gc_input m[2] = {GC_F64(2, 3, 4), GC_F64(2, 3, 4)};
    m[1].no_grad = 1;
    gradcheck("mse", mse, NULL, 2, m, 1e-6);
    gc_input ms[2] = {x[0], GC_F64(3, 2, 3, 5)};
    ms[1].no_grad = 1;
    gradcheck("mse_softmax", mse_softmax, NULL, 2, ms, 1e-6);
    gc_input cs[2] = {GC_F64(2, 4, 6), GC_F64(2, 4, 6)};
    gradcheck("cosine_similarity", cosine, NULL, 2, cs, 1e-6);
    gc_input cs3[2] = {GC_F64(3, 2, 3, 5), GC_F64(3, 2, 3, 5)};
    gradcheck("cosine_similarity_3d", cosine, NULL, 2, cs3, 1e-6);
    cs[1].no_grad = 1;
    gradcheck("cosine_similarity_one_side", cosine, NULL, 2, cs, 1e-6);
    return test_finish();
}
