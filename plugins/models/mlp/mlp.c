/* The `mlp` model plugin: a multi-layer perceptron classifier or regressor.
 *
 * Each sample's x (any shape, TR_F32) is flattened to x_numel features, then
 * fc1 .. fcN (PyTorch Linear layout) with the chosen activation and dropout after every hidden
 * layer, and a last linear layer to n_classes logits (classification: cross-entropy, ignore
 * -100) or to the y_numel targets (regression: squared error summed over targets). The loss
 * over the batch is divided by the batch's normaliser. Limits: at most MLP_MAX_LAYERS hidden
 * layers (the option list's own limit). */
#include <stdio.h>
#include <stdlib.h>

#include "trainer/model.h"
#include "trainer/ops.h"
#include "trainer/plugin.h"

#define MLP_MAX_LAYERS 64

typedef enum mlp_act { MLP_RELU = 0, MLP_GELU = 1, MLP_TANH = 2 } mlp_act;

typedef struct mlp {
    int n_linear;                    /* hidden layers + the output layer */
    int weight[MLP_MAX_LAYERS + 1];  /* parameter indices of fc<i+1>.weight */
    int bias[MLP_MAX_LAYERS + 1];
    mlp_act act;
    double dropout;
    int64_t x_numel;
    int regress;
} mlp;

static const tr_option_spec mlp_options[] = {
    {.key = "layers", .type = TR_OPTION_INT_LIST, .default_value = "[512, 512]", .min = 1,
     .max = 1 << 20, .doc = "widths of the hidden layers, e.g. [512, 512]; [] = linear model"},
    {.key = "activation", .type = TR_OPTION_CHOICE, .default_value = "relu",
     .choices = "relu|gelu|tanh", .doc = "activation after each hidden layer"},
    {.key = "dropout", .type = TR_OPTION_FLOAT, .default_value = "0", .min = 0, .max = 0.99,
     .doc = "dropout probability after each hidden activation (training only)"},
};

static tr_status mlp_create(void **ctx, const tr_options *o, const tr_data_spec *d,
                            tr_params *P) {
    *ctx = NULL;
    if (d->task != TR_TASK_CLASSIFY && d->task != TR_TASK_REGRESS)
        return tr_error_set(TR_ERR_INVALID, "mlp: the dataset's task is neither classification nor "
                                            "regression (mlp maps a feature vector to classes or targets)");
    int regress = d->task == TR_TASK_REGRESS;
    if (d->x_dtype != TR_F32)
        return tr_error_set(TR_ERR_INVALID, "mlp: input x must be %s features, the dataset gives %s",
                            tr_dtype_name(TR_F32), tr_dtype_name(d->x_dtype));
    if (d->x_numel < 1 || (regress ? d->y_numel : d->n_classes) < 1)
        return tr_error_set(TR_ERR_INVALID, "mlp: dataset spec has x_numel %lld, n_classes %lld",
                            (long long)d->x_numel, (long long)d->n_classes);
    int64_t widths[MLP_MAX_LAYERS + 2];
    int n_hidden = tr_options_int_list(o, "layers", widths + 1, MLP_MAX_LAYERS + 1);
    if (n_hidden < 0 || n_hidden > MLP_MAX_LAYERS)
        return tr_error_set(TR_ERR_INVALID, "mlp: layers: at most %d hidden layers, got %d",
                            MLP_MAX_LAYERS, n_hidden);
    mlp *m = calloc(1, sizeof *m);
    if (!m) return tr_error_set(TR_ERR_NOMEM, "mlp: out of memory");
    const char *act = tr_options_string(o, "activation");
    m->act = act && act[0] == 'g' ? MLP_GELU : act && act[0] == 't' ? MLP_TANH : MLP_RELU;
    m->dropout = tr_options_float(o, "dropout");
    m->x_numel = d->x_numel;
    m->n_linear = n_hidden + 1;
    widths[0] = d->x_numel;
    widths[n_hidden + 1] = regress ? d->y_numel : d->n_classes;
    m->regress = regress;
    for (int i = 0; i < m->n_linear; i++) {
        char name[32];
        tr_status st;
        snprintf(name, sizeof name, "fc%d.weight", i + 1);
        st = tr_params_add(P, name, 2, (int64_t[]){widths[i + 1], widths[i]},
                           TR_INIT_KAIMING_UNIFORM, 0, &m->weight[i]);
        if (st == TR_OK) {
            snprintf(name, sizeof name, "fc%d.bias", i + 1);
            st = tr_params_add(P, name, 1, (int64_t[]){widths[i + 1]}, TR_INIT_FAN_IN_UNIFORM,
                               (double)widths[i], &m->bias[i]);
        }
        if (st != TR_OK) {
            free(m);
            tr_error_prefix("mlp: ");
            return st;
        }
    }
    *ctx = m;
    return TR_OK;
}

static void mlp_destroy(void *ctx) { free(ctx); }

static tr_status mlp_forward(void *ctx, tr_graph *g, tr_params *P, const tr_batch *b,
                             tr_model_out *out) {
    mlp *m = ctx;
    if (!b->x || b->x->ndim < 1 || tr_tensor_numel(b->x) != b->x->shape[0] * m->x_numel)
        return tr_error_set(TR_ERR_INVALID, "mlp: batch x does not hold %lld features per sample",
                            (long long)m->x_numel);
    tr_tensor *h = tr_reshape(g, b->x, 2, (int64_t[]){b->x->shape[0], m->x_numel});
    for (int i = 0; i < m->n_linear; i++) {
        h = tr_linear(g, h, tr_params_get(P, m->weight[i]), tr_params_get(P, m->bias[i]));
        if (i == m->n_linear - 1) break;
        switch (m->act) {
        case MLP_GELU: h = tr_gelu(g, h, TR_GELU_EXACT); break;
        case MLP_TANH: h = tr_tanh(g, h); break;
        default: h = tr_relu(g, h); break;
        }
        h = tr_dropout(g, h, m->dropout);
    }
    out->logits = h;
    out->embedding = NULL;
    if (!b->y) out->loss = NULL;
    else if (m->regress) out->loss = tr_mse(g, h, tr_reshape(g, b->y, 2, h->shape), b->normaliser);
    else out->loss = tr_cross_entropy(g, h, b->y, b->normaliser, -100, 0.0);
    return tr_graph_status(g);
}

static const tr_model_ops mlp_ops = {
    .create = mlp_create, .destroy = mlp_destroy, .forward = mlp_forward};

static const tr_plugin_desc mlp_desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_MODEL,
    .name = "mlp",
    .version = "1.0.0",
    .description = "multi-layer perceptron on flattened inputs: classifier or regressor",
    .options = mlp_options,
    .n_options = sizeof mlp_options / sizeof mlp_options[0],
    .ops = &mlp_ops,
    .ops_size = sizeof mlp_ops};

TR_PLUGIN_DEFINE(mlp_desc)
