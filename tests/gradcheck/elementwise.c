/* Finite-difference gradient checks (f64): add, mul (same shape, broadcast, an input used
 * twice), bias_add, scale, gelu (exact and tanh), tanh, sigmoid, sum, mean, sum_dim and
 * mean_dim (positive and negative dims). */
#include "check.h"
#include "gradcheck.h"
#include "trainer/ops.h"

static tr_tensor *add(tr_graph *g, tr_tensor **in, void *ctx) { return tr_add(g, in[0], in[1]); }
static tr_tensor *mul(tr_graph *g, tr_tensor **in, void *ctx) { return tr_mul(g, in[0], in[1]); }
/* x * (x + y): x reaches the output twice, so its gradient must accumulate. */
static tr_tensor *reuse(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_mul(g, in[0], tr_add(g, in[0], in[1]));
}
static tr_tensor *self_add(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_add(g, in[0], in[0]);
}
static tr_tensor *self_mul(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_mul(g, in[0], in[0]);
}
static tr_tensor *bias_add(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_bias_add(g, in[0], in[1]);
}
static tr_tensor *scale(tr_graph *g, tr_tensor **in, void *ctx) { return tr_scale(g, in[0], -2.5); }
static tr_tensor *gelu(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_gelu(g, in[0], ctx ? TR_GELU_TANH : TR_GELU_EXACT);
}
static tr_tensor *tanh_(tr_graph *g, tr_tensor **in, void *ctx) { return tr_tanh(g, in[0]); }
static tr_tensor *sigmoid(tr_graph *g, tr_tensor **in, void *ctx) { return tr_sigmoid(g, in[0]); }
static tr_tensor *sum(tr_graph *g, tr_tensor **in, void *ctx) { return tr_sum(g, in[0]); }
static tr_tensor *mean(tr_graph *g, tr_tensor **in, void *ctx) { return tr_mean(g, in[0]); }
static tr_tensor *sum_dim(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_sum_dim(g, in[0], *(const int *)ctx);
}
static tr_tensor *mean_dim(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_mean_dim(g, in[0], *(const int *)ctx);
}

int main(void) {
    gc_input same[2] = {GC_F64(3, 2, 3, 4), GC_F64(3, 2, 3, 4)};
    gc_input bc[2] = {GC_F64(3, 2, 3, 4), GC_F64(2, 3, 4)};
    gc_input bc1[2] = {GC_F64(3, 2, 3, 4), GC_F64(1, 4)};
    gc_input bc0[2] = {GC_F64(2, 3, 4), GC_F64(0)};
    gradcheck("add", add, NULL, 2, same, 1e-6);
    gradcheck("add_bcast", add, NULL, 2, bc, 1e-6);
    gradcheck("add_bcast1", add, NULL, 2, bc1, 1e-6);
    gradcheck("add_scalar", add, NULL, 2, bc0, 1e-6);
    gradcheck("mul", mul, NULL, 2, same, 1e-6);
    gradcheck("mul_bcast", mul, NULL, 2, bc, 1e-6);
    gradcheck("mul_bcast1", mul, NULL, 2, bc1, 1e-6);
    gradcheck("mul_scalar", mul, NULL, 2, bc0, 1e-6);
    gradcheck("mul_add_reuse", reuse, NULL, 2, bc, 1e-6);
    gradcheck("add_self", self_add, NULL, 1, same, 1e-6);
    gradcheck("mul_self", self_mul, NULL, 1, same, 1e-6);
    gradcheck("bias_add", bias_add, NULL, 2, bc1, 1e-6);
    gc_input x[1] = {GC_F64(2, 3, 5)};
    gradcheck("scale", scale, NULL, 1, x, 1e-6);
    gc_input wide[1] = {{.dtype = TR_F64, .ndim = 2, .shape = {4, 6}, .lo = -4, .hi = 4}};
    gradcheck("gelu_exact", gelu, NULL, 1, wide, 1e-6);
    gradcheck("gelu_tanh", gelu, (void *)1, 1, wide, 1e-6);
    gradcheck("tanh", tanh_, NULL, 1, wide, 1e-6);
    gradcheck("sigmoid", sigmoid, NULL, 1, wide, 1e-6);
    gc_input r[1] = {GC_F64(3, 3, 4, 5)};
    gradcheck("sum", sum, NULL, 1, r, 1e-6);
    gradcheck("mean", mean, NULL, 1, r, 1e-6);
    static const int dims[] = {0, 1, 2, -1, -3};
    const char *names[] = {"sum_dim0", "sum_dim1", "sum_dim2", "sum_dim-1", "sum_dim-3"};
    const char *mnames[] = {"mean_dim0", "mean_dim1", "mean_dim2", "mean_dim-1", "mean_dim-3"};
    for (int i = 0; i < 5; i++) {
        gradcheck(names[i], sum_dim, (void *)&dims[i], 1, r, 1e-6);
        gradcheck(mnames[i], mean_dim, (void *)&dims[i], 1, r, 1e-6);
    }
    return test_finish();
}
