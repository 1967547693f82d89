/* No heap allocation in the steady state: after a warm-up step, training steps of the same
 * shape (forward, backward, clipping, AdamW) make no allocation through the core
 * (tr_alloc_count), with 1 and 2 threads. Outside sanitizer builds malloc is interposed here
 * too: with 1 thread no library allocates at all; with 2, Debian's OpenBLAS allocates a job
 * buffer inside its threaded GEMM driver (sgemm_thread_*), which is OpenBLAS's and is
 * reported, not asserted. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"

#if defined(__SANITIZE_ADDRESS__)
#define COUNT_LIBC 0
#else
#define COUNT_LIBC 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static atomic_long libc_allocs;
void *malloc(size_t n) { atomic_fetch_add(&libc_allocs, 1); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { atomic_fetch_add(&libc_allocs, 1); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { atomic_fetch_add(&libc_allocs, 1); return __libc_realloc(p, n); }
int posix_memalign(void **out, size_t align, size_t n) {
    atomic_fetch_add(&libc_allocs, 1);
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12;
}
void free(void *p) { __libc_free(p); }
#endif

enum { B = 8, T = 16, C = 32, V = 50, NH = 4 };

typedef struct net { tr_params *P; tr_graph *g; tr_optim *opt; int32_t ids[B * T], y[B * T]; float img[B * 1 * 8 * 8]; int32_t cls[B]; } net;

#define PRM(n) tr_params_get(N->P, tr_params_find(N->P, n))

static void step(net *N, int64_t s) {
    tr_graph *g = N->g;
    tr_graph_reset(g);
    tr_graph_set_rng(g, 7, (uint64_t)s, 0);
    tr_tensor *ids = tr_graph_input(g, TR_I32, 2, (int64_t[]){B, T});
    tr_tensor *y = tr_graph_input(g, TR_I32, 1, (int64_t[]){B * T});
    tr_tensor *img = tr_graph_input(g, TR_F32, 4, (int64_t[]){B, 1, 8, 8});
    tr_tensor *cls = tr_graph_input(g, TR_I32, 1, (int64_t[]){B});
    memcpy(ids->data, N->ids, sizeof N->ids);
    memcpy(y->data, N->y, sizeof N->y);
    memcpy(img->data, N->img, sizeof N->img);
    memcpy(cls->data, N->cls, sizeof N->cls);
    /* transformer block LM */
    tr_tensor *x = tr_add(g, tr_embedding(g, ids, PRM("wte")), PRM("wpe"));
    tr_tensor *h = tr_layer_norm(g, x, PRM("ln.weight"), PRM("ln.bias"), 1e-5);
    tr_tensor *qkv = tr_linear(g, h, PRM("qkv.weight"), PRM("qkv.bias"));
    tr_tensor *a = tr_attention(g, tr_slice(g, qkv, 2, 0, C), tr_slice(g, qkv, 2, C, C),
                                tr_slice(g, qkv, 2, 2 * C, C), NH, 1);
    x = tr_add(g, x, tr_dropout(g, a, 0.1));
    h = tr_gelu(g, tr_linear(g, x, PRM("fc.weight"), PRM("fc.bias")), TR_GELU_TANH);
    tr_tensor *logits = tr_linear(g, h, PRM("head.weight"), NULL);
    tr_tensor *l1 = tr_cross_entropy(g, logits, y, B * T, -100, 0.1);
    /* CNN */
    h = tr_conv2d(g, img, PRM("conv.weight"), PRM("conv.bias"), 1, 1);
    h = tr_batch_norm(g, h, PRM("bn.weight"), PRM("bn.bias"),
                      tr_params_buffer(N->P, 0), tr_params_buffer(N->P, 1), 0.1, 1e-5);
    h = tr_flatten(g, tr_max_pool2d(g, tr_relu(g, h), 2, 2, 0), 1);
    tr_tensor *l2 = tr_cross_entropy(g, tr_linear(g, h, PRM("cls.weight"), PRM("cls.bias")), cls, B, -100, 0);
    tr_tensor *loss = tr_add(g, l1, l2);
    tr_params_zero_grad(N->P);
    if (tr_backward(g, loss, NULL) != TR_OK) {
        test_fail_at(__FILE__, __LINE__, "step failed: %s", tr_error_msg());
        return;
    }
    size_t n = tr_params_numel(N->P);
    tr_clip_grad_norm(tr_params_grad(N->P), n, 1.0, tr_grad_sumsq(tr_params_grad(N->P), n));
    tr_optim_step(N->opt, tr_params_data(N->P), tr_params_grad(N->P), n, 1e-3);
}

static void run(int threads) {
    net N_;
    net *N = &N_;
    tr_set_num_threads(threads);
    tr_params_create(&N->P);
    struct { const char *n; int nd; int64_t s[4]; } specs[] = {
        {"wte", 2, {V, C}}, {"wpe", 2, {T, C}}, {"ln.weight", 1, {C}}, {"ln.bias", 1, {C}},
        {"qkv.weight", 2, {3 * C, C}}, {"qkv.bias", 1, {3 * C}}, {"fc.weight", 2, {C, C}},
        {"fc.bias", 1, {C}}, {"head.weight", 2, {V, C}}, {"conv.weight", 4, {4, 1, 3, 3}},
        {"conv.bias", 1, {4}}, {"bn.weight", 1, {4}}, {"bn.bias", 1, {4}},
        {"cls.weight", 2, {3, 64}}, {"cls.bias", 1, {3}}};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        tr_params_add(N->P, specs[i].n, specs[i].nd, specs[i].s, TR_INIT_UNIFORM, 0.2, NULL);
    tr_params_add_buffer(N->P, "bn.running_mean", 1, (int64_t[]){4}, TR_INIT_ZEROS, 0, NULL);
    tr_params_add_buffer(N->P, "bn.running_var", 1, (int64_t[]){4}, TR_INIT_ONES, 0, NULL);
    CHECK(tr_params_finalize(N->P, 3) == TR_OK, "finalize");
    tr_graph_create(&N->g, 0);
    tr_graph_set_params(N->g, N->P);
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    tr_optim_create(&N->opt, &oc, tr_params_numel(N->P));
    for (int i = 0; i < B * T; i++) { N->ids[i] = (i * 7) % V; N->y[i] = (i * 11 + 3) % V; }
    for (int i = 0; i < B; i++) N->cls[i] = i % 3;
    tr_rng_fill_uniform(N->img, sizeof N->img / sizeof(float), 1, 1, 0, -1, 1);

    step(N, 0); /* warm-up: the arena grows to the step's peak */
    step(N, 1);
    uint64_t core0 = tr_alloc_count();
#if COUNT_LIBC
    long libc0 = atomic_load(&libc_allocs);
#endif
    for (int s = 2; s < 12; s++) step(N, s);
    uint64_t core_n = tr_alloc_count() - core0;
    CHECK(core_n == 0, "%d threads: core allocations in 10 steady steps: %llu", threads,
          (unsigned long long)core_n);
#if COUNT_LIBC
    long libc_n = atomic_load(&libc_allocs) - libc0;
    if (threads == 1)
        CHECK(libc_n == 0, "1 thread: malloc calls in 10 steady steps (any library): %ld", libc_n);
    printf("steady state, %d threads: %llu core allocations, %ld malloc calls (any library) in "
           "10 steps; arena peak %zu bytes\n",
           threads, (unsigned long long)core_n, libc_n, tr_arena_peak(tr_graph_arena(N->g)));
#endif
    CHECK(tr_graph_status(N->g) == TR_OK, "no error");
    tr_optim_destroy(N->opt);
    tr_graph_destroy(N->g);
    tr_params_destroy(N->P);
}

int main(void) {
    run(1);
    run(2);
    return test_finish();
}
