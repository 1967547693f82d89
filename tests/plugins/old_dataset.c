/* A dataset built for plugin ABI 0.6 (before an empty validation split meant "none"): with
 * val_fraction 0 its validation split is an error. The core must still run without validation
 * then, unless the config gives data.val_params (tests/e2e/data_splits.sh). Two classes, four
 * features: x = (y, 1 - y, 0.5, i mod 3). */
#include <stddef.h>
#include <stdlib.h>

#include "trainer/model.h"

typedef struct old_ds { int64_t n; } old_ds;

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    if (env->split == TR_SPLIT_VAL && env->val_fraction == 0)
        return tr_error_set(TR_ERR_INVALID, "old_dataset: no validation rows with val_fraction 0");
    old_ds *d = malloc(sizeof *d);
    if (!d) return tr_error_set(TR_ERR_NOMEM, "old_dataset: out of memory");
    d->n = tr_options_int(o, "samples");
    *ctx = d;
    return TR_OK;
}
static void destroy(void *ctx) { free(ctx); }
static void spec(void *ctx, tr_data_spec *out) {
    (void)ctx;
    *out = (tr_data_spec){.task = TR_TASK_CLASSIFY, .x_dtype = TR_F32, .x_ndim = 1, .x_shape = {4}, .x_numel = 4,
                          .y_dtype = TR_I32, .y_ndim = 0, .y_numel = 1, .n_classes = 2};
}
static int64_t size(void *ctx) { return ((old_ds *)ctx)->n; }
static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    (void)ctx;
    float *f = x;
    int32_t c = (int32_t)(index % 2);
    f[0] = (float)c, f[1] = (float)(1 - c), f[2] = 0.5f, f[3] = (float)(index % 3);
    if (y) *(int32_t *)y = c;
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "samples", .type = TR_OPTION_INT, .default_value = "32", .min = 1, .max = 1 << 20, .doc = "samples per split"},
};
/* The table as ABI 0.6 had it: create ... get. */
static const tr_dataset_ops ops = {.create = create, .destroy = destroy, .spec = spec, .size = size, .get = get};
static const tr_plugin_desc desc = {
    .abi_major = 0,
    .abi_minor = 6,
    .struct_size = sizeof(tr_plugin_desc),
    .kind = TR_PLUGIN_DATASET,
    .name = "old_dataset",
    .version = "0.6.0",
    .description = "a dataset built for ABI 0.6 (test fixture)",
    .options = opts,
    .n_options = 1,
    .ops = &ops,
    .ops_size = offsetof(tr_dataset_ops, get) + sizeof ops.get,
};

TR_PLUGIN_DEFINE(desc)
