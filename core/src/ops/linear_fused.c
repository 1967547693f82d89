/* Linear layers with the op that follows them applied as the product is stored: GELU
 * (tr_linear_gelu), a residual (tr_linear_residual), or a residual and a layer norm without
 * gradients (tr_linear_residual_norm: a post-LN encoder's inference). The packed GEMM calls
 * an epilogue on each block of the output once it is final (kernels/gemm.h), while the block
 * is still in cache, so the second op costs no pass of its own over memory (about 3%, 2% and
 * 2% of an all-MiniLM-L6-v2 forward, docs/benchmarks.md). Each gives the bits of the ops it
 * stands for, whose kernels it runs (ops/linear.h, ops/gelu.h, ops/layer_norm.h), and is
 * those ops wherever the fused kernel would not run: on a device, in f64, under bf16-mixed,
 * at the batches the small-batch GEMM takes, with a dropout that is on (training, p > 0),
 * with gradients for the layer norm, and with shapes those ops refuse (their messages). */
#include <string.h>

#include "autograd/node.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "ops/gelu.h"
#include "ops/layer_norm.h"
#include "ops/linear.h"
#include "trainer/ops.h"

/* Whether x, w, b (NULL: none) go the fused way: a host graph, f32 outside bf16-mixed, shapes
 * that tr_linear takes, and more than TR_GEMM_SMALL_MAX rows (*B). Decided before op_check,
 * which tells the parameter-use hook, so that a fallback tells it once. */
static int fusable(tr_graph *g, const tr_tensor *x, const tr_tensor *w, const tr_tensor *b, int64_t *B) {
    if (op_kernels(g) || !x || !w || x->dtype != TR_F32 || w->dtype != TR_F32 || tr_cpu_bf16()) return 0;
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1]) return 0;
    if (b && (b->dtype != TR_F32 || b->ndim != 1 || b->shape[0] != w->shape[0])) return 0;
    *B = tr_tensor_dims(x, 0, x->ndim - 1);
    return *B > TR_GEMM_SMALL_MAX;
}

/* The output (..., OC) of x (..., C) through w (OC, C). */
static tr_tensor *out_like(tr_graph *g, const tr_tensor *x, const tr_tensor *w) {
    int64_t shape[TR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = w->shape[0];
    return op_out(g, TR_F32, x->ndim, shape);
}

static tr_node *record(tr_graph *g, const char *name, tr_backward_fn fn, tr_tensor *y, tr_tensor *x, tr_tensor *w,
                       tr_tensor *b, tr_tensor *r) {
    tr_node *n = op_record(g, name, fn, y, r ? 4 : 3, x, w, b, r);
    if (!n) return NULL;
    n->i[0] = tr_tensor_dims(x, 0, x->ndim - 1);
    n->i[1] = w->shape[1];
    n->i[2] = w->shape[0];
    return n;
}

/* ---- linear + GELU ---- */

typedef struct gelu_epi {
    float *act;  /* laid out as the product (its ldc) */
    int approx;
} gelu_epi;

static void gelu_block(const void *ctx, float *C, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const gelu_epi *e = ctx;
    for (int64_t r = r0; r < r1; r++) ops_gelu_span_f32(e->act + r * ldc + c0, C + r * ldc + c0, c1 - c0, e->approx);
}

/* pre (B, OC) = x w^T + b, act = gelu(pre); act may be pre (in place). */
static void linear_gelu_f32(float *act, float *pre, const float *x, const float *w, const float *b, int64_t B, int64_t C,
                            int64_t OC, int approx) {
    gelu_epi e = {act, approx};
    tr_gemm_epilogue ep = {gelu_block, &e};
    if (tr_gemm_packed_linear_f32(B, OC, C, x, C, w, C, b, pre, OC, &ep)) return;
    ops_linear_forward_f32(pre, x, w, b, B, C, OC);
    int64_t rows = B > 0 ? B : 0;
#pragma omp parallel for if (rows * OC > TR_PAR_MIN / 8) schedule(static)
    for (int64_t r = 0; r < rows; r++) ops_gelu_span_f32(act + r * OC, pre + r * OC, OC, approx);
}

/* saved[0]: the pre-activation; i[3]: approx. */
static void linear_gelu_backward(tr_graph *g, tr_node *n) {
    int64_t N = n->i[0] * n->i[2];
    float *dpre = op_alloc(g, (size_t)(N ? N : 1) * sizeof *dpre);
    if (!dpre) return;
    ops_gelu_backward_f32(dpre, n->out->grad, n->saved[0], N, (int)n->i[3], 0);
    ops_linear_grads(g, n, dpre);
}

tr_tensor *tr_linear_gelu(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, tr_gelu_approx approx) {
    int64_t B;
    if (approx != TR_GELU_EXACT && approx != TR_GELU_TANH) return tr_gelu(g, x, approx); /* its message */
    if (!fusable(g, x, w, b, &B)) return tr_gelu(g, tr_linear(g, x, w, b), approx);
    if (!op_check(g, "linear_gelu", b ? 3 : 2, x, w, b)) return NULL;
    tr_tensor *y = out_like(g, x, w);
    size_t N = (size_t)B * (size_t)w->shape[0];
    /* Without a gradient the activation overwrites the product in place, in lines still in
     * cache: a second buffer's lines would each be read from memory before being written. */
    int grad = op_needs_grad(g, 3, x, w, b);
    float *pre = !y ? NULL : grad ? op_data(g, (N ? N : 1) * sizeof(float)) : y->data;
    if (!y || !pre) return NULL;
    linear_gelu_f32(y->data, pre, x->data, w->data, b ? b->data : NULL, B, w->shape[1], w->shape[0], (int)approx);
    if (grad) {
        tr_node *n = record(g, "linear_gelu", linear_gelu_backward, y, x, w, b, NULL);
        if (!n) return NULL;
        n->i[3] = approx;
        n->saved[0] = pre;
    }
    return y;
}

/* ---- linear + residual ---- */

static void add_block(const void *ctx, float *C, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const float *R = ctx;
    for (int64_t r = r0; r < r1; r++) {
        float *c = C + r * ldc;
        const float *s = R + r * ldc;
        for (int64_t j = c0; j < c1; j++) c[j] = c[j] + s[j];
    }
}

/* y (B, OC) = (x w^T + b) + res: fused with epilogue ep (whose first step adds res), else
 * tr_linear's kernel and the add. */
static void linear_add_f32(float *y, const float *res, const float *x, const float *w, const float *b, int64_t B,
                           int64_t C, int64_t OC, const tr_gemm_epilogue *ep) {
    if (tr_gemm_packed_linear_f32(B, OC, C, x, C, w, C, b, y, OC, ep)) return;
    ops_linear_forward_f32(y, x, w, b, B, C, OC);
    int64_t N = B * OC;
#pragma omp parallel for if (N > TR_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < N; i++) y[i] = y[i] + res[i];
}

static void linear_add_backward(tr_graph *g, tr_node *n) {
    const float *dy = n->out->grad;
    int64_t N = n->i[0] * n->i[2];
    int acc;
    float *dr = op_grad_write(g, n->in[3], &acc);
    if (dr && acc) {
#pragma omp parallel for if (N > TR_PAR_MIN) schedule(static)
        for (int64_t i = 0; i < N; i++) dr[i] = dr[i] + dy[i];
    } else if (dr) {
        memcpy(dr, dy, (size_t)N * sizeof *dr);
    }
    ops_linear_grads(g, n, n->out->grad);
}

/* Whether r has the shape of x through w: (..., OC). */
static int residual_fits(const tr_tensor *x, const tr_tensor *w, const tr_tensor *r) {
    if (!r || r->dtype != TR_F32 || r->ndim != x->ndim) return 0;
    for (int i = 0; i < x->ndim - 1; i++)
        if (r->shape[i] != x->shape[i]) return 0;
    return r->shape[r->ndim - 1] == w->shape[0];
}

tr_tensor *tr_linear_residual(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, double p, tr_tensor *r) {
    int64_t B;
    if ((tr_graph_training(g) && p != 0) || !fusable(g, x, w, b, &B) || !residual_fits(x, w, r))
        return tr_add(g, tr_dropout(g, tr_linear(g, x, w, b), p), r);
    if (!(p >= 0 && p < 1)) return tr_dropout(g, x, p); /* its message */
    if (!op_check(g, "linear_residual", b ? 4 : 3, x, w, r, b)) return NULL;
    tr_tensor *y = out_like(g, x, w);
    if (!y) return NULL;
    tr_gemm_epilogue ep = {add_block, r->data};
    linear_add_f32(y->data, r->data, x->data, w->data, b ? b->data : NULL, B, w->shape[1], w->shape[0], &ep);
    if (op_needs_grad(g, 4, x, w, b, r) && !record(g, "linear_residual", linear_add_backward, y, x, w, b, r)) return NULL;
    return y;
}

/* ---- linear + residual + layer norm, without gradients ---- */

typedef struct norm_epi {
    const float *res, *gamma, *beta;
    double eps;
    int64_t N;
    uint8_t *done; /* per row: normalised by the epilogue */
} norm_epi;

/* The residual added; rows that the block holds whole normalised in place while in cache. */
static void norm_block(const void *ctx, float *C, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const norm_epi *e = ctx;
    add_block(e->res, C, ldc, r0, r1, c0, c1);
    if (c0 != 0 || c1 != e->N) return; /* the GEMM's column blocks split the rows: normalised after it */
    for (int64_t r = r0; r < r1; r++) {
        float mean, rstd;
        ops_layer_norm_row_f32(C + r * ldc, &mean, &rstd, C + r * ldc, e->gamma, e->beta, e->eps, e->N);
        e->done[r] = 1;
    }
}

static int norm_fits(const tr_tensor *t, const tr_tensor *w) {
    return t && t->dtype == TR_F32 && t->ndim == 1 && t->shape[0] == w->shape[0];
}

tr_tensor *tr_linear_residual_norm(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, double p, tr_tensor *r,
                                   tr_tensor *gamma, tr_tensor *beta, double eps) {
    int64_t B;
    if (op_needs_grad(g, 6, x, w, b, r, gamma, beta) || (tr_graph_training(g) && p != 0) || !fusable(g, x, w, b, &B) ||
        !residual_fits(x, w, r) || !norm_fits(gamma, w) || !norm_fits(beta, w) || !(eps >= 0))
        return tr_layer_norm(g, tr_linear_residual(g, x, w, b, p, r), gamma, beta, eps);
    if (!(p >= 0 && p < 1)) return tr_dropout(g, x, p); /* its message */
    if (!(b ? op_check(g, "linear_residual_norm", 6, x, w, r, gamma, beta, b)
            : op_check(g, "linear_residual_norm", 5, x, w, r, gamma, beta)))
        return NULL;
    tr_tensor *y = out_like(g, x, w);
    uint8_t *done = op_alloc(g, (size_t)B);
    if (!y || !done) return NULL;
    memset(done, 0, (size_t)B);
    int64_t C = w->shape[1], N = w->shape[0];
    float *out = y->data;
    norm_epi e = {r->data, gamma->data, beta->data, eps, N, done};
    tr_gemm_epilogue ep = {norm_block, &e};
    linear_add_f32(out, r->data, x->data, w->data, b ? b->data : NULL, B, C, N, &ep); /* declined: no row done */
#pragma omp parallel for if (B * N > TR_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < B; i++) {
        float mean, rstd;
        if (!done[i]) ops_layer_norm_row_f32(out + i * N, &mean, &rstd, out + i * N, e.gamma, e.beta, eps, N);
    }
    return y;
}
