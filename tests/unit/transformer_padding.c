/* The transformer model plugin on padded batches (ops.h's TR_PAD_ID): the same samples padded
 * with ids -1 to T = 16 and to T = 40 (a batch shorter than the dataset's T, as `padding:
 * longest` gives) give the same loss, logits, pooled embeddings and parameter gradients to
 * 1e-5, in modes classify (pool mean and cls), pairs and lm (targets -100 at padding, the
 * normaliser counting the real targets); a fully padded sample stays finite. Then the same
 * on a device (the test device fake_gpu, whose kernels are the CPU's): the T = 40 batch
 * against the CPU's. With argument `old`: fake_gpu as a plugin built for ABI 0.8 refuses
 * padding, naming it, and runs unpadded batches as before. Skips (77) when the plugins have
 * not been built. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/accel.h"
#include "trainer/trainer.h"

#define PLUGIN TRAINER_BINARY_DIR "/plugins/models/tr_model_transformer.so"
#define FAKE_GPU TRAINER_BINARY_DIR "/test_plugins/fake_gpu/fake_gpu.so"

enum { B = 4, V = 23, TS = 40, TL = 16, NC = 3 };
static const int len[B] = {16, 11, 5, 0}; /* real tokens per sample: full, partial, short, none */

typedef struct model {
    const tr_model_ops *ops;
    void *ctx;
    tr_params *P;
} model;

static int make(model *m, const tr_plugin *p, const char *const *kv, int n, const tr_data_spec *d) {
    memset(m, 0, sizeof *m);
    tr_options *o = NULL;
    tr_status st = tr_options_create(&o, p->desc->options, p->desc->n_options, kv, n, "test");
    if (st == TR_OK) st = tr_params_create(&m->P);
    m->ops = p->desc->ops;
    if (st == TR_OK) st = m->ops->create(&m->ctx, o, d, m->P);
    tr_options_destroy(o);
    if (st == TR_OK) st = tr_params_finalize(m->P, 7);
    CHECK(st == TR_OK, "create: %s", tr_error_msg());
    return st == TR_OK;
}

static void drop(model *m) {
    if (m->ctx) m->ops->destroy(m->ctx);
    tr_params_destroy(m->P);
}

/* What one forward and backward gives: loss, logits, embedding, every parameter gradient. */
typedef struct result {
    double loss;
    float *logits, *emb, *grad;
    int64_t n_logits, n_emb;
} result;

static void result_free(result *r) { free(r->logits), free(r->emb), free(r->grad); }

/* A device tensor's (or host tensor's) floats into a new array. */
static float *take(tr_accel *a, const tr_tensor *t, const void *p, int64_t *n) {
    *n = t ? tr_tensor_numel(t) : 0;
    float *h = malloc((size_t)(*n ? *n : 1) * sizeof *h);
    if (t && a) CHECK(tr_accel_download(a, h, p, (size_t)*n * sizeof *h) == TR_OK, "download: %s", tr_error_msg());
    else if (t) memcpy(h, p, (size_t)*n * sizeof *h);
    return h;
}

/* Forward and backward of x (xs: B * rows of T ids) and y on the CPU or device a (the
 * parameters uploaded there, the gradients downloaded). */
static int run(model *m, tr_accel *a, const int32_t *x, const int64_t *xshape, int xnd, const void *y,
               tr_dtype ydt, const int64_t *yshape, int ynd, double normaliser, result *r) {
    memset(r, 0, sizeof *r);
    tr_graph *g = NULL;
    CHECK(tr_graph_create(&g, 0) == TR_OK, "graph");
    size_t np = tr_params_numel(m->P);
    float *dp = NULL, *dg = NULL;
    tr_params *P = m->P; /* on a device: P's layout over device buffers */
    if (a) {
        CHECK(tr_graph_set_accel(g, a) == TR_OK, "set accel: %s", tr_error_msg());
        CHECK(tr_accel_alloc(a, np * sizeof(float), (void **)&dp) == TR_OK &&
                  tr_accel_alloc(a, np * sizeof(float), (void **)&dg) == TR_OK,
              "device params: %s", tr_error_msg());
        tr_accel_upload(a, dp, tr_params_data(m->P), np * sizeof(float));
        tr_accel_zero(a, dg, np * sizeof(float));
        CHECK(tr_params_clone_view(m->P, dp, dg, NULL, tr_accel_device(a), &P) == TR_OK, "clone view: %s",
              tr_error_msg());
    } else {
        tr_params_zero_grad(m->P);
    }
    tr_graph_set_params(g, P);
    tr_graph_set_training(g, 1);
    tr_graph_set_rng(g, 5, 0, 0);
    int64_t nx = 1, ny = 1;
    for (int d = 0; d < xnd; d++) nx *= xshape[d];
    for (int d = 0; d < ynd; d++) ny *= yshape[d];
    tr_batch b = {.size = B, .normaliser = normaliser};
    b.x = tr_graph_input_from(g, (void *)x, TR_I32, xnd, xshape);
    b.y = tr_graph_input_from(g, (void *)y, ydt, ynd, yshape);
    tr_model_out out = {0};
    tr_status st = tr_graph_status(g);
    if (st == TR_OK) st = m->ops->forward(m->ctx, g, P, &b, &out);
    if (st == TR_OK) st = tr_backward(g, out.loss, NULL);
    CHECK(st == TR_OK, "forward/backward: %s", tr_error_msg());
    if (st == TR_OK) {
        int64_t n1;
        float *l = take(a, out.loss, out.loss->data, &n1);
        r->loss = l[0];
        free(l);
        r->logits = take(a, out.logits, out.logits->data, &r->n_logits);
        r->emb = take(a, out.embedding, out.embedding ? out.embedding->data : NULL, &r->n_emb);
        int64_t ng = (int64_t)np;
        r->grad = malloc(np * sizeof(float));
        if (a) tr_accel_download(a, r->grad, dg, np * sizeof(float));
        else memcpy(r->grad, tr_params_grad(m->P), np * sizeof(float));
        (void)ng;
    }
    tr_graph_destroy(g);
    if (a) {
        tr_params_destroy(P);
        tr_accel_free(a, dp, np * sizeof(float));
        tr_accel_free(a, dg, np * sizeof(float));
    }
    (void)nx, (void)ny;
    return st == TR_OK;
}

/* Whether every value is finite. */
static int finite(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* The rows of (B * rows, T0, K) logits at real positions of each sample, compared with the
 * same from a T1 batch. */
static void compare(const char *what, const result *a, const result *b, int64_t per_pos, int64_t Ta, int64_t Tb,
                    int64_t rows, size_t np) {
    char label[160];
    snprintf(label, sizeof label, "%s: loss", what);
    CHECK(fabs(a->loss - b->loss) <= 1e-5 * fmax(1, fabs(a->loss)), "%s %.8f vs %.8f", label, a->loss, b->loss);
    printf("%s %.8f vs %.8f (|d| %.2e)\n", label, a->loss, b->loss, fabs(a->loss - b->loss));
    CHECK(finite(a->logits, a->n_logits) && finite(b->logits, b->n_logits), "%s: logits finite", what);
    if (per_pos) { /* lm: (rows, T, K), the real positions */
        int64_t K = a->n_logits / (rows * Ta);
        double worst = 0, ref = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t t = 0; t < len[r % B]; t++)
                for (int64_t k = 0; k < K; k++) {
                    float x = a->logits[(r * Ta + t) * K + k], y = b->logits[(r * Tb + t) * K + k];
                    worst = fmax(worst, fabs(x - y)), ref = fmax(ref, fabs(y));
                }
        printf("%s: logits at real positions max|d| %.2e (max|ref| %.2e)\n", what, worst, ref);
        CHECK(worst <= 1e-5 * fmax(1, ref), "%s: logits differ by %g", what, worst);
    } else {
        snprintf(label, sizeof label, "%s: logits", what);
        check_tensor(label, a->logits, b->logits, a->n_logits, 1e-5);
        if (a->n_emb) {
            snprintf(label, sizeof label, "%s: embedding", what);
            check_tensor(label, a->emb, b->emb, a->n_emb, 1e-5);
        }
    }
    snprintf(label, sizeof label, "%s: parameter gradients", what);
    CHECK(finite(a->grad, (int64_t)np), "%s: gradients finite", what);
    check_tensor(label, a->grad, b->grad, (int64_t)np, 1e-5);
}

/* rows samples of T ids, sample r with len[r % B] real tokens (right padding), then -1. */
static void ids_of(int32_t *x, int rows, int T, int seed) {
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) x[r * T + t] = t < len[r % B] ? (int32_t)((seed + 7 * r + 3 * t + t * t) % V) : -1;
}

static void test_modes(const tr_plugin *p, tr_accel *dev) {
    const char *common[] = {"d_model=32", "n_head=4", "n_layer=2", "dropout=0", "max_seq=40"};
    int32_t xs[2 * B * TS], xl[2 * B * TS], ys[B * TS], yl[B * TS], cy[B] = {0, 2, 1, 1};
    float score[B] = {0.5f, -0.25f, 0.75f, 0.1f};
    const char *modes[4] = {"classify mean", "classify cls", "pairs", "lm"};
    for (int mode = 0; mode < 4; mode++) {
        tr_data_spec d = {.x_dtype = TR_I32, .x_ndim = 1, .x_shape = {TS}, .x_numel = TS, .y_dtype = TR_I32,
                          .n_classes = NC, .vocab = V};
        const char *kv[8];
        int n = 0;
        for (; n < 5; n++) kv[n] = common[n];
        int rows = B, lm = mode == 3;
        if (mode < 2) {
            d.task = TR_TASK_CLASSIFY;
            kv[n++] = "mode=classify";
            kv[n++] = mode ? "pool=cls" : "pool=mean";
        } else if (mode == 2) {
            d.task = TR_TASK_REGRESS, d.x_ndim = 2, d.x_shape[0] = 2, d.x_shape[1] = TS, d.x_numel = 2 * TS;
            d.y_dtype = TR_F32, d.y_numel = 1;
            kv[n++] = "mode=pairs";
            rows = 2 * B;
        } else {
            d.task = TR_TASK_LM, d.y_ndim = 1, d.y_shape[0] = TS, d.y_numel = TS, d.n_classes = V;
        }
        model m;
        if (!make(&m, p, kv, n, &d)) continue;
        ids_of(xs, rows, TL, mode), ids_of(xl, rows, TS, mode);
        double normaliser = B;
        if (lm) { /* next tokens, -100 (ignored, as Hugging Face's labels) at padding and after each sample's last token */
            int real = 0;
            for (int r = 0; r < B; r++) {
                for (int t = 0; t < TL; t++) ys[r * TL + t] = t + 1 < len[r] ? xs[r * TL + t + 1] : -100;
                for (int t = 0; t < TS; t++) yl[r * TS + t] = t + 1 < len[r] ? xl[r * TS + t + 1] : -100;
                real += len[r] > 1 ? len[r] - 1 : 0;
            }
            normaliser = real;
        }
        int64_t xsh_s[3] = {B, 2, TL}, xsh_l[3] = {B, 2, TS};
        if (mode != 2) xsh_s[1] = TL, xsh_l[1] = TS;
        int xnd = mode == 2 ? 3 : 2;
        const void *ysv = lm ? (const void *)ys : mode == 2 ? (const void *)score : (const void *)cy;
        const void *ylv = lm ? (const void *)yl : ysv;
        tr_dtype ydt = mode == 2 ? TR_F32 : TR_I32;
        int64_t ysh_s[2] = {B, TL}, ysh_l[2] = {B, TS}, ysh_1[2] = {B, 1};
        result rs, rl, rd;
        char what[96];
        if (run(&m, NULL, xs, xsh_s, xnd, ysv, ydt, lm ? ysh_s : mode == 2 ? ysh_1 : ysh_s, lm || mode == 2 ? 2 : 1,
                normaliser, &rs) &&
            run(&m, NULL, xl, xsh_l, xnd, ylv, ydt, lm ? ysh_l : mode == 2 ? ysh_1 : ysh_l, lm || mode == 2 ? 2 : 1,
                normaliser, &rl)) {
            snprintf(what, sizeof what, "%s T16 vs T40", modes[mode]);
            compare(what, &rs, &rl, lm, TL, TS, rows, tr_params_numel(m.P));
            if (dev && run(&m, dev, xl, xsh_l, xnd, ylv, ydt, lm ? ysh_l : mode == 2 ? ysh_1 : ysh_l,
                           lm || mode == 2 ? 2 : 1, normaliser, &rd)) {
                snprintf(what, sizeof what, "%s T40 on %s vs CPU", modes[mode], tr_accel_name(dev));
                compare(what, &rd, &rl, lm, TS, TS, rows, tr_params_numel(m.P));
                result_free(&rd);
            }
            result_free(&rs), result_free(&rl);
        }
        drop(&m);
    }
}

/* A device plugin built for ABI 0.8 (fake_gpu with TRAINER_FAKE_GPU_OLD_KERNELS=pad): padding
 * ids and masks are refused naming the op and what to do; an unpadded batch trains as before
 * (its mask is all ones: the unmasked kernels). */
static void test_old_device(const tr_plugin *p, tr_accel *a) {
    tr_graph *g = NULL;
    tr_graph_create(&g, 0);
    tr_graph_set_accel(g, a);
    int32_t ids[6] = {1, 2, -1, 3, -1, -1};
    tr_tensor *x = tr_graph_input_from(g, ids, TR_I32, 2, (int64_t[]){2, 3});
    tr_tensor *table = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){5, 4});
    tr_tensor *e = tr_embedding(g, x, table);
    CHECK(!e && strstr(tr_error_msg(), "embedding: ids (2, 3) hold padding (id -1)") &&
              strstr(tr_error_msg(), "before ABI 0.9"),
          "old device, padded ids: %s", tr_error_msg());
    tr_graph_reset(g);
    x = tr_graph_input_from(g, ids, TR_I32, 2, (int64_t[]){2, 3});
    tr_tensor *qkv = tr_graph_leaf(g, TR_F32, 3, (int64_t[]){2, 3, 12});
    tr_accel_zero(a, qkv->data, tr_tensor_bytes(qkv));
    tr_tensor *y = tr_attention_qkv_masked(g, qkv, tr_padding_mask(g, x), 2, 0);
    CHECK(!y && strstr(tr_error_msg(), "attention_masked: device fake_gpu:0 has no kernel for this op"),
          "old device, masked attention: %s", tr_error_msg());
    tr_graph_destroy(g);

    const char *kv[] = {"d_model=32", "n_head=4", "n_layer=1", "dropout=0", "mode=classify"};
    tr_data_spec d = {.task = TR_TASK_CLASSIFY, .x_dtype = TR_I32, .x_ndim = 1, .x_shape = {TL}, .x_numel = TL,
                      .y_dtype = TR_I32, .n_classes = NC, .vocab = V};
    model m;
    if (!make(&m, p, kv, 5, &d)) return;
    int32_t xs[B * TL], cy[B] = {0, 1, 2, 0};
    for (int i = 0; i < B * TL; i++) xs[i] = (int32_t)(i * 7 % V);
    result rc, rd;
    int64_t xsh[2] = {B, TL}, ysh[1] = {B};
    if (run(&m, NULL, xs, xsh, 2, cy, TR_I32, ysh, 1, B, &rc) && run(&m, a, xs, xsh, 2, cy, TR_I32, ysh, 1, B, &rd)) {
        compare("unpadded classify on the ABI 0.8 device vs CPU", &rd, &rc, 0, TL, TL, B, tr_params_numel(m.P));
        result_free(&rc), result_free(&rd);
    }
    drop(&m);
}

int main(int argc, char **argv) {
    int old = argc > 1 && strcmp(argv[1], "old") == 0; /* the device half on a device built for ABI 0.8 */
    tr_set_num_threads(1);
    if (access(PLUGIN, R_OK) != 0) test_skip(PLUGIN " not built");
    if (access(FAKE_GPU, R_OK) != 0) test_skip(FAKE_GPU " not built");
    setenv("TRAINER_FAKE_GPUS", "1", 1);
    unsetenv("TRAINER_FAKE_GPU_DISCOVERY_ONLY");
    if (old) setenv("TRAINER_FAKE_GPU_OLD_KERNELS", "pad", 1);
    else unsetenv("TRAINER_FAKE_GPU_OLD_KERNELS");
    tr_plugin *p = NULL, *fp = NULL;
    tr_accel *a = NULL;
    CHECK(tr_plugin_open(PLUGIN, "test", &p) == TR_OK, "open: %s", tr_error_msg());
    if (!p) return test_finish();
    if (!old) test_modes(p, NULL);
    CHECK(tr_plugin_open(FAKE_GPU, "test", &fp) == TR_OK && tr_accel_open(fp, 0, &a) == TR_OK,
          "open fake_gpu: %s", tr_error_msg());
    if (a) {
        tr_accel_bind(a);
        if (old) test_old_device(p, a);
        else test_modes(p, a);
        tr_accel_close(a);
    }
    if (fp) tr_plugin_close(fp);
    tr_plugin_close(p);
    return test_finish();
}
