/* Linear layer y = x W^T + b over the last dim (PyTorch's nn.Linear layout). */
#include <math.h>

#include "autograd/node.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "ops/cpu_kernels.h"
#include "ops/linear.h"
#include "trainer/ops.h"

/* The forward's product with its bias added as the packed GEMM stores its tiles (f32, bias,
 * not bf16-mixed, above the batches gemm_small.c takes: where GEMM_LINEAR would run the
 * packed GEMM, whose bits it gives): 1 when it did; 0, nothing written, else. */
static int linear_bias_stored_f32(int64_t B, int64_t OC, int64_t C, const float *inp, const float *weight,
                                  const float *bias, float *out) {
    return bias && !tr_cpu_bf16() && B > TR_GEMM_SMALL_MAX &&
           tr_gemm_packed_linear_f32(B, OC, C, inp, C, weight, C, bias, out, OC, NULL);
}
static int linear_bias_stored_f64(int64_t B, int64_t OC, int64_t C, const double *inp, const double *weight,
                                  const double *bias, double *out) {
    (void)B, (void)OC, (void)C, (void)inp, (void)weight, (void)bias, (void)out;
    return 0;
}

#define TR_GENERIC "ops/linear.inc"
#include "ops/generic.h"

/* Batches up to which the weight gradient is computed apart: its sum of squares noted, or the
 * gradient deferred. Deferring costs B multiply-adds an element in the update and Gram matrices
 * of B^2 (C + OC) / 2; and above 16 the noted sum (squares in float) would tell the clip
 * coefficient apart from the sum in double that devices and other strategies take. */
#define LINEAR_APART_MAX 16

/* Whether the weight gradient is computed apart, on the CPU in f32 at a batch of
 * LINEAR_APART_MAX or less (the small-batch GEMM), with its sum of squares noted for the
 * gradient-ready hook, so the gradient norm needs no pass of its own over the weights. Not
 * when x is w or a view of it (their gradients share a buffer). */
static int weight_grad_apart(tr_graph *g, const tr_tensor *x, const tr_tensor *w, int64_t B) {
    const tr_tensor *xb = x->view_of ? x->view_of : x;
    /* not in bf16 (tr_cpu_bf16): those fp32 kernels would skip the rounding */
    return B > 0 && B <= LINEAR_APART_MAX && !op_kernels(g) && w->dtype == TR_F32 && xb != w &&
           !tr_cpu_bf16() && op_wants_grad_sumsq(g, w);
}

/* A tile of the deferred weight gradient dW = dy^T x: i = {B, C, OC}, a = dy (B, OC), b = x
 * (B, C). The same kernel and summation order as the stored gradient's, so the same bits. */
static void weight_grad_tile(const void *ctx, size_t r0, size_t r1, size_t c0, size_t c1, float *out) {
    const op_deferred *d = ctx;
    int64_t B = d->i[0], C = d->i[1], OC = d->i[2];
    tr_gemm_linear_f32(1, 0, (int64_t)(r1 - r0), (int64_t)(c1 - c0), B, 1, (const float *)d->a + r0, OC,
                       (const float *)d->b + c0, C, 0, out, (int64_t)(c1 - c0));
}

/* Leaves the weight gradient to the optimizer (op_defer_grad) when the graph defers and its
 * norm, from the Gram matrices of dy and x, is finite: 1 when deferred. Not when x is a
 * parameter: the step would change it while it recomputes the tiles. */
static int defer_weight_grad(tr_graph *g, tr_tensor *w, const float *dy, const tr_tensor *xt, int64_t B, int64_t C,
                             int64_t OC) {
    const float *x = xt->data;
    if ((xt->view_of ? xt->view_of : xt)->param >= 0 || !op_may_defer_grad(g, w)) return 0;
    double sumsq = tr_gemm_small_tn_norm2_f32(OC, C, B, dy, OC, x, C);
    if (!isfinite(sumsq)) return 0; /* computed and summed as stored */
    op_deferred d = {
        .tile = weight_grad_tile, .rows = (size_t)OC, .cols = (size_t)C, .a = dy, .b = x, .i = {B, C, OC}, .tn = 1};
    op_defer_grad(g, w, &d, sumsq);
    return 1;
}

void ops_linear_grads(tr_graph *g, tr_node *n, void *dy) {
    tr_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t B = n->i[0], C = n->i[1], OC = n->i[2];
    int acc, wacc;
    void *dx = op_grad_write(g, x, &acc), *dw = op_grad_write(g, w, &wacc), *db = b ? op_grad(g, b) : NULL;
    int apart = dw && weight_grad_apart(g, x, w, B);
    if (apart && !wacc && defer_weight_grad(g, w, dy, x, B, C, OC)) dw = NULL, apart = 0;
    /* rows: per-row sums of squares, arena scratch like every op's */
    double *rows = apart ? op_alloc(g, (size_t)(OC ? OC : 1) * sizeof *rows) : NULL;
    OP_RUN(g, x->dtype, linear_backward, dx, rows ? NULL : dw, db, dy, x->data, w->data, B, C, OC, acc, wacc);
    if (rows)
        op_note_grad_sumsq(g, w, tr_gemm_small_tn_sumsq_f32(OC, C, B, 1, dy, OC, x->data, C, wacc, dw, C, rows));
}

static void linear_backward(tr_graph *g, tr_node *n) { ops_linear_grads(g, n, n->out->grad); }

void ops_linear_forward_f32(float *out, const float *inp, const float *weight, const float *bias, int64_t B, int64_t C,
                            int64_t OC) {
    linear_forward_f32(out, inp, weight, bias, B, C, OC);
}

tr_tensor *tr_linear(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b) {
    if (!op_check(g, "linear", b ? 3 : 2, x, w, b)) return NULL;
    if (!OP_DEVICE(g, "linear", linear_forward, linear_backward)) return NULL;
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1])
        return op_fail(g, TR_ERR_INVALID, "linear: input %s does not match weight %s (OC, C)",
                       op_shape(x), op_shape(w));
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return op_fail(g, TR_ERR_INVALID, "linear: bias %s does not match weight %s",
                       op_shape(b), op_shape(w));
    int64_t C = w->shape[1], OC = w->shape[0], B = tr_tensor_dims(x, 0, x->ndim - 1);
    int64_t shape[TR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = OC;
    tr_tensor *y = op_out(g, x->dtype, x->ndim, shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, linear_forward, y->data, x->data, w->data, b ? b->data : NULL, B, C, OC);
    if (op_needs_grad(g, 3, x, w, b)) {
        tr_node *n = op_record(g, "linear", linear_backward, y, 3, x, w, b);
        if (!n) return NULL;
        n->i[0] = B;
        n->i[1] = C;
        n->i[2] = OC;
    }
    return y;
}

void ops_kernels_linear(tr_kernels *k) {
    k->linear_forward = linear_forward_f32;
    k->linear_backward = linear_backward_f32;
}
