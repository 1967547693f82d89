/* A model built for plugin ABI 0.10, before tr_model_ops.export_to: a linear classifier on
 * float features. Its table ends at forward (ops_size), and the memory after it holds a
 * function that aborts: a core that read past ops_size would call it. The core must train it
 * and refuse `trainer export` by name (tests/e2e/hf_export.py). */
#include <stddef.h>
#include <stdlib.h>

#include "trainer/model.h"
#include "trainer/ops.h"

typedef struct old_model { int w, b; } old_model;

static tr_status create(void **ctx, const tr_options *o, const tr_data_spec *d, tr_params *P) {
    (void)o;
    if (d->x_dtype != TR_F32 || d->task != TR_TASK_CLASSIFY)
        return tr_error_set(TR_ERR_INVALID, "old_model: float features and classes only");
    old_model *m = malloc(sizeof *m);
    if (!m) return tr_error_set(TR_ERR_NOMEM, "old_model: out of memory");
    tr_status st = tr_params_add(P, "fc.weight", 2, (int64_t[]){d->n_classes, d->x_numel}, TR_INIT_KAIMING_UNIFORM, 0, &m->w);
    if (st == TR_OK) st = tr_params_add(P, "fc.bias", 1, (int64_t[]){d->n_classes}, TR_INIT_FAN_IN_UNIFORM, (double)d->x_numel, &m->b);
    if (st != TR_OK) {
        free(m);
        return st;
    }
    *ctx = m;
    return TR_OK;
}

static void destroy(void *ctx) { free(ctx); }

static tr_status forward(void *ctx, tr_graph *g, tr_params *P, const tr_batch *b, tr_model_out *out) {
    old_model *m = ctx;
    tr_tensor *x = tr_reshape(g, b->x, 2, (int64_t[]){b->size, tr_tensor_numel(b->x) / b->size});
    out->logits = tr_linear(g, x, tr_params_get(P, m->w), tr_params_get(P, m->b));
    if (b->y) out->loss = tr_cross_entropy(g, out->logits, b->y, b->normaliser, -100, 0.0);
    return tr_graph_status(g);
}

static tr_status never(void *ctx, tr_params *P, const tr_model_export *env) {
    (void)ctx, (void)P, (void)env;
    abort(); /* past the table this plugin declares: the core must not see it */
}

static const tr_model_ops ops = {.create = create, .destroy = destroy, .forward = forward, .export_to = never};
static const tr_plugin_desc desc = {
    .abi_major = 0,
    .abi_minor = 10,
    .struct_size = sizeof(tr_plugin_desc),
    .kind = TR_PLUGIN_MODEL,
    .name = "old_model",
    .version = "0.10.0",
    .description = "a model built for ABI 0.10 (test fixture)",
    .ops = &ops,
    .ops_size = offsetof(tr_model_ops, forward) + sizeof ops.forward,
};

TR_PLUGIN_DEFINE(desc)
