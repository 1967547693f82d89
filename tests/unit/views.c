/* Reshape views: shared data, no tape node, the gradient reaches the base (a leaf or an op
 * output), views of views point at the base, ops work on views, -1 inference and flatten. */
#include <string.h>

#include "check.h"
#include "trainer/ops.h"

static tr_graph *g;

static void fill(tr_tensor *t, double start) {
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)(start + (double)i);
}

static void check_shape(const char *what, const tr_tensor *t, int ndim, const int64_t *shape) {
    CHECK(t != NULL, "%s: NULL (%s)", what, tr_error_msg());
    if (!t) return;
    int same = t->ndim == ndim;
    for (int i = 0; i < ndim && same; i++) same = t->shape[i] == shape[i];
    char buf[96];
    CHECK(same, "%s: shape %s", what, tr_shape_str(t, buf, sizeof buf));
}

/* A view of a leaf: same data, no node, gradient of the view lands in the leaf. */
static void test_leaf_view(void) {
    tr_graph_reset(g);
    tr_tensor *x = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){2, 6});
    fill(x, 0);
    size_t nodes = tr_graph_nodes(g);
    tr_tensor *v = tr_reshape(g, x, 3, (int64_t[]){3, -1, 2});
    check_shape("reshape (3, -1, 2)", v, 3, (int64_t[]){3, 2, 2});
    if (!v) return;
    CHECK(v->data == x->data, "a reshape shares its input's data");
    CHECK(v->view_of == x, "view_of is the base");
    CHECK(v->requires_grad == 1, "a view of a leaf requires a gradient");
    CHECK(tr_graph_nodes(g) == nodes, "reshape recorded %zu nodes", tr_graph_nodes(g) - nodes);
    /* Backward from the view itself: dout lands in x's buffer, in x's layout. */
    float dout[12];
    for (int i = 0; i < 12; i++) dout[i] = (float)(i * i) - 3;
    CHECK(tr_backward(g, v, dout) == TR_OK, "backward from a view: %s", tr_error_msg());
    const float *gx = x->grad;
    int ok = 1;
    for (int i = 0; i < 12; i++) ok &= gx[i] == dout[i];
    CHECK(ok, "x.grad equals dout through a view (x.grad[5] = %g)", gx[5]);
}

/* A reshape of a reshape views the original base; an op on it sends the gradient there. */
static void test_view_of_view(void) {
    tr_graph_reset(g);
    tr_tensor *x = tr_graph_leaf(g, TR_F32, 3, (int64_t[]){2, 3, 4});
    fill(x, -5);
    tr_tensor *v1 = tr_reshape(g, x, 2, (int64_t[]){6, 4});
    tr_tensor *v2 = tr_reshape(g, v1, 2, (int64_t[]){4, -1});
    check_shape("reshape of a reshape", v2, 2, (int64_t[]){4, 6});
    if (!v2) return;
    CHECK(v2->view_of == x, "a view of a view has view_of = the base, got %p",
          (void *)v2->view_of);
    CHECK(v2->data == x->data, "a view of a view shares the base's data");
    /* y = v2[:, 1:3]: dx is dout in those 2 columns of each 6-row of x, 0 elsewhere. */
    tr_tensor *y = tr_slice(g, v2, 1, 1, 2);
    CHECK(y != NULL, "slice of a view: %s", tr_error_msg());
    if (!y) return;
    const float *yd = y->data;
    CHECK(yd[0] == -4 && yd[1] == -3 && yd[2] == 2 && yd[5] == 9, "slice values %g %g %g %g",
          yd[0], yd[1], yd[2], yd[5]);
    float dout[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(tr_backward(g, y, dout) == TR_OK, "backward: %s", tr_error_msg());
    float want[24] = {0};
    for (int r = 0; r < 4; r++) {
        want[r * 6 + 1] = dout[r * 2];
        want[r * 6 + 2] = dout[r * 2 + 1];
    }
    CHECK(memcmp(x->grad, want, sizeof want) == 0, "x.grad through a view of a view");
    /* Views' gradients are the base's buffer. */
    CHECK(v1->grad == x->grad && v2->grad == x->grad, "views share the base's gradient");
}

/* A view of an op output (not a leaf): the op's backward still runs with the gradient the
 * view received, and accumulation from the base's own use and the view's use both count. */
static void test_view_of_op_output(void) {
    tr_graph_reset(g);
    tr_tensor *x = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){2, 3});
    fill(x, 1); /* x = [[1 2 3] [4 5 6]] */
    tr_tensor *t = tr_transpose(g, x, 0, 1); /* (3, 2) = [[1 4] [2 5] [3 6]] */
    tr_tensor *v = tr_flatten(g, t, 0);      /* (6) view of t */
    check_shape("flatten(t, 0)", v, 1, (int64_t[]){6});
    if (!v) return;
    CHECK(v->view_of == t && v->requires_grad, "flatten of an op output views it");
    /* y = concat(v, t flattened again) uses t twice: once via the view, once directly via
     * a second view; plus a slice of t itself. */
    tr_tensor *s = tr_slice(g, t, 0, 2, 1);                       /* [[3 6]] */
    tr_tensor *sv = tr_reshape(g, s, 1, (int64_t[]){2});          /* (2) */
    tr_tensor *y = tr_concat(g, (tr_tensor *[]){v, sv}, 2, 0);    /* (8) */
    CHECK(y != NULL, "concat of views: %s", tr_error_msg());
    if (!y) return;
    static const float yv[8] = {1, 4, 2, 5, 3, 6, 3, 6};
    CHECK(memcmp(y->data, yv, sizeof yv) == 0, "concat of views values");
    float dout[8] = {1, 2, 3, 4, 5, 6, 10, 20};
    CHECK(tr_backward(g, y, dout) == TR_OK, "backward: %s", tr_error_msg());
    /* dt = [[1 2] [3 4] [5+10 6+20]] -> dx = dt^T = [[1 3 15] [2 4 26]] */
    static const float want[6] = {1, 3, 15, 2, 4, 26};
    const float *gx = x->grad;
    CHECK(memcmp(gx, want, sizeof want) == 0, "x.grad = %g %g %g %g %g %g", gx[0], gx[1],
          gx[2], gx[3], gx[4], gx[5]);
}

/* Views of tensors that need no gradient stay gradient-free; flatten's shapes; ids reshape. */
static void test_no_grad_and_shapes(void) {
    tr_graph_reset(g);
    tr_tensor *x = tr_graph_input(g, TR_F32, 4, (int64_t[]){2, 3, 4, 5});
    tr_tensor *f1 = tr_flatten(g, x, 1), *f2 = tr_flatten(g, x, -2), *f0 = tr_flatten(g, x, 0);
    check_shape("flatten(x, 1)", f1, 2, (int64_t[]){2, 60});
    check_shape("flatten(x, -2)", f2, 3, (int64_t[]){2, 3, 20});
    check_shape("flatten(x, 0)", f0, 1, (int64_t[]){120});
    CHECK(f1 && f1->requires_grad == 0 && f1->view_of == x, "a view of an input needs no grad");
    tr_tensor *ids = tr_graph_input(g, TR_I32, 2, (int64_t[]){3, 4});
    tr_tensor *r = tr_reshape(g, ids, 1, (int64_t[]){-1});
    check_shape("reshape of i32 ids", r, 1, (int64_t[]){12});
    CHECK(r && r->dtype == TR_I32, "reshape keeps the dtype");
    tr_tensor *e = tr_graph_input(g, TR_F32, 2, (int64_t[]){0, 4});
    check_shape("reshape of an empty tensor", tr_reshape(g, e, 3, (int64_t[]){2, 0, 7}), 3,
                (int64_t[]){2, 0, 7});
    CHECK(tr_graph_status(g) == TR_OK, "no error: %s", tr_error_msg());
}

int main(void) {
    CHECK(tr_graph_create(&g, 1 << 20) == TR_OK, "graph create");
    test_leaf_view();
    test_view_of_view();
    test_view_of_op_output();
    test_no_grad_and_shapes();
    tr_graph_destroy(g);
    return test_finish();
}
