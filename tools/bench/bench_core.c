/* Micro-benchmark of the core: OpenBLAS sgemm rate, each major op forward+backward, and full
 * training steps, with achieved GFLOP/s printed next to the sgemm rate of the same run.
 *
 *   build/bin/bench_core [--threads N] [--quick] [--sgemm | --gemm | --peak]
 *
 * --sgemm prints only the reference sgemm rate (one number, GFLOP/s), for scripts that set it
 * beside their own figures (tools/bench/cpu_vs_torch.py). --peak prints only the cores'
 * multiply-add peak (GFLOP/s, measured: independent fused multiply-add chains on the widest
 * vectors the CPU has, on every thread at once), the ceiling that the sgemm rate falls short of
 * where OpenBLAS has no kernel for the CPU's widest vectors (0.3.21 on Zen 5: its 256-bit
 * kernels, half of the 512-bit peak). --gemm times trainer's packed GEMM
 * (kernels/gemm_packed.c) against OpenBLAS's sgemm on the products the benchmark workloads run,
 * interleaved, and prints both rates and their ratio.
 * Each figure is the median of several timed windows after warm-up. FLOP counts are the
 * multiply-adds of the GEMM-shaped work (x2), the usual convention; elementwise work is not
 * counted, so a step's GFLOP/s is its useful GEMM rate. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm.h"
#include "trainer/trainer.h"

static int quick;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*bench_fn)(void *ctx);

/* Median seconds per call over `windows` windows of calls lasting >= min_window seconds. */
static double time_it(bench_fn fn, void *ctx) {
    int windows = quick ? 3 : 7;
    double min_window = quick ? 0.05 : 0.2;
    fn(ctx); fn(ctx); /* warm-up: arena growth, BLAS buffers, page faults */
    int reps = 1;
    double t0 = tr_now();
    fn(ctx);
    double one = tr_now() - t0;
    if (one < min_window) reps = (int)(min_window / (one > 1e-7 ? one : 1e-7)) + 1;
    double w[16];
    for (int i = 0; i < windows; i++) {
        t0 = tr_now();
        for (int r = 0; r < reps; r++) fn(ctx);
        w[i] = (tr_now() - t0) / reps;
    }
    qsort(w, (size_t)windows, sizeof w[0], cmp_d);
    return w[windows / 2];
}

/* ---- sgemm, and trainer's packed GEMM beside it ---- */
typedef struct pair_ctx {
    int ta, tb, M, N, K;
    float *A, *B, *C;
} pair_ctx;
static void run_blas(void *p) {
    pair_ctx *c = p;
    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans, c->M, c->N,
                c->K, 1.0f, c->A, c->ta ? c->M : c->K, c->B, c->tb ? c->K : c->N, 0.0f, c->C, c->N);
}
static pair_ctx pair_make(int ta, int tb, int M, int N, int K) {
    pair_ctx c = {ta, tb, M, N, K, tr_malloc(sizeof(float) * M * K), tr_malloc(sizeof(float) * K * N),
                  tr_malloc(sizeof(float) * M * N)};
    tr_rng_fill_uniform(c.A, (size_t)M * K, 1, 1, 0, -1, 1);
    tr_rng_fill_uniform(c.B, (size_t)K * N, 1, 2, 0, -1, 1);
    return c;
}
static void pair_free(pair_ctx *c) { tr_free(c->A), tr_free(c->B), tr_free(c->C); }
static double bench_sgemm(int M, int N, int K) {
    pair_ctx c = pair_make(0, 1, M, N, K);
    double t = time_it(run_blas, &c);
    pair_free(&c);
    return 2.0 * M * N * K / t / 1e9;
}

/* ---- the cores' multiply-add peak ---- */
/* CHAINS independent chains of `iters` multiply-adds each, on vectors of LANES floats; returns
 * a value that depends on every chain, so none is optimised away. Enough chains to cover the
 * latency on every multiply-add pipe (4 cycles x 2 pipes on current x86 cores). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FMA_CHAINS(NAME, TARGET, VEC, SET1, FMADD, CHAINS)                               \
    __attribute__((target(TARGET))) static float NAME(long iters) {                      \
        VEC acc[CHAINS], mul = SET1(0.999999f), add = SET1(1e-7f);                       \
        for (int i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);                        \
        for (long k = 0; k < iters; k++)                                                 \
            for (int i = 0; i < CHAINS; i++) acc[i] = FMADD(acc[i], mul, add);           \
        float sum = 0, lane[16];                                                         \
        for (int i = 0; i < CHAINS; i++) {                                               \
            memcpy(lane, &acc[i], sizeof acc[i]);                                        \
            sum += lane[0];                                                              \
        }                                                                                \
        return sum;                                                                      \
    }
enum { CHAINS_512 = 16, CHAINS_256 = 12 };
FMA_CHAINS(fma_chains_512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, CHAINS_512)
FMA_CHAINS(fma_chains_256, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, CHAINS_256)

/* Multiply-adds per chain step on this CPU's widest vectors: lanes x chains, 0 if none. */
static int fma_width(int *lanes, int *chains) {
    if (__builtin_cpu_supports("avx512f")) return *lanes = 16, *chains = CHAINS_512, 1;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return *lanes = 8, *chains = CHAINS_256, 1;
    return 0;
}

static volatile float fma_sink;

typedef struct peak_ctx {
    long iters;
    int lanes, team; /* team: the threads that ran the last call */
} peak_ctx;

static void run_peak(void *p) {
    peak_ctx *c = p;
#pragma omp parallel
    {
        float r = c->lanes == 16 ? fma_chains_512(c->iters) : fma_chains_256(c->iters);
#pragma omp atomic
        fma_sink += r;
#pragma omp single nowait
        c->team = omp_get_num_threads();
    }
}

static double bench_peak(void) {
    int lanes, chains;
    if (!fma_width(&lanes, &chains)) return 0;
    peak_ctx c = {.iters = 2000000, .lanes = lanes};
    double t = time_it(run_peak, &c);
    return 2.0 * lanes * chains * (double)c.iters * c.team / t / 1e9;
}
#else
static double bench_peak(void) { return 0; }
#endif

/* ---- trainer's packed GEMM against OpenBLAS, per workload product ---- */
static void run_packed(void *p) {
    pair_ctx *c = p;
    if (!tr_gemm_packed_f32(c->ta, c->tb, c->M, c->N, c->K, 1.0f, c->A, c->ta ? c->M : c->K, c->B,
                            c->tb ? c->K : c->N, 0.0f, c->C, c->N)) {
        fprintf(stderr, "bench_core: the packed GEMM is not in this build (no AVX-512) or declined %dx%dx%d\n",
                c->M, c->N, c->K);
        exit(1);
    }
}
static void bench_gemm_pairs(void) {
    static const struct { const char *what; int ta, tb, M, N, K; } P[] = {
        {"classifier qkv forward", 0, 1, 4096, 768, 256},  {"classifier fc1 forward", 0, 1, 4096, 1024, 256},
        {"classifier fc2 forward", 0, 1, 4096, 256, 1024}, {"classifier proj forward", 0, 1, 4096, 256, 256},
        {"classifier fc1 dx", 0, 0, 4096, 256, 1024},      {"classifier fc2 dx", 0, 0, 4096, 1024, 256},
        {"classifier qkv dx", 0, 0, 4096, 256, 768},       {"classifier fc1 dW", 1, 0, 1024, 256, 4096},
        {"classifier fc2 dW", 1, 0, 256, 1024, 4096},      {"classifier qkv dW", 1, 0, 768, 256, 4096},
        {"attention scores (per head)", 0, 1, 128, 128, 64}, {"attention probs x v", 0, 0, 128, 64, 128},
        {"attention dv / dk", 1, 0, 128, 64, 128},         {"MiniLM attention scores (head 32)", 0, 1, 128, 128, 32},
        {"MiniLM attention probs x v", 0, 0, 128, 32, 128}, {"MiniLM attention dv / dk", 1, 0, 128, 32, 128},         {"MLP b128 layer 1 forward", 0, 1, 128, 512, 784},
        {"MLP b128 layer 2 forward", 0, 1, 128, 512, 512}, {"MLP b128 layer 2 dx", 0, 0, 128, 512, 512},
        {"MLP b128 layer 1 dW", 1, 0, 512, 784, 128},      {"MLP b128 layer 2 dW", 1, 0, 512, 512, 128},
        {"FashionCNN conv2 chunk (im2col)", 0, 0, 64, 4096, 288}, {"FashionCNN fc 2304->600", 0, 1, 128, 600, 2304},
        {"FashionCNN fc dW", 1, 0, 600, 2304, 128},        {"square 1024", 0, 1, 1024, 1024, 1024},
    };
    printf("%-34s %-17s %9s %9s %7s\n", "product (ta tb M x N x K)", "", "OpenBLAS", "trainer", "ratio");
    double lsum = 0;
    int n = (int)(sizeof P / sizeof P[0]);
    for (int i = 0; i < n; i++) {
        pair_ctx c = pair_make(P[i].ta, P[i].tb, P[i].M, P[i].N, P[i].K);
        double tb = 1e30, tp = 1e30; /* the better of 3 interleaved medians each */
        for (int r = 0; r < 3; r++) {
            double x = time_it(run_blas, &c), y = time_it(run_packed, &c);
            tb = x < tb ? x : tb, tp = y < tp ? y : tp;
        }
        double fl = 2.0 * P[i].M * P[i].N * P[i].K;
        char shape[40];
        snprintf(shape, sizeof shape, "%d%d %dx%dx%d", P[i].ta, P[i].tb, P[i].M, P[i].N, P[i].K);
        printf("%-34s %-17s %6.1f GF %6.1f GF %6.2fx\n", P[i].what, shape, fl / tb / 1e9, fl / tp / 1e9, tb / tp);
        lsum += log(tb / tp);
        pair_free(&c);
    }
    printf("geometric mean of the ratios: %.3fx\n", exp(lsum / n));
}

/* ---- ops: each builds a small graph on persistent leaves and runs forward+backward ---- */
typedef struct op_ctx {
    tr_graph *g;
    tr_tensor *in[6];
    int kind;
    int64_t a[4];
} op_ctx;

enum { OP_LINEAR, OP_CONV, OP_ATTN, OP_ATTN_DROPOUT, OP_LAYERNORM, OP_SOFTMAX_CE, OP_GELU };

static void run_op(void *p) {
    op_ctx *c = p;
    tr_graph *g = c->g;
    tr_graph_reset(g);
    tr_tensor *y = NULL;
    switch (c->kind) {
    case OP_LINEAR: y = tr_linear(g, c->in[0], c->in[1], c->in[2]); break;
    case OP_CONV: y = tr_conv2d(g, c->in[0], c->in[1], c->in[2], 1, 1); break;
    case OP_ATTN: y = tr_attention(g, c->in[0], c->in[1], c->in[2], (int)c->a[0], (int)c->a[1]); break;
    case OP_ATTN_DROPOUT: /* training mode: the key mask in[3], dropout 0.1 */
        tr_graph_set_training(g, 1);
        y = tr_attention_dropout(g, c->in[0], c->in[1], c->in[2], c->in[3], (int)c->a[0], (int)c->a[1], 0.1);
        break;
    case OP_LAYERNORM: y = tr_layer_norm(g, c->in[0], c->in[1], c->in[2], 1e-5); break;
    case OP_GELU: y = tr_gelu(g, c->in[0], TR_GELU_TANH); break;
    case OP_SOFTMAX_CE: y = tr_cross_entropy(g, c->in[0], c->in[1], (double)c->a[0], -100, 0.0); break;
    }
    if (!y || tr_backward(g, y, NULL) != TR_OK) {
        fprintf(stderr, "bench_core: op failed: %s\n", tr_error_msg());
        exit(1);
    }
}

/* Leaves live in a separate graph that is never reset. */
static tr_tensor *leaf(tr_graph *store, int nd, const int64_t *shape, int grad, uint64_t s) {
    tr_tensor *t = grad ? tr_graph_leaf(store, TR_F32, nd, shape)
                        : tr_graph_input(store, TR_F32, nd, shape);
    tr_rng_fill_uniform(t->data, (size_t)tr_tensor_numel(t), 3, s, 0, -1, 1);
    return t;
}

static void report(const char *name, double sec, double flops, double peak) {
    if (flops > 0)
        printf("%-46s %9.3f ms  %7.1f GFLOP/s  %5.1f%% of sgemm\n", name, sec * 1e3,
               flops / sec / 1e9, 100 * flops / sec / 1e9 / peak);
    else
        printf("%-46s %9.3f ms\n", name, sec * 1e3);
}

/* ---- full training step: MLP with AdamW ---- */
typedef struct step_ctx {
    tr_graph *g;
    tr_params *P;
    tr_optim *opt;
    int n_layers;
    int64_t B, widths[8];
    float *xb;
    int32_t *yb;
} step_ctx;

static void run_step(void *p) {
    step_ctx *c = p;
    tr_graph *g = c->g;
    tr_graph_reset(g);
    tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){c->B, c->widths[0]});
    tr_tensor *y = tr_graph_input(g, TR_I32, 1, (int64_t[]){c->B});
    memcpy(x->data, c->xb, sizeof(float) * (size_t)(c->B * c->widths[0]));
    memcpy(y->data, c->yb, sizeof(int32_t) * (size_t)c->B);
    tr_tensor *h = x;
    for (int l = 0; l < c->n_layers; l++) {
        h = tr_linear(g, h, tr_params_get(c->P, 2 * l), tr_params_get(c->P, 2 * l + 1));
        if (l + 1 < c->n_layers) h = tr_relu(g, h);
    }
    tr_tensor *loss = tr_cross_entropy(g, h, y, (double)c->B, -100, 0.0);
    tr_params_zero_grad(c->P);
    if (tr_backward(g, loss, NULL) != TR_OK ||
        tr_optim_step(c->opt, tr_params_data(c->P), tr_params_grad(c->P), tr_params_numel(c->P), 1e-3) != TR_OK) {
        fprintf(stderr, "bench_core: step failed: %s\n", tr_error_msg());
        exit(1);
    }
}

static void bench_mlp(const char *name, int64_t B, int n_layers, const int64_t *widths, double peak) {
    step_ctx c = {.B = B, .n_layers = n_layers};
    memcpy(c.widths, widths, sizeof(int64_t) * (size_t)(n_layers + 1));
    tr_params_create(&c.P);
    double flops = 0;
    for (int l = 0; l < n_layers; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "fc%d.weight", l);
        tr_params_add(c.P, nm, 2, (int64_t[]){widths[l + 1], widths[l]}, TR_INIT_KAIMING_UNIFORM, 0, NULL);
        snprintf(nm, sizeof nm, "fc%d.bias", l);
        tr_params_add(c.P, nm, 1, (int64_t[]){widths[l + 1]}, TR_INIT_FAN_IN_UNIFORM, (double)widths[l], NULL);
        /* forward 2BIO, backward 4BIO (the first layer needs no input gradient: 2BIO) */
        flops += (l == 0 ? 4.0 : 6.0) * B * widths[l] * widths[l + 1];
    }
    tr_params_finalize(c.P, 1);
    tr_graph_create(&c.g, 0);
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    tr_optim_create(&c.opt, &oc, tr_params_numel(c.P));
    c.xb = tr_malloc(sizeof(float) * (size_t)(B * widths[0]));
    c.yb = tr_malloc(sizeof(int32_t) * (size_t)B);
    tr_rng_fill_uniform(c.xb, (size_t)(B * widths[0]), 5, 5, 0, 0, 1);
    for (int64_t i = 0; i < B; i++) c.yb[i] = (int32_t)(i % widths[n_layers]);
    double t = time_it(run_step, &c);
    report(name, t, flops, peak);
    printf("%-46s %9.0f samples/s\n", "", (double)B / t);
    tr_free(c.xb); tr_free(c.yb);
    tr_optim_destroy(c.opt);
    tr_graph_destroy(c.g);
    tr_params_destroy(c.P);
}

int main(int argc, char **argv) {
    int threads = 0, sgemm_only = 0, gemm_pairs = 0, peak_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--sgemm") == 0) sgemm_only = 1;
        else if (strcmp(argv[i], "--gemm") == 0) gemm_pairs = 1;
        else if (strcmp(argv[i], "--peak") == 0) peak_only = 1;
        else {
            fprintf(stderr, "usage: bench_core [--threads N] [--quick] [--sgemm | --gemm | --peak]\n");
            return 2;
        }
    }
    tr_set_num_threads(threads);
    if (peak_only) {
        double fp = bench_peak();
        if (fp <= 0) {
            fprintf(stderr, "bench_core: --peak needs an x86-64 CPU with AVX2 and FMA\n");
            return 1;
        }
        printf("%.2f\n", fp);
        return 0;
    }
    if (gemm_pairs) {
        printf("trainer %s bench_core --gemm, %d threads\n\n", tr_version(), tr_get_num_threads());
        bench_gemm_pairs();
        return 0;
    }
    double s1 = bench_sgemm(1024, 1024, 1024), s2 = bench_sgemm(512, 2048, 2048);
    double peak = s1 > s2 ? s1 : s2; /* the reference: the better of the two */
    if (sgemm_only) {
        printf("%.2f\n", peak);
        return 0;
    }
    printf("trainer %s bench_core, %d threads\n\n", tr_version(), tr_get_num_threads());
    printf("%-46s %9s     %7.1f GFLOP/s\n", "sgemm 1024x1024x1024", "", s1);
    printf("%-46s %9s     %7.1f GFLOP/s\n", "sgemm 512x2048x2048 (MLP layer shape)", "", s2);
    printf("%-46s %9s     %7.1f GFLOP/s\n", "sgemm reference rate (the better one)", "", peak);
    printf("\nops, forward + backward:\n");

    tr_graph *store;
    tr_graph_create(&store, 0);
    op_ctx c;
    tr_graph_create(&c.g, 0);

    c.kind = OP_LINEAR;
    c.in[0] = leaf(store, 2, (int64_t[]){512, 1024}, 1, 1);
    c.in[1] = leaf(store, 2, (int64_t[]){1024, 1024}, 1, 2);
    c.in[2] = leaf(store, 1, (int64_t[]){1024}, 1, 3);
    report("linear 512x1024 -> 1024", time_it(run_op, &c), 6.0 * 512 * 1024 * 1024, peak);

    c.kind = OP_CONV; /* FashionCNN's second conv at batch 128 */
    c.in[0] = leaf(store, 4, (int64_t[]){128, 32, 14, 14}, 1, 4);
    c.in[1] = leaf(store, 4, (int64_t[]){64, 32, 3, 3}, 1, 5);
    c.in[2] = leaf(store, 1, (int64_t[]){64}, 1, 6);
    report("conv2d 128x32x14x14 -> 64, 3x3 pad 1", time_it(run_op, &c),
           6.0 * 128 * 14 * 14 * 64 * 32 * 9, peak);

    c.kind = OP_ATTN; /* transformer workload: B 32, T 128, C 256, 4 heads, causal */
    c.a[0] = 4, c.a[1] = 1;
    c.in[0] = leaf(store, 3, (int64_t[]){32, 128, 256}, 1, 7);
    c.in[1] = leaf(store, 3, (int64_t[]){32, 128, 256}, 1, 8);
    c.in[2] = leaf(store, 3, (int64_t[]){32, 128, 256}, 1, 9);
    report("attention B32 T128 C256 h4 causal", time_it(run_op, &c),
           3.0 * 2 * 2.0 * 32 * 128 * 128 * 256, peak);
    c.a[0] = 12, c.a[1] = 0; /* all-MiniLM-L6-v2's: B 32, T 128, C 384, 12 heads */
    c.in[0] = leaf(store, 3, (int64_t[]){32, 128, 384}, 1, 7);
    c.in[1] = leaf(store, 3, (int64_t[]){32, 128, 384}, 1, 8);
    c.in[2] = leaf(store, 3, (int64_t[]){32, 128, 384}, 1, 9);
    report("attention B32 T128 C384 h12", time_it(run_op, &c), 3.0 * 2 * 2.0 * 32 * 128 * 128 * 384, peak);
    c.kind = OP_ATTN_DROPOUT; /* the same with fine-tuning's key mask (8 padded keys) and dropout 0.1 */
    c.in[3] = tr_graph_input(store, TR_I32, 2, (int64_t[]){32, 128});
    for (int i = 0; i < 32 * 128; i++) ((int32_t *)c.in[3]->data)[i] = i % 128 < 120;
    report("attention B32 T128 C384 h12, key mask, dropout", time_it(run_op, &c), 3.0 * 2 * 2.0 * 32 * 128 * 128 * 384,
           peak);
    tr_graph_set_training(c.g, 0);

    c.kind = OP_LAYERNORM;
    c.in[0] = leaf(store, 3, (int64_t[]){32, 128, 256}, 1, 10);
    c.in[1] = leaf(store, 1, (int64_t[]){256}, 1, 11);
    c.in[2] = leaf(store, 1, (int64_t[]){256}, 1, 12);
    report("layer_norm 32x128x256", time_it(run_op, &c), 0, peak);

    c.kind = OP_GELU;
    c.in[0] = leaf(store, 3, (int64_t[]){32, 128, 1024}, 1, 13);
    report("gelu(tanh) 32x128x1024", time_it(run_op, &c), 0, peak);

    c.kind = OP_SOFTMAX_CE;
    c.a[0] = 2048;
    c.in[0] = leaf(store, 2, (int64_t[]){2048, 256}, 1, 14);
    c.in[1] = tr_graph_input(store, TR_I32, 1, (int64_t[]){2048});
    for (int i = 0; i < 2048; i++) ((int32_t *)c.in[1]->data)[i] = (i * 7) % 256;
    report("cross_entropy 2048x256", time_it(run_op, &c), 0, peak);

    printf("\nfull training steps (forward, backward, AdamW):\n");
    bench_mlp("MLP 1024-2048-2048-10, batch 512 (GEMM-bound)", 512, 3, (int64_t[]){1024, 2048, 2048, 10}, peak);
    bench_mlp("MLP 784-512-512-10, batch 128", 128, 3, (int64_t[]){784, 512, 512, 10}, peak);
    bench_mlp("MLP 784-512-512-10, batch 8", 8, 3, (int64_t[]){784, 512, 512, 10}, peak);

    tr_graph_destroy(c.g);
    tr_graph_destroy(store);
    return 0;
}
