/* The `hf_encoder` model plugin: a pretrained Hugging Face BERT-family encoder loaded from its
 * folder (config.json + model.safetensors, or model.safetensors.index.json with shards), built
 * as `transformers`' BertModel computes it:
 *
 *   x = drop(LN(word[ids] + position[0:T] + token_type[types]))
 *   per layer: x = LN(x + drop(o(attn(q(x), k(x), v(x), mask))));  x = LN(x + drop(out(act(in(x)))))
 *              (a block of trainer.activation_checkpointing: tr_graph_block)
 *   (drop: hidden_dropout_prob; attn drops its probabilities with attention_probs_dropout_prob)
 *   pooler = tanh(dense(x[:, 0]))
 *   embed:    out->embedding = pool(x) (cls | mean over real tokens | pooler), L2-normalised
 *             with `normalize`; logits = the same tensor
 *   classify: logits = classifier(drop(pooler)), BertForSequenceClassification's head
 *   pairs:    x (B, 2, T) a query and a passage per sample, encoded as one batch of 2B and
 *             pooled as embed; logits (B, 1) their cosine similarity, the loss its squared
 *             error against the score (../common/pair_head.h); single texts x (B, T) are
 *             embedded as under embed (`trainer embed`), not trained on
 * Parameter names are Hugging Face's (embeddings.word_embeddings.weight, encoder.layer.0...),
 * so checkpoints map back. hf_load.c reads and checks the files; docs/huggingface.md has the
 * rules (what loads, what is refused, token types). RoBERTa and XLM-R (model_type roberta,
 * xlm-roberta): positions count from pad_token_id + 1 over the real tokens, the head is
 * RobertaClassificationHead (dense, tanh, out_proj on the <s> token). config.json is kept
 * with every checkpoint (tr_params_add_file); a resumed run (and a command given the
 * checkpoint) is built from that copy and reads no pretrained weight (tr_params_restore). Token types and positions come from
 * the ids on the host, for a device's batch too (tr_graph_host_values). Limits: dropout draws
 * the core's masks, not torch's (the same probabilities, other random numbers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_encoder.h"
#include "../common/pair_head.h"
#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/memory.h"
#include "trainer/ops.h"
#include "trainer/plugin.h"

static const tr_option_spec hf_options[] = {
    {.key = "pretrained", .type = TR_OPTION_PATH, .default_value = NULL,
     .doc = "a Hugging Face model folder: config.json and model.safetensors (or model.safetensors.index.json)"},
    {.key = "task", .type = TR_OPTION_CHOICE, .default_value = "embed", .choices = "embed|classify|pairs",
     .doc = "embed: pooled text embeddings (trainer embed); classify: BertForSequenceClassification's head; "
            "pairs: scored query/passage pairs, the cosine similarity of their embeddings"},
    {.key = "num_labels", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = 1 << 20,
     .doc = "classify: classes; 0 = the dataset's"},
    {.key = "pooling", .type = TR_OPTION_CHOICE, .default_value = "auto", .choices = "auto|cls|mean|pooler",
     .doc = "embed, pairs: cls token, mean of the real tokens, or the BERT pooler; auto = sentence-transformers' "
            "1_Pooling/config.json when present, else cls"},
    {.key = "normalize", .type = TR_OPTION_CHOICE, .default_value = "auto", .choices = "auto|true|false",
     .doc = "embed, pairs: L2-normalise the embedding; auto = true when modules.json lists a Normalize module"},
    {.key = "sep_token_id", .type = TR_OPTION_INT, .default_value = "-2", .min = -2, .max = 1 << 30,
     .doc = "the [SEP] id that ends segment 0 (token types); -2 = config.json's, else the folder's tokenizer's "
            "[SEP]; -1 = none (every token type 0)"},
};

static void hf_destroy(void *ctx) {
    hf_model *m = ctx;
    if (!m) return;
    hf_files_close(m);
    tr_free(m->config_text);
    free(m->layer);
    free(m->src);
    free(m);
}

static tr_status hf_create(void **ctx, const tr_options *o, const tr_data_spec *d, tr_params *P) {
    *ctx = NULL;
    const char *task = tr_options_string(o, "task");
    int pairs = task && strcmp(task, "pairs") == 0;
    if (pairs && d->x_ndim == 2) {
        TR_CHECK(pair_spec_check(d, "hf_encoder: task pairs"));
    } else if (d->x_dtype != TR_I32 || d->x_ndim != 1 || d->x_shape[0] < 1) {
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: input x must be %s token ids of shape (T) (a tokenized "
                                            "csv or text dataset%s), the dataset gives %s with %d dims",
                            tr_dtype_name(TR_I32), pairs ? "; task pairs: (2, T), the text dataset's mode pairs" : "",
                            tr_dtype_name(d->x_dtype), d->x_ndim);
    }
    int64_t T = d->x_shape[d->x_ndim - 1];
    hf_model *m = calloc(1, sizeof *m);
    if (!m) return tr_error_set(TR_ERR_NOMEM, "hf_encoder: out of memory");
    m->classify = task && strcmp(task, "classify") == 0;
    m->pairs = pairs;
    m->sep_id = (int32_t)tr_options_int(o, "sep_token_id");
    /* A resumed run, or eval, predict, embed, export of a checkpoint folder: built from the
     * config.json the checkpoint keeps (hf_config_keep), never from the pretrained folder, and
     * no weights read (the checkpoint's replace them). An older trainer's checkpoint has
     * none: then the folder's config.json. */
    const char *restore = tr_params_restore(P), *pretrained = tr_options_string(o, "pretrained");
    m->restored = restore != NULL;
    m->folder = pretrained ? pretrained : "";
    int from_ckpt = m->from_checkpoint = restore && hf_file_exists(restore, "config.json");
    tr_status st = hf_config_read(m, from_ckpt ? restore : pretrained);
    if (st == TR_OK) st = hf_pooling_read(m, tr_options_string(o, "pooling"), tr_options_string(o, "normalize"));
    if (st == TR_OK && m->kept_pooling >= 0) { /* the choices the run made at its start */
        m->pooling = m->kept_pooling;
        m->normalize = m->kept_normalize;
    }
    if (st == TR_OK && m->classify) {
        m->num_labels = tr_options_int(o, "num_labels");
        if (m->num_labels == 0) m->num_labels = d->n_classes;
        if (m->num_labels < 1) st = tr_error_set(TR_ERR_INVALID, "hf_encoder: task classify needs num_labels (the "
                                                                "dataset gives no classes)");
        else if (d->task != TR_TASK_CLASSIFY)
            st = tr_error_set(TR_ERR_INVALID, "hf_encoder: task classify needs a classification dataset");
        else if (d->n_classes != m->num_labels)
            st = tr_error_set(TR_ERR_INVALID, "hf_encoder: num_labels %lld differs from the dataset's %lld classes",
                              (long long)m->num_labels, (long long)d->n_classes);
    }
    if (st == TR_OK && d->vocab > m->V)
        st = tr_error_set(TR_ERR_INVALID, "hf_encoder: the dataset's vocabulary %lld is larger than %s's vocab_size "
                                          "%lld (a tokenizer of another model?)",
                          (long long)d->vocab, m->dir, (long long)m->V);
    int64_t n_pos = m->roberta ? m->S - m->pad_id - 1 : m->S; /* RoBERTa's start at pad_token_id + 1 */
    if (st == TR_OK && T > n_pos)
        st = tr_error_set(TR_ERR_INVALID, "hf_encoder: the dataset's sequences of %lld tokens are longer than the "
                                          "%lld positions of %s (set data.params.max_length)",
                          (long long)T, (long long)n_pos, m->dir);
    if (st == TR_OK && !from_ckpt) st = hf_files_open(m); /* an older checkpoint: for the names only */
    if (st == TR_OK) st = hf_register(m, P);
    if (st == TR_OK) st = hf_config_keep(m, P);
    if (st == TR_OK && from_ckpt)
        TR_INFO("hf_encoder: the model from %s/config.json, its weights from the checkpoint (%s is not read)", restore,
                pretrained);
    else if (st == TR_OK && m->restored)
        TR_INFO("hf_encoder: %s keeps no config.json (an older trainer's): the model from %s/config.json, its weights "
                "from the checkpoint", restore, m->dir);
    if (st != TR_OK) {
        hf_destroy(m);
        if (strncmp(tr_error_msg(), "hf_encoder", 10) != 0) tr_error_prefix("hf_encoder: ");
        return st;
    }
    *ctx = m;
    return TR_OK;
}

/* The batch's ids in host memory (on a device, the copy its upload came from), or NULL with
 * an error set. */
static const int32_t *host_ids(tr_graph *g, const tr_tensor *ids) {
    const int32_t *id = tr_graph_host_values(g, ids);
    if (!id) tr_error_set(TR_ERR_INTERNAL, "hf_encoder: the batch's token ids are not readable on the host");
    return id;
}

/* A (B, T) int32 input made on the host (valid until the graph's reset) and passed in as the
 * batch is; *host receives its values to fill first. */
static tr_status host_input(tr_graph *g, int64_t B, int64_t T, int32_t **host) {
    *host = tr_arena_alloc(tr_graph_arena(g), (size_t)(B * T) * sizeof **host);
    return *host ? TR_OK : tr_error_set(TR_ERR_NOMEM, "hf_encoder: out of memory for (%lld, %lld) ids",
                                        (long long)B, (long long)T);
}

/* Token types as BERT's template makes them: 0 up to and including the first sep id of each
 * row, 1 after it (padding -1 stays -1: no row), read from the ids on the host (a device's
 * batch too) and passed in as an input. *out NULL when every type is 0 (no row has a token
 * after its first sep). */
static tr_status token_types(const hf_model *m, tr_graph *g, tr_tensor *ids, int64_t B, int64_t T, tr_tensor **out) {
    *out = NULL;
    if (m->sep_id < 0 || m->type_vocab < 2) return TR_OK;
    const int32_t *id = host_ids(g, ids);
    if (!id) return TR_ERR_INTERNAL;
    int any = 0;
    for (int64_t b = 0; b < B && !any; b++) {
        int64_t t = 0;
        while (t < T && id[b * T + t] != m->sep_id) t++;
        for (t++; t < T && !any; t++) any = id[b * T + t] != TR_PAD_ID;
    }
    if (!any) return TR_OK;
    int32_t *ty;
    TR_CHECK(host_input(g, B, T, &ty));
    for (int64_t b = 0; b < B; b++) {
        int seg = 0;
        for (int64_t t = 0; t < T; t++) {
            int32_t v = id[b * T + t];
            ty[b * T + t] = v == TR_PAD_ID ? TR_PAD_ID : seg;
            if (v == m->sep_id) seg = 1;
        }
    }
    *out = tr_graph_input_from(g, ty, TR_I32, 2, (int64_t[]){B, T});
    return tr_graph_status(g);
}

/* RoBERTa's position ids (create_position_ids_from_input_ids): pad_id + 1 + the count of real
 * tokens before, for each real token; padding -1 (no row). Read from the ids on the host. */
static tr_status roberta_positions(const hf_model *m, tr_graph *g, tr_tensor *ids, int64_t B, int64_t T,
                                   tr_tensor **out) {
    const int32_t *id = host_ids(g, ids);
    int32_t *p;
    if (!id) return TR_ERR_INTERNAL;
    TR_CHECK(host_input(g, B, T, &p));
    for (int64_t b = 0; b < B; b++) {
        int32_t next = m->pad_id + 1;
        for (int64_t t = 0; t < T; t++) p[b * T + t] = id[b * T + t] == TR_PAD_ID ? TR_PAD_ID : next++;
    }
    *out = tr_graph_input_from(g, p, TR_I32, 2, (int64_t[]){B, T});
    return tr_graph_status(g);
}

/* The intermediate dense layer and its activation (GELU fused into the product's store). */
static tr_tensor *intermediate(const hf_model *m, tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b) {
    switch (m->act) {
    case HF_ACT_GELU: return tr_linear_gelu(g, x, w, b, TR_GELU_EXACT);
    case HF_ACT_GELU_TANH: return tr_linear_gelu(g, x, w, b, TR_GELU_TANH);
    default: return tr_relu(g, tr_linear(g, x, w, b));
    }
}

/* x / max(|x|, ~0) over the last dim, from ops with a gradient and device kernels: the layer
 * norm of [x, -x] (mean 0, variance |x|^2 / H) is x sqrt(H) / sqrt(|x|^2 + H eps). */
static tr_tensor *l2_normalize(tr_graph *g, tr_tensor *x, int64_t B, int64_t H) {
    tr_tensor *both[2] = {x, tr_scale(g, x, -1.0)};
    tr_tensor *n = tr_layer_norm(g, tr_concat(g, both, 2, 1), NULL, NULL, 1e-30 / (double)H);
    return tr_scale(g, tr_reshape(g, tr_slice(g, n, 1, 0, H), 2, (int64_t[]){B, H}), 1.0 / sqrt((double)H));
}

/* One encoder layer, a unit of activation checkpointing (tr_graph_block): in = {x, mask}. */
typedef struct hf_layer_args {
    const hf_model *m;
    const hf_layer *k;
    tr_params *P;
} hf_layer_args;

static tr_tensor *hf_layer_fn(tr_graph *g, tr_tensor *const *in, int n_in, const void *user) {
    (void)n_in;
    const hf_layer_args *a = user;
    const hf_model *m = a->m;
    const hf_layer *k = a->k;
    tr_tensor *x = in[0], *mask = in[1];
    double pdrop = m->hidden_dropout;
#define W(i) tr_params_get(a->P, (i))
    tr_tensor *q = tr_linear(g, x, W(k->q_w), W(k->q_b));
    tr_tensor *kk = tr_linear(g, x, W(k->k_w), W(k->k_b));
    tr_tensor *v = tr_linear(g, x, W(k->v_w), W(k->v_b));
    tr_tensor *att = tr_attention_dropout(g, q, kk, v, mask, m->n_head, 0, m->attn_dropout);
    /* dense, dropout, + residual, LayerNorm; the residual added, and without gradients the
     * row normalised, as the product is stored where the dropout is off */
    x = tr_linear_residual_norm(g, att, W(k->ao_w), W(k->ao_b), pdrop, x, W(k->ao_ln_w), W(k->ao_ln_b), m->eps);
    tr_tensor *h = intermediate(m, g, x, W(k->in_w), W(k->in_b));
    return tr_linear_residual_norm(g, h, W(k->out_w), W(k->out_b), pdrop, x, W(k->out_ln_w), W(k->out_ln_b), m->eps);
#undef W
}

static tr_status hf_forward(void *ctx, tr_graph *g, tr_params *P, const tr_batch *b, tr_model_out *out) {
    hf_model *m = ctx;
    memset(out, 0, sizeof *out);
    /* pairs: both texts of every sample go through the encoder as one batch of 2B rows. */
    int pair_batch = m->pairs && b->x && b->x->ndim == 3;
    if (!b->x || b->x->dtype != TR_I32 || b->x->ndim != 2 + pair_batch || (pair_batch && b->x->shape[1] != 2))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: batch x must be %s token ids (B, T)%s", tr_dtype_name(TR_I32),
                            m->pairs ? " or pairs (B, 2, T)" : "");
    if (b->y && !m->classify && !pair_batch)
        return tr_error_set(TR_ERR_INVALID, m->pairs ? "hf_encoder: task pairs trains on scored text pairs (x (B, 2, T): "
                                                       "the text dataset's mode pairs), the dataset gives single texts"
                                                     : "hf_encoder: task embed has no loss to train on: use `trainer "
                                                       "embed`, or task classify or pairs to fine-tune");
    int64_t T = b->x->shape[b->x->ndim - 1], H = m->H;
    int64_t B = pair_batch ? 2 * b->x->shape[0] : b->x->shape[0]; /* rows encoded */
    int64_t first_pos = m->roberta ? m->pad_id + 1 : 0; /* RoBERTa's positions start after pad_id */
    if (T < 1 || first_pos + T > m->S)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %lld tokens, more than the %lld positions of "
                                            "max_position_embeddings", (long long)T, (long long)(m->S - first_pos));
    double pdrop = m->hidden_dropout;
#define W(i) tr_params_get(P, (i))
    /* The inputs made from the ids first, before any op reads the batch: on a device they are
     * uploaded beside the compute stream into the step's input buffer, and the CUDA emulator
     * checks per buffer that nothing queued since that buffer's last step read it. */
    tr_tensor *ids = pair_batch ? pair_rows(g, b->x) : b->x, *types, *pos_ids = NULL;
    TR_CHECK(token_types(m, g, ids, B, T, &types));
    if (m->roberta) TR_CHECK(roberta_positions(m, g, ids, B, T, &pos_ids));
    tr_tensor *mask = tr_padding_mask(g, ids);
    /* In transformers' order: (word + token type) + position. */
    tr_tensor *x = tr_embedding(g, ids, W(m->word_emb));
    x = types ? tr_add(g, x, tr_embedding(g, types, W(m->type_emb)))
              : tr_add(g, x, tr_reshape(g, tr_slice(g, W(m->type_emb), 0, 0, 1), 1, &H));
    if (pos_ids) x = tr_add(g, x, tr_embedding(g, pos_ids, W(m->pos_emb)));
    else x = tr_add(g, x, T == m->S ? W(m->pos_emb) : tr_slice(g, W(m->pos_emb), 0, 0, T));
    x = tr_dropout(g, tr_layer_norm(g, x, W(m->emb_ln_w), W(m->emb_ln_b), m->eps), pdrop);
    hf_dump(m, g, "hidden_0", x);
    for (int i = 0; i < m->n_layer; i++) {
        hf_layer_args la = {m, &m->layer[i], P};
        x = tr_graph_block(g, hf_layer_fn, (tr_tensor *[]){x, mask}, 2, &la, sizeof la);
        char dump[32];
        snprintf(dump, sizeof dump, "hidden_%d", i + 1);
        hf_dump(m, g, dump, x);
    }
    tr_tensor *cls = tr_reshape(g, tr_slice(g, x, 1, 0, 1), 2, (int64_t[]){B, H});
    tr_tensor *pooled = m->pool_w >= 0 ? tr_tanh(g, tr_linear(g, cls, W(m->pool_w), W(m->pool_b))) : NULL;
    if (m->classify) {
        tr_tensor *h;
        if (m->roberta) { /* RobertaClassificationHead on the <s> token */
            h = tr_dropout(g, cls, m->classifier_dropout);
            h = tr_tanh(g, tr_linear(g, h, W(m->cls_dense_w), W(m->cls_dense_b)));
            h = tr_dropout(g, h, m->classifier_dropout);
            out->embedding = cls;
        } else {
            h = tr_dropout(g, pooled, m->classifier_dropout);
            out->embedding = pooled;
        }
        out->logits = tr_linear(g, h, W(m->cls_w), W(m->cls_b));
        hf_dump(m, g, "logits", out->logits);
        if (b->y) {
            tr_tensor *y = tr_reshape(g, b->y, 1, (int64_t[]){B});
            out->loss = tr_cross_entropy(g, out->logits, y, b->normaliser, -100, 0.0);
        }
    } else {
        tr_tensor *e = m->pooling == HF_POOL_MEAN ? tr_mean_masked(g, x, mask)
                       : m->pooling == HF_POOL_POOLER ? pooled
                                                      : cls;
        if (pair_batch) {
            /* The cosine of e as pooled, normalize or not: it is the same number, and its
             * backward leaves a dimension whose gradient is 0 at 0, where l2_normalize's
             * (a layer norm of [x, -x]) leaves rounding noise (~1e-12) that AdamW turns into
             * full steps: all-MiniLM-L6-v2's dead dimensions 127 and 223 came alive. */
            pair_head(g, e, b, out);
        } else {
            if (m->normalize) e = l2_normalize(g, e, B, H);
            out->embedding = e;
            out->logits = e;
        }
    }
#undef W
    return tr_graph_status(g);
}

static const tr_model_ops hf_ops = {.create = hf_create, .destroy = hf_destroy, .forward = hf_forward,
                                    .export_to = hf_export};

static const tr_plugin_desc hf_desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_MODEL,
    .name = "hf_encoder",
    .version = "0.1.0",
    .description = "a pretrained Hugging Face BERT encoder (config.json + safetensors): text embeddings, a classifier "
                   "or scored text pairs",
    .options = hf_options,
    .n_options = sizeof hf_options / sizeof hf_options[0],
    .ops = &hf_ops,
    .ops_size = sizeof hf_ops};

TR_PLUGIN_DEFINE(hf_desc)
