/* The `transformer` model plugin: a GPT-style pre-LN transformer, as a causal language model
 * (mode lm) or a sequence classifier (mode classify).
 *
 *   x = drop(wte[ids] + wpe[:T])
 *   per block: x += drop(proj(attn(ln1(x)))); x += drop(mlp.proj(gelu_tanh(mlp.fc(ln2(x)))))
 *              (a block of trainer.activation_checkpointing: tr_graph_block)
 *   x = lnf(x)
 *   lm:       logits (B, T, V) = x @ wte^T (tied) or head(x); loss over the B*T tokens
 *   classify: e = mean over T of x (pool mean) or x[:, 0] (pool cls) -> out->embedding;
 *             logits (B, K) = head(e)
 *   pairs:    x (B, 2, T) holds two texts per sample (a query and a passage); each is encoded
 *             and pooled as in classify, the pair's score is the cosine similarity of the two
 *             embeddings (logits (B, 1), embeddings (B, 2*C)), and the loss is the squared
 *             error against the dataset's score (sentence-transformers' CosineSimilarityLoss).
 * Padding (ops.h's TR_PAD_ID): a token id -1 is padding, left or right. Its embedding is 0,
 * no key at a padded position is attended to (tr_padding_mask, tr_attention_qkv_masked), pool
 * mean averages the real positions only (tr_mean_masked; cls takes position 0), and lm
 * ignores targets -100 (Hugging Face's labels at padding): results at the real positions do not depend on how much padding a
 * sample has, and a batch may be shorter than the dataset's T (padding: longest; positions
 * are wpe's first T rows). The loss is cross-entropy (targets -100 ignored, as in torch)
 * divided by the batch's normaliser (the core passes global batch * T for LMs, padded
 * positions included: a normaliser of real tokens is the caller's). Parameter names follow a GPT-2
 * layout: wte.weight, wpe.weight, h.<i>.ln1.weight, h.<i>.attn.qkv.weight, ..., lnf.weight,
 * head.weight. Limits: `dropout` is not applied to the attention probabilities (torch's
 * nn.TransformerEncoderLayer and GPT-2's attn_pdrop drop them too; tr_attention_qkv_dropout
 * would), so runs keep the numbers the benchmark peer (tools/bench/torch_peer.py) and the
 * strategy tests are written for; learned absolute positions only, so sequences are at most
 * max_seq long. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/model.h"
#include "trainer/ops.h"
#include "trainer/plugin.h"

#include "../common/pair_head.h"

typedef struct tf_block {
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b;
    int ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
} tf_block;

typedef struct transformer {
    int lm;              /* 1: causal LM, 0: classifier or pairs */
    int pairs;           /* 1: two texts per sample, scored by cosine similarity */
    int pool_mean;       /* classify: 1 mean over T, 0 position 0 */
    int tied;            /* lm: head shares wte.weight */
    int n_head, n_layer;
    int64_t C, F, V, S;  /* d_model, d_ff, vocabulary, max sequence */
    int64_t n_out;       /* V (lm) or n_classes (classify) */
    double dropout;
    int wte, wpe, lnf_w, lnf_b;
    int head_w, head_b;  /* -1 when absent */
    tf_block *block;     /* (n_layer) */
} transformer;

static const tr_option_spec tf_options[] = {
    {.key = "mode", .type = TR_OPTION_CHOICE, .default_value = "lm", .choices = "lm|classify|pairs",
     .doc = "lm: causal next-token model; classify: one class per token sequence; pairs: cosine similarity of two texts' embeddings"},
    {.key = "d_model", .type = TR_OPTION_INT, .default_value = "128", .min = 1, .max = 1 << 16,
     .doc = "embedding width (a multiple of n_head)"},
    {.key = "n_head", .type = TR_OPTION_INT, .default_value = "4", .min = 1, .max = 1 << 12,
     .doc = "attention heads"},
    {.key = "n_layer", .type = TR_OPTION_INT, .default_value = "2", .min = 1, .max = 1024,
     .doc = "transformer blocks"},
    {.key = "d_ff", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = 1 << 20,
     .doc = "MLP hidden width; 0 = 4 * d_model"},
    {.key = "dropout", .type = TR_OPTION_FLOAT, .default_value = "0.1", .min = 0, .max = 0.99,
     .doc = "dropout on the embeddings and each residual branch (training only; not on the attention "
            "probabilities)"},
    {.key = "max_seq", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = 1 << 24,
     .doc = "positions in the position table; 0 = the dataset's sequence length"},
    {.key = "pool", .type = TR_OPTION_CHOICE, .default_value = "mean", .choices = "cls|mean",
     .doc = "classify: mean over positions, or the first position (cls token)"},
    {.key = "tied", .type = TR_OPTION_BOOL, .default_value = "true",
     .doc = "lm: the output head shares the token embedding wte.weight"},
    {.key = "vocab", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = 1 << 24,
     .doc = "token vocabulary; 0 = the dataset's (its vocabulary, or n_classes in mode lm)"},
};

static void tf_destroy(void *ctx) {
    transformer *m = ctx;
    if (!m) return;
    free(m->block);
    free(m);
}

/* Registers one parameter named printf-style; on failure sets *st (first failure kept). */
static void tf_add(tr_params *P, tr_status *st, int *index, int ndim, const int64_t *shape,
                   tr_init init, double arg, const char *fmt, int layer) {
    char name[64];
    if (*st != TR_OK) return;
    snprintf(name, sizeof name, fmt, layer);
    *st = tr_params_add(P, name, ndim, shape, init, arg, index);
}

static tr_status tf_create(void **ctx, const tr_options *o, const tr_data_spec *d,
                           tr_params *P) {
    *ctx = NULL;
    const char *mode = tr_options_string(o, "mode");
    int pairs = mode && strcmp(mode, "pairs") == 0;
    int lm = !pairs && (!mode || strcmp(mode, "classify") != 0);
    int64_t C = tr_options_int(o, "d_model"), H = tr_options_int(o, "n_head");
    int64_t L = tr_options_int(o, "n_layer"), F = tr_options_int(o, "d_ff");
    int64_t S = tr_options_int(o, "max_seq"), vocab = tr_options_int(o, "vocab");
    if (C % H != 0)
        return tr_error_set(TR_ERR_INVALID,
                            "transformer: d_model %lld is not a multiple of n_head %lld",
                            (long long)C, (long long)H);
    if (lm && d->task != TR_TASK_LM)
        return tr_error_set(TR_ERR_INVALID, "transformer: mode lm needs a language-model dataset "
                                            "(set mode: classify for class labels)");
    if (!lm && !pairs && d->task != TR_TASK_CLASSIFY)
        return tr_error_set(TR_ERR_INVALID, "transformer: mode classify needs a classification "
                                            "dataset (set mode: lm for next-token data)");
    if (pairs) TR_CHECK(pair_spec_check(d, "transformer: mode pairs"));
    if (!pairs && (d->x_dtype != TR_I32 || d->x_ndim != 1 || d->x_shape[0] < 1))
        return tr_error_set(TR_ERR_INVALID, "transformer: input x must be %s token ids of shape "
                                            "(T), the dataset gives %s with %d dims",
                            tr_dtype_name(TR_I32), tr_dtype_name(d->x_dtype), d->x_ndim);
    int64_t T = d->x_shape[pairs ? 1 : 0];
    if (lm && (d->y_dtype != TR_I32 || d->y_numel != T))
        return tr_error_set(TR_ERR_INVALID, "transformer: mode lm needs %s next-token targets of "
                                            "shape (%lld)", tr_dtype_name(TR_I32), (long long)T);
    if (!pairs && d->n_classes < 1)
        return tr_error_set(TR_ERR_INVALID, "transformer: dataset spec has n_classes %lld",
                            (long long)d->n_classes);
    if (lm && vocab != 0 && vocab != d->n_classes)
        return tr_error_set(TR_ERR_INVALID, "transformer: vocab %lld differs from the dataset's "
                                            "vocabulary %lld (leave vocab 0 in mode lm)",
                            (long long)vocab, (long long)d->n_classes);
    if (!lm && vocab == 0) vocab = d->vocab;
    if (!lm && vocab == 0)
        return tr_error_set(TR_ERR_INVALID, "transformer: vocab must be set in mode classify "
                                            "(the number of distinct token ids): the dataset "
                                            "does not give one");
    if (S == 0) S = T;
    if (S < T)
        return tr_error_set(TR_ERR_INVALID, "transformer: max_seq %lld is shorter than the "
                                            "dataset's sequence length %lld",
                            (long long)S, (long long)T);
    if (F == 0) F = 4 * C;

    transformer *m = calloc(1, sizeof *m);
    if (m) m->block = calloc((size_t)L, sizeof *m->block);
    if (!m || !m->block) {
        tf_destroy(m);
        return tr_error_set(TR_ERR_NOMEM, "transformer: out of memory");
    }
    const char *pool = tr_options_string(o, "pool");
    m->lm = lm;
    m->pairs = pairs;
    m->pool_mean = !pool || strcmp(pool, "cls") != 0;
    m->tied = lm && tr_options_bool(o, "tied");
    m->n_head = (int)H, m->n_layer = (int)L;
    m->C = C, m->F = F, m->S = S;
    m->V = lm ? d->n_classes : vocab;
    m->n_out = d->n_classes;
    m->dropout = tr_options_float(o, "dropout");
    m->head_w = m->head_b = -1;

    tr_status st = TR_OK;
    const tr_init KU = TR_INIT_KAIMING_UNIFORM, FI = TR_INIT_FAN_IN_UNIFORM;
    tf_add(P, &st, &m->wte, 2, (int64_t[]){m->V, C}, TR_INIT_NORMAL, 0.02, "wte.weight", 0);
    tf_add(P, &st, &m->wpe, 2, (int64_t[]){S, C}, TR_INIT_NORMAL, 0.02, "wpe.weight", 0);
    for (int i = 0; i < m->n_layer; i++) {
        tf_block *b = &m->block[i];
        tf_add(P, &st, &b->ln1_w, 1, &C, TR_INIT_ONES, 0, "h.%d.ln1.weight", i);
        tf_add(P, &st, &b->ln1_b, 1, &C, TR_INIT_ZEROS, 0, "h.%d.ln1.bias", i);
        tf_add(P, &st, &b->qkv_w, 2, (int64_t[]){3 * C, C}, KU, 0, "h.%d.attn.qkv.weight", i);
        tf_add(P, &st, &b->qkv_b, 1, (int64_t[]){3 * C}, FI, (double)C, "h.%d.attn.qkv.bias", i);
        tf_add(P, &st, &b->proj_w, 2, (int64_t[]){C, C}, KU, 0, "h.%d.attn.proj.weight", i);
        tf_add(P, &st, &b->proj_b, 1, &C, FI, (double)C, "h.%d.attn.proj.bias", i);
        tf_add(P, &st, &b->ln2_w, 1, &C, TR_INIT_ONES, 0, "h.%d.ln2.weight", i);
        tf_add(P, &st, &b->ln2_b, 1, &C, TR_INIT_ZEROS, 0, "h.%d.ln2.bias", i);
        tf_add(P, &st, &b->fc_w, 2, (int64_t[]){F, C}, KU, 0, "h.%d.mlp.fc.weight", i);
        tf_add(P, &st, &b->fc_b, 1, &F, FI, (double)C, "h.%d.mlp.fc.bias", i);
        tf_add(P, &st, &b->fc2_w, 2, (int64_t[]){C, F}, KU, 0, "h.%d.mlp.proj.weight", i);
        tf_add(P, &st, &b->fc2_b, 1, &C, FI, (double)F, "h.%d.mlp.proj.bias", i);
    }
    tf_add(P, &st, &m->lnf_w, 1, &C, TR_INIT_ONES, 0, "lnf.weight", 0);
    tf_add(P, &st, &m->lnf_b, 1, &C, TR_INIT_ZEROS, 0, "lnf.bias", 0);
    if (!m->tied && !pairs)
        tf_add(P, &st, &m->head_w, 2, (int64_t[]){m->n_out, C}, KU, 0, "head.weight", 0);
    if (!lm && !pairs) tf_add(P, &st, &m->head_b, 1, &m->n_out, FI, (double)C, "head.bias", 0);
    if (st != TR_OK) {
        tf_destroy(m);
        tr_error_prefix("transformer: ");
        return st;
    }
    *ctx = m;
    return TR_OK;
}

/* One block, a unit of activation checkpointing (tr_graph_block): in = {x, mask}. */
typedef struct tf_block_args {
    const transformer *m;
    const tf_block *k;
    tr_params *P;
} tf_block_args;

static tr_tensor *tf_block_fn(tr_graph *g, tr_tensor *const *in, int n_in, const void *user) {
    (void)n_in;
    const tf_block_args *a = user;
    const transformer *m = a->m;
    const tf_block *k = a->k;
    tr_tensor *x = in[0], *mask = in[1];
#define PG(f) tr_params_get(a->P, k->f)
    tr_tensor *h = tr_layer_norm(g, x, PG(ln1_w), PG(ln1_b), 1e-5);
    tr_tensor *qkv = tr_linear(g, h, PG(qkv_w), PG(qkv_b));
    tr_tensor *att = tr_attention_qkv_masked(g, qkv, mask, m->n_head, m->lm);
    /* x + dropout(proj(att)): the residual added as the product is stored where the dropout
     * is off; GELU applied as fc's product is stored */
    x = tr_linear_residual(g, att, PG(proj_w), PG(proj_b), m->dropout, x);
    h = tr_layer_norm(g, x, PG(ln2_w), PG(ln2_b), 1e-5);
    h = tr_linear_gelu(g, h, PG(fc_w), PG(fc_b), TR_GELU_TANH);
    tr_tensor *y = tr_linear_residual(g, h, PG(fc2_w), PG(fc2_b), m->dropout, x);
#undef PG
    return y;
}

static tr_status tf_forward(void *ctx, tr_graph *g, tr_params *P, const tr_batch *b,
                            tr_model_out *out) {
    transformer *m = ctx;
    if (!b->x || b->x->dtype != TR_I32 || b->x->ndim != (m->pairs ? 3 : 2))
        return tr_error_set(TR_ERR_INVALID, "transformer: batch x must be %s token ids %s",
                            tr_dtype_name(TR_I32), m->pairs ? "(B, 2, T)" : "(B, T)");
    int64_t B = b->x->shape[0], T = b->x->shape[b->x->ndim - 1], C = m->C;
    /* pairs: both texts of every sample go through the encoder as one batch of 2B. */
    tr_tensor *ids = m->pairs ? pair_rows(g, b->x) : b->x;
    if (T < 1 || T > m->S)
        return tr_error_set(TR_ERR_INVALID, "transformer: sequence length %lld exceeds max_seq %lld",
                            (long long)T, (long long)m->S);
    tr_tensor *wte = tr_params_get(P, m->wte), *wpe = tr_params_get(P, m->wpe);
    tr_tensor *pos = T == m->S ? wpe : tr_slice(g, wpe, 0, 0, T);
    tr_tensor *mask = tr_padding_mask(g, ids); /* (B, T): 0 at padding; all ones is the unmasked path */
    tr_tensor *x = tr_dropout(g, tr_add(g, tr_embedding(g, ids, wte), pos), m->dropout);
    for (int i = 0; i < m->n_layer; i++) {
        tf_block_args a = {m, &m->block[i], P};
        x = tr_graph_block(g, tf_block_fn, (tr_tensor *[]){x, mask}, 2, &a, sizeof a);
    }
    x = tr_layer_norm(g, x, tr_params_get(P, m->lnf_w), tr_params_get(P, m->lnf_b), 1e-5);
    out->embedding = NULL;
    out->loss = NULL;
    if (m->lm) {
        tr_tensor *w = m->tied ? wte : tr_params_get(P, m->head_w);
        out->logits = tr_linear(g, x, w, NULL);
        if (b->y) {
            if (tr_tensor_numel(b->y) != B * T)
                return tr_error_set(TR_ERR_INVALID, "transformer: %lld next-token targets for a batch of %lld x %lld "
                                                    "token ids (targets must be as long as the batch's ids)",
                                    (long long)tr_tensor_numel(b->y), (long long)B, (long long)T);
            tr_tensor *y = tr_reshape(g, b->y, 1, (int64_t[]){B * T});
            out->loss = tr_cross_entropy(g, out->logits, y, b->normaliser, -100, 0.0);
        }
    } else {
        int64_t R = m->pairs ? 2 * B : B; /* rows of ids */
        tr_tensor *e = m->pool_mean ? tr_mean_masked(g, x, mask)
                                    : tr_reshape(g, tr_slice(g, x, 1, 0, 1), 2, (int64_t[]){R, C});
        if (m->pairs) {
            pair_head(g, e, b, out);
        } else {
            out->embedding = e;
            out->logits = tr_linear(g, e, tr_params_get(P, m->head_w), tr_params_get(P, m->head_b));
            if (b->y) {
                tr_tensor *y = tr_reshape(g, b->y, 1, (int64_t[]){B});
                out->loss = tr_cross_entropy(g, out->logits, y, b->normaliser, -100, 0.0);
            }
        }
    }
    return tr_graph_status(g);
}

static const tr_model_ops tf_ops = {
    .create = tf_create, .destroy = tf_destroy, .forward = tf_forward};

static const tr_plugin_desc tf_desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_MODEL,
    .name = "transformer",
    .version = "1.0.0",
    .description = "pre-LN GPT-style transformer: causal LM or sequence classifier",
    .options = tf_options,
    .n_options = sizeof tf_options / sizeof tf_options[0],
    .ops = &tf_ops,
    .ops_size = sizeof tf_ops};

TR_PLUGIN_DEFINE(tf_desc)
