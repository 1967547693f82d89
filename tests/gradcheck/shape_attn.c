/* Finite-difference gradient checks: matmul, embedding, attention and the shape ops
 * (reshape/flatten views, transpose, permute, concat, slice); padding (ids -1, key padding
 * masks, the masked mean); dropout on the attention probabilities (a fixed mask: gradcheck
 * resets the graph to the same seed, step and call before each evaluation). */
#include "check.h"
#include "gradcheck.h"
#include "trainer/ops.h"

typedef struct attn_args {
    int n_head, causal, self; /* self: q = k = v = input 0 (gradients from three uses) */
} attn_args;

static tr_tensor *matmul(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_matmul(g, in[0], in[1]);
}
static tr_tensor *embedding(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_embedding(g, in[0], in[1]);
}
static tr_tensor *attention(tr_graph *g, tr_tensor **in, void *ctx) {
    const attn_args *a = ctx;
    if (a->self) return tr_attention(g, in[0], in[0], in[0], a->n_head, a->causal);
    return tr_attention(g, in[0], in[1], in[2], a->n_head, a->causal);
}
/* Attention on one fused projection; with `also` the input's columns [0, C) also scale the
 * output, through a slice recorded after the attention (its gradient reaches the input
 * first: the attention's adds) or before it (the attention's is written, the slice's adds). */
typedef struct qkv_args {
    int n_head, causal, also; /* also: 0 none, 1 slice after, 2 slice before */
} qkv_args;
static tr_tensor *attention_qkv(tr_graph *g, tr_tensor **in, void *ctx) {
    const qkv_args *a = ctx;
    int64_t C = in[0]->shape[2] / 3;
    tr_tensor *before = a->also == 2 ? tr_slice(g, in[0], 2, 0, C) : NULL;
    tr_tensor *y = tr_attention_qkv(g, in[0], a->n_head, a->causal);
    if (a->also == 1) return tr_mul(g, y, tr_slice(g, in[0], 2, 0, C));
    return before ? tr_mul(g, before, y) : y;
}
/* Attention with a key padding mask (input 3, or input 1 for the fused form). */
static tr_tensor *attention_masked(tr_graph *g, tr_tensor **in, void *ctx) {
    const attn_args *a = ctx;
    return tr_attention_masked(g, in[0], in[1], in[2], in[3], a->n_head, a->causal);
}
static tr_tensor *attention_qkv_masked(tr_graph *g, tr_tensor **in, void *ctx) {
    const attn_args *a = ctx;
    return tr_attention_qkv_masked(g, in[0], in[1], a->n_head, a->causal);
}
/* Attention with dropout p on its probabilities: q, k, v (self: input 0 three times) and the
 * key padding mask (input 3 when `masked`); the fused form with `also` as attention_qkv. */
typedef struct drop_args {
    int n_head, causal, self, masked, also;
    double p;
} drop_args;
static tr_tensor *attention_dropout(tr_graph *g, tr_tensor **in, void *ctx) {
    const drop_args *a = ctx;
    if (a->self) return tr_attention_dropout(g, in[0], in[0], in[0], NULL, a->n_head, a->causal, a->p);
    return tr_attention_dropout(g, in[0], in[1], in[2], a->masked ? in[3] : NULL, a->n_head, a->causal, a->p);
}
static tr_tensor *attention_qkv_dropout(tr_graph *g, tr_tensor **in, void *ctx) {
    const drop_args *a = ctx;
    int64_t C = in[0]->shape[2] / 3;
    tr_tensor *before = a->also == 2 ? tr_slice(g, in[0], 2, 0, C) : NULL;
    tr_tensor *y = tr_attention_qkv_dropout(g, in[0], a->masked ? in[1] : NULL, a->n_head, a->causal, a->p);
    if (a->also == 1) return tr_mul(g, y, tr_slice(g, in[0], 2, 0, C));
    return before ? tr_mul(g, before, y) : y;
}
/* The masked mean of a masked attention's output, the mask made from ids (input 1). */
static tr_tensor *mean_masked(tr_graph *g, tr_tensor **in, void *ctx) {
    tr_tensor *m = tr_padding_mask(g, in[1]);
    return tr_mean_masked(g, tr_attention_qkv_masked(g, in[0], m, 2, 0), m);
}
/* A view of a leaf and of an op output, each feeding a copy op. */
static tr_tensor *views(tr_graph *g, tr_tensor **in, void *ctx) {
    tr_tensor *v = tr_reshape(g, in[0], 3, (int64_t[]){3, -1, 2}); /* (6, 4) -> (3, 4, 2) */
    tr_tensor *t = tr_transpose(g, v, 1, 2);                       /* (3, 2, 4) */
    tr_tensor *f = tr_flatten(g, t, 1);                            /* (3, 8) view of t */
    return tr_slice(g, tr_reshape(g, f, 2, (int64_t[]){4, 6}), 1, 1, 4);
}
static tr_tensor *transpose(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_transpose(g, in[0], 0, 2);
}
static tr_tensor *permute(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_permute(g, in[0], (const int[]){3, 1, 0, 2});
}
static tr_tensor *concat(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_concat(g, in, 3, *(const int *)ctx);
}
/* The same tensor twice in one concat: its gradient gets both windows. */
static tr_tensor *concat_twice(tr_graph *g, tr_tensor **in, void *ctx) {
    tr_tensor *xs[3] = {in[0], in[1], in[0]};
    return tr_concat(g, xs, 3, -1);
}
static tr_tensor *slice(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_slice(g, in[0], 1, 1, 2);
}

int main(void) {
    const double tol = 1e-6;
    gc_input mb[2] = {GC_F64(4, 2, 2, 3, 4), GC_F64(4, 2, 2, 4, 3)};
    gradcheck("matmul_batched", matmul, NULL, 2, mb, tol);
    gc_input ms[2] = {GC_F64(3, 2, 3, 4), GC_F64(2, 4, 5)};
    gradcheck("matmul_shared", matmul, NULL, 2, ms, tol);

    static const int32_t ids[6] = {1, 3, 1, 0, 3, 1}; /* repeated ids accumulate */
    gc_input em[2] = {{.dtype = TR_I32, .ndim = 2, .shape = {2, 3}, .ivalues = ids},
                      GC_F64(2, 5, 3)};
    gradcheck("embedding", embedding, NULL, 2, em, tol);

    static const int32_t pad_ids[6] = {1, -1, 3, -1, 1, 0}; /* padding: zero rows, no gradient */
    gc_input ep[2] = {{.dtype = TR_I32, .ndim = 2, .shape = {2, 3}, .ivalues = pad_ids}, GC_F64(2, 5, 3)};
    gradcheck("embedding_padding", embedding, NULL, 2, ep, tol);

    /* key padding masks (B = 3, S = 5): right padding, left padding, a sample with no key */
    static const int32_t kmask[15] = {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0};
    static const struct {
        const char *name;
        attn_args a;
        int T;
    } am[] = {
        {"attention_masked", {2, 0, 0}, 4},
        {"attention_masked_causal", {2, 1, 0}, 5},
        {"attention_masked_causal_h1_cross", {1, 1, 0}, 3},
    };
    for (size_t i = 0; i < sizeof am / sizeof am[0]; i++) {
        gc_input a[4] = {GC_F64(3, 3, am[i].T, 4), GC_F64(3, 3, 5, 4), GC_F64(3, 3, 5, 4),
                         {.dtype = TR_I32, .ndim = 2, .shape = {3, 5}, .ivalues = kmask}};
        gradcheck(am[i].name, attention_masked, (void *)&am[i].a, 4, a, tol);
    }
    static const attn_args qm[2] = {{2, 0, 0}, {2, 1, 0}};
    gc_input aq[2] = {GC_F64(3, 3, 5, 12), {.dtype = TR_I32, .ndim = 2, .shape = {3, 5}, .ivalues = kmask}};
    gradcheck("attention_qkv_masked", attention_qkv_masked, (void *)&qm[0], 2, aq, tol);
    gradcheck("attention_qkv_masked_causal", attention_qkv_masked, (void *)&qm[1], 2, aq, tol);
    static const int32_t mids[15] = {4, 2, 7, -1, -1, -1, -1, 3, 3, 1, -1, -1, -1, -1, -1};
    gc_input mm[2] = {GC_F64(3, 3, 5, 12), {.dtype = TR_I32, .ndim = 2, .shape = {3, 5}, .ivalues = mids}};
    gradcheck("mean_masked_of_attention", mean_masked, NULL, 2, mm, tol);

    static const struct {
        const char *name;
        attn_args a;
        int B, T, S, C;
    } att[] = {
        {"attention", {2, 0, 0}, 2, 4, 4, 6},
        {"attention_causal", {2, 1, 0}, 2, 4, 4, 6},
        {"attention_h1_causal", {1, 1, 0}, 1, 5, 5, 3},
        {"attention_cross", {3, 0, 0}, 2, 3, 5, 6},
        {"attention_cross_causal_tlts", {2, 1, 0}, 1, 3, 5, 4},
        {"attention_cross_causal_tgts", {2, 1, 0}, 1, 5, 3, 4},
        {"attention_self", {2, 1, 1}, 2, 4, 4, 4},
    };
    for (size_t i = 0; i < sizeof att / sizeof att[0]; i++) {
        gc_input a[3] = {GC_F64(3, att[i].B, att[i].T, att[i].C),
                         GC_F64(3, att[i].B, att[i].S, att[i].C),
                         GC_F64(3, att[i].B, att[i].S, att[i].C)};
        gradcheck(att[i].name, attention, (void *)&att[i].a, att[i].a.self ? 1 : 3, a, tol);
    }

    static const struct {
        const char *name;
        qkv_args a;
        int B, T, C;
    } qa[] = {
        {"attention_qkv", {2, 0, 0}, 2, 4, 6},
        {"attention_qkv_causal", {3, 1, 0}, 1, 5, 6},
        {"attention_qkv_adds", {2, 1, 1}, 2, 3, 4},
        {"attention_qkv_writes", {1, 0, 2}, 2, 3, 4},
    };
    for (size_t i = 0; i < sizeof qa / sizeof qa[0]; i++) {
        gc_input a[1] = {GC_F64(3, qa[i].B, qa[i].T, 3 * qa[i].C)};
        gradcheck(qa[i].name, attention_qkv, (void *)&qa[i].a, 1, a, tol);
    }

    /* dropout on the probabilities: n_head, causal, self, masked, also, p */
    static const struct {
        const char *name;
        drop_args a;
        int B, T, S, C;
    } ad[] = {
        {"attention_dropout", {2, 0, 0, 0, 0, 0.5}, 2, 4, 4, 6},
        {"attention_dropout_cross", {1, 0, 0, 0, 0, 0.4}, 1, 3, 5, 4},
        {"attention_dropout_causal_cross", {2, 1, 0, 0, 0, 0.3}, 1, 5, 3, 4},
        {"attention_dropout_self", {2, 1, 1, 0, 0, 0.5}, 2, 4, 4, 4},
        {"attention_dropout_masked", {2, 0, 0, 1, 0, 0.5}, 3, 4, 5, 4},
        {"attention_dropout_masked_causal", {2, 1, 0, 1, 0, 0.3}, 3, 5, 5, 4},
    };
    for (size_t i = 0; i < sizeof ad / sizeof ad[0]; i++) {
        gc_input a[4] = {GC_F64(3, ad[i].B, ad[i].T, ad[i].C), GC_F64(3, ad[i].B, ad[i].S, ad[i].C),
                         GC_F64(3, ad[i].B, ad[i].S, ad[i].C),
                         {.dtype = TR_I32, .ndim = 2, .shape = {3, 5}, .ivalues = kmask}};
        gradcheck(ad[i].name, attention_dropout, (void *)&ad[i].a, ad[i].a.self ? 1 : ad[i].a.masked ? 4 : 3, a,
                  tol);
    }
    static const struct {
        const char *name;
        drop_args a;
        int B, T, C;
    } qd[] = {
        {"attention_qkv_dropout", {2, 0, 0, 0, 0, 0.5}, 2, 4, 6},
        {"attention_qkv_dropout_causal_adds", {2, 1, 0, 0, 1, 0.3}, 2, 3, 4},
        {"attention_qkv_dropout_writes", {1, 0, 0, 0, 2, 0.5}, 2, 3, 4},
        {"attention_qkv_dropout_masked_causal", {2, 1, 0, 1, 0, 0.4}, 3, 5, 4},
    };
    for (size_t i = 0; i < sizeof qd / sizeof qd[0]; i++) {
        gc_input a[2] = {GC_F64(3, qd[i].B, qd[i].T, 3 * qd[i].C),
                         {.dtype = TR_I32, .ndim = 2, .shape = {3, 5}, .ivalues = kmask}};
        gradcheck(qd[i].name, attention_qkv_dropout, (void *)&qd[i].a, qd[i].a.masked ? 2 : 1, a, tol);
    }

    gc_input v[1] = {GC_F64(2, 6, 4)};
    gradcheck("reshape_flatten_views", views, NULL, 1, v, tol);
    gc_input t[1] = {GC_F64(3, 2, 3, 4)};
    gradcheck("transpose", transpose, NULL, 1, t, tol);
    gc_input p[1] = {GC_F64(4, 2, 3, 2, 4)};
    gradcheck("permute", permute, NULL, 1, p, tol);
    static const int d0 = 0, d1 = 1;
    gc_input c0[3] = {GC_F64(2, 2, 3), GC_F64(2, 1, 3), GC_F64(2, 3, 3)};
    gradcheck("concat_dim0", concat, (void *)&d0, 3, c0, tol);
    gc_input c1[3] = {GC_F64(3, 2, 1, 3), GC_F64(3, 2, 2, 3), GC_F64(3, 2, 3, 3)};
    gradcheck("concat_dim1", concat, (void *)&d1, 3, c1, tol);
    gc_input c2[2] = {GC_F64(2, 2, 3), GC_F64(2, 2, 1)};
    gradcheck("concat_same_input_twice", concat_twice, NULL, 2, c2, tol);
    gc_input s[1] = {GC_F64(3, 2, 4, 3)};
    gradcheck("slice", slice, NULL, 1, s, tol);
    return test_finish();
}
