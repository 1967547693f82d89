/* Unit tests of the base layer: status messages, arena, counted allocation, Philox RNG,
 * flushing denormals. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"

static tr_status inner(void) { return tr_error_set(TR_ERR_PARSE, "cfg.yaml:3:7: bad value"); }
static tr_status outer(void) {
    TR_CHECK(inner());
    return TR_OK;
}

static void test_status(void) {
    CHECK(outer() == TR_ERR_PARSE, "status propagates");
    CHECK(strcmp(tr_error_msg(), "cfg.yaml:3:7: bad value") == 0, "message kept: %s", tr_error_msg());
    CHECK(strstr(tr_error_trace(), "base.c:") != NULL, "trace has file:line: %s", tr_error_trace());
    tr_error_prefix("model.params: ");
    CHECK(strcmp(tr_error_msg(), "model.params: cfg.yaml:3:7: bad value") == 0, "prefix: %s",
          tr_error_msg());
    CHECK(strcmp(tr_status_str(TR_ERR_TIMEOUT), "timed out") == 0, "status name");
    tr_error_clear();
    CHECK(tr_error_msg()[0] == '\0', "cleared");
    CHECK(tr_log_level_parse("debug") == TR_LOG_DEBUG && tr_log_level_parse("nope") == -1,
          "log level names");
}

static void test_arena(void) {
    tr_arena *a;
    CHECK(tr_arena_create(&a, 4096) == TR_OK, "arena create");
    /* The first step outgrows the first chunk; later steps of the same allocations need no heap
     * and land on the first step's addresses (its memory is kept, already faulted in). */
    char *first[100];
    for (int step = 0; step < 3; step++) {
        tr_arena_reset(a);
        uint64_t before = tr_alloc_count();
        int same = 1;
        for (int i = 0; i < 100; i++) {
            char *p = tr_arena_alloc(a, 1000 + (size_t)i);
            CHECK(p != NULL && ((uintptr_t)p % TR_ALIGN) == 0, "aligned block");
            memset(p, i, 1000);
            if (step == 0) first[i] = p;
            same &= p == first[i];
        }
        if (step > 0) {
            CHECK(tr_alloc_count() == before, "step %d allocated %llu times", step,
                  (unsigned long long)(tr_alloc_count() - before));
            CHECK(same, "step %d: blocks moved from the first step's addresses", step);
        }
    }
    CHECK(tr_arena_peak(a) >= 100 * 1000, "peak %zu", tr_arena_peak(a));
    CHECK(tr_arena_capacity(a) >= tr_arena_peak(a), "capacity holds the peak");
    /* A larger step grows the arena; the step after it, of the same size, does not. */
    size_t cap = tr_arena_capacity(a);
    for (int step = 0; step < 2; step++) {
        tr_arena_reset(a);
        uint64_t before = tr_alloc_count();
        for (size_t i = 0; i < cap / 8000 + 10; i++) CHECK(tr_arena_alloc(a, 8000) != NULL, "large step block");
        CHECK(step == 0 ? tr_arena_capacity(a) > cap : tr_alloc_count() == before,
              "larger step %d: capacity %zu (was %zu), %llu allocations", step, tr_arena_capacity(a), cap,
              (unsigned long long)(tr_alloc_count() - before));
    }
    char *z = tr_arena_calloc(a, 333);
    int zero = 1;
    for (int i = 0; i < 333; i++) zero &= z[i] == 0;
    CHECK(zero, "calloc zeroes");
    tr_arena_destroy(a);
}

static void test_rng(void) {
    /* Known-answer vectors of Philox4x32-10 (Random123's kat_vectors). */
    uint32_t r[4];
    tr_philox4x32(r, 0, 0, 0);
    CHECK(r[0] == 0x6627e8d5u && r[1] == 0xe169c58du && r[2] == 0xbc57ac4cu && r[3] == 0x9b00dbd8u,
          "philox zero KAT: %08x %08x %08x %08x", r[0], r[1], r[2], r[3]);
    tr_philox4x32(r, 0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull);
    CHECK(r[0] == 0x408f276du && r[1] == 0x41c83b0eu && r[2] == 0xa20bc7c6u && r[3] == 0x6d5451fdu,
          "philox ones KAT: %08x %08x %08x %08x", r[0], r[1], r[2], r[3]);
    tr_philox4x32(r, 0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull);
    CHECK(r[0] == 0xd16cfe09u && r[1] == 0x94fdccebu && r[2] == 0x5001e420u && r[3] == 0x24126ea1u,
          "philox pi KAT: %08x %08x %08x %08x", r[0], r[1], r[2], r[3]);

    /* Blocks 16 at a time in vector lanes equal blocks one at a time: 37 blocks (two vector
     * groups and a tail), from a low counter that wraps past 2^64 inside the first group. */
    uint32_t many[4 * 37];
    const uint64_t key = 0x299f31d0a4093822ull, hi = 0x0370734413198a2eull, lo0 = 0xfffffffffffffff8ull;
    tr_philox4x32_blocks(many, 37, key, hi, lo0);
    int same = 1;
    for (int b = 0; b < 37; b++) {
        tr_philox4x32(r, key, hi, lo0 + (uint64_t)b);
        for (int i = 0; i < 4; i++) same &= many[4 * b + i] == r[i];
    }
    CHECK(same, "philox blocks equal single blocks");
    tr_philox4x32_blocks(many, 1, 0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull);
    CHECK(many[0] == 0x408f276du && many[3] == 0x6d5451fdu, "philox blocks ones KAT: %08x %08x", many[0], many[3]);
    tr_philox4x32_blocks(many, 16, 0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull);
    CHECK(many[0] == 0x408f276du && many[3] == 0x6d5451fdu, "philox vector blocks ones KAT: %08x %08x", many[0],
          many[3]);

    /* A range drawn in pieces equals the range drawn at once (layout independence). */
    float whole[103], part[103];
    tr_rng_fill_uniform(whole, 103, 7, 3, 5, -1, 1);
    tr_rng_fill_uniform(part, 50, 7, 3, 5, -1, 1);
    tr_rng_fill_uniform(part + 50, 53, 7, 3, 55, -1, 1);
    CHECK(memcmp(whole, part, sizeof whole) == 0, "uniform split equals whole");
    CHECK(whole[17] == -1 + 2 * tr_rng_uniform(7, 3, 22), "element access matches fill");
    tr_rng_fill_normal(whole, 103, 7, 3, 5, 0, 1);
    tr_rng_fill_normal(part, 33, 7, 3, 5, 0, 1);
    tr_rng_fill_normal(part + 33, 70, 7, 3, 38, 0, 1);
    CHECK(memcmp(whole, part, sizeof whole) == 0, "normal split equals whole");

    /* Moments of 200k draws. */
    enum { N = 200000 };
    static float u[N];
    tr_rng_fill_uniform(u, N, 1, 2, 0, 0, 1);
    double m = 0, v = 0;
    for (int i = 0; i < N; i++) m += u[i];
    m /= N;
    for (int i = 0; i < N; i++) v += (u[i] - m) * (u[i] - m);
    v /= N;
    CHECK_NEAR(m, 0.5, 0.005);
    CHECK_NEAR(v, 1.0 / 12, 0.002);
    tr_rng_fill_normal(u, N, 1, 2, 0, 0, 1);
    m = v = 0;
    for (int i = 0; i < N; i++) m += u[i];
    m /= N;
    for (int i = 0; i < N; i++) v += (u[i] - m) * (u[i] - m);
    v /= N;
    CHECK_NEAR(m, 0.0, 0.01);
    CHECK_NEAR(v, 1.0, 0.02);
    CHECK(tr_rng_stream(1, 2, 3) != tr_rng_stream(1, 3, 2), "sub-streams differ");
}

/* Counts the nonzero results of x * s over n elements of x (a parallel kernel: the OpenMP
 * pool's threads compute most of them). */
static int64_t scaled_nonzero(float x, double s, int64_t n) {
    tr_graph *g;
    if (tr_graph_create(&g, 0) != TR_OK) return -1;
    tr_tensor *t = tr_graph_input(g, TR_F32, 1, &n);
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = x;
    tr_tensor *y = tr_scale(g, t, s);
    int64_t nz = 0;
    for (int64_t i = 0; y && i < n; i++) nz += ((float *)y->data)[i] != 0.0f;
    tr_graph_destroy(g);
    return y ? nz : -1;
}

static void test_flush_denormals(void) {
    const int64_t n = 1 << 20; /* far above the kernels' parallel threshold */
    tr_set_num_threads(2);
    volatile float tiny = 1e-30f, small = 1e-10f, denormal = 1e-40f;
    /* IEEE gradual underflow: the product is a denormal, not 0, on every thread */
    CHECK(tr_set_flush_denormals(0) == 1, "this CPU has a flush control");
    CHECK(tiny * small != 0.0f && denormal * 1.0f != 0.0f, "gradual underflow when off");
    CHECK(scaled_nonzero(1e-30f, 1e-10, n) == n, "every thread keeps denormals when off");
    /* flushed: results below FLT_MIN are 0 (FTZ) and denormal inputs read as 0 (DAZ) */
    CHECK(tr_set_flush_denormals(1) == 1, "flush on");
    CHECK(tiny * small == 0.0f, "FTZ on the calling thread: %g", (double)(tiny * small));
    CHECK(denormal * 1.0f == 0.0f, "DAZ on the calling thread: %g", (double)(denormal * 1.0f));
    CHECK(scaled_nonzero(1e-30f, 1e-10, n) == 0, "every pool thread flushes");
    CHECK(scaled_nonzero(1.0f, 0.5, n) == n, "normal values untouched");
    tr_set_flush_denormals(0);
    CHECK(scaled_nonzero(1e-30f, 1e-10, n) == n, "off again on every thread");
}

int main(void) {
    test_status();
    test_flush_denormals();
    test_arena();
    test_rng();
    return test_finish();
}
