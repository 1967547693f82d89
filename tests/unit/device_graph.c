/* A graph on a device, through the test device plugin fake_gpu (its memory is its own
 * checked mappings, its kernels the core's CPU ones), loaded from the build tree:
 * - tr_cpu_kernels() fills every entry of the kernel table (an entry added without its CPU
 *   kernel would make that op fail on every device);
 * - an MLP step (linear, gelu, dropout, linear, cross-entropy, forward and backward) on the
 *   device gives bitwise the CPU graph's loss, logits and gradients; its outputs are device
 *   memory (the fake device refuses to download anything else);
 * - refusals name the op and the device: a host tensor into a device op, a view of host
 *   memory, an op without a device kernel (the fake device with TRAINER_FAKE_GPU_OLD_KERNELS,
 *   as a plugin built before layer_norm's entries), an f64 input, a device that does not exist;
 * - device memory comes back: nothing allocated after the graph and buffers are freed.
 * Skips (77) when the fake_gpu plugin has not been built. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/accel.h"
#include "trainer/trainer.h"

#define FAKE_GPU TRAINER_BINARY_DIR "/test_plugins/fake_gpu/fake_gpu.so"

enum { B = 6, C = 10, H = 7, K = 4 };

/* Every function pointer of the table after `size` is set. */
static void check_table_full(const tr_kernels *k) {
    size_t n = (sizeof *k - offsetof(tr_kernels, zero)) / sizeof(void (*)(void));
    const char *base = (const char *)k + offsetof(tr_kernels, zero);
    int unset = 0;
    for (size_t i = 0; i < n; i++) {
        void (*fn)(void);
        memcpy(&fn, base + i * sizeof fn, sizeof fn);
        if (!fn) unset++;
    }
    CHECK(k->size == sizeof *k && unset == 0, "tr_cpu_kernels: %d of %zu entries unset (size %zu)", unset, n, k->size);
}

typedef struct net {
    tr_tensor *w1, *b1, *w2, *b2, *x, *y;
} net;

/* Leaves and inputs of the net in g, from host values (uploaded on a device graph). */
static void make_net(tr_graph *g, tr_accel *a, net *n, const float *vals, const int32_t *tg) {
    tr_tensor **ts[5] = {&n->w1, &n->b1, &n->w2, &n->b2, &n->x};
    int64_t shapes[5][2] = {{H, C}, {H, 0}, {K, H}, {K, 0}, {B, C}};
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        int nd = shapes[i][1] ? 2 : 1;
        *ts[i] = i < 4 ? tr_graph_leaf(g, TR_F32, nd, shapes[i]) : tr_graph_input(g, TR_F32, nd, shapes[i]);
        size_t bytes = tr_tensor_bytes(*ts[i]);
        if (a) CHECK(tr_accel_upload(a, (*ts[i])->data, vals + at, bytes) == TR_OK, "upload: %s", tr_error_msg());
        else memcpy((*ts[i])->data, vals + at, bytes);
        at += bytes / sizeof(float);
    }
    n->y = tr_graph_input(g, TR_I32, 1, (int64_t[]){B});
    if (a) CHECK(tr_accel_upload(a, n->y->data, tg, B * sizeof *tg) == TR_OK, "upload targets: %s", tr_error_msg());
    else memcpy(n->y->data, tg, B * sizeof *tg);
}

/* Forward and backward; copies the loss, logits and the four gradients into out. */
static void run_net(tr_graph *g, tr_accel *a, const float *vals, const int32_t *tg, float *out) {
    net n;
    tr_graph_set_rng(g, 11, 3, 40);
    make_net(g, a, &n, vals, tg);
    tr_tensor *h = tr_dropout(g, tr_gelu(g, tr_linear(g, n.x, n.w1, n.b1), TR_GELU_TANH), 0.25);
    tr_tensor *logits = tr_linear(g, h, n.w2, n.b2);
    tr_tensor *loss = tr_cross_entropy(g, logits, n.y, B, -100, 0.1);
    CHECK(loss && tr_backward(g, loss, NULL) == TR_OK, "net step: %s", tr_error_msg());
    if (!loss) return;
    const tr_tensor *src[6] = {loss, logits, n.w1, n.b1, n.w2, n.b2};
    size_t at = 0;
    for (int i = 0; i < 6; i++) {
        const void *p = i < 2 ? src[i]->data : src[i]->grad;
        size_t bytes = tr_tensor_bytes(src[i]);
        if (a) CHECK(tr_accel_download(a, out + at, p, bytes) == TR_OK, "download %d: %s", i, tr_error_msg());
        else memcpy(out + at, p, bytes);
        at += bytes / sizeof(float);
    }
}

int main(void) {
    check_table_full(tr_cpu_kernels());
    if (access(FAKE_GPU, R_OK) != 0) test_skip(FAKE_GPU " not built (build the fake_gpu target first)");
    setenv("TRAINER_FAKE_GPUS", "1", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("TRAINER_FAKE_GPU_DISCOVERY_ONLY");
    setenv("TRAINER_FAKE_GPU_OLD_KERNELS", "1", 1); /* a table without layer_norm's entries */
    tr_plugin *p = NULL;
    CHECK(tr_plugin_open(FAKE_GPU, "test", &p) == TR_OK, "open fake_gpu: %s", tr_error_msg());
    if (!p) return test_finish();
    tr_accel *a = NULL;
    CHECK(tr_accel_open(p, 3, &a) != TR_OK && strstr(tr_error_msg(), "fake_gpu: no GPU 3 (1 visible)"),
          "opening a GPU that does not exist: %s", tr_error_msg());
    CHECK(tr_accel_open(p, 0, &a) == TR_OK && a, "open fake_gpu:0: %s", tr_error_msg());
    if (!a) return test_finish();
    CHECK(strcmp(tr_accel_name(a), "fake_gpu:0") == 0, "name %s", tr_accel_name(a));

    enum { NV = H * C + H + K * H + K + B * C, NO = 1 + B * K + H * C + H + K * H + K };
    float vals[NV], cpu[NO], dev[NO];
    for (int i = 0; i < NV; i++) vals[i] = (float)((i * 37 % 29) - 14) / 17.0f;
    int32_t tg[B] = {0, 3, 1, 2, 3, 0};
    tr_graph *gc, *gd;
    CHECK(tr_graph_create(&gc, 0) == TR_OK && tr_graph_create(&gd, 0) == TR_OK, "graphs");
    CHECK(tr_graph_set_accel(gd, a) == TR_OK, "set accel: %s", tr_error_msg());
    run_net(gc, NULL, vals, tg, cpu);
    memset(dev, 0, sizeof dev);
    run_net(gd, a, vals, tg, dev);
    CHECK(memcmp(cpu, dev, sizeof cpu) == 0, "device step differs from the CPU's (loss %g vs %g)", dev[0], cpu[0]);
    CHECK(cpu[0] > 0.5f && cpu[0] < 5.0f, "loss %g", cpu[0]);
    CHECK(tr_accel_allocated(a) > 0, "the device graph's arena is device memory");

    /* Refusals. A host tensor into a device op. */
    tr_graph_reset(gd);
    float hx[4] = {1, -2, 3, -4};
    tr_tensor host = tr_tensor_view(hx, TR_F32, 1, (int64_t[]){4});
    check_op_error(gd, __FILE__, __LINE__, tr_relu(gd, &host), "relu: input 0 is in host memory", "runs on fake_gpu:0");
    check_op_error(gd, __FILE__, __LINE__, tr_graph_view(gd, hx, TR_F32, 1, (int64_t[]){4}), "a view of host memory on fake_gpu:0",
                   NULL);
    tr_tensor *rows = tr_graph_input(gd, TR_F32, 2, (int64_t[]){2, 4});
    check_op_error(gd, __FILE__, __LINE__, tr_layer_norm(gd, rows, NULL, NULL, 1e-5),
                   "layer_norm: device fake_gpu:0 has no kernel", NULL);
    tr_tensor *d64 = tr_graph_input(gd, TR_F64, 1, (int64_t[]){4});
    check_op_error(gd, __FILE__, __LINE__, tr_relu(gd, d64), "relu: input 0 has dtype f64; on fake_gpu:0 ops take f32", NULL);
    /* The device's copies refuse host memory on the device side. */
    CHECK(tr_accel_upload(a, hx, hx, sizeof hx) != TR_OK && strstr(tr_error_msg(), "which is not device memory"),
          "upload to host memory: %s", tr_error_msg());
    /* A CPU graph refuses device tensors. */
    tr_tensor *dt = tr_graph_input(gd, TR_F32, 1, (int64_t[]){4});
    tr_graph_reset(gc);
    check_op_error(gc, __FILE__, __LINE__, tr_relu(gc, dt), "relu: input 0 is in device memory but the graph runs on the CPU",
                   NULL);

    tr_graph_destroy(gd);
    tr_graph_destroy(gc);
    CHECK(tr_accel_allocated(a) == 0, "%zu bytes of device memory left allocated", tr_accel_allocated(a));
    tr_accel_close(a);
    tr_plugin_close(p);
    return test_finish();
}
