/* Dataset plugin `synthetic`: learnable data made from the run seed, for tests and demos.
 *
 *   classify: sample g = centre[g % classes] + noise * normal; centres are normal(0, 1) per
 *             feature. x is (features) f32, or `shape` when given (e.g. [1, 28, 28]).
 *   lm:       seq_len+1 tokens of a random walk on a fixed transition table where each token
 *             has 3 likely successors (90%) and otherwise a uniform one; x = first seq_len
 *             tokens, y = last seq_len.
 *
 * Every value is a pure function of (seed, global sample index) through the counter-based
 * RNG, so samples are computed in get() without state: thread-safe, identical for any thread
 * count. The validation split uses global indices from 2^40 on: the same distribution, other
 * samples. Classes are exactly balanced (class = index % classes). */
#include <stdlib.h>
#include <string.h>

#include "trainer/model.h"
#include "trainer/plugin.h"
#include "trainer/rng.h"

#define SUCCESSORS 3
#define VAL_OFFSET (1ull << 40)

enum { STREAM_CENTRES = 1, STREAM_NOISE = 2, STREAM_TABLE = 3, STREAM_WALK = 4 };

typedef struct synthetic {
    tr_data_spec spec;
    int lm;
    int64_t n;
    uint64_t seed, offset;
    float noise;
    float *centres;     /* (classes, x_numel) */
    int32_t *succ;      /* (vocab, SUCCESSORS) */
    uint8_t *xs, *ys;   /* materialized samples (n, x bytes) and (n, y bytes), or NULL */
    size_t xb, yb;
} synthetic;

static tr_status generate(synthetic *s, int64_t index, void *x, void *y);

static uint64_t stream_of(int what) {
    return tr_rng_stream(TR_RNG_STREAM_DATA, 0x5e17, (uint64_t)what);
}

static void destroy(void *ctx) {
    synthetic *s = ctx;
    if (!s) return;
    free(s->centres);
    free(s->succ);
    free(s->xs);
    free(s->ys);
    free(s);
}

static tr_status create(void **ctx, const tr_options *o, const tr_dataset_env *env) {
    synthetic *s = calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "synthetic: out of memory");
    s->lm = strcmp(tr_options_string(o, "task"), "lm") == 0;
    s->seed = env->seed;
    int val = env->split == TR_SPLIT_VAL;
    s->n = tr_options_int(o, val ? "val_samples" : "samples");
    s->offset = val ? VAL_OFFSET : 0;
    s->noise = (float)tr_options_float(o, "noise");
    tr_data_spec *d = &s->spec;
    if (s->lm) {
        int64_t T = tr_options_int(o, "seq_len"), V = tr_options_int(o, "vocab");
        *d = (tr_data_spec){.task = TR_TASK_LM, .x_dtype = TR_I32, .x_ndim = 1, .x_shape = {T},
                            .x_numel = T, .y_dtype = TR_I32, .y_ndim = 1, .y_shape = {T},
                            .y_numel = T, .n_classes = V, .vocab = V};
        s->succ = malloc((size_t)V * SUCCESSORS * sizeof *s->succ);
        if (!s->succ) {
            destroy(s);
            return tr_error_set(TR_ERR_NOMEM, "synthetic: out of memory");
        }
        for (int64_t i = 0; i < V * SUCCESSORS; i++)
            s->succ[i] = (int32_t)(tr_rng_u32(s->seed, stream_of(STREAM_TABLE), (uint64_t)i) % V);
    } else {
        int64_t shape[TR_MAX_DIMS];
        int nd = tr_options_int_list(o, "shape", shape, TR_MAX_DIMS);
        if (nd > TR_MAX_DIMS - 1) {
            destroy(s);
            return tr_error_set(TR_ERR_INVALID, "synthetic: shape has %d dims, at most %d", nd,
                                TR_MAX_DIMS - 1);
        }
        *d = (tr_data_spec){.task = TR_TASK_CLASSIFY, .x_dtype = TR_F32, .y_dtype = TR_I32,
                            .y_ndim = 0, .y_numel = 1, .n_classes = tr_options_int(o, "classes")};
        if (nd <= 0) {
            d->x_ndim = 1;
            d->x_shape[0] = tr_options_int(o, "features");
        } else {
            d->x_ndim = nd;
            for (int i = 0; i < nd; i++) d->x_shape[i] = shape[i];
        }
        d->x_numel = 1;
        for (int i = 0; i < d->x_ndim; i++) d->x_numel *= d->x_shape[i];
        if (d->x_numel > (1 << 24) || d->x_numel * d->n_classes > ((int64_t)1 << 31)) {
            tr_status st = tr_error_set(TR_ERR_INVALID,
                                        "synthetic: %lld values per sample x %lld classes is too large",
                                        (long long)d->x_numel, (long long)d->n_classes);
            destroy(s);
            return st;
        }
        size_t n = (size_t)(d->n_classes * d->x_numel);
        s->centres = malloc(n * sizeof *s->centres);
        if (!s->centres) {
            destroy(s);
            return tr_error_set(TR_ERR_NOMEM, "synthetic: out of memory for %zu centre values", n);
        }
        tr_rng_fill_normal(s->centres, n, s->seed, stream_of(STREAM_CENTRES), 0, 0.0f, 1.0f);
    }
    if (tr_options_bool(o, "materialize")) {
        /* Every sample made once here; get() is then a copy (throughput benchmarks). */
        s->xb = (size_t)s->spec.x_numel * tr_dtype_size(s->spec.x_dtype);
        s->yb = (size_t)s->spec.y_numel * tr_dtype_size(s->spec.y_dtype);
        if ((double)s->n * (double)(s->xb + s->yb) > 4e9) {
            long long n = (long long)s->n;
            destroy(s);
            return tr_error_set(TR_ERR_INVALID, "synthetic: materialize: %lld samples need more than 4 GB", n);
        }
        s->xs = malloc((size_t)s->n * s->xb + 1);
        s->ys = malloc((size_t)s->n * s->yb + 1);
        if (!s->xs || !s->ys) {
            long long n = (long long)s->n;
            destroy(s);
            return tr_error_set(TR_ERR_NOMEM, "synthetic: out of memory to materialize %lld samples", n);
        }
        for (int64_t i = 0; i < s->n; i++) generate(s, i, s->xs + (size_t)i * s->xb, s->ys + (size_t)i * s->yb);
    }
    *ctx = s;
    return TR_OK;
}

static void spec(void *ctx, tr_data_spec *out) { *out = ((synthetic *)ctx)->spec; }
static int64_t size(void *ctx) { return ((synthetic *)ctx)->n; }

static tr_status get(void *ctx, int64_t index, void *x, void *y) {
    synthetic *s = ctx;
    if (index < 0 || index >= s->n)
        return tr_error_set(TR_ERR_INVALID, "synthetic: sample %lld out of range [0, %lld)",
                            (long long)index, (long long)s->n);
    if (!s->xs) return generate(s, index, x, y);
    memcpy(x, s->xs + (size_t)index * s->xb, s->xb);
    if (y) memcpy(y, s->ys + (size_t)index * s->yb, s->yb);
    return TR_OK;
}

/* Sample `index` from the seed (the same values whether materialized or not). */
static tr_status generate(synthetic *s, int64_t index, void *x, void *y) {
    uint64_t g = s->offset + (uint64_t)index;
    const tr_data_spec *d = &s->spec;
    if (s->lm) {
        int64_t T = d->x_numel, V = d->n_classes;
        uint64_t st = tr_rng_stream(stream_of(STREAM_WALK), g, 0);
        int32_t tok = (int32_t)(tr_rng_u32(s->seed, st, 0) % V), *xs = x, *ys = y;
        for (int64_t t = 0; t <= T; t++) {
            if (t < T) xs[t] = tok;
            if (t > 0 && ys) ys[t - 1] = tok;
            uint32_t r = tr_rng_u32(s->seed, st, (uint64_t)(2 * t + 1));
            uint32_t pick = tr_rng_u32(s->seed, st, (uint64_t)(2 * t + 2));
            if (r % 10 < 9)
                tok = s->succ[tok * SUCCESSORS + pick % SUCCESSORS];
            else
                tok = (int32_t)(pick % V);
        }
        return TR_OK;
    }
    int64_t c = (int64_t)(g % (uint64_t)d->n_classes), n = d->x_numel;
    float *xs = x;
    tr_rng_fill_normal(xs, (size_t)n, s->seed, tr_rng_stream(stream_of(STREAM_NOISE), g, 0), 0,
                       0.0f, s->noise);
    for (int64_t i = 0; i < n; i++) xs[i] += s->centres[c * n + i];
    if (y) *(int32_t *)y = (int32_t)c;
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "task", .type = TR_OPTION_CHOICE, .default_value = "classify",
     .choices = "classify|lm", .doc = "classify: Gaussian clusters; lm: random-walk token sequences"},
    {.key = "samples", .type = TR_OPTION_INT, .default_value = "8192", .min = 1, .max = 1e12,
     .doc = "samples in the train split"},
    {.key = "val_samples", .type = TR_OPTION_INT, .default_value = "2048", .min = 1, .max = 1e12,
     .doc = "samples in the validation split"},
    {.key = "features", .type = TR_OPTION_INT, .default_value = "32", .min = 1, .max = 1 << 24,
     .doc = "classify: x is (features) f32 unless shape is given"},
    {.key = "shape", .type = TR_OPTION_INT_LIST, .default_value = "[]", .min = 1, .max = 1 << 24,
     .doc = "classify: per-sample x shape, e.g. [1, 28, 28]; [] = (features)"},
    {.key = "classes", .type = TR_OPTION_INT, .default_value = "8", .min = 2, .max = 1 << 20,
     .doc = "classify: number of classes (exactly balanced)"},
    {.key = "noise", .type = TR_OPTION_FLOAT, .default_value = "1.0", .min = 0, .max = 1e6,
     .doc = "classify: std of the noise around each class centre (centres have std 1)"},
    {.key = "materialize", .type = TR_OPTION_BOOL, .default_value = "false",
     .doc = "make every sample once at start (memory: samples x sample size) so loading is a copy"},
    {.key = "seq_len", .type = TR_OPTION_INT, .default_value = "64", .min = 1, .max = 1 << 24,
     .doc = "lm: tokens per sample"},
    {.key = "vocab", .type = TR_OPTION_INT, .default_value = "32", .min = 2, .max = 1 << 24,
     .doc = "lm: vocabulary size"},
};
static const tr_dataset_ops ops = {
    .create = create, .destroy = destroy, .spec = spec, .size = size, .get = get};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_DATASET, .name = "synthetic", .version = "1.0.0",
    .description = "learnable synthetic data from the run seed (Gaussian classes or LM walks)",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops,
    .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
