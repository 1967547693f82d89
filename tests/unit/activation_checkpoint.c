/* Activation checkpointing in the graph (tr_graph_block, tr_graph_set_checkpointing):
 * - a chain of 4 residual blocks (layer norm, linear, gelu, dropout 0.2, linear) and a head,
 *   3 steps: with every block checkpointed, and every 2nd, the loss and every parameter's
 *   gradient are the bits of the run without; the gradient-ready hook fires once per
 *   parameter, in the same order; the use hook is asked again in backward (in_backward 1) for
 *   the recomputed blocks' parameters (not the last block's, whose first run backward finds
 *   still in the scratch); the activation peak is below half of the run without
 *   (every 2nd: in between); the steps after the first allocate nothing; a forward in grad
 *   mode off gives the same loss and records nothing, and with or without checkpointing peaks
 *   the same, below a third of training's (every block runs in the scratch then);
 * - a conv block with batch-norm (the cnn model's block): the same gradients and running
 *   statistics updated once (the second run in backward leaves them);
 * - the same chain on a device graph (the fake_gpu test device, when built): the same bits
 *   with and without checkpointing, a lower device activation peak;
 * - refusals: a block that returns its input, a parameter as a block input. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/accel.h"
#include "trainer/trainer.h"

#define FAKE_GPU TRAINER_BINARY_DIR "/test_plugins/fake_gpu/fake_gpu.so"

enum { N = 24, C = 16, F = 48, K = 5, L = 4, STEPS = 3, MAXP = 64, MAXLOG = 4096 };

typedef struct hooks {
    int ready[MAXLOG], n_ready;     /* parameters in the order their gradients were final */
    int back_uses[MAXP];            /* use-hook calls in backward, per parameter */
} hooks;

static void on_ready(void *user, int p) {
    hooks *h = user;
    if (h->n_ready < MAXLOG) h->ready[h->n_ready++] = p;
}

static tr_status on_use(void *user, int p, int in_backward, uint64_t op) {
    (void)op;
    hooks *h = user;
    if (in_backward && p < MAXP) h->back_uses[p]++;
    return TR_OK;
}

/* The chain's tensors: per block ln w, b, fc1 w, b, fc2 w, b; the head w, b. */
typedef struct chain_args {
    tr_tensor *t[6];
} chain_args;

static tr_tensor *chain_block(tr_graph *g, tr_tensor *const *in, int n_in, const void *user) {
    (void)n_in;
    const chain_args *a = user;
    tr_tensor *h = tr_layer_norm(g, in[0], a->t[0], a->t[1], 1e-5);
    h = tr_dropout(g, tr_gelu(g, tr_linear(g, h, a->t[2], a->t[3]), TR_GELU_TANH), 0.2);
    return tr_add(g, in[0], tr_linear(g, h, a->t[4], a->t[5]));
}

/* One step of the chain over tensors t[0..6L+2) (the x and targets given): the loss. */
static tr_tensor *chain_forward(tr_graph *g, tr_tensor **t, tr_tensor *x, tr_tensor *y) {
    for (int l = 0; l < L; l++) {
        chain_args a;
        memcpy(a.t, t + 6 * l, sizeof a.t);
        x = tr_graph_block(g, chain_block, (tr_tensor *[]){x}, 1, &a, sizeof a);
    }
    return tr_cross_entropy(g, tr_linear(g, x, t[6 * L], t[6 * L + 1]), y, N, -100, 0.0);
}

static tr_params *chain_params(void) {
    tr_params *P;
    CHECK(tr_params_create(&P) == TR_OK, "params");
    char name[32];
    int idx;
    for (int l = 0; l < L; l++) {
        static const char *what[6] = {"ln.w", "ln.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"};
        int64_t shapes[6][2] = {{C, 0}, {C, 0}, {F, C}, {F, 0}, {C, F}, {C, 0}};
        for (int i = 0; i < 6; i++) {
            snprintf(name, sizeof name, "%d.%s", l, what[i]);
            tr_init init = i == 0 ? TR_INIT_ONES : i == 1 ? TR_INIT_ZEROS : (i & 1) ? TR_INIT_FAN_IN_UNIFORM : TR_INIT_KAIMING_UNIFORM;
            CHECK(tr_params_add(P, name, shapes[i][1] ? 2 : 1, shapes[i], init, i == 3 ? C : F, &idx) == TR_OK, "%s", name);
        }
    }
    CHECK(tr_params_add(P, "head.w", 2, (int64_t[]){K, C}, TR_INIT_KAIMING_UNIFORM, 0, &idx) == TR_OK, "head.w");
    CHECK(tr_params_add(P, "head.b", 1, (int64_t[]){K}, TR_INIT_FAN_IN_UNIFORM, C, &idx) == TR_OK, "head.b");
    CHECK(tr_params_finalize(P, 7) == TR_OK, "finalize: %s", tr_error_msg());
    return P;
}

typedef struct result {
    float loss[STEPS];
    float *grad;                 /* the last step's flat gradient */
    size_t peak;
    uint64_t allocs_late;        /* allocations during the last step */
    hooks h;
} result;

/* STEPS steps of the chain on the CPU with `every` (0: no checkpointing). */
static void run_chain(int every, result *r) {
    memset(r, 0, sizeof *r);
    tr_params *P = chain_params();
    int np = tr_params_count(P);
    tr_tensor *t[6 * L + 2];
    for (int i = 0; i < np; i++) t[i] = tr_params_get(P, i);
    float xs[N * C];
    int32_t ys[N];
    for (int i = 0; i < N * C; i++) xs[i] = (float)test_value((uint64_t)i, 1);
    for (int i = 0; i < N; i++) ys[i] = i % K;
    tr_graph *g;
    CHECK(tr_graph_create(&g, 0) == TR_OK, "graph");
    tr_graph_set_params(g, P);
    tr_graph_set_grad_hook(g, on_ready, &r->h);
    tr_graph_set_use_hook(g, on_use, &r->h);
    tr_graph_set_checkpointing(g, every);
    CHECK(tr_graph_checkpointing(g) == every, "checkpointing %d", tr_graph_checkpointing(g));
    for (int s = 0; s < STEPS; s++) {
        uint64_t before = tr_alloc_count();
        tr_graph_reset(g);
        tr_graph_set_rng(g, 5, (uint64_t)s, 100);
        r->h.n_ready = 0;
        memset(r->h.back_uses, 0, sizeof r->h.back_uses);
        tr_params_zero_grad(P);
        tr_tensor *x = tr_graph_view(g, xs, TR_F32, 2, (int64_t[]){N, C});
        tr_tensor *y = tr_graph_view(g, ys, TR_I32, 1, (int64_t[]){N});
        tr_tensor *loss = chain_forward(g, t, x, y);
        CHECK(loss && tr_backward(g, loss, NULL) == TR_OK, "every %d step %d: %s", every, s, tr_error_msg());
        if (!loss) break;
        r->loss[s] = *(float *)loss->data;
        if (s == STEPS - 1) r->allocs_late = tr_alloc_count() - before;
        for (int i = 0; i < np; i++) CHECK(t[i]->uses == 0, "every %d: parameter %d has %d uses left", every, i, t[i]->uses);
        /* a small SGD step, so the steps differ */
        float *w = tr_params_data(P), *gr = tr_params_grad(P);
        for (size_t i = 0; i < tr_params_numel(P); i++) w[i] -= 0.1f * gr[i];
    }
    r->grad = malloc(tr_params_numel(P) * sizeof(float));
    memcpy(r->grad, tr_params_grad(P), tr_params_numel(P) * sizeof(float));
    r->peak = tr_graph_activation_peak(g);
    tr_graph_destroy(g);
    tr_params_destroy(P);
}

static size_t check_chain(void) {
    result base, ck1, ck2;
    run_chain(0, &base);
    run_chain(1, &ck1);
    run_chain(2, &ck2);
    size_t n = 0;
    {
        tr_params *P = chain_params();
        n = tr_params_numel(P);
        tr_params_destroy(P);
    }
    const result *cks[2] = {&ck1, &ck2};
    for (int c = 0; c < 2; c++) {
        const result *r = cks[c];
        CHECK(memcmp(r->loss, base.loss, sizeof base.loss) == 0, "every %d: losses %.9g %.9g %.9g, without %.9g %.9g %.9g", c + 1,
              r->loss[0], r->loss[1], r->loss[2], base.loss[0], base.loss[1], base.loss[2]);
        CHECK(memcmp(r->grad, base.grad, n * sizeof(float)) == 0, "every %d: gradients differ from the run without", c + 1);
        CHECK(r->h.n_ready == 6 * L + 2 && memcmp(r->h.ready, base.h.ready, sizeof(int) * (size_t)r->h.n_ready) == 0,
              "every %d: %d ready hooks (without: %d), in another order", c + 1, r->h.n_ready, base.h.n_ready);
        CHECK(r->allocs_late == 0, "every %d: %llu allocations in the last step", c + 1, (unsigned long long)r->allocs_late);
    }
    /* Each parameter's gradient final exactly once. */
    int seen[6 * L + 2] = {0};
    for (int i = 0; i < ck1.h.n_ready; i++) seen[ck1.h.ready[i]]++;
    for (int p = 0; p < 6 * L + 2; p++) CHECK(seen[p] == 1, "parameter %d ready %d times", p, seen[p]);
    /* Recomputed blocks ask for their parameters again in backward: block 0's fc1.w
     * (parameter 2) is read by one op in forward and by its backward; checkpointed, also by
     * the second run. Block 1 (parameter 8) is checkpointed under every 1, not every 2. */
    CHECK(ck1.h.back_uses[2] == base.h.back_uses[2] + 1, "fc1.w of block 0: %d uses in backward, without %d",
          ck1.h.back_uses[2], base.h.back_uses[2]);
    CHECK(ck1.h.back_uses[8] == base.h.back_uses[8] + 1 && ck2.h.back_uses[8] == base.h.back_uses[8],
          "fc1.w of block 1: %d (every 1), %d (every 2) uses in backward, without %d", ck1.h.back_uses[8],
          ck2.h.back_uses[8], base.h.back_uses[8]);
    /* The last block's first run is still in the scratch when backward starts: not run again. */
    CHECK(ck1.h.back_uses[6 * (L - 1) + 2] == base.h.back_uses[6 * (L - 1) + 2], "fc1.w of the last block: %d uses in "
          "backward, without %d", ck1.h.back_uses[6 * (L - 1) + 2], base.h.back_uses[6 * (L - 1) + 2]);
    printf("activation peak: %zu bytes without checkpointing, %zu every block, %zu every 2nd\n", base.peak, ck1.peak,
           ck2.peak);
    CHECK(ck1.peak * 2 < base.peak, "peak %zu with checkpointing, %zu without", ck1.peak, base.peak);
    CHECK(ck1.peak < ck2.peak && ck2.peak < base.peak, "peaks %zu < %zu < %zu", ck1.peak, ck2.peak, base.peak);
    free(base.grad);
    free(ck1.grad);
    free(ck2.grad);
    return base.peak;
}

/* Grad mode off (validation): the loss of one forward, and the peak; every block runs in the
 * scratch, checkpointed or not, keeping only its output. */
static size_t run_eval(int every, float *loss_out) {
    tr_params *P = chain_params();
    tr_tensor *t[6 * L + 2];
    for (int i = 0; i < 6 * L + 2; i++) t[i] = tr_params_get(P, i);
    float xs[N * C];
    int32_t ys[N];
    for (int i = 0; i < N * C; i++) xs[i] = (float)test_value((uint64_t)i, 3);
    for (int i = 0; i < N; i++) ys[i] = (i * 3) % K;
    tr_graph *g;
    CHECK(tr_graph_create(&g, 0) == TR_OK, "graph");
    tr_graph_set_params(g, P);
    tr_graph_set_checkpointing(g, every);
    tr_graph_set_training(g, 0);
    tr_graph_set_grad_enabled(g, 0);
    tr_tensor *loss = chain_forward(g, t, tr_graph_view(g, xs, TR_F32, 2, (int64_t[]){N, C}),
                                    tr_graph_view(g, ys, TR_I32, 1, (int64_t[]){N}));
    CHECK(loss && tr_graph_nodes(g) == 0, "eval, every %d: %s", every, loss ? "recorded nodes" : tr_error_msg());
    *loss_out = loss ? *(float *)loss->data : -1.0f;
    size_t peak = tr_graph_activation_peak(g);
    tr_graph_destroy(g);
    tr_params_destroy(P);
    return peak;
}

static void check_eval(size_t train_peak) {
    float l0, l1;
    size_t p0 = run_eval(0, &l0), p1 = run_eval(1, &l1);
    CHECK(l0 == l1 && l0 > 0, "eval loss %.9g checkpointed, %.9g not", l1, l0);
    printf("eval activation peak: %zu bytes without checkpointing, %zu with; training %zu\n", p0, p1, train_peak);
    CHECK(p0 == p1, "eval peak %zu with checkpointing, %zu without: not the same", p1, p0);
    CHECK(p0 * 3 < train_peak, "eval peak %zu, a training forward and backward's %zu", p0, train_peak);
}

/* The cnn model's block: conv 3x3, batch-norm, max-pool 2, relu. */
typedef struct conv_args {
    tr_tensor *w, *b, *gamma, *beta, *rm, *rv;
} conv_args;

static tr_tensor *conv_block(tr_graph *g, tr_tensor *const *in, int n_in, const void *user) {
    (void)n_in;
    const conv_args *a = user;
    tr_tensor *h = tr_conv2d(g, in[0], a->w, a->b, 1, 1);
    return tr_batch_norm_pool_relu(g, h, a->gamma, a->beta, a->rm, a->rv, 0.1, 1e-5);
}

/* Two steps of two conv blocks and a linear head: gradients, then running statistics. */
static void run_conv(int every, float *grad, float *stats, size_t *n_grad, size_t *n_stats) {
    tr_params *P;
    CHECK(tr_params_create(&P) == TR_OK, "params");
    int idx[14];
    int64_t ch[3] = {2, 4, 4};
    for (int l = 0; l < 2; l++) {
        int64_t oc = ch[l + 1], ic = ch[l];
        char name[32];
        snprintf(name, sizeof name, "conv%d.w", l);
        CHECK(tr_params_add(P, name, 4, (int64_t[]){oc, ic, 3, 3}, TR_INIT_KAIMING_UNIFORM, 0, &idx[6 * l]) == TR_OK, "%s", name);
        snprintf(name, sizeof name, "conv%d.b", l);
        CHECK(tr_params_add(P, name, 1, &oc, TR_INIT_FAN_IN_UNIFORM, (double)(ic * 9), &idx[6 * l + 1]) == TR_OK, "%s", name);
        snprintf(name, sizeof name, "bn%d.w", l);
        CHECK(tr_params_add(P, name, 1, &oc, TR_INIT_ONES, 0, &idx[6 * l + 2]) == TR_OK, "%s", name);
        snprintf(name, sizeof name, "bn%d.b", l);
        CHECK(tr_params_add(P, name, 1, &oc, TR_INIT_ZEROS, 0, &idx[6 * l + 3]) == TR_OK, "%s", name);
        snprintf(name, sizeof name, "bn%d.rm", l);
        CHECK(tr_params_add_buffer(P, name, 1, &oc, TR_INIT_ZEROS, 0, &idx[6 * l + 4]) == TR_OK, "%s", name);
        snprintf(name, sizeof name, "bn%d.rv", l);
        CHECK(tr_params_add_buffer(P, name, 1, &oc, TR_INIT_ONES, 0, &idx[6 * l + 5]) == TR_OK, "%s", name);
    }
    CHECK(tr_params_add(P, "head.w", 2, (int64_t[]){3, 16}, TR_INIT_KAIMING_UNIFORM, 0, &idx[12]) == TR_OK, "head.w");
    CHECK(tr_params_add(P, "head.b", 1, (int64_t[]){3}, TR_INIT_FAN_IN_UNIFORM, 16, &idx[13]) == TR_OK, "head.b");
    CHECK(tr_params_finalize(P, 3) == TR_OK, "finalize: %s", tr_error_msg());
    enum { B = 4, HW = 8 };
    float xs[B * 2 * HW * HW];
    int32_t ys[B] = {0, 2, 1, 2};
    for (int i = 0; i < B * 2 * HW * HW; i++) xs[i] = (float)test_value((uint64_t)i, 2);
    tr_graph *g;
    CHECK(tr_graph_create(&g, 0) == TR_OK, "graph");
    tr_graph_set_params(g, P);
    tr_graph_set_checkpointing(g, every);
    for (int s = 0; s < 2; s++) {
        tr_graph_reset(g);
        tr_params_zero_grad(P);
        tr_tensor *h = tr_graph_view(g, xs, TR_F32, 4, (int64_t[]){B, 2, HW, HW});
        for (int l = 0; l < 2; l++) {
            conv_args a = {tr_params_get(P, idx[6 * l]), tr_params_get(P, idx[6 * l + 1]), tr_params_get(P, idx[6 * l + 2]),
                           tr_params_get(P, idx[6 * l + 3]), tr_params_buffer(P, idx[6 * l + 4]),
                           tr_params_buffer(P, idx[6 * l + 5])};
            h = tr_graph_block(g, conv_block, (tr_tensor *[]){h}, 1, &a, sizeof a);
        }
        h = tr_linear(g, tr_flatten(g, h, 1), tr_params_get(P, idx[12]), tr_params_get(P, idx[13]));
        tr_tensor *loss = tr_cross_entropy(g, h, tr_graph_view(g, ys, TR_I32, 1, (int64_t[]){B}), B, -100, 0.0);
        CHECK(loss && tr_backward(g, loss, NULL) == TR_OK, "conv every %d: %s", every, tr_error_msg());
    }
    *n_grad = tr_params_numel(P);
    *n_stats = tr_params_buffers_numel(P);
    memcpy(grad, tr_params_grad(P), *n_grad * sizeof *grad);
    memcpy(stats, tr_params_buffers_data(P), *n_stats * sizeof *stats);
    tr_graph_destroy(g);
    tr_params_destroy(P);
}

static void check_conv(void) {
    static float g0[4096], g1[4096], s0[256], s1[256];
    size_t ng, ns;
    run_conv(0, g0, s0, &ng, &ns);
    run_conv(1, g1, s1, &ng, &ns);
    CHECK(memcmp(g0, g1, ng * sizeof *g0) == 0, "conv blocks: gradients differ with checkpointing");
    CHECK(memcmp(s0, s1, ns * sizeof *s0) == 0, "conv blocks: running statistics differ with checkpointing "
          "(updated again in backward?): running_mean[0] %.9g vs %.9g", s1[0], s0[0]);
    CHECK(s0[0] != 0.0f, "the running mean moved (%g)", s0[0]);
}

/* The chain on a device graph with leaves for parameters (uploaded): loss and gradients. */
static size_t run_device(tr_accel *a, int every, float *out, size_t *n_out) {
    tr_graph *g;
    CHECK(tr_graph_create(&g, 0) == TR_OK && tr_graph_set_accel(g, a) == TR_OK, "device graph: %s", tr_error_msg());
    tr_graph_set_checkpointing(g, every);
    tr_graph_set_rng(g, 5, 1, 0);
    tr_params *P = chain_params(); /* its host values, uploaded into leaves */
    int np = tr_params_count(P);
    tr_tensor *t[6 * L + 2];
    for (int i = 0; i < np; i++) {
        tr_tensor *p = tr_params_get(P, i);
        t[i] = tr_graph_leaf(g, TR_F32, p->ndim, p->shape);
        CHECK(t[i] && tr_accel_upload(a, t[i]->data, p->data, tr_tensor_bytes(p)) == TR_OK, "upload %d", i);
    }
    float xs[N * C];
    int32_t ys[N];
    for (int i = 0; i < N * C; i++) xs[i] = (float)test_value((uint64_t)i, 1);
    for (int i = 0; i < N; i++) ys[i] = i % K;
    tr_tensor *x = tr_graph_input_from(g, xs, TR_F32, 2, (int64_t[]){N, C});
    tr_tensor *y = tr_graph_input_from(g, ys, TR_I32, 1, (int64_t[]){N});
    tr_tensor *loss = chain_forward(g, t, x, y);
    CHECK(loss && tr_backward(g, loss, NULL) == TR_OK, "device, every %d: %s", every, tr_error_msg());
    size_t at = 0;
    if (loss) {
        CHECK(tr_accel_download(a, out, loss->data, sizeof(float)) == TR_OK, "loss");
        at = 1;
        for (int i = 0; i < np; i++) {
            CHECK(tr_accel_download(a, out + at, t[i]->grad, tr_tensor_bytes(t[i])) == TR_OK, "grad %d", i);
            at += (size_t)tr_tensor_numel(t[i]);
        }
    }
    *n_out = at;
    size_t peak = tr_graph_activation_peak(g);
    tr_graph_destroy(g);
    tr_params_destroy(P);
    return peak;
}

static void check_device(void) {
    if (access(FAKE_GPU, R_OK) != 0) {
        printf("skipped the device graph: " FAKE_GPU " not built\n");
        return;
    }
    setenv("TRAINER_FAKE_GPUS", "1", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("TRAINER_FAKE_GPU_DISCOVERY_ONLY");
    unsetenv("TRAINER_FAKE_GPU_OLD_KERNELS");
    tr_plugin *p = NULL;
    tr_accel *a = NULL;
    CHECK(tr_plugin_open(FAKE_GPU, "test", &p) == TR_OK && tr_accel_open(p, 0, &a) == TR_OK, "fake_gpu: %s", tr_error_msg());
    if (!a) return;
    static float d0[8192], d1[8192];
    size_t n0, n1;
    size_t p0 = run_device(a, 0, d0, &n0), p1 = run_device(a, 1, d1, &n1);
    CHECK(n0 > 1 && n0 == n1 && memcmp(d0, d1, n0 * sizeof *d0) == 0, "device: loss %.9g vs %.9g, or gradients differ", d1[0],
          d0[0]);
    printf("device activation peak: %zu bytes without checkpointing, %zu with\n", p0, p1);
    CHECK(p1 < p0, "device peak %zu with checkpointing, %zu without", p1, p0);
    CHECK(tr_accel_allocated(a) == 0, "%zu bytes of device memory left", tr_accel_allocated(a));
    tr_accel_close(a);
    tr_plugin_close(p);
}

static tr_tensor *returns_input(tr_graph *g, tr_tensor *const *in, int n_in, const void *user) {
    (void)g, (void)n_in, (void)user;
    return in[0];
}

static void check_refusals(void) {
    tr_params *P = chain_params();
    tr_graph *g;
    CHECK(tr_graph_create(&g, 0) == TR_OK, "graph");
    tr_graph_set_params(g, P);
    tr_graph_set_checkpointing(g, 1);
    float xs[N * C] = {0};
    tr_tensor *x = tr_graph_view(g, xs, TR_F32, 2, (int64_t[]){N, C});
    CHECK_OP_ERROR(g, tr_graph_block(g, returns_input, (tr_tensor *[]){x}, 1, NULL, 0), "block: the block returned its input",
                   NULL);
    tr_tensor *w = tr_params_get(P, 2);
    CHECK_OP_ERROR(g, tr_graph_block(g, returns_input, (tr_tensor *[]){w}, 1, NULL, 0), "block: input 0 is a parameter", NULL);
    tr_graph_destroy(g);
    tr_params_destroy(P);
}

int main(void) {
    tr_set_num_threads(1);
    check_eval(check_chain());
    check_conv();
    check_refusals();
    check_device();
    return test_finish();
}
