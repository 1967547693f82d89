/* matmul, embedding, attention and the shape ops against PyTorch, forward and backward, with
 * padding (ids -1, key padding masks, the masked mean) and dropout on the attention
 * probabilities (the reference rebuilds the mask from the core's Philox stream: reftest's
 * graph has seed 1234, step 0, sample_base 0) (cases in tools/reference/cases/shape_attn.py). */
#include "check.h"
#include "reftest.h"
#include "trainer/ops.h"

typedef struct attn_args {
    int n_head, causal;
} attn_args;
typedef struct drop_args {
    int n_head, causal;
    double p; /* dropout on the probabilities */
} drop_args;

static tr_tensor *matmul(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_matmul(g, in[0], in[1]);
}
static tr_tensor *embedding(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_embedding(g, in[0], in[1]);
}
static tr_tensor *attention(tr_graph *g, tr_tensor **in, void *ctx) {
    const attn_args *a = ctx;
    return tr_attention(g, in[0], in[1], in[2], a->n_head, a->causal);
}
static tr_tensor *attention_qkv(tr_graph *g, tr_tensor **in, void *ctx) {
    const attn_args *a = ctx;
    return tr_attention_qkv(g, in[0], a->n_head, a->causal);
}
static tr_tensor *attention_masked(tr_graph *g, tr_tensor **in, void *ctx) {
    const attn_args *a = ctx;
    return tr_attention_masked(g, in[0], in[1], in[2], in[3], a->n_head, a->causal);
}
static tr_tensor *attention_qkv_masked(tr_graph *g, tr_tensor **in, void *ctx) {
    const attn_args *a = ctx;
    return tr_attention_qkv_masked(g, in[0], in[1], a->n_head, a->causal);
}
static tr_tensor *attention_dropout(tr_graph *g, tr_tensor **in, void *ctx) {
    const drop_args *a = ctx;
    return tr_attention_dropout(g, in[0], in[1], in[2], in[3], a->n_head, a->causal, a->p);
}
static tr_tensor *attention_qkv_dropout(tr_graph *g, tr_tensor **in, void *ctx) {
    const drop_args *a = ctx;
    return tr_attention_qkv_dropout(g, in[0], in[1], a->n_head, a->causal, a->p);
}
static tr_tensor *mean_masked(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_mean_masked(g, in[0], in[1]);
}
static tr_tensor *reshape_transpose(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_transpose(g, tr_reshape(g, in[0], 3, (int64_t[]){2, -1, 3}), 0, 2);
}
static tr_tensor *transpose(tr_graph *g, tr_tensor **in, void *ctx) {
    const int *d = ctx;
    return tr_transpose(g, in[0], d[0], d[1]);
}
static tr_tensor *permute(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_permute(g, in[0], ctx);
}
static tr_tensor *concat(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_concat(g, in, 3, *(const int *)ctx);
}
static tr_tensor *slice(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_slice(g, in[0], 1, 2, 3);
}
static tr_tensor *slice_large(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_slice(g, in[0], 1, 10, 30);
}

int main(void) {
    const double tol = 1e-5;
    const char *ab[] = {"a", "b", NULL}, *qkv[] = {"q", "k", "v", NULL}, *x[] = {"x", NULL};
    reftest_op("matmul_batched", matmul, NULL, ab, tol);
    reftest_op("matmul_shared", matmul, NULL, ab, tol);
    reftest_op("matmul_batched_large", matmul, NULL, ab, tol);
    reftest_op("matmul_2d", matmul, NULL, ab, tol);
    const char *ids_table[] = {"ids", "table", NULL};
    reftest_op("embedding", embedding, NULL, ids_table, tol);
    reftest_op("embedding_large", embedding, NULL, ids_table, tol);

    static const struct {
        const char *name;
        attn_args a;
    } att[] = {
        {"attention_h4", {4, 0}},
        {"attention_causal_h4", {4, 1}},
        {"attention_h1", {1, 0}},
        {"attention_causal_h1", {1, 1}},
        {"attention_cross_h4", {4, 0}},
        {"attention_cross_h1", {1, 0}},
        {"attention_cross_causal_h4", {4, 1}},
        {"attention_cross_causal_h2", {2, 1}},
        {"attention_long_causal", {2, 1}},
        {"attention_blocks_causal", {2, 1}},
        {"attention_wide_heads", {2, 1}},
        {"attention_rows_128", {2, 0}},
        {"attention_rows_200", {2, 0}},
        {"attention_rows_300", {2, 0}},
    };
    for (size_t i = 0; i < sizeof att / sizeof att[0]; i++)
        reftest_op(att[i].name, attention, (void *)&att[i].a, qkv, tol);

    static const struct {
        const char *name;
        attn_args a;
    } packed[] = {
        {"attention_qkv_h4", {4, 0}},
        {"attention_qkv_causal_h2", {2, 1}},
        {"attention_qkv_long_causal", {2, 1}},
    };
    const char *fused[] = {"qkv", NULL};
    for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++)
        reftest_op(packed[i].name, attention_qkv, (void *)&packed[i].a, fused, tol);

    /* padding: ids -1, key padding masks, the masked mean */
    reftest_op("embedding_padding", embedding, NULL, ids_table, tol);
    static const struct {
        const char *name;
        attn_args a;
    } masked[] = {
        {"attention_masked_right", {4, 0}},        {"attention_masked_left", {4, 0}},
        {"attention_masked_empty", {2, 0}},        {"attention_masked_causal_right", {2, 1}},
        {"attention_masked_causal_left", {2, 1}},  {"attention_masked_cross", {1, 0}},
        {"attention_masked_cross_causal", {2, 1}}, {"attention_masked_long_causal", {2, 1}},
        {"attention_masked_blocks", {2, 0}},
    };
    const char *qkvm[] = {"q", "k", "v", "mask", NULL};
    for (size_t i = 0; i < sizeof masked / sizeof masked[0]; i++)
        reftest_op(masked[i].name, attention_masked, (void *)&masked[i].a, qkvm, tol);
    static const struct {
        const char *name;
        attn_args a;
    } packed_masked[] = {{"attention_qkv_masked_right", {4, 0}}, {"attention_qkv_masked_causal_left", {2, 1}}};
    const char *fused_mask[] = {"qkv", "mask", NULL};
    for (size_t i = 0; i < sizeof packed_masked / sizeof packed_masked[0]; i++)
        reftest_op(packed_masked[i].name, attention_qkv_masked, (void *)&packed_masked[i].a, fused_mask, tol);
    const char *xm[] = {"x", "mask", NULL};
    reftest_op("mean_masked", mean_masked, NULL, xm, tol);
    reftest_op("mean_masked_left", mean_masked, NULL, xm, tol);

    reftest_op("reshape_transpose", reshape_transpose, NULL, x, tol);
    static const int t3[2] = {0, 2}, t4[2] = {1, -1}; /* -1: the last dim, 3 */
    reftest_op("transpose_3d", transpose, (void *)t3, x, tol);
    reftest_op("transpose_4d", transpose, (void *)t4, x, tol);
    static const int p3[3] = {2, 0, 1}, p4[4] = {0, 2, 3, 1};
    reftest_op("permute_3d", permute, (void *)p3, x, tol);
    reftest_op("permute_4d", permute, (void *)p4, x, tol);
    reftest_op("permute_large", permute, (void *)p4, x, tol);
    static const int d0 = 0, d1 = 1;
    const char *abc[] = {"a", "b", "c", NULL};
    reftest_op("concat_dim0", concat, (void *)&d0, abc, tol);
    reftest_op("concat_dim1", concat, (void *)&d1, abc, tol);
    reftest_op("concat_large", concat, (void *)&d1, abc, tol);
    reftest_op("slice_mid", slice, NULL, x, tol);
    reftest_op("slice_large", slice_large, NULL, x, tol);

    /* dropout on the attention probabilities, with the mask the reference rebuilt */
    static const struct {
        const char *name;
        drop_args a;
    } dropped[] = {
        {"attention_dropout_h4", {4, 0, 0.3}},
        {"attention_dropout_cross_causal", {2, 1, 0.5}},
        {"attention_dropout_masked", {4, 0, 0.1}},
        {"attention_dropout_masked_causal_left", {2, 1, 0.3}},
        {"attention_dropout_long", {1, 0, 0.2}},
        {"attention_dropout_long_heads", {2, 1, 0.2}},
        {"attention_dropout_blocks", {2, 1, 0.3}},
    };
    for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
        reftest_op(dropped[i].name, attention_dropout, (void *)&dropped[i].a, qkvm, tol);
    static const struct {
        const char *name;
        drop_args a;
    } packed_dropped[] = {{"attention_qkv_dropout", {4, 1, 0.3}}, {"attention_qkv_dropout_masked", {2, 0, 0.4}}};
    for (size_t i = 0; i < sizeof packed_dropped / sizeof packed_dropped[0]; i++)
        reftest_op(packed_dropped[i].name, attention_qkv_dropout, (void *)&packed_dropped[i].a, fused_mask, tol);
    return test_finish();
}
