/* The CUDA plugin's kernel table against the core's CPU kernels (tr_cpu_kernels), entry by
 * entry: the same random inputs on the host and on the device, every output compared with
 * its normalised error printed (max|gpu - cpu| / max|cpu|) and bounded; dropout masks, the
 * loss total and column sums in the CPU's order must be equal, and so must pooling (max-pool's
 * winners too) and batch-norm's per-channel sums of the same plane statistics.
 *
 *   unit_cuda_kernels            the plugin over the CPU emulator of CUDA (test plugin
 *                                cuda_emu): kernels.cu, launches and memory, without a GPU
 *   unit_cuda_kernels PLUGIN     another device plugin, e.g. build/plugins/devices/
 *                                tr_device_cuda.so on a GPU (ctest: gpu_cuda_kernels)
 *
 * Skips (77) when the plugin is missing, sees no GPU, or cannot run kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "device_compare.h"
#include "trainer/optim.h"

/* out = f(x) style entries: unary forward, (dx, dout, y) backward with acc. */
static void test_unary(void) {
    enum { N = 3001 };
    const char *names[] = {"relu", "gelu exact", "gelu tanh", "tanh", "sigmoid"};
    for (int op = 0; op < 5; op++) {
        float *x = dc_rand(N, -4, 4), *dy = dc_rand(N, -1, 1), *dx0 = dc_rand(N, -1, 1);
        float *y = calloc(N, sizeof *y), *dx = malloc(N * sizeof *dx);
        void *gx = dc_dev(x, sizeof(float) * N), *gy = dc_dev(y, sizeof(float) * N);
        void *gdy = dc_dev(dy, sizeof(float) * N), *gdx = dc_dev(dx0, sizeof(float) * N);
        memcpy(dx, dx0, N * sizeof *dx);
        char name[64];
        for (int acc = 0; acc < 2; acc++) {
            switch (op) {
            case 0:
                dc_cpu->relu_forward(y, x, N), dc_gpu->relu_forward(gy, gx, N);
                dc_cpu->relu_backward(dx, dy, y, N, acc), dc_gpu->relu_backward(gdx, gdy, gy, N, acc);
                break;
            case 1:
            case 2:
                dc_cpu->gelu_forward(y, x, N, op - 1), dc_gpu->gelu_forward(gy, gx, N, op - 1);
                dc_cpu->gelu_backward(dx, dy, x, N, op - 1, acc), dc_gpu->gelu_backward(gdx, gdy, gx, N, op - 1, acc);
                break;
            case 3:
                dc_cpu->tanh_forward(y, x, N), dc_gpu->tanh_forward(gy, gx, N);
                dc_cpu->tanh_backward(dx, dy, y, N), dc_gpu->tanh_backward(gdx, gdy, gy, N);
                break;
            default:
                dc_cpu->sigmoid_forward(y, x, N), dc_gpu->sigmoid_forward(gy, gx, N);
                dc_cpu->sigmoid_backward(dx, dy, y, N), dc_gpu->sigmoid_backward(gdx, gdy, gy, N);
            }
            snprintf(name, sizeof name, "%s forward", names[op]);
            dc_compare(name, gy, y, N, 1e-5);
            snprintf(name, sizeof name, "%s backward (acc %d)", names[op], acc);
            dc_compare(name, gdx, dx, N, 1e-5);
        }
        dc_free_all();
        free(x), free(dy), free(dx0), free(y), free(dx);
    }
}

/* add, mul, bias-add, scale: broadcast over rows, and their backward with column sums. */
static void test_binary(void) {
    enum { RW = 37, M = 300 };
    size_t n = (size_t)RW * M;
    float *a = dc_rand(n, -2, 2), *b = dc_rand(M, -2, 2), *bf = dc_rand(n, -2, 2), *dy = dc_rand(n, -1, 1);
    float *out = malloc(n * sizeof *out), *da = dc_rand(n, -1, 1), *db = dc_rand(M, -1, 1);
    void *ga = dc_dev(a, n * 4), *gb = dc_dev(b, M * 4), *gbf = dc_dev(bf, n * 4), *gdy = dc_dev(dy, n * 4);
    void *gout = dc_dev(a, n * 4), *gda = dc_dev(da, n * 4), *gdb = dc_dev(db, M * 4);

    dc_cpu->add_forward(out, a, b, RW, M), dc_gpu->add_forward(gout, ga, gb, RW, M);
    dc_compare("add forward (broadcast)", gout, out, n, 0);
    dc_cpu->add_forward(out, a, bf, 1, (int64_t)n), dc_gpu->add_forward(gout, ga, gbf, 1, (int64_t)n);
    dc_compare("add forward (same shape)", gout, out, n, 0);
    dc_cpu->add_backward(da, db, dy, RW, M, 1), dc_gpu->add_backward(gda, gdb, gdy, RW, M, 1);
    dc_compare("add backward da", gda, da, n, 0);
    dc_compare("add backward db (column sums)", gdb, db, M, 1e-6);
    dc_cpu->add_backward(da, NULL, dy, RW, M, 0), dc_gpu->add_backward(gda, NULL, gdy, RW, M, 0);
    dc_compare("add backward da (acc 0)", gda, da, n, 0);

    dc_cpu->mul_forward(out, a, b, RW, M), dc_gpu->mul_forward(gout, ga, gb, RW, M);
    dc_compare("mul forward", gout, out, n, 0);
    dc_cpu->mul_backward(da, db, dy, a, b, RW, M), dc_gpu->mul_backward(gda, gdb, gdy, ga, gb, RW, M);
    dc_compare("mul backward da", gda, da, n, 1e-6);
    dc_compare("mul backward db", gdb, db, M, 1e-5);

    dc_cpu->bias_add_forward(out, a, b, RW, M), dc_gpu->bias_add_forward(gout, ga, gb, RW, M);
    dc_compare("bias_add forward", gout, out, n, 0);
    dc_cpu->bias_add_backward(da, db, dy, RW, M), dc_gpu->bias_add_backward(gda, gdb, gdy, RW, M);
    dc_compare("bias_add backward dx", gda, da, n, 1e-6);
    dc_compare("bias_add backward dbias", gdb, db, M, 1e-6);

    dc_cpu->scale_forward(out, a, -0.37, (int64_t)n), dc_gpu->scale_forward(gout, ga, -0.37, (int64_t)n);
    dc_compare("scale forward", gout, out, n, 0);
    dc_cpu->scale_backward(da, dy, 2.5, (int64_t)n), dc_gpu->scale_backward(gda, gdy, 2.5, (int64_t)n);
    dc_compare("scale backward", gda, da, n, 1e-6);

    dc_free_all();
    free(a), free(b), free(bf), free(dy), free(out), free(da), free(db);
}

static void test_linear(void) {
    enum { B = 5, C = 37, OC = 11 };
    float *x = dc_rand(B * C, -1, 1), *w = dc_rand(OC * C, -1, 1), *bias = dc_rand(OC, -1, 1), *dy = dc_rand(B * OC, -1, 1);
    float *y = malloc(B * OC * sizeof *y), *dx = dc_rand(B * C, -1, 1), *dw = dc_rand(OC * C, -1, 1), *db = dc_rand(OC, -1, 1);
    void *gx = dc_dev(x, sizeof(float) * B * C), *gw = dc_dev(w, sizeof(float) * OC * C);
    void *gb = dc_dev(bias, sizeof(float) * OC), *gdy = dc_dev(dy, sizeof(float) * B * OC);
    void *gy = dc_dev(y, sizeof(float) * B * OC), *gdx = dc_dev(dx, sizeof(float) * B * C);
    void *gdw = dc_dev(dw, sizeof(float) * OC * C), *gdb = dc_dev(db, sizeof(float) * OC);
    dc_cpu->linear_forward(y, x, w, bias, B, C, OC), dc_gpu->linear_forward(gy, gx, gw, gb, B, C, OC);
    dc_compare("linear forward", gy, y, B * OC, 1e-5);
    dc_cpu->linear_forward(y, x, w, NULL, B, C, OC), dc_gpu->linear_forward(gy, gx, gw, NULL, B, C, OC);
    dc_compare("linear forward (no bias)", gy, y, B * OC, 1e-5);
    for (int acc = 0; acc < 2; acc++) {
        dc_cpu->linear_backward(dx, dw, db, dy, x, w, B, C, OC, acc, !acc);
        dc_gpu->linear_backward(gdx, gdw, gdb, gdy, gx, gw, B, C, OC, acc, !acc);
        dc_compare(acc ? "linear backward dx (acc 1)" : "linear backward dx (acc 0)", gdx, dx, B * C, 1e-5);
        dc_compare(acc ? "linear backward dw (wacc 0)" : "linear backward dw (wacc 1)", gdw, dw, OC * C, 1e-5);
        dc_compare("linear backward db", gdb, db, OC, 1e-5);
    }
    dc_free_all();
    free(x), free(w), free(bias), free(dy), free(y), free(dx), free(dw), free(db);
}

static void test_dropout(void) {
    enum { N = 5003 };
    float *x = dc_rand(N, -1, 1), *dy = dc_rand(N, -1, 1), *y = malloc(N * 4), *dx = dc_rand(N, -1, 1);
    uint8_t *mask = malloc(N), *gm_host = malloc(N);
    void *gx = dc_dev(x, N * 4), *gdy = dc_dev(dy, N * 4), *gy = dc_dev(y, N * 4), *gdx = dc_dev(dx, N * 4);
    void *gm = dc_dev(mask, N);
    uint32_t thr = (uint32_t)ceil(0.3 * 16777216.0);
    /* first = 7: a start inside a Philox block */
    dc_cpu->dropout_forward(y, mask, x, N, 1234, 99, 7, thr, 1 / 0.7);
    dc_gpu->dropout_forward(gy, gm, gx, N, 1234, 99, 7, thr, 1 / 0.7);
    dc_compare("dropout forward", gy, y, N, 0);
    CHECK(tr_accel_download(dc_accel, gm_host, gm, N) == TR_OK && memcmp(gm_host, mask, N) == 0,
          "dropout: the device's mask differs from the core's Philox stream");
    int kept = 0;
    for (int i = 0; i < N; i++) kept += mask[i];
    CHECK(kept > N * 6 / 10 && kept < N * 8 / 10, "dropout kept %d of %d at p 0.3", kept, N);
    for (int acc = 0; acc < 2; acc++) {
        dc_cpu->dropout_backward(dx, dy, mask, N, 1 / 0.7, acc), dc_gpu->dropout_backward(gdx, gdy, gm, N, 1 / 0.7, acc);
        dc_compare("dropout backward", gdx, dx, N, 0);
    }
    dc_free_all();
    free(x), free(dy), free(y), free(dx), free(mask), free(gm_host);
}

/* Rows shorter than a warp, between a warp and the block, and longer than the block. */
static void test_rows(void) {
    const int64_t shapes[3][2] = {{9, 5}, {6, 100}, {4, 700}};
    for (int s = 0; s < 3; s++) {
        int64_t RW = shapes[s][0], C = shapes[s][1];
        size_t n = (size_t)(RW * C);
        float *x = dc_rand(n, -6, 6), *dy = dc_rand(n, -1, 1), *y = malloc(n * 4), *dx = dc_rand(n, -1, 1);
        void *gx = dc_dev(x, n * 4), *gdy = dc_dev(dy, n * 4), *gy = dc_dev(y, n * 4), *gdx = dc_dev(dx, n * 4);
        char name[64];
        /* softmax, then log-softmax: forward, and backward from the CPU's output on both */
        for (int k = 0; k < 2; k++) {
            const char *op = k ? "log_softmax" : "softmax";
            (k ? dc_cpu->log_softmax_forward : dc_cpu->softmax_forward)(y, x, RW, C);
            (k ? dc_gpu->log_softmax_forward : dc_gpu->softmax_forward)(gy, gx, RW, C);
            snprintf(name, sizeof name, "%s forward (%lld x %lld)", op, (long long)RW, (long long)C);
            dc_compare(name, gy, y, n, 1e-5);
            CHECK(tr_accel_upload(dc_accel, gy, y, n * 4) == TR_OK, "upload");
            (k ? dc_cpu->log_softmax_backward : dc_cpu->softmax_backward)(dx, dy, y, RW, C);
            (k ? dc_gpu->log_softmax_backward : dc_gpu->softmax_backward)(gdx, gdy, gy, RW, C);
            snprintf(name, sizeof name, "%s backward (%lld x %lld)", op, (long long)RW, (long long)C);
            dc_compare(name, gdx, dx, n, 1e-5);
        }

        /* cross-entropy with ignored rows and label smoothing */
        int32_t *t = malloc((size_t)RW * sizeof *t);
        for (int64_t i = 0; i < RW; i++) t[i] = i % 3 == 1 ? -100 : (int32_t)((i * 7) % C);
        double *loss = malloc((size_t)RW * sizeof *loss), *gl_host = malloc((size_t)RW * sizeof *gl_host);
        float *stats = malloc((size_t)RW * 2 * 4), total, gtotal;
        void *gt = dc_dev(t, (size_t)RW * 4), *gl = dc_dev(loss, (size_t)RW * 8), *gs = dc_dev(stats, (size_t)RW * 8);
        void *gtot = dc_dev(&total, 4);
        dc_cpu->cross_entropy_forward(loss, stats, x, t, RW, C, -100, 0.1);
        dc_gpu->cross_entropy_forward(gl, gs, gx, gt, RW, C, -100, 0.1);
        CHECK(tr_accel_download(dc_accel, gl_host, gl, (size_t)RW * 8) == TR_OK, "download loss");
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < RW; i++) {
            worst = fmax(worst, fabs(gl_host[i] - loss[i]));
            scale = fmax(scale, fabs(loss[i]));
        }
        printf("  %-44s %.3e\n", "cross_entropy forward (loss)", scale ? worst / scale : worst);
        CHECK(worst <= 1e-5 * scale, "cross_entropy loss: error %g of %g", worst, scale);
        dc_compare("cross_entropy forward (stats)", gs, stats, (size_t)RW * 2, 1e-5);
        /* the totals from the same per-sample losses: equal */
        CHECK(tr_accel_upload(dc_accel, gl, loss, (size_t)RW * 8) == TR_OK, "upload");
        dc_cpu->loss_total(&total, loss, RW, 3.0), dc_gpu->loss_total(gtot, gl, RW, 3.0);
        CHECK(tr_accel_download(dc_accel, &gtotal, gtot, 4) == TR_OK && gtotal == total, "loss total %.9g, expected %.9g",
              (double)gtotal, (double)total);
        CHECK(tr_accel_upload(dc_accel, gs, stats, (size_t)RW * 8) == TR_OK, "upload");
        dc_cpu->cross_entropy_backward(dx, x, stats, t, 0.25, RW, C, -100, 0.1);
        dc_gpu->cross_entropy_backward(gdx, gx, gs, gt, 0.25, RW, C, -100, 0.1);
        dc_compare("cross_entropy backward", gdx, dx, n, 1e-5);
        dc_free_all();
        free(x), free(dy), free(y), free(dx), free(t), free(loss), free(gl_host), free(stats);
    }
}

static void test_optim(void) {
    enum { N = 4099 };
    tr_optim_kind kinds[] = {TR_OPTIM_SGD, TR_OPTIM_SGD, TR_OPTIM_ADAM, TR_OPTIM_ADAMW};
    const char *names[] = {"sgd momentum nesterov wd", "sgd plain", "adam wd", "adamw"};
    for (int k = 0; k < 4; k++) {
        tr_optim_config cfg = tr_optim_defaults(kinds[k]);
        if (k == 0) cfg.momentum = 0.9, cfg.nesterov = 1, cfg.weight_decay = 0.01, cfg.dampening = 0;
        if (k == 2) cfg.weight_decay = 0.05;
        float *p = dc_rand(N, -1, 1), *s0 = calloc(N, 4), *s1 = calloc(N, 4);
        void *gp = dc_dev(p, N * 4), *gs0 = dc_dev(s0, N * 4), *gs1 = dc_dev(s1, N * 4);
        for (int64_t step = 0; step < 3; step++) {
            float *g = dc_rand(N, -1, 1);
            void *gg = dc_dev(g, N * 4);
            float *hs[2] = {s0, s1}, *ds[2] = {gs0, gs1};
            dc_cpu->optim_update(&cfg, step, p, g, hs, N, 1e-2);
            dc_gpu->optim_update(&cfg, step, gp, gg, ds, N, 1e-2);
            dc_free(gg);
            free(g);
        }
        char name[64];
        snprintf(name, sizeof name, "%s: parameters after 3 steps", names[k]);
        dc_compare(name, gp, p, N, 1e-6);
        snprintf(name, sizeof name, "%s: state 0", names[k]);
        if (k != 1) dc_compare(name, gs0, s0, N, 1e-6);
        dc_free_all();
        free(p), free(s0), free(s1);
    }
}

static void test_norm(void) {
    const size_t sizes[] = {1, 1000, 300001};
    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s];
        float *g = dc_rand(n, -3, 3);
        void *gg = dc_dev(g, n * 4);
        double want = dc_cpu->sumsq(g, n), got = dc_gpu->sumsq(gg, n);
        printf("  sumsq (%zu) %.17g vs %.17g\n", n, got, want);
        CHECK(fabs(got - want) <= 1e-12 * want, "sumsq of %zu: %.17g, expected %.17g", n, got, want);
        /* queued into device memory: the same value, and the slots beside it untouched */
        double slots[3] = {-1, -1, -1};
        void *gs = dc_dev(slots, sizeof slots);
        dc_gpu->sumsq_to((double *)gs + 1, gg, n);
        slots[1] = got;
        dc_compare_f64("sumsq_to", gs, slots, 3, 0);
        dc_cpu->scale_inplace(g, n, 0.37f), dc_gpu->scale_inplace(gg, n, 0.37f);
        dc_compare("scale_inplace", gg, g, n, 0);
        dc_free(gg);
        free(g);
    }
    /* zero and copy */
    float h[100], z[100] = {0};
    for (int i = 0; i < 100; i++) h[i] = (float)i;
    void *a = dc_dev(h, sizeof h), *b = dc_dev(z, sizeof z);
    dc_gpu->copy(b, a, sizeof h);
    dc_compare("copy", b, h, 100, 0);
    dc_gpu->zero(b, sizeof h);
    dc_compare("zero", b, z, 100, 0);
    dc_free_all();
}

/* conv2d: the GEMM path (18 taps), the CPU's direct path (9 taps), stride 2 without and with
 * padding (non-square kernels), and one whose chunk on the device holds 3 of 4 images (two
 * chunks). */
static void test_conv(void) {
    const tr_conv2d_dims shapes[] = {
        {.N = 3, .C = 2, .H = 7, .W = 6, .OC = 5, .KH = 3, .KW = 3, .S = 1, .P = 1},
        {.N = 2, .C = 1, .H = 9, .W = 9, .OC = 4, .KH = 3, .KW = 3, .S = 1, .P = 1},
        {.N = 2, .C = 3, .H = 8, .W = 9, .OC = 4, .KH = 3, .KW = 2, .S = 2, .P = 0},
        {.N = 2, .C = 2, .H = 9, .W = 7, .OC = 3, .KH = 2, .KW = 3, .S = 2, .P = 1},
        {.N = 4, .C = 40, .H = 112, .W = 112, .OC = 4, .KH = 3, .KW = 3, .S = 1, .P = 1},
    };
    for (int s = 0; s < 5; s++) {
        tr_conv2d_dims d = shapes[s];
        d.OH = (d.H + 2 * d.P - d.KH) / d.S + 1, d.OW = (d.W + 2 * d.P - d.KW) / d.S + 1;
        size_t nx = (size_t)(d.N * d.C * d.H * d.W), nw = (size_t)(d.OC * d.C * d.KH * d.KW);
        size_t ny = (size_t)(d.N * d.OC * d.OH * d.OW);
        float *x = dc_rand(nx, -1, 1), *w = dc_rand(nw, -1, 1), *b = dc_rand((size_t)d.OC, -1, 1), *dy = dc_rand(ny, -1, 1);
        float *y = malloc(ny * 4), *dx = dc_rand(nx, -1, 1), *dw = dc_rand(nw, -1, 1), *db = dc_rand((size_t)d.OC, -1, 1);
        void *rwork = malloc(dc_cpu->conv2d_work(&d)), *gwork = dc_zeros(dc_gpu->conv2d_work(&d));
        void *gx = dc_dev(x, nx * 4), *gw = dc_dev(w, nw * 4), *gb = dc_dev(b, (size_t)d.OC * 4);
        void *gdy = dc_dev(dy, ny * 4), *gy = dc_dev(y, ny * 4), *gdx = dc_dev(dx, nx * 4);
        void *gdw = dc_dev(dw, nw * 4), *gdb = dc_dev(db, (size_t)d.OC * 4);
        char name[96], what[48];
        snprintf(what, sizeof what, "%lldx%lldx%lldx%lld k%lldx%lld s%lld p%lld", (long long)d.N, (long long)d.C,
                 (long long)d.H, (long long)d.W, (long long)d.KH, (long long)d.KW, (long long)d.S, (long long)d.P);
        dc_cpu->conv2d_forward(y, x, w, b, rwork, &d), dc_gpu->conv2d_forward(gy, gx, gw, gb, gwork, &d);
        snprintf(name, sizeof name, "conv2d forward (%s)", what);
        dc_compare(name, gy, y, ny, 1e-5);
        dc_cpu->conv2d_forward(y, x, w, NULL, rwork, &d), dc_gpu->conv2d_forward(gy, gx, gw, NULL, gwork, &d);
        snprintf(name, sizeof name, "conv2d forward, no bias (%s)", what);
        dc_compare(name, gy, y, ny, 1e-5);
        for (int acc = 0; acc < 2; acc++) {
            dc_cpu->conv2d_backward(dx, dw, db, dy, x, w, rwork, &d, acc);
            dc_gpu->conv2d_backward(gdx, gdw, gdb, gdy, gx, gw, gwork, &d, acc);
            snprintf(name, sizeof name, "conv2d backward dx, acc %d (%s)", acc, what);
            dc_compare(name, gdx, dx, nx, 1e-5);
            snprintf(name, sizeof name, "conv2d backward dw += (%s)", what);
            dc_compare(name, gdw, dw, nw, 1e-5);
            snprintf(name, sizeof name, "conv2d backward db += (%s)", what);
            dc_compare(name, gdb, db, (size_t)d.OC, 1e-5);
        }
        /* only the input gradient, and only the parameters' */
        dc_cpu->conv2d_backward(dx, NULL, NULL, dy, x, w, rwork, &d, 0);
        dc_gpu->conv2d_backward(gdx, NULL, NULL, gdy, gx, gw, gwork, &d, 0);
        dc_cpu->conv2d_backward(NULL, dw, db, dy, x, w, rwork, &d, 0);
        dc_gpu->conv2d_backward(NULL, gdw, gdb, gdy, gx, gw, gwork, &d, 0);
        snprintf(name, sizeof name, "conv2d backward dx alone (%s)", what);
        dc_compare(name, gdx, dx, nx, 1e-5);
        snprintf(name, sizeof name, "conv2d backward dw alone (%s)", what);
        dc_compare(name, gdw, dw, nw, 1e-5);
        snprintf(name, sizeof name, "conv2d backward db alone (%s)", what);
        dc_compare(name, gdb, db, (size_t)d.OC, 1e-5);
        dc_free_all();
        free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db), free(rwork);
    }
}

/* max and average pooling: 2x2 stride 2 on odd planes, overlapping 3x3 windows with padding;
 * max-pool's winners equal, a NaN among the inputs. */
static void test_pool(void) {
    const tr_pool2d_dims shapes[] = {{.H = 7, .W = 9, .k = 2, .S = 2, .P = 0},
                                     {.H = 10, .W = 8, .k = 3, .S = 2, .P = 1},
                                     {.H = 5, .W = 6, .k = 3, .S = 1, .P = 1}};
    const int64_t NC = 6;
    for (int s = 0; s < 3; s++) {
        tr_pool2d_dims d = shapes[s];
        d.OH = (d.H + 2 * d.P - d.k) / d.S + 1, d.OW = (d.W + 2 * d.P - d.k) / d.S + 1;
        size_t nx = (size_t)(NC * d.H * d.W), ny = (size_t)(NC * d.OH * d.OW);
        float *x = dc_rand(nx, -1, 1), *dy = dc_rand(ny, -1, 1), *y = malloc(ny * 4), *dx = dc_rand(nx, -1, 1);
        for (size_t i = 7; i < nx; i += 13) x[i] = x[i - 1]; /* ties: the first in scan order wins */
        x[d.W + 1] = NAN; /* plane 0 */
        int32_t *am = malloc(ny * 4), *gam_host = malloc(ny * 4);
        void *gx = dc_dev(x, nx * 4), *gdy = dc_dev(dy, ny * 4), *gy = dc_dev(y, ny * 4), *gdx = dc_dev(dx, nx * 4);
        void *gam = dc_dev(am, ny * 4);
        char name[96];
        dc_cpu->max_pool_forward(y, am, x, NC, &d), dc_gpu->max_pool_forward(gy, gam, gx, NC, &d);
        snprintf(name, sizeof name, "max_pool forward (%lldx%lld k%lld s%lld p%lld)", (long long)d.H, (long long)d.W,
                 (long long)d.k, (long long)d.S, (long long)d.P);
        float *got = malloc(ny * 4);
        CHECK(tr_accel_download(dc_accel, got, gy, ny * 4) == TR_OK, "download");
        int same = 1;
        for (size_t i = 0; i < ny; i++) same &= (isnan(got[i]) && isnan(y[i])) || got[i] == y[i];
        CHECK(same, "%s: values differ", name);
        CHECK(tr_accel_download(dc_accel, gam_host, gam, ny * 4) == TR_OK && memcmp(gam_host, am, ny * 4) == 0,
              "%s: the device's winners differ from the CPU's", name);
        printf("  %-60s equal\n", name);
        free(got);
        for (int acc = 0; acc < 2; acc++) {
            dc_cpu->max_pool_backward(dx, dy, am, NC, &d, acc), dc_gpu->max_pool_backward(gdx, gdy, gam, NC, &d, acc);
            snprintf(name, sizeof name, "max_pool backward, acc %d (k%lld s%lld)", acc, (long long)d.k, (long long)d.S);
            dc_compare(name, gdx, dx, nx, 0);
        }
        /* average pooling of finite values */
        for (size_t i = 0; i < nx; i++)
            if (isnan(x[i])) x[i] = 0.5f;
        CHECK(tr_accel_upload(dc_accel, gx, x, nx * 4) == TR_OK, "upload");
        dc_cpu->avg_pool_forward(y, x, NC, &d), dc_gpu->avg_pool_forward(gy, gx, NC, &d);
        snprintf(name, sizeof name, "avg_pool forward (k%lld s%lld p%lld)", (long long)d.k, (long long)d.S,
                 (long long)d.P);
        dc_compare(name, gy, y, ny, 0);
        dc_cpu->avg_pool_backward(dx, dy, NC, &d), dc_gpu->avg_pool_backward(gdx, gdy, NC, &d);
        snprintf(name, sizeof name, "avg_pool backward += (k%lld s%lld p%lld)", (long long)d.k, (long long)d.S,
                 (long long)d.P);
        dc_compare(name, gdx, dx, nx, 0);
        dc_free_all();
        free(x), free(dy), free(y), free(dx), free(am), free(gam_host);
    }
}

/* batch-norm's pieces in bn_compute's order, on (N, C, S) with planes shorter and longer
 * than a block, and 2-D input (S = 1); the mean is offset so that the deviations cancel. */
static void test_batch_norm(void) {
    const int64_t shapes[3][3] = {{4, 3, 50}, {2, 2, 700}, {6, 5, 1}};
    for (int s = 0; s < 3; s++) {
        int64_t N = shapes[s][0], C = shapes[s][1], S = shapes[s][2], NC = N * C, M = N * S;
        size_t n = (size_t)(N * C * S);
        float *x = dc_rand(n, 99, 101), *dy = dc_rand(n, -1, 1), *gamma = dc_rand((size_t)C, 0.5f, 1.5f);
        float *beta = dc_rand((size_t)C, -1, 1), *rm = dc_rand((size_t)C, -1, 1), *rv = dc_rand((size_t)C, 0.5f, 2);
        float *mean = malloc((size_t)C * 4), *var = malloc((size_t)C * 4), *y = malloc(n * 4), *dx = dc_rand(n, -1, 1);
        float *dg = dc_rand((size_t)C, -1, 1), *dbt = dc_rand((size_t)C, -1, 1);
        double *ps = malloc((size_t)NC * 16), *sums = malloc((size_t)C * 8), *sq = malloc((size_t)C * 8);
        double *dsum = malloc((size_t)C * 16), *gsum = malloc((size_t)C * 16);
        void *gx = dc_dev(x, n * 4), *gdy = dc_dev(dy, n * 4), *ggamma = dc_dev(gamma, (size_t)C * 4);
        void *gbeta = dc_dev(beta, (size_t)C * 4), *grm = dc_dev(rm, (size_t)C * 4), *grv = dc_dev(rv, (size_t)C * 4);
        void *gmean = dc_zeros((size_t)C * 4), *gvar = dc_zeros((size_t)C * 4), *gy = dc_zeros(n * 4);
        void *gdx = dc_dev(dx, n * 4), *gdg = dc_dev(dg, (size_t)C * 4), *gdbt = dc_dev(dbt, (size_t)C * 4);
        void *gps = dc_zeros((size_t)NC * 16), *gsums = dc_zeros((size_t)C * 8), *gsq = dc_zeros((size_t)C * 8);
        void *gdsum = dc_zeros((size_t)C * 16), *ggsum = dc_zeros((size_t)C * 16);
        char name[96], what[32];
        snprintf(what, sizeof what, "%lldx%lldx%lld", (long long)N, (long long)C, (long long)S);
#define BN_NAME(fmt) (snprintf(name, sizeof name, fmt " (%s)", what), name)
        dc_cpu->batch_norm_planes(ps, x, NC, S), dc_gpu->batch_norm_planes(gps, gx, NC, S);
        /* the sums and the squared deviations apart (the sums are 100 S, the deviations about
         * S / 3); the CPU sums blocks of 512 in float, the device in double */
        {
            double *got = malloc((size_t)NC * 16), *a = malloc((size_t)NC * 8), *b = malloc((size_t)NC * 8);
            double *ra = malloc((size_t)NC * 8), *rb = malloc((size_t)NC * 8);
            CHECK(tr_accel_download(dc_accel, got, gps, (size_t)NC * 16) == TR_OK, "download");
            for (int64_t p = 0; p < NC; p++) a[p] = got[2 * p], b[p] = got[2 * p + 1], ra[p] = ps[2 * p], rb[p] = ps[2 * p + 1];
            check_tensor_f64(BN_NAME("batch_norm plane sums"), a, ra, NC, 1e-6);
            check_tensor_f64(BN_NAME("batch_norm plane squared deviations"), b, rb, NC, 1e-5);
            free(got), free(a), free(b), free(ra), free(rb);
        }
        /* the rest from the same plane statistics */
        CHECK(tr_accel_upload(dc_accel, gps, ps, (size_t)NC * 16) == TR_OK, "upload");
        dc_cpu->batch_norm_plane_sums(sums, ps, N, C), dc_gpu->batch_norm_plane_sums(gsums, gps, N, C);
        dc_compare_f64(BN_NAME("batch_norm sums"), gsums, sums, (size_t)C, 0);
        dc_cpu->batch_norm_divide(mean, sums, (double)M, C), dc_gpu->batch_norm_divide(gmean, gsums, (double)M, C);
        dc_compare(BN_NAME("batch_norm mean"), gmean, mean, (size_t)C, 0);
        dc_cpu->batch_norm_plane_sqdevs(sq, ps, mean, N, C, S), dc_gpu->batch_norm_plane_sqdevs(gsq, gps, gmean, N, C, S);
        dc_compare_f64(BN_NAME("batch_norm squared deviations"), gsq, sq, (size_t)C, 1e-12);
        CHECK(tr_accel_upload(dc_accel, gsq, sq, (size_t)C * 8) == TR_OK, "upload");
        dc_cpu->batch_norm_divide(var, sq, (double)M, C), dc_gpu->batch_norm_divide(gvar, gsq, (double)M, C);
        dc_cpu->batch_norm_finish(var, rm, rv, mean, C, 0.1, M, 1e-5), dc_gpu->batch_norm_finish(gvar, grm, grv, gmean, C, 0.1, M, 1e-5);
        dc_compare(BN_NAME("batch_norm invstd"), gvar, var, (size_t)C, 1e-7);
        dc_compare(BN_NAME("batch_norm running mean"), grm, rm, (size_t)C, 1e-7);
        dc_compare(BN_NAME("batch_norm running var"), grv, rv, (size_t)C, 1e-7);
        dc_cpu->batch_norm_finish(rv, NULL, NULL, rm, C, 0.1, M, 1e-5), dc_gpu->batch_norm_finish(grv, NULL, NULL, grm, C, 0.1, M, 1e-5);
        dc_compare(BN_NAME("batch_norm invstd of the running var"), grv, rv, (size_t)C, 1e-7);
        CHECK(tr_accel_upload(dc_accel, gvar, var, (size_t)C * 4) == TR_OK, "upload");
        for (int affine = 0; affine < 2; affine++) {
            const float *g = affine ? gamma : NULL, *b = affine ? beta : NULL;
            const void *gg = affine ? ggamma : NULL, *gb = affine ? gbeta : NULL;
            dc_cpu->batch_norm_forward(y, x, mean, var, g, b, N, C, S), dc_gpu->batch_norm_forward(gy, gx, gmean, gvar, gg, gb, N, C, S);
            /* x a + b cancels: x is about 100, its spread 1 (one rounding of x a is 1e-5 of y) */
            dc_compare(affine ? BN_NAME("batch_norm forward") : BN_NAME("batch_norm forward, no affine"), gy, y, n, 3e-5);
        }
        for (int k = 0; k < 3; k++) { /* batch statistics acc 0 and 1, running ones */
            int batch = k < 2, acc = k == 1;
            dc_cpu->batch_norm_backward(dx, dg, dbt, dy, x, mean, var, gamma, batch, N, C, S, acc);
            dc_gpu->batch_norm_backward(gdx, gdg, gdbt, gdy, gx, gmean, gvar, ggamma, batch, N, C, S, acc);
            snprintf(name, sizeof name, "batch_norm backward dx (batch %d, acc %d; %s)", batch, acc, what);
            dc_compare(name, gdx, dx, n, 1e-5);
            dc_compare(BN_NAME("batch_norm backward dgamma"), gdg, dg, (size_t)C, 1e-5);
            dc_compare(BN_NAME("batch_norm backward dbeta"), gdbt, dbt, (size_t)C, 1e-5); /* float blocks vs double */
        }
        dc_cpu->batch_norm_dsums_all(dsum, dsum + C, dy, x, mean, var, N, C, S);
        dc_gpu->batch_norm_dsums_all(gdsum, (double *)gdsum + C, gdy, gx, gmean, gvar, N, C, S);
        dc_compare_f64(BN_NAME("batch_norm sync sums"), gdsum, dsum, (size_t)C * 2, 1e-5);
        for (int64_t i = 0; i < 2 * C; i++) gsum[i] = 3 * dsum[i] + 1; /* as if from 3 replicas */
        CHECK(tr_accel_upload(dc_accel, gdsum, dsum, (size_t)C * 16) == TR_OK && tr_accel_upload(dc_accel, ggsum, gsum, (size_t)C * 16) == TR_OK,
              "upload");
        dc_cpu->batch_norm_sync_grads(dx, dg, dbt, dy, x, mean, var, gamma, dsum, dsum + C, gsum, gsum + C, 3.0 * (double)M, N,
                                 C, S);
        dc_gpu->batch_norm_sync_grads(gdx, gdg, gdbt, gdy, gx, gmean, gvar, ggamma, gdsum, (double *)gdsum + C, ggsum,
                                 (double *)ggsum + C, 3.0 * (double)M, N, C, S);
        dc_compare(BN_NAME("batch_norm sync dx +="), gdx, dx, n, 1e-5);
        dc_compare(BN_NAME("batch_norm sync dgamma"), gdg, dg, (size_t)C, 1e-6);
        dc_compare(BN_NAME("batch_norm sync dbeta"), gdbt, dbt, (size_t)C, 1e-5);
#undef BN_NAME
        dc_free_all();
        free(x), free(dy), free(gamma), free(beta), free(rm), free(rv), free(mean), free(var), free(y), free(dx);
        free(dg), free(dbt), free(ps), free(sums), free(sq), free(dsum), free(gsum);
    }
}

/* Uploads beside the compute stream (tr_accel_upload_after): what the compute stream queues
 * after one sees the bytes, across staging chunks too; on the emulator, a copy into memory a
 * kernel used after the mark it waits for is refused as the race it would be on a GPU. */
static void test_upload_after(void) {
    if (!tr_accel_can_upload_after(dc_accel)) {
        printf("  upload_after: %s has no copy stream entries (skipped)\n", tr_accel_name(dc_accel));
        return;
    }
    enum { N = 3 << 20 }; /* 12 MiB: three staging chunks */
    float *a = dc_rand(N, -1, 1), *b = dc_rand(N, -1, 1), *want = malloc(N * sizeof *want);
    void *ga = dc_dev(a, N * sizeof(float)), *gb = dc_dev(b, N * sizeof(float));
    void *mark = NULL;
    CHECK(tr_accel_mark(dc_accel, &mark) == TR_OK && mark, "mark: %s", tr_error_msg());
    CHECK(tr_accel_upload_after(dc_accel, gb, a, N * sizeof(float), mark) == TR_OK, "upload_after: %s", tr_error_msg());
    dc_gpu->scale_inplace(gb, N, 0.5f); /* queued after the copy: must see a */
    for (size_t i = 0; i < N; i++) want[i] = a[i] * 0.5f;
    dc_compare("upload_after, then a kernel on its bytes", gb, want, N, 0);
    if (!strncmp(tr_accel_name(dc_accel), "cuda_emu", 8)) {
        /* gb was scaled after `mark`: a copy into it waiting for that mark alone races */
        tr_status st = tr_accel_upload_after(dc_accel, gb, b, sizeof(float), mark);
        CHECK(st == TR_ERR_INTERNAL && strstr(tr_error_msg(), "races with k_scale_inplace"),
              "a racing copy beside the compute stream: status %d, %s", (int)st, tr_error_msg());
        printf("  racing copy refused: %s\n", tr_error_msg());
    }
    CHECK(tr_accel_mark(dc_accel, &mark) == TR_OK, "mark again: %s", tr_error_msg()); /* now after the scale */
    CHECK(tr_accel_upload_after(dc_accel, gb, b, N * sizeof(float), mark) == TR_OK, "upload_after: %s", tr_error_msg());
    dc_gpu->copy(ga, gb, N * sizeof(float));
    dc_compare("upload_after into a buffer after its last kernel's mark", ga, b, N, 0);
    tr_accel_mark_free(dc_accel, mark);
    dc_free_all();
    free(a), free(b), free(want);
}

int main(int argc, char **argv) {
    dc_open(argc, argv);
    test_upload_after();
    test_unary();
    test_binary();
    test_linear();
    test_dropout();
    test_rows();
    test_optim();
    test_norm();
    test_conv();
    test_pool();
    test_batch_norm();
    return dc_close();
}
