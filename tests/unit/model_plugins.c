/* The built-in model plugins (mlp, cnn, transformer), loaded from the build tree as the CLI
 * loads them: parameter counts against their formulas, forward shapes, the loss at
 * initialisation (about ln(n_classes)), learnability (30 AdamW steps on one fixed batch
 * halve the loss), refusal of bad options with a message naming the option, batch-norm
 * running statistics, and the tied LM head (no head parameter; wte's gradient is the sum of
 * its embedding and head uses, checked against an untied copy with head = wte).
 * Skips (77) when a plugin .so has not been built yet. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/trainer.h"

#define PLUGIN_DIR TRAINER_BINARY_DIR "/plugins/models/"

typedef struct model {
    const tr_plugin *plugin;
    const tr_model_ops *ops;
    void *ctx;
    tr_params *P;
} model;

static tr_plugin *open_plugin(const char *name) {
    char path[512];
    snprintf(path, sizeof path, PLUGIN_DIR "tr_model_%s.so", name);
    if (access(path, R_OK) != 0) {
        char why[700];
        snprintf(why, sizeof why, "%s not built (build the tr_model_* targets first)", path);
        test_skip(why);
    }
    tr_plugin *p = NULL;
    if (tr_plugin_open(path, "test", &p) != TR_OK) {
        test_fail_at(__FILE__, __LINE__, "open %s: %s", path, tr_error_msg());
        return NULL;
    }
    CHECK(p->desc->kind == TR_PLUGIN_MODEL && strcmp(p->desc->name, name) == 0 &&
              p->desc->ops_size >= sizeof(tr_model_ops),
          "%s: descriptor", name);
    return p;
}

/* Resolves kv against the plugin's options and creates the model; the status is returned
 * (message in tr_error_msg), *m is filled only on success. */
static tr_status model_make(model *m, const tr_plugin *p, const char *const *kv, int n_kv,
                            const tr_data_spec *spec, uint64_t seed) {
    memset(m, 0, sizeof *m);
    tr_options *o = NULL;
    tr_status st = tr_options_create(&o, p->desc->options, p->desc->n_options, kv, n_kv,
                                     "test: model.params");
    if (st != TR_OK) return st;
    tr_params *P = NULL;
    st = tr_params_create(&P);
    const tr_model_ops *ops = p->desc->ops;
    void *ctx = NULL;
    if (st == TR_OK) st = ops->create(&ctx, o, spec, P);
    tr_options_destroy(o);
    if (st == TR_OK) st = tr_params_finalize(P, seed);
    if (st != TR_OK) {
        if (ctx) ops->destroy(ctx);
        tr_params_destroy(P);
        return st;
    }
    m->plugin = p, m->ops = ops, m->ctx = ctx, m->P = P;
    return TR_OK;
}

static void model_free(model *m) {
    if (m->ctx) m->ops->destroy(m->ctx);
    tr_params_destroy(m->P);
    memset(m, 0, sizeof *m);
}

static void expect_refused(const tr_plugin *p, const char *const *kv, int n_kv,
                           const tr_data_spec *spec, const char *needle) {
    model m;
    tr_status st = model_make(&m, p, kv, n_kv, spec, 1);
    CHECK(st != TR_OK, "%s: %s refused", p->desc->name, n_kv ? kv[0] : "(defaults)");
    if (st == TR_OK) {
        model_free(&m);
        return;
    }
    CHECK(strstr(tr_error_msg(), needle) != NULL, "%s: message '%s' lacks '%s'", p->desc->name,
          tr_error_msg(), needle);
}

/* Deterministic pseudo-random numbers for batches. */
static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}
static float frand(uint64_t *s) { return (float)lcg(s) / (float)(1ULL << 31) * 2.0f - 1.0f; }

typedef struct batch_data {
    float *x;          /* F32 features, or NULL */
    int32_t *ids;      /* I32 tokens, or NULL */
    int32_t *y;
    int64_t x_shape[TR_MAX_DIMS];
    int x_ndim;
    int64_t y_shape[TR_MAX_DIMS];
    int y_ndim;
    double normaliser;
} batch_data;

/* Builds the batch on g and runs forward. */
static tr_status run_forward(model *m, tr_graph *g, const batch_data *bd, int with_y,
                             tr_model_out *out) {
    tr_batch b = {.size = bd->x_shape[0], .first = 0, .normaliser = bd->normaliser};
    b.x = tr_graph_input(g, bd->ids ? TR_I32 : TR_F32, bd->x_ndim, bd->x_shape);
    if (!b.x) return tr_graph_status(g);
    memcpy(b.x->data, bd->ids ? (void *)bd->ids : (void *)bd->x, tr_tensor_bytes(b.x));
    if (with_y) {
        b.y = tr_graph_input(g, TR_I32, bd->y_ndim, bd->y_shape);
        if (!b.y) return tr_graph_status(g);
        memcpy(b.y->data, bd->y, tr_tensor_bytes(b.y));
    }
    memset(out, 0, sizeof *out);
    return m->ops->forward(m->ctx, g, m->P, &b, out);
}

static int finite_all(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* Initial loss near ln(n_classes), then 30 AdamW steps on the same batch more than halve it.
 * Returns the first loss; *last receives the final one. */
static double check_learns(const char *what, model *m, const batch_data *bd, int64_t n_classes,
                           double lr, double *last) {
    tr_graph *g = NULL;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, m->P);
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    oc.lr = lr;
    tr_optim *opt = NULL;
    tr_optim_create(&opt, &oc, tr_params_numel(m->P));
    double first = NAN, loss = NAN;
    for (int s = 0; s < 30; s++) {
        tr_graph_reset(g);
        tr_graph_set_rng(g, 1234, (uint64_t)s, 0);
        tr_params_zero_grad(m->P);
        tr_model_out out;
        tr_status st = run_forward(m, g, bd, 1, &out);
        if (st != TR_OK || !out.loss || tr_backward(g, out.loss, NULL) != TR_OK) {
            test_fail_at(__FILE__, __LINE__, "%s step %d: %s", what, s, tr_error_msg());
            break;
        }
        loss = ((float *)out.loss->data)[0];
        if (s == 0) {
            first = loss;
            CHECK(out.loss->ndim == 1 && out.loss->shape[0] == 1, "%s: scalar loss", what);
            CHECK(isfinite(loss) && fabs(loss - log((double)n_classes)) < 0.3,
                  "%s: initial loss %.4f, expected about ln(%lld) = %.4f", what, loss,
                  (long long)n_classes, log((double)n_classes));
            CHECK(finite_all(tr_params_grad(m->P), (int64_t)tr_params_numel(m->P)),
                  "%s: finite gradients", what);
            double gmax = 0;
            const float *gr = tr_params_grad(m->P);
            for (size_t i = 0; i < tr_params_numel(m->P); i++) gmax = fmax(gmax, fabs(gr[i]));
            CHECK(gmax > 0, "%s: nonzero gradient", what);
        }
        tr_optim_step(opt, tr_params_data(m->P), tr_params_grad(m->P), tr_params_numel(m->P), lr);
    }
    printf("%s: loss %.4f -> %.4f after 30 AdamW steps (ln C = %.4f)\n", what, first, loss,
           log((double)n_classes));
    CHECK(isfinite(loss) && loss < 0.5 * first, "%s: loss %.4f not below half of %.4f", what,
          loss, first);
    tr_optim_destroy(opt);
    tr_graph_destroy(g);
    *last = loss;
    return first;
}

static void check_count(const char *what, model *m, size_t expected) {
    size_t n = tr_params_trainable(m->P);
    printf("%s: %zu parameters\n", what, n);
    CHECK(n == expected, "%s: %zu parameters, formula gives %zu", what, n, expected);
}

/* ---------------------------------------------------------------- mlp */

static void test_mlp(void) {
    tr_plugin *p = open_plugin("mlp");
    if (!p) return;
    model m;
    double last;

    /* Defaults on 784 features, 10 classes: 784-512-512-10. */
    tr_data_spec mnist = {.task = TR_TASK_CLASSIFY, .x_dtype = TR_F32, .x_ndim = 1,
                          .x_shape = {784}, .x_numel = 784, .y_dtype = TR_I32, .n_classes = 10};
    if (model_make(&m, p, NULL, 0, &mnist, 1) == TR_OK) {
        check_count("mlp defaults", &m, 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10);
        CHECK(tr_params_find(m.P, "fc3.weight") >= 0 && tr_params_find(m.P, "fc4.weight") < 0,
              "mlp: fc1..fc3");
        model_free(&m);
    } else {
        test_fail_at(__FILE__, __LINE__, "mlp defaults: %s", tr_error_msg());
    }

    /* (3, 4, 4) inputs flattened to 48, layers 32, 16, gelu, dropout on. */
    tr_data_spec spec = {.task = TR_TASK_CLASSIFY, .x_dtype = TR_F32, .x_ndim = 3,
                         .x_shape = {3, 4, 4}, .x_numel = 48, .y_dtype = TR_I32, .n_classes = 10};
    const char *kv[] = {"layers=[32, 16]", "activation=gelu", "dropout=0.1"};
    if (model_make(&m, p, kv, 3, &spec, 7) != TR_OK) {
        test_fail_at(__FILE__, __LINE__, "mlp: %s", tr_error_msg());
        tr_plugin_close(p);
        return;
    }
    check_count("mlp [32, 16]", &m, 48 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10);
    CHECK(tr_params_get(m.P, tr_params_find(m.P, "fc1.weight"))->shape[1] == 48 &&
              tr_params_get(m.P, tr_params_find(m.P, "fc2.bias"))->shape[0] == 16,
          "mlp: PyTorch Linear layout");

    enum { B = 16 };
    float x[B * 48];
    int32_t y[B];
    uint64_t s = 11;
    for (int i = 0; i < B * 48; i++) x[i] = frand(&s);
    for (int i = 0; i < B; i++) y[i] = (int32_t)(lcg(&s) % 10);
    batch_data bd = {.x = x, .y = y, .x_shape = {B, 3, 4, 4}, .x_ndim = 4, .y_shape = {B},
                     .y_ndim = 1, .normaliser = B};

    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, m.P);
    tr_model_out out;
    CHECK(run_forward(&m, g, &bd, 0, &out) == TR_OK, "mlp predict: %s", tr_error_msg());
    CHECK(out.logits && out.logits->ndim == 2 && out.logits->shape[0] == B &&
              out.logits->shape[1] == 10 && out.loss == NULL,
          "mlp: logits (16, 10), no loss without y");
    /* Dropout: training forwards with different rng steps differ; eval forwards agree. */
    float l[4][B * 10];
    for (int k = 0; k < 4; k++) {
        tr_graph_reset(g);
        tr_graph_set_training(g, k < 2);
        tr_graph_set_rng(g, 1, (uint64_t)(k % 2), 0);
        CHECK(run_forward(&m, g, &bd, 0, &out) == TR_OK && out.logits, "mlp: %s", tr_error_msg());
        if (out.logits) memcpy(l[k], out.logits->data, sizeof l[k]);
    }
    CHECK(memcmp(l[0], l[1], sizeof l[0]) != 0, "mlp: dropout masks differ between steps");
    CHECK(memcmp(l[2], l[3], sizeof l[2]) == 0 && memcmp(l[0], l[2], sizeof l[0]) != 0,
          "mlp: no dropout in eval mode");
    tr_graph_destroy(g);

    check_learns("mlp", &m, &bd, 10, 1e-2, &last);
    model_free(&m);

    const char *bad1[] = {"layers=[32, 0]"};
    expect_refused(p, bad1, 1, &spec, "layers");
    const char *bad2[] = {"activation=swish"};
    expect_refused(p, bad2, 1, &spec, "activation");
    const char *bad3[] = {"dropout=1.5"};
    expect_refused(p, bad3, 1, &spec, "dropout");
    tr_data_spec lm = spec;
    lm.task = TR_TASK_LM;
    expect_refused(p, NULL, 0, &lm, "classification");
    tr_plugin_close(p);
}

/* ---------------------------------------------------------------- cnn */

static void test_cnn(void) {
    tr_plugin *p = open_plugin("cnn");
    if (!p) return;
    model m;
    double last;

    /* Defaults on flat 784 = (1, 28, 28): FashionCNN's 1,475,338 parameters. */
    tr_data_spec flat = {.task = TR_TASK_CLASSIFY, .x_dtype = TR_F32, .x_ndim = 1,
                         .x_shape = {784}, .x_numel = 784, .y_dtype = TR_I32, .n_classes = 10};
    if (model_make(&m, p, NULL, 0, &flat, 1) == TR_OK) {
        size_t conv = (1 * 32 * 9 + 32) + 2 * 32 + (32 * 64 * 9 + 64) + 2 * 64;
        size_t fc = (64 * 6 * 6 * 600 + 600) + (600 * 120 + 120) + (120 * 10 + 10);
        check_count("cnn defaults (FashionCNN)", &m, conv + fc);
        CHECK(tr_params_buffer_count(m.P) == 4, "cnn: 4 running-stat buffers");
        tr_tensor *rv = tr_params_buffer(m.P, tr_params_find_buffer(m.P, "bn2.running_var"));
        CHECK(rv && rv->shape[0] == 64 && ((float *)rv->data)[5] == 1.0f, "cnn: running_var ones");
        model_free(&m);
    } else {
        test_fail_at(__FILE__, __LINE__, "cnn defaults: %s", tr_error_msg());
    }

    /* (2, 12, 12): conv 2->4 p1 (12), pool (6), conv 4->8 p0 (4), pool (2): 32 features. */
    tr_data_spec spec = {.task = TR_TASK_CLASSIFY, .x_dtype = TR_F32, .x_ndim = 3,
                         .x_shape = {2, 12, 12}, .x_numel = 288, .y_dtype = TR_I32,
                         .n_classes = 10};
    const char *kv[] = {"channels=[4, 8]", "fc=[32, 16]"};
    if (model_make(&m, p, kv, 2, &spec, 3) != TR_OK) {
        test_fail_at(__FILE__, __LINE__, "cnn: %s", tr_error_msg());
        tr_plugin_close(p);
        return;
    }
    check_count("cnn [4, 8] fc [32, 16]", &m,
                (2 * 4 * 9 + 4) + 8 + (4 * 8 * 9 + 8) + 16 + (32 * 32 + 32) + (32 * 16 + 16) +
                    (16 * 10 + 10));

    enum { B = 16 };
    float x[B * 288];
    int32_t y[B];
    uint64_t s = 5;
    for (int i = 0; i < B * 288; i++) x[i] = frand(&s);
    for (int i = 0; i < B; i++) y[i] = (int32_t)(lcg(&s) % 10);
    batch_data bd = {.x = x, .y = y, .x_shape = {B, 2, 12, 12}, .x_ndim = 4, .y_shape = {B},
                     .y_ndim = 1, .normaliser = B};

    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, m.P);
    tr_model_out out;
    CHECK(run_forward(&m, g, &bd, 1, &out) == TR_OK, "cnn forward: %s", tr_error_msg());
    CHECK(out.logits && out.logits->ndim == 2 && out.logits->shape[0] == B &&
              out.logits->shape[1] == 10 && out.loss && isfinite(((float *)out.loss->data)[0]),
          "cnn: logits (16, 10), finite loss");
    tr_tensor *rm = tr_params_buffer(m.P, tr_params_find_buffer(m.P, "bn1.running_mean"));
    double rm_abs = 0;
    for (int c = 0; c < 4; c++) rm_abs += fabs(((float *)rm->data)[c]);
    CHECK(rm_abs > 0, "cnn: training forward updates bn1.running_mean");
    /* Eval mode uses the running statistics and leaves them alone. */
    float before[4];
    memcpy(before, rm->data, sizeof before);
    tr_graph_reset(g);
    tr_graph_set_training(g, 0);
    CHECK(run_forward(&m, g, &bd, 1, &out) == TR_OK && out.loss &&
              isfinite(((float *)out.loss->data)[0]),
          "cnn eval forward: %s", tr_error_msg());
    CHECK(memcmp(before, rm->data, sizeof before) == 0, "cnn: eval leaves running stats");
    tr_graph_destroy(g);
    model_free(&m);

    /* Learnability from fresh parameters (running stats at their init). */
    if (model_make(&m, p, kv, 2, &spec, 3) == TR_OK) {
        check_learns("cnn", &m, &bd, 10, 1e-2, &last);
        model_free(&m);
    }

    tr_data_spec line = flat;
    line.x_shape[0] = line.x_numel = 783;
    expect_refused(p, NULL, 0, &line, "perfect-square");
    tr_data_spec tiny = spec;
    tiny.x_shape[1] = tiny.x_shape[2] = 4;
    tiny.x_numel = 32;
    expect_refused(p, NULL, 0, &tiny, "channels");
    tr_data_spec four = spec;
    four.x_ndim = 2;
    expect_refused(p, NULL, 0, &four, "(C, H, W)");
    const char *bad1[] = {"channels=[]"};
    expect_refused(p, bad1, 1, &spec, "channels");
    const char *bad2[] = {"fc=[600, -1]"};
    expect_refused(p, bad2, 1, &spec, "fc");
    tr_plugin_close(p);
}

/* ---------------------------------------------------------------- transformer */

enum { LM_V = 16, LM_T = 8, LM_B = 4, LM_C = 32 };

static size_t tf_count(size_t V, size_t S, size_t C, size_t L, size_t F) {
    return V * C + S * C + L * (4 * C * C + 2 * C * F + 9 * C + F) + 2 * C;
}

/* Sequences of an arithmetic progression mod V (learnable next tokens). Ids stay below
 * max_id so the upper wte rows get no embedding gradient. */
static void lm_batch(int32_t *ids, int32_t *y, int max_id) {
    for (int b = 0; b < LM_B; b++)
        for (int t = 0; t <= LM_T; t++) {
            int32_t v = (int32_t)((3 * b + (b + 1) * t) % max_id);
            if (t < LM_T) ids[b * LM_T + t] = v;
            if (t > 0) y[b * LM_T + t - 1] = v;
        }
}

static float *param_grad(model *m, const char *name) {
    int i = tr_params_find(m->P, name);
    return i < 0 ? NULL : tr_params_get(m->P, i)->grad;
}

/* Changes the last token of sequence 0 and reports which positions' outputs moved:
 * returns a bit mask over t of (B, T, ...) tensor `what` (0 logits, 1 embedding) for seq 0. */
static unsigned changed_positions(model *m, const batch_data *bd, int embedding) {
    batch_data b2 = *bd;
    int64_t B = bd->x_shape[0], T = bd->x_shape[1];
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(B * T));
    memcpy(ids, bd->ids, sizeof(int32_t) * (size_t)(B * T));
    ids[T - 1] = (ids[T - 1] + 5) % LM_V;
    b2.ids = ids;
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, m->P);
    tr_graph_set_training(g, 0);
    tr_model_out o1, o2;
    unsigned mask = 0;
    if (run_forward(m, g, bd, 0, &o1) == TR_OK && run_forward(m, g, &b2, 0, &o2) == TR_OK) {
        tr_tensor *a = embedding ? o1.embedding : o1.logits, *b = embedding ? o2.embedding : o2.logits;
        if (embedding) {
            mask = memcmp(a->data, b->data, sizeof(float) * (size_t)a->shape[1]) != 0;
        } else {
            int64_t V = a->shape[2];
            for (int64_t t = 0; t < T; t++)
                if (memcmp((float *)a->data + t * V, (float *)b->data + t * V, sizeof(float) * (size_t)V))
                    mask |= 1u << t;
        }
    } else {
        test_fail_at(__FILE__, __LINE__, "causality forward: %s", tr_error_msg());
    }
    tr_graph_destroy(g);
    free(ids);
    return mask;
}

static void test_transformer(void) {
    tr_plugin *p = open_plugin("transformer");
    if (!p) return;
    model m = {0}, u = {0};
    double last;
    tr_data_spec lm = {.task = TR_TASK_LM, .x_dtype = TR_I32, .x_ndim = 1, .x_shape = {LM_T},
                       .x_numel = LM_T, .y_dtype = TR_I32, .y_ndim = 1, .y_shape = {LM_T},
                       .y_numel = LM_T, .n_classes = LM_V};

    /* Defaults: d_model 128, 2 layers, d_ff 512, tied, max_seq = T. */
    if (model_make(&m, p, NULL, 0, &lm, 1) == TR_OK) {
        check_count("transformer defaults", &m, tf_count(LM_V, LM_T, 128, 2, 512));
        model_free(&m);
    } else {
        test_fail_at(__FILE__, __LINE__, "transformer defaults: %s", tr_error_msg());
    }

    int32_t ids[LM_B * LM_T], y[LM_B * LM_T];
    lm_batch(ids, y, LM_V);
    batch_data bd = {.ids = ids, .y = y, .x_shape = {LM_B, LM_T}, .x_ndim = 2,
                     .y_shape = {LM_B, LM_T}, .y_ndim = 2, .normaliser = LM_B * LM_T};

    /* LM with dropout, max_seq longer than T (wpe sliced). */
    const char *kv[] = {"d_model=32", "n_head=4", "n_layer=2", "max_seq=12", "dropout=0.1"};
    if (model_make(&m, p, kv, 5, &lm, 9) == TR_OK) {
        check_count("transformer lm d32 L2 tied", &m, tf_count(LM_V, 12, LM_C, 2, 4 * LM_C));
        CHECK(tr_params_find(m.P, "head.weight") < 0, "tied lm: no head.weight");
        CHECK(tr_params_find(m.P, "h.1.mlp.proj.weight") >= 0 &&
                  tr_params_get(m.P, tr_params_find(m.P, "h.1.attn.qkv.weight"))->shape[0] ==
                      3 * LM_C,
              "transformer: GPT-2 parameter names and layout");
        tr_graph *g;
        tr_graph_create(&g, 0);
        tr_graph_set_params(g, m.P);
        tr_model_out out;
        CHECK(run_forward(&m, g, &bd, 1, &out) == TR_OK, "lm forward: %s", tr_error_msg());
        CHECK(out.logits && out.logits->ndim == 3 && out.logits->shape[0] == LM_B &&
                  out.logits->shape[1] == LM_T && out.logits->shape[2] == LM_V,
              "lm: logits (B, T, V)");
        tr_graph_destroy(g);
        unsigned mv = changed_positions(&m, &bd, 0);
        CHECK(mv == 1u << (LM_T - 1), "lm is causal: changing token T-1 moved positions 0x%x", mv);
        check_learns("transformer lm", &m, &bd, LM_V, 3e-3, &last);
        model_free(&m);
    } else {
        test_fail_at(__FILE__, __LINE__, "transformer lm: %s", tr_error_msg());
    }

    /* Tied head: wte's gradient = its embedding-use part + its head-use part. An untied copy
     * (head.weight = wte.weight, every other parameter equal) computes the same function and
     * gives the two parts separately. Ids stay below V/2, so the upper rows of the untied
     * wte get no gradient, while the tied wte's do (from the head). */
    int32_t ids2[LM_B * LM_T], y2[LM_B * LM_T];
    lm_batch(ids2, y2, LM_V / 2);
    batch_data bd2 = bd;
    bd2.ids = ids2, bd2.y = y2;
    const char *tkv[] = {"d_model=32", "n_layer=1", "dropout=0", "tied=true"};
    const char *ukv[] = {"d_model=32", "n_layer=1", "dropout=0", "tied=false"};
    if (model_make(&m, p, tkv, 4, &lm, 4) == TR_OK && model_make(&u, p, ukv, 4, &lm, 4) == TR_OK) {
        check_count("transformer lm untied", &u, tf_count(LM_V, LM_T, LM_C, 1, 4 * LM_C) + LM_V * LM_C);
        for (int i = 0; i < tr_params_count(m.P); i++) {
            tr_tensor *a = tr_params_get(m.P, i);
            tr_tensor *b = tr_params_get(u.P, tr_params_find(u.P, tr_params_name(m.P, i)));
            memcpy(b->data, a->data, tr_tensor_bytes(a));
        }
        tr_tensor *head = tr_params_get(u.P, tr_params_find(u.P, "head.weight"));
        memcpy(head->data, tr_params_get(m.P, tr_params_find(m.P, "wte.weight"))->data,
               tr_tensor_bytes(head));
        float lt = NAN, lu = NAN;
        model *both[2] = {&m, &u};
        for (int k = 0; k < 2; k++) {
            tr_graph *g;
            tr_graph_create(&g, 0);
            tr_graph_set_params(g, both[k]->P);
            tr_params_zero_grad(both[k]->P);
            tr_model_out out;
            CHECK(run_forward(both[k], g, &bd2, 1, &out) == TR_OK &&
                      tr_backward(g, out.loss, NULL) == TR_OK,
                  "tied test forward/backward: %s", tr_error_msg());
            if (out.loss) *(k ? &lu : &lt) = ((float *)out.loss->data)[0];
            tr_graph_destroy(g);
        }
        CHECK_NEAR(lt, lu, 1e-6);
        const float *gt = param_grad(&m, "wte.weight"), *ge = param_grad(&u, "wte.weight");
        const float *gh = param_grad(&u, "head.weight");
        float sum[LM_V * LM_C];
        double emb_low = 0, emb_high = 0, head_low = 0, tied_high = 0;
        for (int r = 0; r < LM_V; r++)
            for (int c = 0; c < LM_C; c++) {
                int i = r * LM_C + c;
                sum[i] = ge[i] + gh[i];
                if (r < LM_V / 2) emb_low = fmax(emb_low, fabs(ge[i])), head_low = fmax(head_low, fabs(gh[i]));
                else emb_high = fmax(emb_high, fabs(ge[i])), tied_high = fmax(tied_high, fabs(gt[i]));
            }
        CHECK(emb_low > 0 && head_low > 0, "both uses contribute: embedding %g, head %g", emb_low,
              head_low);
        CHECK(emb_high == 0 && tied_high > 0,
              "unused token rows: embedding part %g (expect 0), tied grad %g (head part)", emb_high,
              tied_high);
        check_tensor("tied wte.grad vs embedding + head grads", gt, sum, LM_V * LM_C, 1e-5);
    } else {
        test_fail_at(__FILE__, __LINE__, "tied/untied: %s", tr_error_msg());
    }
    if (m.P) model_free(&m);
    if (u.P) model_free(&u);

    /* Classify, mean and cls pooling: vocab 16 tokens of length 8, 3 classes. */
    tr_data_spec cls = {.task = TR_TASK_CLASSIFY, .x_dtype = TR_I32, .x_ndim = 1,
                        .x_shape = {LM_T}, .x_numel = LM_T, .y_dtype = TR_I32, .n_classes = 3};
    enum { CB = 12 };
    int32_t cids[CB * LM_T], cy[CB];
    uint64_t s = 99;
    for (int i = 0; i < CB * LM_T; i++) cids[i] = (int32_t)(lcg(&s) % LM_V);
    for (int i = 0; i < CB; i++) cy[i] = i % 3;
    batch_data cbd = {.ids = cids, .y = cy, .x_shape = {CB, LM_T}, .x_ndim = 2, .y_shape = {CB},
                      .y_ndim = 1, .normaliser = CB};
    const char *pools[2] = {"pool=mean", "pool=cls"};
    for (int k = 0; k < 2; k++) {
        const char *ckv[] = {"mode=classify", "vocab=16", "d_model=32", "n_layer=1", "dropout=0",
                             pools[k]};
        if (model_make(&m, p, ckv, 6, &cls, 2) != TR_OK) {
            test_fail_at(__FILE__, __LINE__, "classify: %s", tr_error_msg());
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "transformer classify %s", pools[k]);
        check_count(what, &m, tf_count(LM_V, LM_T, LM_C, 1, 4 * LM_C) + 3 * LM_C + 3);
        tr_graph *g;
        tr_graph_create(&g, 0);
        tr_graph_set_params(g, m.P);
        tr_model_out out;
        CHECK(run_forward(&m, g, &cbd, 1, &out) == TR_OK, "classify forward: %s", tr_error_msg());
        CHECK(out.logits && out.logits->ndim == 2 && out.logits->shape[0] == CB &&
                  out.logits->shape[1] == 3,
              "%s: logits (B, 3)", what);
        CHECK(out.embedding && out.embedding->ndim == 2 && out.embedding->shape[0] == CB &&
                  out.embedding->shape[1] == LM_C,
              "%s: embedding (B, d_model)", what);
        tr_graph_destroy(g);
        CHECK(changed_positions(&m, &cbd, 1) == 1,
              "%s: not causal (the pooled embedding sees the last token)", what);
        check_learns(what, &m, &cbd, 3, 3e-3, &last);
        model_free(&m);
    }

    const char *bad1[] = {"d_model=30", "n_head=4"};
    expect_refused(p, bad1, 2, &lm, "d_model 30 is not a multiple of n_head 4");
    const char *bad2[] = {"max_seq=4"};
    expect_refused(p, bad2, 1, &lm, "max_seq");
    const char *bad3[] = {"mode=classify"};
    expect_refused(p, bad3, 1, &cls, "vocab");
    expect_refused(p, NULL, 0, &cls, "mode");
    const char *bad4[] = {"pool=max"};
    expect_refused(p, bad4, 1, &lm, "pool");
    const char *bad5[] = {"n_heads=4"};
    expect_refused(p, bad5, 1, &lm, "n_heads");
    tr_plugin_close(p);
}

int main(void) {
    tr_set_num_threads(1);
    test_mlp();
    test_cnn();
    test_transformer();
    return test_finish();
}
