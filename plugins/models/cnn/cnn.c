/* The `cnn` model plugin: FashionCNN-style convolutional classifier for (C, H, W) images.
 *
 * Block i (one per `channels` entry): conv 3x3 (padding 1 for the first block, 0 after, as in
 * FashionCNN), batch-norm, relu, max-pool 2: a block of trainer.activation_checkpointing
 * (tr_graph_block). Then flatten, linear layers to each `fc` width (dropout after the first; no
 * activation between them, as FashionCNN has none), and a last linear layer to n_classes. Defaults give FashionCNN: conv 1->32 p1, BN, relu, pool, conv
 * 32->64 p0, BN, relu, pool, fc 2304->600, dropout 0.25, fc 600->120, fc 120->10.
 * Input: TR_F32 x of (C, H, W), or (N) with N a perfect square, read as (1, sqrt N, sqrt N).
 * Limits: classification only; 3x3 kernels, stride 1, pool 2 are fixed. */
#include <stdio.h>
#include <stdlib.h>

#include "trainer/model.h"
#include "trainer/ops.h"
#include "trainer/plugin.h"

#define CNN_MAX_BLOCKS 8
#define CNN_MAX_FC 16

typedef struct cnn_block {
    int conv_w, conv_b;   /* conv<i>.weight (OC, IC, 3, 3), conv<i>.bias (OC) */
    int bn_w, bn_b;       /* bn<i>.weight, bn<i>.bias (OC) */
    int bn_mean, bn_var;  /* buffers bn<i>.running_mean, bn<i>.running_var (OC) */
    int padding;
} cnn_block;

typedef struct cnn {
    int n_blocks, n_fc;                 /* n_fc counts the output layer */
    cnn_block block[CNN_MAX_BLOCKS];
    int fc_w[CNN_MAX_FC + 1], fc_b[CNN_MAX_FC + 1];
    double dropout;
    int64_t in_shape[3];                /* (C, H, W) each sample is viewed as */
} cnn;

static const tr_option_spec cnn_options[] = {
    {.key = "channels", .type = TR_OPTION_INT_LIST, .default_value = "[32, 64]", .min = 1,
     .max = 1 << 16, .doc = "output channels of each conv block (conv 3x3, BN, relu, pool 2)"},
    {.key = "fc", .type = TR_OPTION_INT_LIST, .default_value = "[600, 120]", .min = 1,
     .max = 1 << 20, .doc = "widths of the linear layers before the output layer"},
    {.key = "dropout", .type = TR_OPTION_FLOAT, .default_value = "0.25", .min = 0, .max = 0.99,
     .doc = "dropout probability after the first linear layer (training only)"},
};

static tr_status cnn_fail(cnn *m, tr_status st) {
    free(m);
    tr_error_prefix("cnn: ");
    return st;
}

static tr_status cnn_create(void **ctx, const tr_options *o, const tr_data_spec *d,
                            tr_params *P) {
    *ctx = NULL;
    if (d->task != TR_TASK_CLASSIFY)
        return tr_error_set(TR_ERR_INVALID, "cnn: the dataset's task is not classification "
                                            "(cnn predicts one class id per sample)");
    if (d->x_dtype != TR_F32)
        return tr_error_set(TR_ERR_INVALID, "cnn: input x must be %s images, the dataset gives %s",
                            tr_dtype_name(TR_F32), tr_dtype_name(d->x_dtype));
    int64_t shape[3];
    if (d->x_ndim == 3) {
        shape[0] = d->x_shape[0], shape[1] = d->x_shape[1], shape[2] = d->x_shape[2];
    } else if (d->x_ndim == 1) {
        int64_t s = 0;
        while ((s + 1) * (s + 1) <= d->x_shape[0]) s++;
        if (s < 1 || s * s != d->x_shape[0])
            return tr_error_set(TR_ERR_INVALID,
                                "cnn: input x has shape (%lld): expected (C, H, W) images, or a "
                                "flat perfect-square length such as 784 = (1, 28, 28)",
                                (long long)d->x_shape[0]);
        shape[0] = 1, shape[1] = s, shape[2] = s;
    } else {
        return tr_error_set(TR_ERR_INVALID, "cnn: input x has %d dims per sample: expected (C, H, W)",
                            d->x_ndim);
    }
    if (d->n_classes < 1)
        return tr_error_set(TR_ERR_INVALID, "cnn: dataset spec has n_classes %lld",
                            (long long)d->n_classes);
    int64_t ch[CNN_MAX_BLOCKS + 1], fc[CNN_MAX_FC + 2];
    int n_blocks = tr_options_int_list(o, "channels", ch + 1, CNN_MAX_BLOCKS + 1);
    if (n_blocks < 1 || n_blocks > CNN_MAX_BLOCKS)
        return tr_error_set(TR_ERR_INVALID, "cnn: channels: expected 1 to %d conv blocks, got %d",
                            CNN_MAX_BLOCKS, n_blocks);
    int n_hidden = tr_options_int_list(o, "fc", fc + 1, CNN_MAX_FC + 1);
    if (n_hidden < 0 || n_hidden > CNN_MAX_FC)
        return tr_error_set(TR_ERR_INVALID, "cnn: fc: at most %d linear layers, got %d", CNN_MAX_FC,
                            n_hidden);

    /* Spatial sizes through the blocks: conv 3x3 (OH = H + 2p - 2), then pool 2 (floor). */
    int64_t H = shape[1], W = shape[2];
    for (int i = 0; i < n_blocks; i++) {
        int p = i == 0 ? 1 : 0;
        int64_t ch_ = H + 2 * p - 2, cw = W + 2 * p - 2;
        if (ch_ < 2 || cw < 2)
            return tr_error_set(TR_ERR_INVALID,
                                "cnn: input (%lld, %lld, %lld) is too small for %d conv blocks "
                                "(channels): block %d sees %lldx%lld, needs at least %dx%d",
                                (long long)shape[0], (long long)shape[1], (long long)shape[2],
                                n_blocks, i + 1, (long long)H, (long long)W, 4 - 2 * p, 4 - 2 * p);
        H = ch_ / 2, W = cw / 2;
    }

    cnn *m = calloc(1, sizeof *m);
    if (!m) return tr_error_set(TR_ERR_NOMEM, "cnn: out of memory");
    m->n_blocks = n_blocks;
    m->dropout = tr_options_float(o, "dropout");
    for (int k = 0; k < 3; k++) m->in_shape[k] = shape[k];
    ch[0] = shape[0];
    char name[48];
    for (int i = 0; i < n_blocks; i++) {
        cnn_block *bl = &m->block[i];
        int64_t ic = ch[i], oc = ch[i + 1];
        bl->padding = i == 0 ? 1 : 0;
        snprintf(name, sizeof name, "conv%d.weight", i + 1);
        tr_status st = tr_params_add(P, name, 4, (int64_t[]){oc, ic, 3, 3},
                                     TR_INIT_KAIMING_UNIFORM, 0, &bl->conv_w);
        if (st != TR_OK) return cnn_fail(m, st);
        snprintf(name, sizeof name, "conv%d.bias", i + 1);
        st = tr_params_add(P, name, 1, &oc, TR_INIT_FAN_IN_UNIFORM, (double)(ic * 9), &bl->conv_b);
        if (st != TR_OK) return cnn_fail(m, st);
        snprintf(name, sizeof name, "bn%d.weight", i + 1);
        st = tr_params_add(P, name, 1, &oc, TR_INIT_ONES, 0, &bl->bn_w);
        if (st != TR_OK) return cnn_fail(m, st);
        snprintf(name, sizeof name, "bn%d.bias", i + 1);
        st = tr_params_add(P, name, 1, &oc, TR_INIT_ZEROS, 0, &bl->bn_b);
        if (st != TR_OK) return cnn_fail(m, st);
        snprintf(name, sizeof name, "bn%d.running_mean", i + 1);
        st = tr_params_add_buffer(P, name, 1, &oc, TR_INIT_ZEROS, 0, &bl->bn_mean);
        if (st != TR_OK) return cnn_fail(m, st);
        snprintf(name, sizeof name, "bn%d.running_var", i + 1);
        st = tr_params_add_buffer(P, name, 1, &oc, TR_INIT_ONES, 0, &bl->bn_var);
        if (st != TR_OK) return cnn_fail(m, st);
    }
    fc[0] = ch[n_blocks] * H * W;
    fc[n_hidden + 1] = d->n_classes;
    m->n_fc = n_hidden + 1;
    for (int i = 0; i < m->n_fc; i++) {
        snprintf(name, sizeof name, "fc%d.weight", i + 1);
        tr_status st = tr_params_add(P, name, 2, (int64_t[]){fc[i + 1], fc[i]},
                                     TR_INIT_KAIMING_UNIFORM, 0, &m->fc_w[i]);
        if (st != TR_OK) return cnn_fail(m, st);
        snprintf(name, sizeof name, "fc%d.bias", i + 1);
        st = tr_params_add(P, name, 1, &fc[i + 1], TR_INIT_FAN_IN_UNIFORM, (double)fc[i],
                           &m->fc_b[i]);
        if (st != TR_OK) return cnn_fail(m, st);
    }
    *ctx = m;
    return TR_OK;
}

static void cnn_destroy(void *ctx) { free(ctx); }

/* One conv block, a unit of activation checkpointing (tr_graph_block): in = {h}. */
typedef struct cnn_block_args {
    const cnn_block *bl;
    tr_params *P;
} cnn_block_args;

static tr_tensor *cnn_block_fn(tr_graph *g, tr_tensor *const *in, int n_in, const void *user) {
    (void)n_in;
    const cnn_block_args *a = user;
    const cnn_block *bl = a->bl;
    tr_params *P = a->P;
    tr_tensor *h = tr_conv2d(g, in[0], tr_params_get(P, bl->conv_w), tr_params_get(P, bl->conv_b), 1, bl->padding);
    /* batch-norm, ReLU, max-pool 2 as one op (pooling before ReLU, which is the same: both are
     * monotone), never writing the normalised tensor or its gradient */
    return tr_batch_norm_pool_relu(g, h, tr_params_get(P, bl->bn_w), tr_params_get(P, bl->bn_b),
                                   tr_params_buffer(P, bl->bn_mean), tr_params_buffer(P, bl->bn_var), 0.1, 1e-5);
}

static tr_status cnn_forward(void *ctx, tr_graph *g, tr_params *P, const tr_batch *b,
                             tr_model_out *out) {
    cnn *m = ctx;
    int64_t per = m->in_shape[0] * m->in_shape[1] * m->in_shape[2];
    if (!b->x || b->x->ndim < 1 || tr_tensor_numel(b->x) != b->x->shape[0] * per)
        return tr_error_set(TR_ERR_INVALID, "cnn: batch x does not hold (%lld, %lld, %lld) per sample",
                            (long long)m->in_shape[0], (long long)m->in_shape[1],
                            (long long)m->in_shape[2]);
    tr_tensor *h = tr_reshape(g, b->x, 4, (int64_t[]){b->x->shape[0], m->in_shape[0],
                                                      m->in_shape[1], m->in_shape[2]});
    for (int i = 0; i < m->n_blocks; i++) {
        cnn_block_args a = {&m->block[i], P};
        h = tr_graph_block(g, cnn_block_fn, (tr_tensor *[]){h}, 1, &a, sizeof a);
    }
    h = tr_flatten(g, h, 1);
    for (int i = 0; i < m->n_fc; i++) {
        h = tr_linear(g, h, tr_params_get(P, m->fc_w[i]), tr_params_get(P, m->fc_b[i]));
        if (i == 0 && m->n_fc > 1) h = tr_dropout(g, h, m->dropout);
    }
    out->logits = h;
    out->embedding = NULL;
    out->loss = b->y ? tr_cross_entropy(g, h, b->y, b->normaliser, -100, 0.0) : NULL;
    return tr_graph_status(g);
}

static const tr_model_ops cnn_ops = {
    .create = cnn_create, .destroy = cnn_destroy, .forward = cnn_forward};

static const tr_plugin_desc cnn_desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_MODEL,
    .name = "cnn",
    .version = "1.0.0",
    .description = "FashionCNN-style conv + batch-norm classifier for (C, H, W) images",
    .options = cnn_options,
    .n_options = sizeof cnn_options / sizeof cnn_options[0],
    .ops = &cnn_ops,
    .ops_size = sizeof cnn_ops};

TR_PLUGIN_DEFINE(cnn_desc)
