/* Bad input to matmul, embedding, attention and the shape ops gives NULL and a message that
 * names the op and the shapes; errors are sticky. Also edge shapes that are not errors. */
#include <string.h>

#include "check.h"
#include "trainer/ops.h"

static tr_graph *g;

static tr_tensor *in(tr_dtype dt, int ndim, const int64_t *shape) {
    return tr_graph_input(g, dt, ndim, shape);
}
/* An arena input of the given dtype and dims: F32(2, 3) is a (2, 3) f32 tensor. */
#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define F32(...) in(TR_F32, NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define F64(...) in(TR_F64, NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define I32(...) in(TR_I32, NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

/* `y` must be NULL with an error whose message contains each of the given fragments. */
static void expect_error(int line, const char *what, tr_tensor *y, const char *const *frags) {
    test_checks++;
    const char *msg = tr_error_msg();
    int ok = y == NULL && tr_graph_status(g) != TR_OK;
    for (int i = 0; ok && frags[i]; i++) ok = strstr(msg, frags[i]) != NULL;
    if (!ok)
        test_fail_at(__FILE__, line, "%s: got %s, status %d, message \"%s\"", what,
                     y ? "a tensor" : "NULL", (int)tr_graph_status(g), msg);
    tr_graph_reset(g);
}
#define EXPECT_ERROR(y, ...) expect_error(__LINE__, #y, (y), (const char *[]){__VA_ARGS__, NULL})

static void test_matmul(void) {
    EXPECT_ERROR(tr_matmul(g, F32(2, 3, 4), F32(2, 5, 6)), "matmul", "(2, 3, 4)", "(2, 5, 6)");
    EXPECT_ERROR(tr_matmul(g, F32(2, 3, 4), F32(3, 4, 6)), "matmul", "batch");
    EXPECT_ERROR(tr_matmul(g, F32(3, 4), F32(2, 4, 6)), "matmul", "batch");
    EXPECT_ERROR(tr_matmul(g, F32(4), F32(4, 6)), "matmul", "2-D");
    EXPECT_ERROR(tr_matmul(g, F32(3, 4), F64(4, 6)), "matmul", "f64");
    EXPECT_ERROR(tr_matmul(g, I32(3, 4), I32(4, 6)), "matmul", "i32");
    EXPECT_ERROR(tr_matmul(g, NULL, F32(4, 6)), "matmul", "NULL");
}

static void test_embedding(void) {
    EXPECT_ERROR(tr_embedding(g, F32(2, 3), F32(5, 4)), "embedding", "i32");
    EXPECT_ERROR(tr_embedding(g, I32(2, 3), F32(5)), "embedding", "(5)");
    EXPECT_ERROR(tr_embedding(g, I32(2, 3), I32(5, 4)), "embedding");
    EXPECT_ERROR(tr_embedding(g, NULL, F32(5, 4)), "embedding", "NULL");
    /* An id outside [0, V): the message names the id and its position. */
    tr_tensor *ids = I32(2, 3), *table = F32(5, 4);
    static const int32_t bad[6] = {0, 1, 4, 3, 5, 2};
    memcpy(ids->data, bad, sizeof bad);
    EXPECT_ERROR(tr_embedding(g, ids, table), "embedding", "id 5", "(1, 1)", "[0, 5)");
    /* -1 is padding (a zero row); any other negative id is out of range. */
    ids = I32(4);
    static const int32_t neg[4] = {0, -1, -2, 0};
    memcpy(ids->data, neg, sizeof neg);
    EXPECT_ERROR(tr_embedding(g, ids, F32(5, 4)), "id -2", "(2)");
}

static void test_attention(void) {
    EXPECT_ERROR(tr_attention(g, F32(2, 4, 6), F32(2, 4, 6), F32(2, 4, 6), 4, 0), "attention",
                 "6 channels", "4 heads");
    EXPECT_ERROR(tr_attention(g, F32(2, 4, 6), F32(2, 4, 6), F32(2, 4, 6), 0, 0), "attention",
                 "0 heads");
    EXPECT_ERROR(tr_attention(g, F32(2, 4, 8), F32(2, 5, 8), F32(2, 4, 8), 2, 0), "attention",
                 "(2, 5, 8)", "(2, 4, 8)");
    EXPECT_ERROR(tr_attention(g, F32(2, 4, 8), F32(3, 4, 8), F32(3, 4, 8), 2, 0), "attention",
                 "(3, 4, 8)");
    EXPECT_ERROR(tr_attention(g, F32(2, 4, 8), F32(2, 4, 6), F32(2, 4, 6), 2, 0), "attention");
    EXPECT_ERROR(tr_attention(g, F32(4, 8), F32(4, 8), F32(4, 8), 2, 0), "attention", "3-D");
    EXPECT_ERROR(tr_attention(g, F32(2, 4, 8), F32(2, 0, 8), F32(2, 0, 8), 2, 0), "attention",
                 "S = 0");
    EXPECT_ERROR(tr_attention(g, F32(2, 4, 8), F64(2, 4, 8), F32(2, 4, 8), 2, 0), "attention",
                 "f64");
    EXPECT_ERROR(tr_attention_qkv(g, F32(2, 4, 18), 4, 0), "attention_qkv", "6 channels", "4 heads");
    EXPECT_ERROR(tr_attention_qkv(g, F32(2, 4, 18), 0, 1), "attention_qkv", "0 heads");
    EXPECT_ERROR(tr_attention_qkv(g, F32(2, 4, 8), 2, 0), "attention_qkv", "(2, 4, 8)", "(B, T, 3C)");
    EXPECT_ERROR(tr_attention_qkv(g, F32(4, 24), 2, 0), "attention_qkv", "(4, 24)", "3-D");
    EXPECT_ERROR(tr_attention_qkv(g, F32(2, 0, 24), 2, 0), "attention_qkv", "T = 0");
    EXPECT_ERROR(tr_attention_qkv(g, F32(2, 4, 0), 2, 0), "attention_qkv", "0 channels");
    EXPECT_ERROR(tr_attention_qkv(g, I32(2, 4, 24), 2, 0), "attention_qkv", "i32");
    EXPECT_ERROR(tr_attention_qkv(g, NULL, 2, 0), "attention_qkv", "NULL");
}

static void test_shape_ops(void) {
    EXPECT_ERROR(tr_reshape(g, F32(2, 3), 2, (int64_t[]){4, 2}), "reshape", "(2, 3)", "(4, 2)",
                 "6 elements", "8 elements");
    EXPECT_ERROR(tr_reshape(g, F32(2, 3), 2, (int64_t[]){4, -1}), "reshape", "inferred");
    EXPECT_ERROR(tr_reshape(g, F32(2, 3), 2, (int64_t[]){-1, -1}), "reshape", "(-1, -1)");
    EXPECT_ERROR(tr_reshape(g, F32(2, 3), 2, (int64_t[]){-2, -3}), "reshape");
    EXPECT_ERROR(tr_reshape(g, F32(2, 3), TR_MAX_DIMS + 1, (int64_t[]){1, 1, 1, 1, 1, 1, 6}),
                 "reshape", "dims");
    EXPECT_ERROR(tr_reshape(g, NULL, 1, (int64_t[]){6}), "reshape", "NULL");
    EXPECT_ERROR(tr_flatten(g, F32(2, 3), 2), "flatten", "start_dim 2", "(2, 3)");
    EXPECT_ERROR(tr_transpose(g, F32(2, 3, 4), 0, 3), "transpose", "(0, 3)", "(2, 3, 4)");
    EXPECT_ERROR(tr_transpose(g, I32(2, 3), 0, 1), "transpose", "i32");
    EXPECT_ERROR(tr_permute(g, F32(2, 3, 4), (const int[]){0, 2, 2}), "permute", "perm[2]",
                 "(2, 3, 4)");
    EXPECT_ERROR(tr_permute(g, F32(2, 3, 4), (const int[]){0, 1, 3}), "permute", "perm[2] = 3");
    tr_tensor *a = F32(2, 3);
    EXPECT_ERROR(tr_concat(g, (tr_tensor *[]){a, F32(3, 3), F32(2, 4)}, 3, 1), "concat",
                 "input 1", "(3, 3)", "(2, 3)");
    a = F32(2, 3);
    EXPECT_ERROR(tr_concat(g, (tr_tensor *[]){a, F64(2, 3)}, 2, 0), "concat", "f64");
    a = F32(2, 3);
    EXPECT_ERROR(tr_concat(g, (tr_tensor *[]){a, F32(2, 3, 1)}, 2, 0), "concat", "(2, 3, 1)");
    EXPECT_ERROR(tr_concat(g, (tr_tensor *[]){F32(2, 3)}, 0, 0), "concat", "0 inputs");
    EXPECT_ERROR(tr_concat(g, (tr_tensor *[]){F32(2, 3)}, 1, 2), "concat", "dim 2");
    a = F32(2, 3);
    EXPECT_ERROR(tr_concat(g, (tr_tensor *[]){a, NULL}, 2, 0), "concat", "NULL");
    EXPECT_ERROR(tr_slice(g, F32(2, 5, 3), 1, 3, 3), "slice", "[3, 6)", "size 5", "(2, 5, 3)");
    EXPECT_ERROR(tr_slice(g, F32(2, 5, 3), 1, -1, 2), "slice", "[-1, 1)");
    EXPECT_ERROR(tr_slice(g, F32(2, 5, 3), 3, 0, 1), "slice", "dim 3");
}

/* After an error every later op returns NULL and keeps the first message. */
static void test_sticky(void) {
    tr_tensor *x = F32(2, 3);
    tr_tensor *bad = tr_matmul(g, x, F32(4, 5));
    tr_tensor *y = tr_transpose(g, x, 0, 1);
    tr_tensor *r = tr_reshape(g, x, 1, (int64_t[]){6});
    CHECK(bad == NULL && y == NULL && r == NULL, "ops after an error return NULL");
    CHECK(strstr(tr_error_msg(), "matmul") != NULL, "first error kept: %s", tr_error_msg());
    CHECK(tr_backward(g, x, NULL) != TR_OK, "backward reports the pending error");
    tr_graph_reset(g);
}

/* Shapes at the edges work: empty inner dim, empty slices, a concat of one tensor. */
static void test_edges(void) {
    tr_tensor *a = F32(3, 0), *b = F32(0, 2);
    tr_tensor *y = tr_matmul(g, a, b); /* K = 0: zeros */
    CHECK(y && y->shape[0] == 3 && y->shape[1] == 2, "matmul (3, 0) @ (0, 2): %s",
          tr_error_msg());
    if (y) {
        int zero = 1;
        for (int i = 0; i < 6; i++) zero &= ((float *)y->data)[i] == 0;
        CHECK(zero, "matmul with K = 0 gives zeros");
    }
    tr_tensor *x = F32(2, 3);
    for (int i = 0; i < 6; i++) ((float *)x->data)[i] = (float)i;
    tr_tensor *s = tr_slice(g, x, 1, 3, 0);
    CHECK(s && s->shape[0] == 2 && s->shape[1] == 0, "empty slice at the end");
    tr_tensor *c = tr_concat(g, (tr_tensor *[]){x}, 1, -1);
    CHECK(c && memcmp(c->data, x->data, 6 * sizeof(float)) == 0, "concat of one tensor copies");
    tr_tensor *t = tr_transpose(g, x, -1, -2);
    CHECK(t && t->shape[0] == 3 && ((float *)t->data)[1] == 3, "transpose(-1, -2)");
    CHECK(tr_graph_status(g) == TR_OK, "no error: %s", tr_error_msg());
    tr_graph_reset(g);
}

int main(void) {
    CHECK(tr_graph_create(&g, 1 << 20) == TR_OK, "graph create");
    test_matmul();
    test_embedding();
    test_attention();
    test_shape_ops();
    test_sticky();
    test_edges();
    tr_graph_destroy(g);
    return test_finish();
}
