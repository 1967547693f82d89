/* The sampler: per-epoch permutations from the counter RNG and per-rank shares of each
 * global batch (see trainer/data.h for the semantics). */
#include "trainer/data.h"
#include "trainer/rng.h"

tr_status tr_sampler_validate(const tr_sampler *s) {
    if (s->n < 0) return tr_error_set(TR_ERR_INVALID, "sampler: dataset size %lld", (long long)s->n);
    if (s->global_batch < 1)
        return tr_error_set(TR_ERR_INVALID, "data.batch_size: must be >= 1, got %lld",
                            (long long)s->global_batch);
    if (s->world < 1 || s->rank < 0 || s->rank >= s->world)
        return tr_error_set(TR_ERR_INVALID, "sampler: rank %d of world %d", s->rank, s->world);
    if (s->global_batch < s->world)
        return tr_error_set(TR_ERR_INVALID,
                            "data.batch_size: the global batch (%lld) is smaller than the number "
                            "of ranks (%d): every rank needs at least one sample; set data.batch_size to %d "
                            "or more, or run fewer ranks",
                            (long long)s->global_batch, s->world, s->world);
    return TR_OK;
}

int64_t tr_sampler_batches(const tr_sampler *s) {
    if (s->global_batch <= 0) return 0;
    return s->drop_last ? s->n / s->global_batch : (s->n + s->global_batch - 1) / s->global_batch;
}

void tr_sampler_permutation(const tr_sampler *s, int64_t epoch, int64_t *perm) {
    for (int64_t i = 0; i < s->n; i++) perm[i] = i;
    if (!s->shuffle) return;
    /* Fisher-Yates; draw i uses element i of the epoch's stream, so the permutation depends
     * only on (seed, epoch). 64-bit draws keep the modulo bias below 2^-40 for n < 2^24. */
    uint64_t stream = tr_rng_stream(TR_RNG_STREAM_SHUFFLE, (uint64_t)epoch, 0);
    for (int64_t i = s->n - 1; i > 0; i--) {
        uint64_t r = ((uint64_t)tr_rng_u32(s->seed, stream, 2 * (uint64_t)i) << 32) |
                     tr_rng_u32(s->seed, stream, 2 * (uint64_t)i + 1);
        int64_t j = (int64_t)(r % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

void tr_sampler_share(const tr_sampler *s, int64_t b, int64_t *offset, int64_t *count,
                      int64_t *global_size) {
    int64_t start = b * s->global_batch;
    int64_t gs = s->n - start < s->global_batch ? s->n - start : s->global_batch;
    if (gs < 0) gs = 0;
    int64_t lo = gs * s->rank / s->world, hi = gs * (s->rank + 1) / s->world;
    *offset = lo;
    *count = hi - lo;
    *global_size = gs;
}
