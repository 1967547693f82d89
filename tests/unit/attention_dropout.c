/* Dropout on the attention probabilities (tr_attention_dropout, tr_attention_qkv_dropout):
 * - p = 0 and eval mode are tr_attention_masked / tr_attention_qkv_masked bit for bit (output
 *   and gradients), record as many nodes and draw no randomness (a tr_dropout after them is
 *   still call 0 of the step);
 * - the mask's definition: with v the identity of each head the output is the dropped
 *   probabilities, which must be att / (1 - p) exactly where tr_rng_uniform(seed,
 *   tr_rng_stream(DROPOUT, step, call), (sample_base + b) NH T S + (h T + t) S + s) >= p and 0
 *   elsewhere (att: the probabilities without dropout), causal and key padding included, the
 *   op being call 1 after a tr_dropout; the fused form draws the same mask;
 * - statistics: over 2^20 probabilities the dropped fraction is p within 5 sigma (p 0.1, 0.5),
 *   and the mean output over 4000 steps is the output without dropout within 5 standard errors
 *   (element by element);
 * - a batch split: samples 3..5 of a batch of 6 get the output they get as a batch of 3 from
 *   sample_base 3; another step or seed gives another mask;
 * - p outside [0, 1) is refused naming the op, in eval mode too;
 * - on a device (the test device fake_gpu: the CPU's kernels through the kernel table) the
 *   output and gradients are the CPU graph's. With argument `old`: fake_gpu as a plugin built
 *   for ABI 0.10 refuses dropout on attention naming the op, and runs it with p 0 or in eval.
 * Skips (77) when fake_gpu has not been built (the device half). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/accel.h"
#include "trainer/rng.h"
#include "trainer/trainer.h"

#define FAKE_GPU TRAINER_BINARY_DIR "/test_plugins/fake_gpu/fake_gpu.so"

static tr_graph *g;

/* An f32 tensor of test values (salt), a leaf when leaf. */
static tr_tensor *values(int ndim, const int64_t *shape, uint64_t salt, int leaf) {
    tr_tensor *t = leaf ? tr_graph_leaf(g, TR_F32, ndim, shape) : tr_graph_input(g, TR_F32, ndim, shape);
    for (int64_t i = 0; i < tr_tensor_numel(t); i++) ((float *)t->data)[i] = (float)test_value((uint64_t)i, salt);
    return t;
}

/* The key padding mask (B, S): sample b sees its first len[b] keys. */
static tr_tensor *key_mask(int64_t B, int64_t S, const int64_t *len) {
    tr_tensor *m = tr_graph_input(g, TR_I32, 2, (int64_t[]){B, S});
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) ((int32_t *)m->data)[b * S + s] = s < len[b];
    return m;
}

/* v (B, S, NH * S) whose head h is the S x S identity: attention's output is then the
 * probabilities it multiplies v by, out[b, t, h S + s] = P[b, h, t, s]. */
static tr_tensor *identity_v(int64_t B, int64_t S, int64_t NH) {
    tr_tensor *v = tr_graph_input(g, TR_F32, 3, (int64_t[]){B, S, NH * S});
    float *p = v->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t j = 0; j < NH * S; j++) p[(b * S + s) * NH * S + j] = j % S == s;
    return v;
}

/* What one forward and backward gives. */
typedef struct result {
    float out[512], grad[3][512];
    int64_t n_out, n_in[3];
    size_t nodes;
} result;

/* form 0: tr_attention_masked; 1: tr_attention_dropout(p); 2: tr_attention_qkv_masked;
 * 3: tr_attention_qkv_dropout(p); on q, k, v (or one qkv) of test values and a key mask,
 * backward of a fixed dout. */
static void run_form(int form, double p, int training, result *r) {
    enum { B = 3, T = 5, NH = 2, C = 8 };
    static const int64_t len[B] = {5, 3, 0};
    tr_graph_reset(g);
    tr_graph_set_training(g, training);
    tr_graph_set_rng(g, 21, 4, 6);
    memset(r, 0, sizeof *r);
    tr_tensor *in[3] = {NULL, NULL, NULL}, *y;
    tr_tensor *mask = key_mask(B, T, len);
    if (form < 2) {
        for (int i = 0; i < 3; i++) in[i] = values(3, (int64_t[]){B, T, C}, 10 + (uint64_t)i, 1);
        y = form == 0 ? tr_attention_masked(g, in[0], in[1], in[2], mask, NH, 1)
                      : tr_attention_dropout(g, in[0], in[1], in[2], mask, NH, 1, p);
    } else {
        in[0] = values(3, (int64_t[]){B, T, 3 * C}, 10, 1);
        y = form == 2 ? tr_attention_qkv_masked(g, in[0], mask, NH, 1)
                      : tr_attention_qkv_dropout(g, in[0], mask, NH, 1, p);
    }
    CHECK(y != NULL, "form %d: %s", form, tr_error_msg());
    if (!y) return;
    float dout[B * T * C];
    for (int i = 0; i < B * T * C; i++) dout[i] = (float)test_value((uint64_t)i, 99);
    r->nodes = tr_graph_nodes(g);
    CHECK(tr_backward(g, y, dout) == TR_OK, "form %d backward: %s", form, tr_error_msg());
    r->n_out = tr_tensor_numel(y);
    memcpy(r->out, y->data, (size_t)r->n_out * sizeof(float));
    for (int i = 0; i < 3 && in[i]; i++) {
        r->n_in[i] = tr_tensor_numel(in[i]);
        memcpy(r->grad[i], in[i]->grad, (size_t)r->n_in[i] * sizeof(float));
    }
    tr_graph_set_training(g, 1);
}

static int same(const result *a, const result *b) {
    return a->nodes == b->nodes && memcmp(a, b, offsetof(result, nodes)) == 0;
}

/* p = 0 and eval mode: the ops without dropout, bit for bit; no randomness drawn. */
static void identity_cases(void) {
    result ref, r;
    for (int fused = 0; fused < 2; fused++) {
        run_form(2 * fused, 0, 1, &ref);
        run_form(2 * fused + 1, 0.0, 1, &r);
        CHECK(same(&r, &ref), "%s: p = 0 differs from the op without dropout", fused ? "fused" : "separate");
        run_form(2 * fused + 1, 0.5, 0, &r);
        CHECK(same(&r, &ref), "%s: eval mode differs from the op without dropout", fused ? "fused" : "separate");
        run_form(2 * fused + 1, 0.5, 1, &r);
        CHECK(!same(&r, &ref), "%s: p = 0.5 in training changes nothing", fused ? "fused" : "separate");
    }
    /* a training-mode dropout after the identities is call 0 of the step */
    tr_graph_reset(g);
    tr_graph_set_rng(g, 8, 0, 0);
    tr_tensor *q = values(3, (int64_t[]){1, 4, 4}, 1, 0);
    tr_attention_dropout(g, q, q, q, NULL, 2, 0, 0.0);
    tr_graph_set_training(g, 0);
    tr_attention_qkv_dropout(g, values(3, (int64_t[]){1, 4, 12}, 2, 0), NULL, 2, 0, 0.5);
    tr_graph_set_training(g, 1);
    tr_tensor *x = values(1, (int64_t[]){64}, 3, 0), *y = tr_dropout(g, x, 0.5);
    uint64_t stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, 0, 0);
    int mismatch = 0;
    for (int e = 0; e < 64; e++)
        mismatch += (((float *)y->data)[e] != 0) != (tr_rng_uniform(8, stream, (uint64_t)e) >= 0.5);
    CHECK(mismatch == 0, "attention with p 0 or in eval mode drew randomness (%d mismatches)", mismatch);
}

/* The dropped probabilities of a masked causal cross attention, against the definition. */
static void definition(void) {
    enum { B = 3, T = 4, S = 6, NH = 2, D = S, C = NH * D };
    static const int64_t len[B] = {6, 2, 0};
    const double p = 0.4;
    const uint64_t seed = 5, step = 9, base = 40;
    float att[B * T * C], dropped[B * T * C], fused[B * T * C];
    for (int run = 0; run < 3; run++) { /* 0: no dropout; 1: dropout as call 1; 2: fused as call 1 */
        tr_graph_reset(g);
        tr_graph_set_rng(g, seed, step, base);
        tr_tensor *q = values(3, (int64_t[]){B, T, C}, 30, 0), *k = values(3, (int64_t[]){B, S, C}, 31, 0);
        tr_tensor *v = identity_v(B, S, NH), *mask = key_mask(B, S, len), *y;
        if (run) tr_dropout(g, values(1, (int64_t[]){B}, 32, 0), 0.5); /* call 0 */
        if (run == 2) { /* the fused form needs T == S: q padded to S rows, compared on its first T */
            tr_tensor *qs = tr_graph_input(g, TR_F32, 3, (int64_t[]){B, S, 3 * C});
            float *x = qs->data;
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < S; s++)
                    for (int64_t j = 0; j < C; j++) {
                        float *row = x + (b * S + s) * 3 * C;
                        row[j] = s < T ? ((float *)q->data)[(b * T + s) * C + j] : 0;
                        row[C + j] = ((float *)k->data)[(b * S + s) * C + j];
                        row[2 * C + j] = ((float *)v->data)[(b * S + s) * C + j];
                    }
            y = tr_attention_qkv_dropout(g, qs, mask, NH, 0, p);
        } else {
            y = run ? tr_attention_dropout(g, q, k, v, mask, NH, 0, p) : tr_attention_masked(g, q, k, v, mask, NH, 0);
        }
        CHECK(y != NULL, "definition run %d: %s", run, tr_error_msg());
        if (!y) return;
        float *dst = run == 0 ? att : run == 1 ? dropped : fused;
        for (int64_t b = 0; b < B; b++) /* the first T rows of each sample */
            memcpy(dst + b * T * C, (float *)y->data + b * (y->shape[1]) * C, (size_t)(T * C) * sizeof(float));
    }
    /* the fused run's queries are rows 0..T-1 of S: its mask index is (h S + t) S + s */
    uint64_t stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, step, 1);
    float scale = (float)(1.0 / (1.0 - p));
    int bad = 0, bad_fused = 0, kept = 0, seen = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t s = 0; s < S; s++) {
                    int64_t o = (b * T + t) * C + h * D + s;
                    uint64_t e = (base + (uint64_t)b) * NH * T * S + (uint64_t)((h * T + t) * S + s);
                    uint64_t ef = (base + (uint64_t)b) * NH * S * S + (uint64_t)((h * S + t) * S + s);
                    int keep = tr_rng_uniform(seed, stream, e) >= p, keepf = tr_rng_uniform(seed, stream, ef) >= p;
                    bad += dropped[o] != (keep ? att[o] * scale : 0.0f);
                    bad_fused += fused[o] != (keepf ? att[o] * scale : 0.0f);
                    seen += att[o] != 0;
                    kept += keep && att[o] != 0;
                }
    CHECK(bad == 0, "%d of %d dropped probabilities differ from the definition", bad, B * NH * T * S);
    CHECK(bad_fused == 0, "fused: %d of %d dropped probabilities differ from the definition", bad_fused,
          B * NH * T * S);
    CHECK(seen == (6 + 2) * NH * T && kept > seen / 4 && kept < seen * 9 / 10, "%d of %d visible probabilities kept",
          kept, seen);
}

/* The dropped fraction over 2^20 probabilities. */
static void kept_fraction(double p) {
    enum { B = 16, T = 128, S = 128, NH = 4 };
    tr_graph_reset(g);
    tr_graph_set_rng(g, 77, 3, 0);
    tr_tensor *q = values(3, (int64_t[]){B, T, NH * S}, 40, 0), *k = values(3, (int64_t[]){B, S, NH * S}, 41, 0);
    tr_tensor *y = tr_attention_dropout(g, q, k, identity_v(B, S, NH), NULL, NH, 0, p);
    CHECK(y != NULL, "kept_fraction: %s", tr_error_msg());
    if (!y) return;
    int64_t n = tr_tensor_numel(y), dropped = 0;
    for (int64_t i = 0; i < n; i++) dropped += ((float *)y->data)[i] == 0;
    double frac = (double)dropped / (double)n, sigma = sqrt(p * (1 - p) / (double)n);
    printf("attention dropout p=%.2f: dropped %.5f of %lld probabilities (5 sigma = %.5f)\n", p, frac, (long long)n,
           5 * sigma);
    CHECK(fabs(frac - p) < 5 * sigma, "dropped fraction %.5f, expected %.2f", frac, p);
}

/* The mean output over many steps is the output without dropout. */
static void expectation(void) {
    enum { B = 2, T = 3, S = 4, C = 4, NH = 2, N = B * T * C, STEPS = 4000 };
    static const int64_t len[B] = {4, 2};
    const double p = 0.3;
    double mean[N] = {0}, m2[N] = {0};
    float ref[N];
    for (int step = -1; step < STEPS; step++) {
        tr_graph_reset(g);
        tr_graph_set_rng(g, 3, (uint64_t)(step + 1), 0);
        tr_tensor *q = values(3, (int64_t[]){B, T, C}, 50, 0), *k = values(3, (int64_t[]){B, S, C}, 51, 0);
        tr_tensor *v = values(3, (int64_t[]){B, S, C}, 52, 0), *mask = key_mask(B, S, len);
        tr_tensor *y = step < 0 ? tr_attention_masked(g, q, k, v, mask, NH, 1)
                                : tr_attention_dropout(g, q, k, v, mask, NH, 1, p);
        if (!y) {
            CHECK(0, "expectation step %d: %s", step, tr_error_msg());
            return;
        }
        const float *o = y->data;
        if (step < 0) {
            memcpy(ref, o, sizeof ref);
            continue;
        }
        for (int i = 0; i < N; i++) { /* Welford */
            double d = o[i] - mean[i];
            mean[i] += d / (step + 1);
            m2[i] += d * (o[i] - mean[i]);
        }
    }
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double se = sqrt(m2[i] / (STEPS - 1) / STEPS), z = fabs(mean[i] - ref[i]) / (se + 1e-12);
        bad += fabs(mean[i] - ref[i]) > 5 * se + 1e-6;
        if (z > worst) worst = z;
    }
    printf("attention dropout p=%.2f: mean of %d steps vs no dropout: worst %.2f standard errors\n", p, STEPS, worst);
    CHECK(bad == 0, "%d of %d mean outputs more than 5 standard errors from the output without dropout", bad, N);
}

/* Samples 3..5 of a batch of 6 against a batch of 3 from sample_base 3. */
static void batch_split(void) {
    enum { T = 4, C = 8, NH = 2, PER = T * C };
    const double p = 0.3;
    float full[6 * PER], half[3 * PER], other[3 * PER];
    for (int run = 0; run < 4; run++) { /* the whole batch; its second half; another step; another seed */
        int64_t B = run ? 3 : 6;
        tr_graph_reset(g);
        tr_graph_set_rng(g, run == 3 ? 12 : 11, run == 2 ? 3 : 2, run ? 3 : 0);
        tr_tensor *x[3];
        for (int i = 0; i < 3; i++) {
            x[i] = tr_graph_input(g, TR_F32, 3, (int64_t[]){B, T, C});
            for (int64_t j = 0; j < B * PER; j++)
                ((float *)x[i]->data)[j] = (float)test_value((uint64_t)(j + (run ? 3 * PER : 0)), 60 + (uint64_t)i);
        }
        tr_tensor *y = tr_attention_dropout(g, x[0], x[1], x[2], NULL, NH, 0, p);
        CHECK(y != NULL, "batch_split run %d: %s", run, tr_error_msg());
        if (!y) return;
        memcpy(run == 0 ? full : run == 1 ? half : other, y->data, (size_t)(B * PER) * sizeof(float));
        if (run == 1) CHECK(memcmp(full + 3 * PER, half, sizeof half) == 0, "samples 3..5 differ between the splits");
        if (run >= 2) CHECK(memcmp(half, other, sizeof half) != 0, "%s repeats the mask", run == 2 ? "step 3" : "seed 12");
    }
}

static void bad_p(void) {
    double ps[3] = {1.0, -0.1, NAN};
    for (int i = 0; i < 3; i++) {
        for (int training = 1; training >= 0; training--) {
            tr_graph_reset(g);
            tr_graph_set_training(g, training);
            tr_tensor *q = values(3, (int64_t[]){2, 3, 4}, 70, 0), *qkv = values(3, (int64_t[]){2, 3, 12}, 71, 0);
            CHECK_OP_ERROR(g, tr_attention_dropout(g, q, q, q, NULL, 2, 0, ps[i]), "attention_dropout: dropout p =",
                           "must be in [0, 1) (input (2, 3, 4))");
            CHECK_OP_ERROR(g, tr_attention_qkv_dropout(g, qkv, NULL, 2, 0, ps[i]), "attention_qkv_dropout: dropout p =",
                           "must be in [0, 1)");
        }
    }
    tr_graph_set_training(g, 1);
}

/* Forward and backward of a masked causal self-attention with dropout, separate and fused, on
 * graph gr (device a, or the CPU): outputs and gradients into out (512 floats each). */
static int device_case(tr_graph *gr, tr_accel *a, int fused, double p, float *out) {
    enum { B = 3, T = 6, C = 8, NH = 2 };
    int64_t n_in = B * T * (fused ? 3 * C : C), n_out = B * T * C;
    int32_t mk[B * T];
    for (int i = 0; i < B * T; i++) mk[i] = i % T < (i / T == 1 ? 4 : T);
    tr_graph_reset(gr);
    tr_graph_set_rng(gr, 13, 2, 5);
    tr_tensor *mask = tr_graph_input_from(gr, mk, TR_I32, 2, (int64_t[]){B, T});
    tr_tensor *in[3];
    float h[3 * B * T * 3 * C], dout[B * T * C];
    for (int i = 0; i < (fused ? 1 : 3); i++) {
        in[i] = tr_graph_leaf(gr, TR_F32, 3, (int64_t[]){B, T, fused ? 3 * C : C});
        for (int64_t j = 0; j < n_in; j++) h[j] = (float)test_value((uint64_t)j, 80 + (uint64_t)i);
        if (a) tr_accel_upload(a, in[i]->data, h, (size_t)n_in * sizeof(float));
        else memcpy(in[i]->data, h, (size_t)n_in * sizeof(float));
    }
    for (int64_t j = 0; j < n_out; j++) dout[j] = (float)test_value((uint64_t)j, 90);
    tr_tensor *y = fused ? tr_attention_qkv_dropout(gr, in[0], mask, NH, 1, p)
                         : tr_attention_dropout(gr, in[0], in[1], in[2], mask, NH, 1, p);
    if (!y) return 0;
    if (tr_backward(gr, y, dout) != TR_OK) return 0; /* dout: host memory, also on a device */
    const void *src[4] = {y->data, in[0]->grad, fused ? NULL : in[1]->grad, fused ? NULL : in[2]->grad};
    int64_t n[4] = {n_out, n_in, fused ? 0 : n_in, fused ? 0 : n_in};
    for (int i = 0; i < 4; i++) {
        if (!n[i]) continue;
        if (a) CHECK(tr_accel_download(a, out + 512 * i, src[i], (size_t)n[i] * sizeof(float)) == TR_OK, "download");
        else memcpy(out + 512 * i, src[i], (size_t)n[i] * sizeof(float));
    }
    return 1;
}

static void device(int old) {
    if (access(FAKE_GPU, R_OK) != 0) test_skip(FAKE_GPU " not built (build the fake_gpu target first)");
    setenv("TRAINER_FAKE_GPUS", "1", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("TRAINER_FAKE_GPU_DISCOVERY_ONLY");
    if (old) setenv("TRAINER_FAKE_GPU_OLD_KERNELS", "drop", 1);
    else unsetenv("TRAINER_FAKE_GPU_OLD_KERNELS");
    tr_plugin *p = NULL;
    tr_accel *a = NULL;
    CHECK(tr_plugin_open(FAKE_GPU, "test", &p) == TR_OK && tr_accel_open(p, 0, &a) == TR_OK, "open fake_gpu: %s",
          tr_error_msg());
    if (!a) return;
    tr_accel_bind(a);
    tr_graph *gd = NULL;
    CHECK(tr_graph_create(&gd, 0) == TR_OK && tr_graph_set_accel(gd, a) == TR_OK, "device graph: %s", tr_error_msg());
    static float cpu[4 * 512], dev[4 * 512];
    for (int fused = 0; fused < 2; fused++) {
        const char *what = fused ? "fused" : "separate";
        if (old) {
            CHECK(!device_case(gd, a, fused, 0.3, dev) &&
                      strstr(tr_error_msg(), fused ? "attention_qkv_dropout: device fake_gpu:0 has no kernel"
                                                   : "attention_dropout: device fake_gpu:0 has no kernel"),
                  "old device, %s, p 0.3: %s", what, tr_error_msg());
            tr_graph_set_training(gd, 0);
            CHECK(device_case(gd, a, fused, 0.3, dev), "old device, %s, eval mode: %s", what, tr_error_msg());
            tr_graph_set_training(gd, 1);
            CHECK(device_case(gd, a, fused, 0.0, dev), "old device, %s, p 0: %s", what, tr_error_msg());
            continue;
        }
        memset(cpu, 0, sizeof cpu), memset(dev, 0, sizeof dev);
        CHECK(device_case(g, NULL, fused, 0.3, cpu) && device_case(gd, a, fused, 0.3, dev), "%s: %s", what,
              tr_error_msg());
        char name[64];
        snprintf(name, sizeof name, "device vs CPU, %s: output and gradients", what);
        check_tensor(name, dev, cpu, 4 * 512, 0);
    }
    tr_graph_destroy(gd);
    CHECK(tr_accel_allocated(a) == 0, "%zu bytes of device memory left allocated", tr_accel_allocated(a));
    tr_accel_close(a);
    tr_plugin_close(p);
}

int main(int argc, char **argv) {
    int old = argc > 1 && strcmp(argv[1], "old") == 0;
    if (tr_graph_create(&g, 64 << 20) != TR_OK) return 1;
    if (!old) {
        identity_cases();
        definition();
        kept_fraction(0.1);
        kept_fraction(0.5);
        expectation();
        batch_split();
        bad_p();
    }
    device(old);
    tr_graph_destroy(g);
    return test_finish();
}
