/* Sampling and loading: which samples form each batch on each rank, and a background loader
 * that assembles the next batches while the current one trains.
 *
 *   tr_sampler s = {.n = ds_size, .global_batch = 128, .rank = r, .world = W,
 *                   .shuffle = 1, .drop_last = 0, .seed = seed};
 *   tr_loader *L;
 *   TR_CHECK(tr_loader_create(&L, ops, ds, &spec, &s, 2, 1));   // 2+ batches ahead, 1 thread
 *   TR_CHECK(tr_loader_start_epoch(L, epoch, 0));
 *   const tr_host_batch *b;
 *   while (tr_loader_next(L, &b) == TR_OK && b) { ... train on b ... }
 *
 * Semantics (DistributedSampler's, with the global batch as the unit; docs/design.md
 * "Strategy invariance"):
 * each epoch is a permutation of all n samples, a pure function of (seed, epoch) made with
 * the counter-based RNG, identical for every world size. Global batch b is positions
 * [b*B, b*B + B) of it; rank r takes the contiguous share [r*B/W, (r+1)*B/W) of that batch
 * (shares differ by at most one sample when W does not divide B). The last, short global
 * batch is dropped with drop_last, else split the same way; no sample is duplicated to pad
 * it, so every sample is seen exactly once per epoch by exactly one rank. */
#ifndef TRAINER_DATA_H
#define TRAINER_DATA_H

#include "trainer/export.h"

#include <stdint.h>

#include "trainer/model.h"
#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_sampler {
    int64_t n;              /* dataset size */
    int64_t global_batch;   /* data.batch_size */
    int rank, world;
    int shuffle;
    int drop_last;
    uint64_t seed;
} tr_sampler;

TR_API tr_status tr_sampler_validate(const tr_sampler *s);
/* Global batches per epoch. */
TR_API int64_t tr_sampler_batches(const tr_sampler *s);
/* The epoch's permutation of [0, n) (identity without shuffle) into perm (n entries). */
TR_API void tr_sampler_permutation(const tr_sampler *s, int64_t epoch, int64_t *perm);
/* This rank's share of global batch b: its first position in the batch and its length;
 * *global_size is the whole global batch's length. */
TR_API void tr_sampler_share(const tr_sampler *s, int64_t b, int64_t *offset, int64_t *count,
                      int64_t *global_size);

/* A batch on the host, owned by the loader, valid until the next tr_loader_next. */
typedef struct tr_host_batch {
    void *x;                /* (size, x_shape...) of x_dtype */
    void *y;                /* (size, y_shape...) of y_dtype */
    int64_t size;           /* samples on this rank */
    int64_t global_size;    /* samples in the global batch */
    int64_t first;          /* global position (epoch * n-style index) of this rank's first sample */
    int64_t index;          /* batch number in the epoch */
    /* ABI 0.9: the length of x's last dim in this batch: the spec's, or less when the spec
     * has x_trim_pad (each sample's rows then lie x_len apart; the same on every rank: the
     * longest of the whole global batch); 0 (a batch made by an older caller) means the
     * spec's. */
    int64_t x_len;
} tr_host_batch;

typedef struct tr_loader tr_loader;

/* ds and ops are borrowed. Up to `prefetch` batches are assembled ahead by `workers`
 * background threads, each filling whole batches (prefetch or workers 0: synchronously on
 * the caller's thread); small batches get room for up to 8 (within 16 MiB), and the workers
 * are woken to refill it only when the batches claimed ahead fall to half of it or below
 * `prefetch`. Batches come out in order whatever the number of workers. A batch too large
 * for memory's sizes is an error. */
TR_API tr_status tr_loader_create(tr_loader **out, const tr_dataset_ops *ops, void *ds,
                           const tr_data_spec *spec, const tr_sampler *s, int prefetch,
                           int workers);
TR_API void tr_loader_destroy(tr_loader *L);
/* Starts (or resumes at batch start_batch) an epoch; stops any batches in flight. */
TR_API tr_status tr_loader_start_epoch(tr_loader *L, int64_t epoch, int64_t start_batch);
/* The next batch, or *out = NULL at the end of the epoch. A dataset error is returned here. */
TR_API tr_status tr_loader_next(tr_loader *L, const tr_host_batch **out);

#ifdef __cplusplus
}
#endif
#endif
