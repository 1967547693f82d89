/* Finite-difference gradient checks: conv2d, max/avg pooling, batch_norm (train and eval,
 * with and without affine and running statistics), layer_norm and dropout. */
#include "check.h"
#include "gradcheck.h"
#include "trainer/ops.h"

typedef struct opt {
    int stride, padding, kernel;
    int bias;      /* conv2d: in[2] is the bias */
    int training;  /* batch_norm, dropout */
    int affine;    /* norms: in[1], in[2] are gamma, beta */
    int running;   /* batch_norm: in[3], in[4] are the running statistics */
} opt;

static tr_tensor *conv(tr_graph *g, tr_tensor **in, void *ctx) {
    const opt *o = ctx;
    return tr_conv2d(g, in[0], in[1], o->bias ? in[2] : NULL, o->stride, o->padding);
}
static tr_tensor *max_pool(tr_graph *g, tr_tensor **in, void *ctx) {
    const opt *o = ctx;
    return tr_max_pool2d(g, in[0], o->kernel, o->stride, o->padding);
}
static tr_tensor *avg_pool(tr_graph *g, tr_tensor **in, void *ctx) {
    const opt *o = ctx;
    return tr_avg_pool2d(g, in[0], o->kernel, o->stride, o->padding);
}
static tr_tensor *batch_norm(tr_graph *g, tr_tensor **in, void *ctx) {
    const opt *o = ctx;
    tr_graph_set_training(g, o->training);
    tr_tensor *y = tr_batch_norm(g, in[0], o->affine ? in[1] : NULL, o->affine ? in[2] : NULL,
                                 o->running ? in[3] : NULL, o->running ? in[4] : NULL, 0.1,
                                 1e-5);
    tr_graph_set_training(g, 1);
    return y;
}
static tr_tensor *layer_norm(tr_graph *g, tr_tensor **in, void *ctx) {
    const opt *o = ctx;
    return tr_layer_norm(g, in[0], o->affine ? in[1] : NULL, o->affine ? in[2] : NULL, 1e-5);
}
static tr_tensor *dropout(tr_graph *g, tr_tensor **in, void *ctx) {
    const opt *o = ctx;
    tr_graph_set_training(g, o->training);
    tr_tensor *y = tr_dropout(g, in[0], 0.4);
    tr_graph_set_training(g, 1);
    return y;
}

int main(void) {
    /* conv2d: strides, paddings, no bias, non-square input and kernel, 1x1, and a batch big
     * enough to run on several threads (4 x 5 x 27 x 64 multiply-adds > TR_PAR_MIN) */
    gc_input c1[3] = {GC_F64(4, 2, 3, 5, 6), GC_F64(4, 4, 3, 3, 3), GC_F64(1, 4)};
    gradcheck("conv2d_s1_p1", conv, &(opt){.stride = 1, .padding = 1, .bias = 1}, 3, c1, 1e-6);
    gradcheck("conv2d_s2_p0", conv, &(opt){.stride = 2, .padding = 0, .bias = 1}, 3, c1, 1e-6);
    gradcheck("conv2d_s2_p1_nobias", conv, &(opt){.stride = 2, .padding = 1}, 2, c1, 1e-6);
    gc_input c2[3] = {GC_F64(4, 2, 2, 4, 7), GC_F64(4, 3, 2, 3, 2), GC_F64(1, 3)};
    gradcheck("conv2d_k3x2_s1_p2", conv, &(opt){.stride = 1, .padding = 2, .bias = 1}, 3, c2,
              1e-6);
    gc_input c3[3] = {GC_F64(4, 2, 3, 3, 4), GC_F64(4, 5, 3, 1, 1), GC_F64(1, 5)};
    gradcheck("conv2d_1x1", conv, &(opt){.stride = 1, .padding = 0, .bias = 1}, 3, c3, 1e-6);
    gc_input c4[3] = {GC_F64(4, 4, 3, 8, 8), GC_F64(4, 5, 3, 3, 3), GC_F64(1, 5)};
    gradcheck("conv2d_threads", conv, &(opt){.stride = 1, .padding = 1, .bias = 1}, 3, c4, 1e-6);

    /* pools: random inputs have no ties within the finite-difference step */
    gc_input p[1] = {GC_F64(4, 2, 2, 7, 6)};
    gradcheck("max_pool2d_k3_s2_p1", max_pool, &(opt){.kernel = 3, .stride = 2, .padding = 1},
              1, p, 1e-6);
    gradcheck("max_pool2d_k2_s1_p0", max_pool, &(opt){.kernel = 2, .stride = 1, .padding = 0},
              1, p, 1e-6);
    gradcheck("avg_pool2d_k3_s2_p1", avg_pool, &(opt){.kernel = 3, .stride = 2, .padding = 1},
              1, p, 1e-6);
    gradcheck("avg_pool2d_k2_s1_p1", avg_pool, &(opt){.kernel = 2, .stride = 1, .padding = 1},
              1, p, 1e-6);

    /* batch_norm: x, gamma, beta, running_mean, running_var (buffers: no gradient) */
    gc_input b2[5] = {GC_F64(2, 6, 4), GC_F64(1, 4), GC_F64(1, 4), GC_F64(1, 4),
                      {.dtype = TR_F64, .ndim = 1, .shape = {4}, .lo = 0.5, .hi = 1.5}};
    b2[3].no_grad = b2[4].no_grad = 1;
    gc_input b4[5] = {GC_F64(4, 3, 2, 3, 2), GC_F64(1, 2), GC_F64(1, 2), GC_F64(1, 2),
                      {.dtype = TR_F64, .ndim = 1, .shape = {2}, .lo = 0.5, .hi = 1.5}};
    b4[3].no_grad = b4[4].no_grad = 1;
    opt train = {.training = 1, .affine = 1, .running = 1};
    opt eval = {.training = 0, .affine = 1, .running = 1};
    gradcheck("batch_norm_2d_train", batch_norm, &train, 5, b2, 1e-6);
    gradcheck("batch_norm_4d_train", batch_norm, &train, 5, b4, 1e-6);
    gradcheck("batch_norm_2d_eval", batch_norm, &eval, 5, b2, 1e-6);
    gradcheck("batch_norm_4d_eval", batch_norm, &eval, 5, b4, 1e-6);
    gc_input b4x[5] = {b4[0], b4[1], b4[2], b4[3], b4[4]}; /* only x differentiated */
    b4x[1].no_grad = b4x[2].no_grad = 1;
    gradcheck("batch_norm_4d_noaffine", batch_norm, &(opt){.training = 1, .running = 1}, 5, b4x,
              1e-6);
    gradcheck("batch_norm_4d_untracked_eval", batch_norm, &(opt){.affine = 1}, 3, b4, 1e-6);

    gc_input l[3] = {GC_F64(3, 2, 3, 5), GC_F64(1, 5), GC_F64(1, 5)};
    gradcheck("layer_norm", layer_norm, &(opt){.affine = 1}, 3, l, 1e-6);
    gradcheck("layer_norm_noaffine", layer_norm, &(opt){0}, 1, l, 1e-6);

    /* dropout: the mask is a function of the graph's RNG state, which gradcheck keeps fixed */
    gc_input d[1] = {GC_F64(3, 3, 4, 5)};
    gradcheck("dropout_train", dropout, &(opt){.training = 1}, 1, d, 1e-6);
    gradcheck("dropout_eval", dropout, &(opt){.training = 0}, 1, d, 1e-6);
    return test_finish();
}
