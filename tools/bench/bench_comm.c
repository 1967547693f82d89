/* Communicator benchmark in the manner of nccl-tests: for each collective and sizes from
 * 4 KiB to 256 MiB, the time per call, the algorithm bandwidth (bytes / time) and the bus
 * bandwidth (what each rank's links carry: x 2(n-1)/n for all-reduce, x (n-1)/n for
 * all-gather and reduce-scatter, x 1 for broadcast), next to a plain memcpy of the same
 * bytes on rank 0. Run one process per rank:
 *   build/bin/trainer launch -n 2 build/bin/bench_comm build/plugins shm [MAX_MIB] [OPS]
 * OPS: comma-separated of all_reduce,all_gather,reduce_scatter,broadcast,shared_all_reduce
 * (default all; shared_all_reduce: in place in communicator memory, tr_comm_alloc, which shm
 * all-reduces without staging copies). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

static double time_op(tr_comm *c, tr_comm_kind kind, float *a, float *b, size_t n, int iters) {
    int W = tr_comm_size(c);
    double t0 = 0;
    for (int it = -2; it < iters; it++) { /* two warm-up calls */
        if (it == 0) {
            tr_comm_barrier(c);
            t0 = tr_now();
        }
        tr_status st = TR_OK;
        switch (kind) {
        case TR_COMM_ALL_REDUCE: st = tr_comm_all_reduce(c, a, a, n, TR_F32, TR_RED_SUM); break;
        case TR_COMM_ALL_GATHER: st = tr_comm_all_gather(c, a, b, n / (size_t)W, TR_F32); break;
        case TR_COMM_REDUCE_SCATTER: st = tr_comm_reduce_scatter(c, a, b, n / (size_t)W, TR_F32, TR_RED_SUM); break;
        default: st = tr_comm_broadcast(c, a, n, TR_F32, 0); break;
        }
        if (st != TR_OK) {
            fprintf(stderr, "bench_comm: %s\n", tr_error_msg());
            exit(1);
        }
    }
    double dt = tr_now() - t0, worst = dt;
    tr_comm_all_reduce(c, &worst, &worst, 1, TR_F64, TR_RED_MAX); /* the slowest rank's time */
    return worst / iters;
}

/* Whether the comma-separated list has the word. */
static int listed(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

static double time_memcpy(float *a, float *b, size_t n, int iters) {
    memcpy(b, a, n * sizeof(float));
    double t0 = tr_now();
    for (int it = 0; it < iters; it++) {
        memcpy(b, a, n * sizeof(float));
        __asm__ __volatile__("" ::"r"(b) : "memory");
    }
    return (tr_now() - t0) / iters;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_comm PLUGIN_DIR BACKEND [MAX_MIB] [OPS]\n");
        return 2;
    }
    size_t max_bytes = (size_t)(argc > 3 ? atol(argv[3]) : 256) << 20;
    const char *ops = argc > 4 ? argv[4] : "all_reduce,all_gather,reduce_scatter,broadcast,shared_all_reduce";
    tr_comm_env env;
    tr_registry *reg;
    const tr_plugin *p;
    tr_comm *c;
    if (tr_comm_env_detect(&env) != TR_OK || tr_registry_create(&reg) != TR_OK ||
        tr_registry_scan(reg, argv[1], "bench", 0) != TR_OK || tr_registry_find(reg, TR_PLUGIN_COMM, argv[2], &p) != TR_OK ||
        tr_comm_create(&c, p, NULL, &env) != TR_OK) {
        fprintf(stderr, "bench_comm: %s\n", tr_error_msg());
        return 1;
    }
    int W = tr_comm_size(c), rank = tr_comm_rank(c);
    float *a = tr_malloc(max_bytes + 64), *b = tr_malloc(max_bytes * (size_t)W + 64);
    for (size_t i = 0; i < max_bytes / 4; i++) a[i] = 1.0f;
    memset(b, 0, max_bytes * (size_t)W);
    float *shared = NULL;
    if (listed(ops, "shared_all_reduce") && tr_comm_alloc(c, max_bytes + 64, (void **)&shared) != TR_OK) {
        fprintf(stderr, "bench_comm: %s\n", tr_error_msg());
        return 1;
    }
    if (shared)
        for (size_t i = 0; i < max_bytes / 4; i++) shared[i] = 1.0f;
    /* The rows: an operation, its name in OPS, and whether it runs on the communicator's memory. */
    static const struct { tr_comm_kind kind; const char *op; int shared; } rows[] = {
        {TR_COMM_ALL_REDUCE, "all_reduce", 0},     {TR_COMM_ALL_GATHER, "all_gather", 0},
        {TR_COMM_REDUCE_SCATTER, "reduce_scatter", 0}, {TR_COMM_BROADCAST, "broadcast", 0},
        {TR_COMM_ALL_REDUCE, "shared_all_reduce", 1},
    };
    if (rank == 0)
        printf("# %s, %d ranks, f32; busbw factor: all_reduce 2(n-1)/n, all_gather/reduce_scatter (n-1)/n, broadcast 1\n"
               "%-17s %12s %11s %11s %11s %13s %9s\n",
               argv[2], W, "op", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s", "memcpy_GB/s", "bus/mcpy");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        if (!listed(ops, rows[k].op)) continue;
        /* where the backend could not share it: plain memory, said so */
        const char *name = rows[k].shared && !tr_comm_is_shared(c, shared) ? "alloc_all_reduce" : rows[k].op;
        float *buf = rows[k].shared ? shared : a;
        for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
            size_t n = bytes / 4;
            n -= n % (size_t)W;
            int iters = bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 20 : 5;
            double t = time_op(c, rows[k].kind, buf, b, n, iters);
            double alg = (double)bytes / t / 1e9, f = 1;
            if (rows[k].kind == TR_COMM_ALL_REDUCE) f = 2.0 * (W - 1) / W;
            else if (rows[k].kind != TR_COMM_BROADCAST) f = (double)(W - 1) / W;
            if (rank == 0) {
                double mc = (double)bytes / time_memcpy(a, b, n, iters) / 1e9;
                printf("%-17s %12zu %11.1f %11.2f %11.2f %13.2f %9.2f\n", name, bytes, t * 1e6,
                       alg, alg * f, mc, alg * f / mc);
                fflush(stdout);
            }
            tr_comm_barrier(c);
        }
    }
    tr_free(a);
    tr_free(b);
    tr_comm_destroy(c);
    tr_registry_destroy(reg);
    return 0;
}
