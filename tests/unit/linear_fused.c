/* The fused linear layers (ops/linear_fused.c, trainer/ops.h): tr_linear_gelu and
 * tr_linear_residual against the two ops they stand for, run in a graph of their own from the
 * same inputs:
 *
 * - The same bits forward and for every gradient (x, w, b, and the residual's, also when the
 *   residual is x itself), exact and tanh GELU, with and without bias, 2-D and 3-D inputs,
 *   shapes with tails of the GEMM's tiles, more than one depth block (C > 384) and more than
 *   one column block (OC > 768), on 1 and 2 threads and with each of the packed GEMM's tiles
 *   forced, where the fused kernel is the one that ran (the op's own region in the profile,
 *   forward and backward), and the forward's bits without gradients (GELU then in place);
 * - the composition itself (regions "linear" and "gelu" / "add") at batches the small-batch
 *   GEMM takes, in f64 and with a dropout that is on, with the same values; fused again where
 *   that dropout is off (evaluation);
 * - tr_linear_residual_norm without gradients against tr_layer_norm of the composition: the
 *   same bits where the epilogue normalises whole rows and where the GEMM's column blocks or
 *   column slabs split them (normalised after it); with gradients, the composition;
 * - bad input refused with the composed ops' messages: a residual of another shape or none,
 *   an unknown GELU variant, a dropout probability out of range, a weight that does not fit. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "kernels/gemm.h"
#include "trainer/trainer.h"

enum { GELU_EXACT_OP, GELU_TANH_OP, ADD_OP, ADD_SELF_OP };
static const char *const op_names[] = {"linear_gelu exact", "linear_gelu tanh", "linear_residual",
                                       "linear_residual x + x W^T"};
/* tr_linear_residual's dropout, and whether the graphs train (else evaluate) */
static double drop_p;
static int training = 1;

typedef struct run {
    tr_graph *g;
    tr_tensor *x, *w, *b, *res, *y;
} run;

/* One graph: the op (fused, or composed of tr_linear and tr_gelu / tr_add), loss = sum(y * r). */
static void run_op(run *R, int op, int fused, tr_dtype dt, int ndim, const int64_t *xs, int64_t OC, int bias) {
    tr_graph_create(&R->g, 0);
    tr_graph *g = R->g;
    tr_graph_set_training(g, training);
    int64_t C = xs[ndim - 1], ys[3];
    memcpy(ys, xs, (size_t)ndim * sizeof *ys);
    ys[ndim - 1] = OC;
    R->x = tr_graph_leaf(g, dt, ndim, xs);
    R->w = tr_graph_leaf(g, dt, 2, (int64_t[]){OC, C});
    R->b = bias ? tr_graph_leaf(g, dt, 1, (int64_t[]){OC}) : NULL;
    R->res = op == ADD_OP ? tr_graph_leaf(g, dt, ndim, ys) : op == ADD_SELF_OP ? R->x : NULL;
    tr_tensor *r = tr_graph_input(g, dt, ndim, ys);
    test_fill(R->x, 1), test_fill(R->w, 2), test_fill(r, 4);
    if (R->b) test_fill(R->b, 3);
    if (op == ADD_OP) test_fill(R->res, 5);
    tr_gelu_approx approx = op == GELU_TANH_OP ? TR_GELU_TANH : TR_GELU_EXACT;
    if (op <= GELU_TANH_OP)
        R->y = fused ? tr_linear_gelu(g, R->x, R->w, R->b, approx) : tr_gelu(g, tr_linear(g, R->x, R->w, R->b), approx);
    else
        R->y = fused ? tr_linear_residual(g, R->x, R->w, R->b, drop_p, R->res)
                     : tr_add(g, R->res, tr_dropout(g, tr_linear(g, R->x, R->w, R->b), drop_p));
    CHECK(R->y && tr_backward(g, tr_sum(g, tr_mul(g, R->y, r)), NULL) == TR_OK, "%s: %s", op_names[op], tr_error_msg());
}

static int same(const tr_tensor *a, const tr_tensor *b) {
    if (!a || !b) return a == b;
    size_t bytes = tr_tensor_bytes(a);
    return bytes == tr_tensor_bytes(b) && memcmp(a->data, b->data, bytes) == 0 &&
           (!a->grad || memcmp(a->grad, b->grad, bytes) == 0);
}

/* Calls of the region (phase, name) in p, 0 when absent. */
static int64_t calls(tr_profile *p, const char *phase, const char *name) {
    int n;
    const tr_profile_region *r = tr_profile_regions(p, &n);
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].phase, phase) && !strcmp(r[i].name, name)) return r[i].calls;
    return 0;
}

/* The op fused and composed; want_fused: whether the fused kernel must be the one that ran. */
static void check_op(int op, tr_dtype dt, int ndim, const int64_t *xs, int64_t OC, int bias, int want_fused,
                     const char *how) {
    run f, c;
    tr_profile *p;
    CHECK(tr_profile_create(&p) == TR_OK, "profile");
    tr_profile_attach(p);
    tr_profile_set_ops(TR_PROFILE_OPS);
    run_op(&f, op, 1, dt, ndim, xs, OC, bias);
    tr_profile_set_ops(TR_PROFILE_OPS_OFF);
    tr_profile_attach(NULL);
    run_op(&c, op, 0, dt, ndim, xs, OC, bias);
    const char *fused = op <= GELU_TANH_OP ? "linear_gelu" : "linear_residual", *second = op <= GELU_TANH_OP ? "gelu" : "add";
    int ran = calls(p, "forward", fused) == 1 && calls(p, "backward", fused) == 1;
    int composed = calls(p, "forward", "linear") == 1 && calls(p, "forward", second) == 1;
    char shape[64];
    snprintf(shape, sizeof shape, "%s x (%lld%s%lld) OC %lld%s", op_names[op], (long long)xs[0], ndim == 3 ? ", " : "",
             ndim == 3 ? (long long)xs[1] : 0LL, (long long)OC, bias ? "" : " no bias");
    CHECK(want_fused ? ran && !composed : composed && !ran, "%s (%s, %s): the %s path did not run", shape, how,
          tr_dtype_name(dt), want_fused ? "fused" : "composed");
    CHECK(same(f.y, c.y) && same(f.x, c.x) && same(f.w, c.w) && same(f.b, c.b) && same(f.res, c.res),
          "%s (%s, %s): values or gradients differ from the composed ops'", shape, how, tr_dtype_name(dt));
    tr_graph_destroy(f.g), tr_graph_destroy(c.g);
    tr_profile_destroy(p);
}

/* Without gradients (GELU then overwrites the product in place): the forward's bits. */
static void check_no_grad(int op, int64_t B, int64_t C, int64_t OC) {
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_grad_enabled(g, 0);
    tr_graph_set_training(g, 0); /* the residual's dropout off */
    tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, C}), *w = tr_graph_input(g, TR_F32, 2, (int64_t[]){OC, C});
    tr_tensor *b = tr_graph_input(g, TR_F32, 1, (int64_t[]){OC}), *r = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, OC});
    test_fill(x, 1), test_fill(w, 2), test_fill(b, 3), test_fill(r, 5);
    tr_tensor *f, *c;
    if (op <= GELU_TANH_OP) {
        tr_gelu_approx approx = op == GELU_TANH_OP ? TR_GELU_TANH : TR_GELU_EXACT;
        f = tr_linear_gelu(g, x, w, b, approx), c = tr_gelu(g, tr_linear(g, x, w, b), approx);
    } else {
        f = tr_linear_residual(g, x, w, b, 0.1, r), c = tr_add(g, r, tr_linear(g, x, w, b));
    }
    CHECK(f && c && same(f, c), "%s without gradients, x (%lld, %lld) OC %lld: values differ from the composed ops'",
          op_names[op], (long long)B, (long long)C, (long long)OC);
    tr_graph_destroy(g);
}

/* tr_linear_residual_norm against tr_layer_norm(tr_linear_residual(...)): without gradients
 * (evaluation, dropout 0.1) the fused op runs (want_fused) with the same bits; with them the
 * composition. */
static void check_norm(int64_t B, int64_t C, int64_t OC, int grad, int want_fused, const char *how) {
    tr_profile *p;
    CHECK(tr_profile_create(&p) == TR_OK, "profile");
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_training(g, 0);
    tr_graph_set_grad_enabled(g, grad);
    tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, C}), *w = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){OC, C});
    tr_tensor *b = tr_graph_input(g, TR_F32, 1, (int64_t[]){OC}), *r = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, OC});
    tr_tensor *gm = tr_graph_input(g, TR_F32, 1, (int64_t[]){OC}), *bt = tr_graph_input(g, TR_F32, 1, (int64_t[]){OC});
    test_fill(x, 1), test_fill(w, 2), test_fill(b, 3), test_fill(r, 5), test_fill(gm, 6), test_fill(bt, 7);
    tr_profile_attach(p);
    tr_profile_set_ops(TR_PROFILE_OPS);
    tr_tensor *f = tr_linear_residual_norm(g, x, w, b, 0.1, r, gm, bt, 1e-12);
    tr_profile_set_ops(TR_PROFILE_OPS_OFF);
    tr_profile_attach(NULL);
    tr_tensor *c = tr_layer_norm(g, tr_add(g, r, tr_linear(g, x, w, b)), gm, bt, 1e-12);
    int ran = calls(p, "forward", "linear_residual_norm") == 1;
    int composed = calls(p, "forward", "layer_norm") == 1;
    CHECK(want_fused ? ran && !composed : composed && !ran, "linear_residual_norm x (%lld, %lld) OC %lld (%s%s): the %s "
          "path did not run", (long long)B, (long long)C, (long long)OC, how, grad ? ", with gradients" : "",
          want_fused ? "fused" : "composed");
    CHECK(f && c && same(f, c), "linear_residual_norm x (%lld, %lld) OC %lld (%s%s): values differ from the composed "
          "ops'", (long long)B, (long long)C, (long long)OC, how, grad ? ", with gradients" : "");
    tr_graph_destroy(g);
    tr_profile_destroy(p);
}

static tr_tensor *leaf(tr_graph *g, int64_t d0, int64_t d1) {
    return d1 ? tr_graph_leaf(g, TR_F32, 2, (int64_t[]){d0, d1}) : tr_graph_leaf(g, TR_F32, 1, (int64_t[]){d0});
}

/* x (64, 40), w (48, 40), b (48): each case makes its tensors (a failed op resets the graph). */
static void check_errors(void) {
    tr_graph *g;
    tr_graph_create(&g, 0);
    CHECK_OP_ERROR(g, tr_linear_residual(g, leaf(g, 64, 40), leaf(g, 48, 40), leaf(g, 48, 0), 0.0, leaf(g, 64, 47)),
                   "add", "(64, 47)");
    CHECK_OP_ERROR(g, tr_linear_residual(g, leaf(g, 64, 40), leaf(g, 48, 40), leaf(g, 48, 0), 1.5, leaf(g, 64, 48)),
                   "dropout", "p = 1.5");
    CHECK_OP_ERROR(g, tr_linear_residual(g, leaf(g, 64, 40), leaf(g, 48, 40), NULL, 0.0, NULL), "add", NULL);
    CHECK_OP_ERROR(g, tr_linear_gelu(g, leaf(g, 64, 40), leaf(g, 48, 40), leaf(g, 48, 0), (tr_gelu_approx)7), "gelu",
                   "approx 7");
    CHECK_OP_ERROR(g, tr_linear_gelu(g, leaf(g, 64, 40), leaf(g, 64, 47), leaf(g, 64, 0), TR_GELU_EXACT), "linear",
                   "(64, 47)");
    tr_graph_destroy(g);
}

int main(void) {
    /* x (B, C) or (B0, B1, C), OC */
    static const int64_t shapes[][5] = {
        {2, 33, 37, 70}, {2, 64, 384, 384}, {2, 100, 500, 130}, {2, 40, 64, 800}, {2, 257, 16, 33}, {3, 2, 50, 96, 64},
    };
    const struct { int tile; const char *name; } tiles[] = {
        {TR_GEMM_TILE_16X16, "16 x 16 tile"}, {TR_GEMM_TILE_WIDE, "12 x 32 tile"}, {TR_GEMM_TILE_AUTO, "the CPU's tile"}};
    /* whether the packed GEMM runs here (an AVX-512 build): else the fused ops compose */
    static float a[64 * 64], out[64 * 64];
    const int have = tr_gemm_packed_f32(0, 1, 64, 64, 64, 1.0f, a, 64, a, 64, 0.0f, out, 64);
    printf("packed GEMM %s: fused ops %s\n", have ? "present" : "absent", have ? "fused" : "composed");
    for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
        tr_gemm_packed_tile(tiles[t].tile);
        for (int th = 1; th <= 2; th++) {
            tr_set_num_threads(th);
            char how[64];
            snprintf(how, sizeof how, "%s, %d thread%s", tiles[t].name, th, th > 1 ? "s" : "");
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                int nd = (int)shapes[s][0];
                const int64_t *xs = &shapes[s][1];
                int64_t OC = shapes[s][nd + 1];
                for (int op = GELU_EXACT_OP; op <= ADD_OP; op++)
                    for (int bias = 0; bias <= 1; bias++) check_op(op, TR_F32, nd, xs, OC, bias, have, how);
            }
            check_op(ADD_SELF_OP, TR_F32, 2, (int64_t[]){100, 70}, 70, 1, have, how);
            /* rows whole in the epilogue (OC within a column block), split (OC 800), slabs of
             * columns (B < OC), read in place (small) */
            check_norm(300, 384, 384, 0, have, how), check_norm(100, 500, 800, 0, have, how);
            check_norm(40, 64, 800, 0, have, how), check_norm(64, 40, 33, 0, have, how);
            check_norm(300, 384, 384, 1, 0, how);
        }
    }
    tr_gemm_packed_tile(TR_GEMM_TILE_AUTO);
    tr_set_num_threads(1);
    /* composed: the small-batch GEMM's batches, and f64 */
    for (int op = GELU_EXACT_OP; op <= ADD_OP; op++) {
        check_op(op, TR_F32, 2, (int64_t[]){32, 64}, 48, 1, 0, "batch 32");
        check_op(op, TR_F32, 2, (int64_t[]){1, 64}, 48, 1, 0, "batch 1");
        check_op(op, TR_F64, 2, (int64_t[]){100, 64}, 48, 1, 0, "f64");
    }
    for (int op = GELU_EXACT_OP; op <= ADD_OP; op++) check_no_grad(op, 100, 500, 800), check_no_grad(op, 64, 40, 33);
    /* a dropout that is on composes; off (evaluation, or p 0) fuses */
    drop_p = 0.1;
    check_op(ADD_OP, TR_F32, 2, (int64_t[]){100, 64}, 48, 1, 0, "dropout 0.1, training");
    training = 0;
    check_op(ADD_OP, TR_F32, 2, (int64_t[]){100, 64}, 48, 1, have, "dropout 0.1, evaluating");
    training = 1, drop_p = 0;
    check_errors();
    return test_finish();
}
