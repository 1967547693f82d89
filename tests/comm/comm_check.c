/* One rank of the communicator test: every collective x dtype x reduction x size (0, 1,
 * primes, sizes that do not divide by the world, sizes past one staging chunk) against
 * values this program computes itself, plus in-place calls, send/recv, async works waited
 * out of order, groups, and the error rules. Launched as N processes (`trainer launch` or
 * mpirun); the world comes from the environment.
 * usage: comm_check PLUGIN_DIR BACKEND [quick]      exit 0 when every check passes */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm.h"
#include "trainer/half.h"
#include "trainer/memory.h"

static int fails, checks, rank, world;

#define EXPECT(cond, ...)                                                                    \
    do {                                                                                     \
        checks++;                                                                            \
        if (!(cond)) {                                                                       \
            if (fails++ < 20) {                                                              \
                printf("FAIL rank %d: ", rank);                                              \
                printf(__VA_ARGS__);                                                         \
                printf("\n");                                                                \
            }                                                                                \
        }                                                                                    \
    } while (0)

/* The value rank r contributes at element i: small integers, so sums and products are exact
 * in every dtype (prod uses +-1, +-2). */
static double value(int r, size_t i, tr_red_op op, int salt) {
    if (op == TR_RED_PROD) {
        static const double v[] = {1, -1, 2, 1, -2, 1, 1};
        return v[(r * 3 + i * 5 + (size_t)salt) % 7];
    }
    return (double)((r * 37 + i * 11 + (size_t)salt * 5) % 61) - (op == TR_RED_MAX || op == TR_RED_MIN ? 30 : 20);
}

static void store(void *buf, size_t i, tr_dtype dt, double v) {
    switch (dt) {
    case TR_F32: ((float *)buf)[i] = (float)v; break;
    case TR_F64: ((double *)buf)[i] = v; break;
    case TR_BF16: ((uint16_t *)buf)[i] = tr_f32_to_bf16((float)v); break;
    case TR_F16: ((uint16_t *)buf)[i] = tr_f32_to_f16((float)v); break;
    case TR_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case TR_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case TR_U8: ((uint8_t *)buf)[i] = (uint8_t)(int)(v < 0 ? -v : v); break;
    default: break;
    }
}

static double load(const void *buf, size_t i, tr_dtype dt) {
    switch (dt) {
    case TR_F32: return ((const float *)buf)[i];
    case TR_F64: return ((const double *)buf)[i];
    case TR_BF16: return tr_bf16_to_f32(((const uint16_t *)buf)[i]);
    case TR_F16: return tr_f16_to_f32(((const uint16_t *)buf)[i]);
    case TR_I32: return ((const int32_t *)buf)[i];
    case TR_I64: return (double)((const int64_t *)buf)[i];
    case TR_U8: return ((const uint8_t *)buf)[i];
    default: return NAN;
    }
}

/* What the reduction of every rank's value at i gives, in the dtype's arithmetic. */
static double expected(size_t i, tr_dtype dt, tr_red_op op, int salt) {
    double acc = 0;
    for (int r = 0; r < world; r++) {
        double v = value(r, i, op, salt);
        if (dt == TR_U8) v = fabs(v);
        if (r == 0) acc = v;
        else if (op == TR_RED_MAX) acc = v > acc ? v : acc;
        else if (op == TR_RED_MIN) acc = v < acc ? v : acc;
        else if (op == TR_RED_PROD) acc *= v;
        else acc += v;
    }
    if (op == TR_RED_AVG) {
        if (dt == TR_I32 || dt == TR_I64 || dt == TR_U8) acc = trunc(acc / world);
        else acc /= world;
    }
    if (dt == TR_U8) acc = fmod(acc, 256);
    return acc;
}

static int close_enough(double got, double want, tr_dtype dt) {
    double tol = dt == TR_BF16 ? 8e-3 : dt == TR_F16 ? 1e-3 : dt == TR_F32 ? 1e-6 : 1e-12;
    return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}

static void check_reductions(tr_comm *c, size_t n, tr_dtype dt, tr_red_op op, int salt) {
    size_t es = tr_dtype_size(dt);
    uint8_t *send = tr_malloc((size_t)world * n * es + 1), *recv = tr_malloc((size_t)world * n * es + 1);
    const char *dn = tr_dtype_name(dt), *on = tr_red_op_name(op);
    /* all_reduce out of place, then in place */
    for (size_t i = 0; i < n; i++) store(send, i, dt, value(rank, i, op, salt));
    tr_status st = tr_comm_all_reduce(c, send, recv, n, dt, op);
    EXPECT(st == TR_OK, "all_reduce %s %s n=%zu: %s", dn, on, n, tr_error_msg());
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (!close_enough(load(recv, i, dt), expected(i, dt, op, salt), dt)) bad = i;
    EXPECT(bad == n, "all_reduce %s %s n=%zu: element %zu is %g, want %g", dn, on, n, bad,
           bad < n ? load(recv, bad, dt) : 0, bad < n ? expected(bad, dt, op, salt) : 0);
    st = tr_comm_all_reduce(c, send, send, n, dt, op);
    EXPECT(st == TR_OK && (n == 0 || memcmp(send, recv, n * es) == 0), "in-place all_reduce %s %s n=%zu", dn, on, n);
    /* reduce to the last rank */
    int root = world - 1;
    for (size_t i = 0; i < n; i++) store(send, i, dt, value(rank, i, op, salt + 1));
    memset(recv, 0xAB, n * es + 1);
    st = tr_comm_reduce(c, send, recv, n, dt, op, root);
    EXPECT(st == TR_OK, "reduce %s %s n=%zu: %s", dn, on, n, tr_error_msg());
    if (rank == root) {
        bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (!close_enough(load(recv, i, dt), expected(i, dt, op, salt + 1), dt)) bad = i;
        EXPECT(bad == n, "reduce %s %s n=%zu: element %zu wrong", dn, on, n, bad);
    }
    /* reduce_scatter: send holds world * n, rank r gets block r */
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < n; i++) store(send, (size_t)r * n + i, dt, value(rank, (size_t)r * n + i, op, salt + 2));
    st = tr_comm_reduce_scatter(c, send, recv, n, dt, op);
    EXPECT(st == TR_OK, "reduce_scatter %s %s n=%zu: %s", dn, on, n, tr_error_msg());
    bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (!close_enough(load(recv, i, dt), expected((size_t)rank * n + i, dt, op, salt + 2), dt)) bad = i;
    EXPECT(bad == n, "reduce_scatter %s %s n=%zu: element %zu wrong", dn, on, n, bad);
    /* reduce_scatter with send == recv: the result lands at the start of the buffer */
    for (size_t j = 0; j < (size_t)world * n; j++) store(send, j, dt, value(rank, j, op, salt + 2));
    st = tr_comm_reduce_scatter(c, send, send, n, dt, op);
    EXPECT(st == TR_OK && (n == 0 || memcmp(send, recv, n * es) == 0), "reduce_scatter %s %s n=%zu with send == recv: %s",
           dn, on, n, st == TR_OK ? "differs from the out-of-place result" : tr_error_msg());
    tr_free(send);
    tr_free(recv);
}

/* Whether element i of buf is exactly want (as stored: u8 keeps magnitudes). */
static int holds(const void *buf, size_t i, tr_dtype dt, double want) {
    return load(buf, i, dt) == (dt == TR_U8 ? fabs(want) : want);
}

/* The first element of buf (W blocks of n) that is not value(block, i), or W * n. */
static size_t gathered_wrong(const void *buf, size_t n, tr_dtype dt, int salt) {
    for (size_t j = 0; j < (size_t)world * n; j++) {
        if (!holds(buf, j, dt, value((int)(j / n), j % n, TR_RED_SUM, salt))) return j;
    }
    return (size_t)world * n;
}

/* The first of this rank's n scattered elements that is not the root's value(7, ...), or n. */
static size_t scattered_wrong(const void *buf, size_t n, tr_dtype dt, int salt) {
    for (size_t i = 0; i < n; i++) {
        if (!holds(buf, i, dt, value(7, (size_t)rank * n + i, TR_RED_SUM, salt))) return i;
    }
    return n;
}

static void check_moves(tr_comm *c, size_t n, tr_dtype dt, int salt) {
    size_t es = tr_dtype_size(dt), W = (size_t)world;
    uint8_t *send = tr_malloc(W * n * es + 1), *recv = tr_malloc(W * n * es + 1);
    const char *dn = tr_dtype_name(dt);
    for (int root = 0; root < world; root++) {
        for (size_t i = 0; i < n; i++) store(recv, i, dt, rank == root ? value(root, i, TR_RED_SUM, salt) : 99);
        tr_status st = tr_comm_broadcast(c, recv, n, dt, root);
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (!holds(recv, i, dt, value(root, i, TR_RED_SUM, salt))) bad = i;
        EXPECT(st == TR_OK && bad == n, "broadcast %s n=%zu root %d: element %zu", dn, n, root, bad);
    }
    /* all_gather and gather (rank r contributes value(r, i)) and scatter from the root (block r
     * of its buffer goes to rank r); then again with send == recv (the contribution at the
     * start of the buffer; scatter's root gives from it). */
    int root = world / 2;
    for (int same = 0; same < 2 && (same == 0 || n); same++) {
        uint8_t *src = same ? recv : send;
        const char *how = same ? " with send == recv" : "";
        for (size_t i = 0; i < n; i++) store(src, i, dt, value(rank, i, TR_RED_SUM, salt));
        tr_status st = tr_comm_all_gather(c, src, recv, n, dt);
        size_t bad = gathered_wrong(recv, n, dt, salt);
        EXPECT(st == TR_OK && bad == W * n, "all_gather %s n=%zu%s: element %zu", dn, n, how, bad);
        for (size_t i = 0; i < n; i++) store(src, i, dt, value(rank, i, TR_RED_SUM, salt));
        if (!same) memset(recv, 0, W * n * es);
        st = tr_comm_gather(c, src, recv, n, dt, root);
        bad = rank == root ? gathered_wrong(recv, n, dt, salt) : W * n;
        EXPECT(st == TR_OK && bad == W * n, "gather %s n=%zu to %d%s: element %zu", dn, n, root, how, bad);
        for (size_t j = 0; j < W * n; j++) store(src, j, dt, rank == root ? value(7, j, TR_RED_SUM, salt) : -1);
        st = tr_comm_scatter(c, src, recv, n, dt, root);
        bad = scattered_wrong(recv, n, dt, salt);
        EXPECT(st == TR_OK && bad == n, "scatter %s n=%zu from %d%s: element %zu", dn, n, root, how, bad);
    }
    tr_free(send);
    tr_free(recv);
}

/* send/recv around the ring: even ranks send first, odd ranks receive first. */
static void check_p2p(tr_comm *c, size_t n) {
    if (world < 2) return;
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    int32_t *out = tr_malloc(n * 4 + 4), *in = tr_malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) out[i] = (int32_t)(rank * 1000003 + (int)i);
    tr_status a, b;
    if (rank % 2 == 0) {
        a = tr_comm_send(c, out, n, TR_I32, next);
        b = tr_comm_recv(c, in, n, TR_I32, prev);
    } else {
        b = tr_comm_recv(c, in, n, TR_I32, prev);
        a = tr_comm_send(c, out, n, TR_I32, next);
    }
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (in[i] != (int32_t)(prev * 1000003 + (int)i)) bad = i;
    EXPECT(a == TR_OK && b == TR_OK && bad == n, "send/recv n=%zu from %d: element %zu (%s)", n, prev, bad,
           tr_error_msg());
    tr_free(out);
    tr_free(in);
}

static void check_async(tr_comm *c) {
    enum { K = 6, N = 5003 };
    float *buf[K];
    tr_comm_work *w[K];
    tr_comm_group_start(c);
    for (int k = 0; k < K; k++) {
        buf[k] = tr_malloc(N * sizeof(float));
        for (int i = 0; i < N; i++) buf[k][i] = (float)(rank + k + i % 7);
        if (k == K / 2) {
            tr_status gst = tr_comm_group_end(c); /* the first half as a group */
            EXPECT(gst == TR_OK, "group_end: %s", tr_error_msg());
        }
        tr_status st = tr_comm_iall_reduce(c, buf[k], buf[k], N, TR_F32, TR_RED_SUM, &w[k]);
        EXPECT(st == TR_OK, "iall_reduce %d: %s", k, tr_error_msg());
    }
    int done = 0;
    tr_comm_test(w[K - 1], &done);
    for (int k = K - 1; k >= 0; k--) { /* waited out of order */
        tr_status st = tr_comm_wait(w[k]);
        float want0 = 0;
        for (int r = 0; r < world; r++) want0 += (float)(r + k);
        EXPECT(st == TR_OK && buf[k][0] == want0 && buf[k][N - 1] == want0 + (float)(world * ((N - 1) % 7)),
               "async all_reduce %d: got %g want %g", k, buf[k][0], want0);
        tr_free(buf[k]);
    }
}

/* In-place reduce-scatter and all-gather in alloc'ed memory (NCCL's layout, rank r's part at
 * r * n: ddp's sharded update): shm's direct path, bit for bit as from plain buffers, at
 * offsets that differ between ranks; then async on two ranges waited out of order, and a
 * mixed call (rank 0's buffer in the region) that takes the staged path. */
static void check_shared_scatter_gather(tr_comm *c, float *a, float *plain, size_t N) {
    static const size_t lens[] = {1, 7, 1031, 70001};
    const size_t W = (size_t)world, me = (size_t)rank;
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        size_t n = lens[t], off = me * 16 + t, bad = n;
        if (W * n + W * 16 + t > N) continue; /* the buffers hold N floats */
        for (size_t i = 0; i < W * n; i++) a[off + i] = plain[i] = (float)value(rank, i, TR_RED_SUM, (int)t) * 0.37f;
        EXPECT(tr_comm_reduce_scatter(c, a + off, a + off + me * n, n, TR_F32, TR_RED_SUM) == TR_OK,
               "shared reduce_scatter n=%zu: %s", n, tr_error_msg());
        EXPECT(tr_comm_reduce_scatter(c, plain, plain + me * n, n, TR_F32, TR_RED_SUM) == TR_OK,
               "plain reduce_scatter n=%zu", n);
        EXPECT(memcmp(a + off + me * n, plain + me * n, n * sizeof(float)) == 0,
               "shared reduce_scatter n=%zu equals the plain one", n);
        for (size_t i = 0; i < n && bad == n; i++)
            if (!close_enough(a[off + me * n + i], expected(me * n + i, TR_F32, TR_RED_SUM, (int)t) * 0.37, TR_F32)) bad = i;
        EXPECT(bad == n, "shared reduce_scatter n=%zu: element %zu of this rank's part is %g", n, bad,
               bad < n ? a[off + me * n + bad] : 0);
        for (size_t i = 0; i < n; i++) a[off + me * n + i] = plain[me * n + i] = (float)(me * 100000 + i);
        EXPECT(tr_comm_all_gather(c, a + off + me * n, a + off, n, TR_F32) == TR_OK, "shared all_gather n=%zu: %s", n,
               tr_error_msg());
        EXPECT(tr_comm_all_gather(c, plain + me * n, plain, n, TR_F32) == TR_OK, "plain all_gather n=%zu", n);
        EXPECT(memcmp(a + off, plain, W * n * sizeof(float)) == 0, "shared all_gather n=%zu equals the plain one", n);
        bad = W * n;
        for (size_t i = 0; i < W * n && bad == W * n; i++)
            if (a[off + i] != (float)(i / n * 100000 + i % n)) bad = i;
        EXPECT(bad == W * n, "shared all_gather n=%zu: element %zu is %g", n, bad, bad < W * n ? a[off + bad] : 0);
    }
    enum { M = 20000 };
    if (2 * W * M > N) return;
    tr_comm_work *w[2];
    for (size_t i = 0; i < 2 * W * M; i++) a[i] = (float)(rank + 1);
    for (int k = 0; k < 2; k++)
        EXPECT(tr_comm_ireduce_scatter(c, a + k * W * M, a + k * W * M + me * M, M, TR_F32, TR_RED_SUM, &w[k]) == TR_OK,
               "shared ireduce_scatter %d", k);
    for (int k = 1; k >= 0; k--) {
        float want = (float)(W * (W + 1) / 2);
        EXPECT(tr_comm_wait(w[k]) == TR_OK && a[k * W * M + me * M] == want && a[k * W * M + me * M + M - 1] == want,
               "shared ireduce_scatter %d: %g, want %g", k, a[k * W * M + me * M], want);
    }
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < M; i++) a[k * W * M + me * M + i] = (float)(rank * 10 + k);
        EXPECT(tr_comm_iall_gather(c, a + k * W * M + me * M, a + k * W * M, M, TR_F32, &w[k]) == TR_OK,
               "shared iall_gather %d", k);
    }
    for (int k = 1; k >= 0; k--)
        EXPECT(tr_comm_wait(w[k]) == TR_OK && a[k * W * M] == (float)k && a[k * W * M + W * M - 1] == (float)((W - 1) * 10 + k),
               "shared iall_gather %d: %g", k, a[k * W * M]);
    float *mixed = rank == 0 ? a : plain;
    for (size_t i = 0; i < W * 5000; i++) mixed[i] = (float)(rank * 2 + 1);
    EXPECT(tr_comm_reduce_scatter(c, mixed, mixed + me * 5000, 5000, TR_F32, TR_RED_SUM) == TR_OK &&
               mixed[me * 5000] == (float)(world * world) && mixed[me * 5000 + 4999] == (float)(world * world),
           "mixed shared and plain reduce_scatter: %g", mixed[me * 5000]);
    for (size_t i = 0; i < 5000; i++) mixed[me * 5000 + i] = (float)rank;
    EXPECT(tr_comm_all_gather(c, mixed + me * 5000, mixed, 5000, TR_F32) == TR_OK && mixed[0] == 0 &&
               mixed[W * 5000 - 1] == (float)(world - 1), "mixed shared and plain all_gather: %g", mixed[W * 5000 - 1]);
}

/* tr_comm_alloc'ed memory: shared by shm (every rank's buffer in place: the direct path),
 * plain elsewhere; the results must be the same as from plain buffers, bit for bit. */
static void check_shared(tr_comm *c, int expect_shared) {
    enum { N = 300007 };
    float *a = NULL, *b = NULL, *plain = tr_malloc(N * sizeof(float));
    tr_status st = tr_comm_alloc(c, N * sizeof(float), (void **)&a);
    EXPECT(st == TR_OK && a, "alloc: %s", tr_error_msg());
    if (st != TR_OK || !a) {
        tr_free(plain);
        return;
    }
    /* Another at once (no operation between the two collective allocs). */
    float *tiny = NULL;
    EXPECT(tr_comm_alloc(c, 64, (void **)&tiny) == TR_OK && tiny && tr_comm_is_shared(c, tiny) == expect_shared,
           "alloc right after alloc: %s", tr_error_msg());
    tr_comm_free(c, tiny);
    EXPECT(tr_comm_is_shared(c, a) == expect_shared, "alloc'ed memory shared: %d, want %d", tr_comm_is_shared(c, a),
           expect_shared);
    size_t nz = 0;
    for (size_t i = 0; i < N; i++) nz += a[i] != 0;
    EXPECT(nz == 0, "alloc'ed memory zeroed (%zu nonzero)", nz);
    /* Ranges of the region at offsets that differ between ranks, as ddp's buckets but not
     * at the same place: each against the same all-reduce of a plain buffer. */
    static const size_t lens[] = {0, 1, 7, 16, 1031, 70001, 250000};
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        size_t n = lens[t], off = (size_t)rank * 16 + t;
        for (size_t i = 0; i < n; i++) a[off + i] = plain[i] = (float)value(rank, i, TR_RED_SUM, (int)t) * 0.37f;
        EXPECT(tr_comm_all_reduce(c, a + off, a + off, n, TR_F32, TR_RED_SUM) == TR_OK, "shared all_reduce n=%zu: %s", n,
               tr_error_msg());
        EXPECT(tr_comm_all_reduce(c, plain, plain, n, TR_F32, TR_RED_SUM) == TR_OK, "plain all_reduce n=%zu", n);
        EXPECT(n == 0 || memcmp(a + off, plain, n * sizeof(float)) == 0, "shared all_reduce n=%zu equals the plain one", n);
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (!close_enough(a[off + i], expected(i, TR_F32, TR_RED_SUM, (int)t) * 0.37, TR_F32)) bad = i;
        EXPECT(bad == n, "shared all_reduce n=%zu: element %zu is %g", n, bad, bad < n ? a[off + bad] : 0);
    }
    /* MAX and AVG on the region; an out-of-place call from it and a mixed call (rank 0's
     * buffer shared, the others' plain) take the staged path and still agree. */
    for (size_t i = 0; i < 1031; i++) a[i] = (float)value(rank, i, TR_RED_MAX, 5);
    EXPECT(tr_comm_all_reduce(c, a, a, 1031, TR_F32, TR_RED_MAX) == TR_OK && a[3] == (float)expected(3, TR_F32, TR_RED_MAX, 5) &&
               a[1030] == (float)expected(1030, TR_F32, TR_RED_MAX, 5), "shared all_reduce max");
    for (size_t i = 0; i < 1031; i++) a[i] = (float)(rank + 1);
    EXPECT(tr_comm_all_reduce(c, a, a, 1031, TR_F32, TR_RED_AVG) == TR_OK && a[0] == (float)(world + 1) / 2.0f,
           "shared all_reduce avg: %g", a[0]);
    for (size_t i = 0; i < 5000; i++) a[i] = (float)(rank + i % 3);
    EXPECT(tr_comm_all_reduce(c, a, plain, 5000, TR_F32, TR_RED_SUM) == TR_OK &&
               plain[4999] == (float)(world * (world - 1) / 2 + world * (4999 % 3)), "out of place from the region");
    float *mixed = rank == 0 ? a : plain;
    for (size_t i = 0; i < 5000; i++) mixed[i] = (float)(rank * 2 + 1);
    EXPECT(tr_comm_all_reduce(c, mixed, mixed, 5000, TR_F32, TR_RED_SUM) == TR_OK && mixed[0] == (float)(world * world) &&
               mixed[4999] == (float)(world * world), "mixed shared and plain buffers: %g", mixed[0]);
    /* No elements, mixed, twice in a row, then a shared call: the ranks stay in step. */
    EXPECT(tr_comm_all_reduce(c, mixed, mixed, 0, TR_F32, TR_RED_SUM) == TR_OK &&
               tr_comm_all_reduce(c, a, a, 0, TR_F32, TR_RED_SUM) == TR_OK, "all_reduce of no elements");
    a[0] = 1;
    EXPECT(tr_comm_all_reduce(c, a, a, 1, TR_F32, TR_RED_SUM) == TR_OK && a[0] == (float)world, "in step after them");
    /* Async works on disjoint ranges, waited out of order (ddp's buckets); a broadcast from
     * the region; then a second region, the first freed, and the second still works. */
    tr_comm_work *w[4];
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < 20000; i++) a[k * 20000 + i] = (float)(rank + k);
        EXPECT(tr_comm_iall_reduce(c, a + k * 20000, a + k * 20000, 20000, TR_F32, TR_RED_SUM, &w[k]) == TR_OK,
               "shared iall_reduce %d", k);
    }
    for (int k = 3; k >= 0; k--) {
        float want = (float)(world * (world - 1) / 2 + world * k);
        EXPECT(tr_comm_wait(w[k]) == TR_OK && a[k * 20000] == want && a[k * 20000 + 19999] == want,
               "shared iall_reduce %d: %g, want %g", k, a[k * 20000], want);
    }
    check_shared_scatter_gather(c, a, plain, N);
    for (size_t i = 0; i < 1000; i++) a[i] = (float)(rank * 1000 + i);
    EXPECT(tr_comm_broadcast(c, a, 1000, TR_F32, world - 1) == TR_OK && a[999] == (float)((world - 1) * 1000 + 999),
           "broadcast from the region");
    st = tr_comm_alloc(c, 4096 * sizeof(float), (void **)&b);
    EXPECT(st == TR_OK && b && tr_comm_is_shared(c, b) == expect_shared, "second alloc: %s", tr_error_msg());
    tr_comm_free(c, a);
    if (b) {
        for (int i = 0; i < 4096; i++) b[i] = (float)rank;
        EXPECT(tr_comm_all_reduce(c, b, b, 4096, TR_F32, TR_RED_SUM) == TR_OK && b[4095] == (float)(world * (world - 1) / 2),
               "all_reduce in the second region after the first was freed");
    }
    /* Region ids are not reused: past 64 allocations the memory is plain, and still works. */
    int shared_seen = 0, plain_seen = 0;
    for (int i = 0; i < 70 && !plain_seen; i++) {
        float *z = NULL;
        if (tr_comm_alloc(c, 256, (void **)&z) != TR_OK || !z) break;
        if (tr_comm_is_shared(c, z)) shared_seen++;
        else plain_seen = 1;
        z[63] = 2;
        EXPECT(tr_comm_all_reduce(c, z, z, 64, TR_F32, TR_RED_SUM) == TR_OK && z[63] == (float)(2 * world),
               "all_reduce in allocation %d", i);
        tr_comm_free(c, z);
    }
    EXPECT(expect_shared ? plain_seen && shared_seen > 0 && shared_seen <= 64 : !shared_seen,
           "memory past the backend's regions is plain (%d shared first)", shared_seen);
    tr_free(plain); /* b goes with the communicator */
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: comm_check PLUGIN_DIR BACKEND [quick]\n");
        return 2;
    }
    int quick = argc > 3 && strcmp(argv[3], "quick") == 0;
    tr_comm_env env;
    tr_registry *reg;
    const tr_plugin *p;
    tr_comm *c;
    if (tr_comm_env_detect(&env) != TR_OK || tr_registry_create(&reg) != TR_OK ||
        tr_registry_scan(reg, argv[1], "test", 0) != TR_OK || tr_registry_find(reg, TR_PLUGIN_COMM, argv[2], &p) != TR_OK ||
        tr_comm_create(&c, p, NULL, &env) != TR_OK) {
        fprintf(stderr, "comm_check: %s\n", tr_error_msg());
        return 1;
    }
    rank = tr_comm_rank(c);
    world = tr_comm_size(c);
    EXPECT(tr_comm_barrier(c) == TR_OK, "barrier: %s", tr_error_msg());
    static const size_t sizes[] = {0, 1, 2, 3, 7, 13, 1031, 70001};
    static const tr_dtype dts[] = {TR_F32, TR_F64, TR_BF16, TR_F16, TR_I32, TR_I64, TR_U8};
    int salt = 0;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            if (quick && s > 5 && d > 0) continue;
            for (int op = 0; op < TR_RED_COUNT; op++) check_reductions(c, sizes[s], dts[d], (tr_red_op)op, salt++);
            check_moves(c, sizes[s], dts[d], salt++);
        }
    /* Past several staging chunks (1 MiB default): f32 sum, and the moves. */
    check_reductions(c, quick ? 300007 : 1000003, TR_F32, TR_RED_SUM, salt++);
    check_moves(c, 300007, TR_F32, salt++);
    check_p2p(c, 0);
    check_p2p(c, 1);
    check_p2p(c, 1000);
    check_p2p(c, 200003); /* larger than the send/recv ring */
    check_async(c);
    check_shared(c, strcmp(argv[2], "shm") == 0 && world > 1);
    /* Argument errors come back at once and do not break the communicator. */
    float x = 1;
    EXPECT(tr_comm_broadcast(c, &x, 1, TR_F32, world) == TR_ERR_INVALID && strstr(tr_error_msg(), "not a rank"),
           "root out of range refused: %s", tr_error_msg());
    if (world > 1)
        EXPECT(tr_comm_send(c, &x, 1, TR_F32, rank) == TR_ERR_INVALID, "send to self refused");
    EXPECT(tr_comm_all_reduce(c, NULL, &x, 1, TR_F32, TR_RED_SUM) == TR_ERR_INVALID, "NULL buffer refused");
    EXPECT(tr_comm_barrier(c) == TR_OK && tr_comm_last_error(c)[0] == 0, "still usable after argument errors");
    tr_comm_destroy(c);
    tr_registry_destroy(reg);
    printf("rank %d of %d (%s): %d passed, %d failed\n", rank, world, argv[2], checks - fails, fails);
    return fails ? 1 : 0;
}
