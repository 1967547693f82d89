/* Sampler and loader: permutations, per-rank shares (every sample once per epoch, any world
 * size), prefetching equals synchronous loading, resume mid-epoch, errors propagate, padded
 * token batches cut to the global batch's longest on every rank. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/data.h"

typedef struct toy { int64_t n, fail_at, width; } toy; /* width: floats per sample, 0: 2 */

static int64_t toy_size(void *ctx) { return ((toy *)ctx)->n; }
static void toy_spec(void *ctx, tr_data_spec *d) {
    memset(d, 0, sizeof *d);
    int64_t w = ((toy *)ctx)->width ? ((toy *)ctx)->width : 2;
    d->x_dtype = TR_F32; d->x_ndim = 1; d->x_shape[0] = w; d->x_numel = w;
    d->y_dtype = TR_I32; d->y_numel = 1; d->n_classes = 1000;
}
static tr_status toy_get(void *ctx, int64_t i, void *x, void *y) {
    toy *t = ctx;
    if (i == t->fail_at) return tr_error_set(TR_ERR_PARSE, "toy.bin: record %lld is corrupt", (long long)i);
    ((float *)x)[0] = (float)i;
    ((float *)x)[1] = (float)(2 * i);
    if (y) *(int32_t *)y = (int32_t)i;
    return TR_OK;
}
static const tr_dataset_ops toy_ops = {.size = toy_size, .spec = toy_spec, .get = toy_get};

static void test_shares(int64_t n, int64_t B, int drop_last) {
    for (int W = 1; W <= 4; W++) {
        int *seen = calloc((size_t)n, sizeof *seen);
        int64_t *perm = malloc((size_t)n * sizeof *perm);
        tr_sampler s0 = {.n = n, .global_batch = B, .rank = 0, .world = 1, .shuffle = 1, .drop_last = drop_last, .seed = 9};
        tr_sampler_permutation(&s0, 3, perm);
        for (int r = 0; r < W; r++) {
            tr_sampler s = {.n = n, .global_batch = B, .rank = r, .world = W, .shuffle = 1, .drop_last = drop_last, .seed = 9};
            int64_t *pr = malloc((size_t)n * sizeof *pr);
            tr_sampler_permutation(&s, 3, pr);
            CHECK(memcmp(pr, perm, (size_t)n * sizeof *pr) == 0, "W=%d: same permutation on every rank", W);
            for (int64_t b = 0; b < tr_sampler_batches(&s); b++) {
                int64_t off, cnt, gs;
                tr_sampler_share(&s, b, &off, &cnt, &gs);
                CHECK(cnt >= gs / W && cnt <= gs / W + 1, "uneven split within one sample");
                for (int64_t i = 0; i < cnt; i++) seen[pr[b * B + off + i]]++;
            }
            free(pr);
        }
        int64_t expect_total = drop_last ? n / B * B : n, total = 0, dup = 0;
        for (int64_t i = 0; i < n; i++) { total += seen[i]; dup += seen[i] > 1; }
        CHECK(total == expect_total && dup == 0, "n=%lld B=%lld W=%d drop_last=%d: %lld samples seen, %lld twice",
              (long long)n, (long long)B, W, drop_last, (long long)total, (long long)dup);
        free(seen);
        free(perm);
    }
}

/* Batches of B samples of `width` floats (the loader's ring is deeper for small batches: B 4
 * wraps a ring of 8 several times, wide samples get a ring of just `prefetch`). */
static void collect_wide(int64_t B, int64_t width, int prefetch, int workers, int64_t start, int32_t *out,
                         int64_t *count, int rank, int world) {
    toy t = {.n = 103, .fail_at = -1, .width = width};
    tr_sampler s = {.n = 103, .global_batch = B, .rank = rank, .world = world, .shuffle = 1, .seed = 5};
    tr_data_spec spec;
    toy_spec(&t, &spec);
    tr_loader *L;
    CHECK(tr_loader_create(&L, &toy_ops, &t, &spec, &s, prefetch, workers) == TR_OK, "create: %s", tr_error_msg());
    /* Start an epoch, abandon it half-way, then run the real one: restarts must be clean. */
    tr_loader_start_epoch(L, 0, 0);
    const tr_host_batch *b;
    tr_loader_next(L, &b);
    CHECK(tr_loader_start_epoch(L, 1, start) == TR_OK, "start");
    *count = 0;
    while (tr_loader_next(L, &b) == TR_OK && b) {
        for (int64_t i = 0; i < b->size; i++) {
            int32_t y = ((int32_t *)b->y)[i];
            CHECK(((float *)b->x)[(t.width ? t.width : 2) * i + 1] == 2.0f * (float)y, "x matches y");
            out[(*count)++] = y;
        }
    }
    tr_loader_destroy(L);
}

static void collect(int prefetch, int workers, int64_t start, int32_t *out, int64_t *count, int rank, int world) {
    collect_wide(16, 0, prefetch, workers, start, out, count, rank, world);
}

/* Token ids with -1 padding (x_trim_pad): sample i is (i % 13) + 1 ids of value i in 16. */
static tr_status tok_get(void *ctx, int64_t i, void *x, void *y) {
    toy *t = ctx;
    if (i == t->fail_at) return tr_error_set(TR_ERR_PARSE, "tok.bin: record %lld is corrupt", (long long)i);
    int32_t *row = x;
    for (int64_t k = 0; k < 16; k++) row[k] = k <= i % 13 ? (int32_t)i : -1;
    if (y) *(int32_t *)y = (int32_t)i;
    return TR_OK;
}

/* Each batch's x_len for every rank of `world`: every rank cuts its share to the longest text
 * of the whole global batch (what one process cuts it to), and its rows stay intact. */
static void test_trim_global(int world, int workers) {
    toy t = {.n = 61, .fail_at = -1};
    tr_data_spec spec = {.x_dtype = TR_I32, .x_ndim = 1, .x_shape = {16}, .x_numel = 16, .y_dtype = TR_I32,
                         .y_numel = 1, .n_classes = 1000, .x_trim_pad = 1};
    tr_dataset_ops ops = {.size = toy_size, .spec = toy_spec, .get = tok_get};
    int64_t lens[61][4];
    int64_t nb = 0;
    for (int r = 0; r <= world; r++) { /* r == world: the one-process reference */
        tr_sampler s = {.n = 61, .global_batch = 6, .rank = r < world ? r : 0, .world = r < world ? world : 1,
                        .shuffle = 1, .seed = 3};
        tr_loader *L;
        CHECK(tr_loader_create(&L, &ops, &t, &spec, &s, 2, workers) == TR_OK, "create: %s", tr_error_msg());
        tr_loader_start_epoch(L, 2, 0);
        const tr_host_batch *b;
        nb = 0;
        int intact = 1;
        while (tr_loader_next(L, &b) == TR_OK && b) {
            lens[nb++][r < world ? r : 3] = b->x_len;
            for (int64_t i = 0; i < b->size; i++) {
                const int32_t *row = (const int32_t *)b->x + i * b->x_len;
                int32_t id = ((const int32_t *)b->y)[i];
                for (int64_t k = 0; k < b->x_len; k++) intact &= row[k] == (k <= id % 13 ? id : -1);
            }
        }
        CHECK(intact, "world %d rank %d: rows intact after the cut", world, r);
        tr_loader_destroy(L);
    }
    int same = 1, differ = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < world; r++) same &= lens[b][r] == lens[b][3];
    for (int64_t b = 0; b < nb; b++) differ |= lens[b][0] != 16;
    CHECK(same && differ && nb == 11, "world %d: every rank's batches cut to the global batch's longest (%lld batches)",
          world, (long long)nb);
    /* another rank's sample that fails to load fails this rank's batch, naming it */
    t.fail_at = 5;
    tr_sampler s = {.n = 61, .global_batch = 6, .rank = 0, .world = world, .shuffle = 0, .seed = 3};
    tr_loader *L;
    tr_loader_create(&L, &ops, &t, &spec, &s, 0, 0);
    tr_loader_start_epoch(L, 0, 0);
    const tr_host_batch *b;
    tr_status st = tr_loader_next(L, &b);
    CHECK(st == TR_ERR_PARSE && strstr(tr_error_msg(), "sample 5") && strstr(tr_error_msg(), "record 5 is corrupt"),
          "world %d: another rank's bad sample: %s", world, tr_error_msg());
    tr_loader_destroy(L);
}

int main(void) {
    test_trim_global(2, 1);
    test_trim_global(3, 2);
    test_shares(47, 10, 0);
    test_shares(47, 10, 1);
    test_shares(100, 7, 0);
    test_shares(5, 4, 0);

    tr_sampler s = {.n = 50, .global_batch = 8, .rank = 0, .world = 1, .shuffle = 1, .seed = 1};
    int64_t a[50], b2[50];
    tr_sampler_permutation(&s, 0, a);
    tr_sampler_permutation(&s, 1, b2);
    CHECK(memcmp(a, b2, sizeof a) != 0, "epochs shuffle differently");
    s.shuffle = 0;
    tr_sampler_permutation(&s, 1, b2);
    CHECK(b2[0] == 0 && b2[49] == 49, "no shuffle: identity");
    s.global_batch = 0;
    CHECK(tr_sampler_validate(&s) == TR_ERR_INVALID && strstr(tr_error_msg(), "data.batch_size"), "batch 0 refused");
    s.global_batch = 2; s.world = 4; s.rank = 1;
    CHECK(tr_sampler_validate(&s) == TR_ERR_INVALID && strstr(tr_error_msg(), "smaller than the number of ranks"),
          "batch smaller than world refused: %s", tr_error_msg());

    int32_t sync[103], pre[103], resumed[103];
    int64_t ns, np, nr;
    collect(0, 0, 0, sync, &ns, 0, 1);
    collect(3, 1, 0, pre, &np, 0, 1);
    CHECK(ns == 103 && np == 103 && memcmp(sync, pre, sizeof sync) == 0, "prefetch equals synchronous");
    int32_t many[103];
    int64_t nm;
    collect(5, 4, 0, many, &nm, 0, 1);
    CHECK(nm == 103 && memcmp(sync, many, sizeof sync) == 0, "4 workers deliver the same batches in order");
    collect(2, 1, 4, resumed, &nr, 0, 1);
    CHECK(nr == 103 - 64 && memcmp(resumed, sync + 64, (size_t)nr * sizeof *resumed) == 0,
          "resume at batch 4 continues the same order");
    /* 26 batches through the ring of 8 small batches get, and through rings of 2 and 3 when
     * a batch is 16 MiB: each sample order equal to the synchronous one of the same batches. */
    int32_t small0[103], small1[103], wide0[103], wide1[103], wide2[103];
    int64_t k0, k1, k2, k3, k4;
    collect_wide(4, 0, 0, 0, 0, small0, &k0, 0, 1);
    collect_wide(4, 0, 2, 1, 0, small1, &k1, 0, 1);
    CHECK(k0 == 103 && k1 == 103 && memcmp(small0, small1, sizeof small0) == 0, "26 small batches through the deep ring");
    collect_wide(4, 0, 2, 3, 0, small1, &k1, 0, 1);
    CHECK(k1 == 103 && memcmp(small0, small1, sizeof small0) == 0, "... with 3 workers");
    collect_wide(4, 1 << 20, 0, 0, 0, wide0, &k2, 0, 1);
    collect_wide(4, 1 << 20, 2, 1, 0, wide1, &k3, 0, 1);
    collect_wide(4, 1 << 20, 3, 2, 0, wide2, &k4, 0, 1);
    CHECK(k2 == 103 && k3 == 103 && k4 == 103 && memcmp(wide0, wide1, sizeof wide0) == 0 &&
              memcmp(wide0, wide2, sizeof wide0) == 0, "26 batches of 16 MiB through rings of 2 and 3");
    /* Two ranks together see exactly the one-rank order, batch by batch. */
    int32_t r0[103], r1[103];
    int64_t n0, n1;
    collect(2, 1, 0, r0, &n0, 0, 2);
    collect(2, 3, 0, r1, &n1, 1, 2);
    CHECK(n0 + n1 == 103, "ranks cover the epoch");
    CHECK(r0[0] == sync[0] && r1[0] == sync[8], "rank shares are contiguous parts of each global batch");

    /* A dataset error reaches the caller with its message. */
    toy t = {.n = 40, .fail_at = 7};
    tr_sampler s2 = {.n = 40, .global_batch = 8, .rank = 0, .world = 1, .shuffle = 0, .seed = 1};
    tr_data_spec spec;
    toy_spec(&t, &spec);
    tr_loader *L;
    tr_loader_create(&L, &toy_ops, &t, &spec, &s2, 2, 2);
    tr_loader_start_epoch(L, 0, 0);
    const tr_host_batch *hb;
    tr_status st = tr_loader_next(L, &hb);
    CHECK(st == TR_ERR_PARSE && strstr(tr_error_msg(), "toy.bin: record 7 is corrupt"), "error propagates: %s",
          tr_error_msg());
    tr_loader_destroy(L);
    return test_finish();
}
