/* A language-model dataset whose targets at positions mask_from and later are -100 (Hugging
 * Face's ignored labels, which the losses leave out): the test fixture of e2e_lm_ignored.
 * Sample i's tokens are a hash of (split, i, t) mod vocab, whatever seq_len is, so a sample's
 * first k positions are the same for every seq_len >= k: a causal model scores them alike. */
#include <stdint.h>
#include <stdlib.h>

#include "trainer/model.h"
#include "trainer/plugin.h"

typedef struct masked_lm {
    int64_t n, T, V, mask_from;
    uint64_t salt;
} masked_lm;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* A token with some structure to learn: every other one repeats the one before. */
static int32_t token(const masked_lm *d, int64_t i, int64_t t) {
    int64_t u = t - t % 2;
    return (int32_t)(mix(d->salt ^ mix((uint64_t)i * 1000003u + (uint64_t)u)) % (uint64_t)d->V);
}

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    masked_lm *d = malloc(sizeof *d);
    if (!d) return tr_error_set(TR_ERR_NOMEM, "masked_lm: out of memory");
    int val = env->split == TR_SPLIT_VAL;
    *d = (masked_lm){.n = tr_options_int(o, val ? "val_samples" : "samples"), .T = tr_options_int(o, "seq_len"),
                     .V = tr_options_int(o, "vocab"), .mask_from = tr_options_int(o, "mask_from"), .salt = val ? 7 : 3};
    *ctx = d;
    return TR_OK;
}

static void destroy(void *ctx) { free(ctx); }

static void spec(void *ctx, tr_data_spec *out) {
    const masked_lm *d = ctx;
    *out = (tr_data_spec){.task = TR_TASK_LM, .x_dtype = TR_I32, .x_ndim = 1, .x_shape = {d->T}, .x_numel = d->T,
                          .y_dtype = TR_I32, .y_ndim = 1, .y_shape = {d->T}, .y_numel = d->T, .n_classes = d->V,
                          .vocab = d->V};
}

static int64_t size(void *ctx) { return ((masked_lm *)ctx)->n; }

static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    const masked_lm *d = ctx;
    int32_t *xs = x, *ys = y;
    for (int64_t t = 0; t < d->T; t++) {
        xs[t] = token(d, index, t);
        if (ys) ys[t] = t >= d->mask_from ? -100 : token(d, index, t + 1);
    }
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "samples", .type = TR_OPTION_INT, .default_value = "256", .min = 1, .max = 1 << 20, .doc = "train samples"},
    {.key = "val_samples", .type = TR_OPTION_INT, .default_value = "37", .min = 1, .max = 1 << 20, .doc = "validation samples"},
    {.key = "seq_len", .type = TR_OPTION_INT, .default_value = "16", .min = 1, .max = 4096, .doc = "tokens per sample"},
    {.key = "vocab", .type = TR_OPTION_INT, .default_value = "16", .min = 2, .max = 1 << 16, .doc = "vocabulary"},
    {.key = "mask_from", .type = TR_OPTION_INT, .default_value = "4096", .min = 0, .max = 4096,
     .doc = "targets at this position and later are -100"},
};
static const tr_dataset_ops ops = {.create = create, .destroy = destroy, .spec = spec, .size = size, .get = get};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_DATASET, .name = "masked_lm", .version = "1.0.0",
    .description = "LM samples with targets -100 from a position on (test fixture)",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops, .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
