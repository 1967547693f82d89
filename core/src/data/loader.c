/* The batch loader: background worker threads gather this rank's samples of the coming
 * batches into a ring of preallocated host buffers, so loading overlaps compute; each worker
 * fills whole batches, several batches load at once. All buffers are made at creation; an
 * epoch allocates nothing. The ring has room for `prefetch` batches ahead, more for small
 * batches, and the consumer wakes sleeping workers only when the batches claimed ahead fall
 * to half the ring or below `prefetch` (or when the batch it needs is not claimed yet). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "trainer/data.h"
#include "trainer/memory.h"

#define DEEP_BATCHES 8             /* the ring small batches get, at most */
#define DEEP_BYTES ((size_t)16 << 20)

typedef struct slot {
    tr_host_batch b;
    void *other_x, *other_y;   /* another rank's sample, read for its length (trim); else NULL */
    tr_status status;
    char msg[512];
    int64_t ready;             /* the batch this slot holds, complete; -1: none */
} slot;

struct tr_loader {
    const tr_dataset_ops *ops;
    void *ds;
    tr_data_spec spec;
    tr_sampler s;
    size_t x_bytes, y_bytes;   /* per sample */
    int64_t *perm;
    int n_slots;               /* ring size (the batches held ahead + the slot the consumer holds) */
    int64_t wake_ahead;        /* the consumer wakes the workers at this many batches claimed ahead */
    slot *slots;
    int n_workers;             /* background threads; 0: load on the caller's thread */
    pthread_t *threads;
    /* shared state, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t epoch, next_claim, next_take, n_batches;
    uint64_t generation;        /* bumped by start_epoch: workers drop stale work */
    int running, stop;
    int busy;                   /* workers filling a slot (reading perm) */
};

/* The longest unpadded row of `rows` rows of T token ids (-1 padding at the end), or keep if
 * longer. */
static int64_t longest(const int32_t *x, int64_t rows, int64_t T, int64_t keep) {
    for (int64_t r = 0; r < rows && keep < T; r++) {
        const int32_t *row = x + r * T;
        int64_t t = T;
        while (t > keep && row[t - 1] == -1) t--;
        keep = t > keep ? t : keep;
    }
    return keep;
}

/* Cuts the batch's last x dim to the longest unpadded row of the whole global batch b (at
 * least one position), packing the rows x_len apart in place (rows only move down). A rank
 * reads the other ranks' samples of the batch for their lengths: cut to its own share's
 * longest, a sample's tensors would have another shape than under one process, and the
 * dropout masks, keyed by an element's index within its sample (ops/dropout.c), would differ
 * (DESIGN.md decision 5). */
static tr_status trim(tr_loader *L, slot *sl, int64_t b, int64_t off, int64_t count, int64_t gs) {
    tr_host_batch *hb = &sl->b;
    int64_t T = hb->x_len, per = L->spec.x_numel / (T ? T : 1);
    int32_t *x = hb->x;
    int64_t keep = longest(x, hb->size * per, T, 1);
    const int64_t *idx = L->perm + b * L->s.global_batch;
    for (int64_t i = 0; i < gs && keep < T; i++) {
        if (i == off) i += count; /* this rank's own, measured above */
        if (i >= gs) break;
        tr_status st = L->ops->get(L->ds, idx[i], sl->other_x, L->y_bytes ? sl->other_y : NULL);
        if (st != TR_OK) {
            tr_error_prefix("data: sample %lld: ", (long long)idx[i]);
            return st;
        }
        keep = longest(sl->other_x, per, T, keep);
    }
    if (keep == T) return TR_OK;
    for (int64_t r = 1; r < hb->size * per; r++) memmove(x + r * keep, x + r * T, (size_t)keep * sizeof *x);
    hb->x_len = keep;
    return TR_OK;
}

static tr_status fill(tr_loader *L, slot *sl, int64_t b) {
    int64_t off, count, gs;
    tr_sampler_share(&L->s, b, &off, &count, &gs);
    const int64_t *idx = L->perm + b * L->s.global_batch + off;
    for (int64_t i = 0; i < count; i++) {
        tr_status st = L->ops->get(L->ds, idx[i], (char *)sl->b.x + (size_t)i * L->x_bytes,
                                   L->y_bytes ? (char *)sl->b.y + (size_t)i * L->y_bytes : NULL);
        if (st != TR_OK) {
            tr_error_prefix("data: sample %lld: ", (long long)idx[i]);
            return st;
        }
    }
    sl->b.size = count;
    sl->b.x_len = L->spec.x_ndim > 0 ? L->spec.x_shape[L->spec.x_ndim - 1] : 1;
    if (L->spec.x_trim_pad) TR_CHECK(trim(L, sl, b, off, count, gs));
    sl->b.global_size = gs;
    sl->b.first = b * L->s.global_batch + off;
    sl->b.index = b;
    return TR_OK;
}

/* A worker claims the next batch to load, fills its slot outside the lock and marks it
 * ready. Batches are claimed at most n_slots - 1 ahead of the consumer, so the slot the
 * consumer holds is never touched and no two workers share a slot. */
static void *worker(void *arg) {
    tr_loader *L = arg;
    pthread_mutex_lock(&L->mu);
    while (!L->stop) {
        if (!L->running || L->next_claim >= L->n_batches ||
            L->next_claim - L->next_take >= L->n_slots - 1) {
            pthread_cond_wait(&L->cv, &L->mu);
            continue;
        }
        int64_t b = L->next_claim++;
        uint64_t gen = L->generation;
        slot *sl = &L->slots[b % L->n_slots];
        L->busy++;
        pthread_mutex_unlock(&L->mu);
        tr_status st = fill(L, sl, b);
        pthread_mutex_lock(&L->mu);
        L->busy--;
        if (gen == L->generation) { /* else the epoch was restarted meanwhile */
            sl->status = st;
            if (st != TR_OK) snprintf(sl->msg, sizeof sl->msg, "%s", tr_error_msg());
            sl->ready = b;
        }
        pthread_cond_broadcast(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

static void stop_workers(tr_loader *L, int n) {
    pthread_mutex_lock(&L->mu);
    L->stop = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    for (int i = 0; i < n; i++) pthread_join(L->threads[i], NULL);
}

tr_status tr_loader_create(tr_loader **out, const tr_dataset_ops *ops, void *ds,
                           const tr_data_spec *spec, const tr_sampler *s, int prefetch,
                           int workers) {
    *out = NULL;
    TR_CHECK(tr_sampler_validate(s));
    if (prefetch < 0 || workers < 0)
        return tr_error_set(TR_ERR_INVALID, "data: prefetch %d and workers %d must be >= 0", prefetch, workers);
    /* One batch's bytes (the x and y buffers of a slot) must be a size_t. */
    int64_t share = (s->global_batch + s->world - 1) / s->world;
    size_t xb, yb, xs, ys, batch_bytes;
    if (spec->x_numel < 0 || spec->y_numel < 0 ||
        __builtin_mul_overflow((size_t)spec->x_numel, tr_dtype_size(spec->x_dtype), &xb) ||
        __builtin_mul_overflow((size_t)spec->y_numel, tr_dtype_size(spec->y_dtype), &yb) ||
        __builtin_mul_overflow(xb, (size_t)share, &xs) || __builtin_mul_overflow(yb ? yb : 1, (size_t)share, &ys) ||
        __builtin_add_overflow(xs, ys, &batch_bytes))
        return tr_error_set(TR_ERR_INVALID, "data: a batch of %lld samples of %lld + %lld elements does not fit in memory",
                            (long long)share, (long long)spec->x_numel, (long long)spec->y_numel);
    tr_loader *L = tr_calloc(1, sizeof *L);
    if (!L) return TR_ERR_NOMEM;
    L->ops = ops;
    L->ds = ds;
    L->spec = *spec;
    L->s = *s;
    L->x_bytes = xb;
    L->y_bytes = yb;
    int threaded = prefetch > 0 && workers > 0;
    /* Small batches get a deeper ring than asked for (up to DEEP_BATCHES within DEEP_BYTES):
     * the consumer wakes the workers only when the batches claimed ahead fall to half the ring
     * (tr_loader_next), so a deeper ring means fewer wake-ups, which cost most where steps are
     * short. */
    size_t fit = DEEP_BYTES / (batch_bytes ? batch_bytes : 1), want = fit < DEEP_BATCHES ? fit : DEEP_BATCHES;
    int depth = threaded && (size_t)prefetch < want ? (int)want : prefetch;
    L->n_slots = threaded ? depth + 1 : 1;
    /* Half the ring, or the prefetch asked for if more: the hysteresis spends only the extra
     * depth small batches get. */
    L->wake_ahead = depth / 2 > prefetch - 1 ? depth / 2 : prefetch - 1;
    L->perm = tr_malloc((size_t)(s->n ? s->n : 1) * sizeof *L->perm);
    L->slots = tr_calloc((size_t)L->n_slots, sizeof *L->slots);
    L->threads = threaded ? tr_calloc((size_t)workers, sizeof *L->threads) : NULL;
    tr_status st = (L->perm && L->slots && (!threaded || L->threads)) ? TR_OK : TR_ERR_NOMEM;
    for (int i = 0; i < L->n_slots && st == TR_OK; i++) {
        L->slots[i].ready = -1;
        L->slots[i].b.x = tr_malloc(xs);
        L->slots[i].b.y = tr_malloc(ys);
        if (!L->slots[i].b.x || !L->slots[i].b.y) st = TR_ERR_NOMEM;
        if (st == TR_OK && spec->x_trim_pad && s->world > 1) {
            L->slots[i].other_x = tr_malloc(xb ? xb : 1);
            L->slots[i].other_y = tr_malloc(yb ? yb : 1);
            if (!L->slots[i].other_x || !L->slots[i].other_y) st = TR_ERR_NOMEM;
        }
    }
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    for (int i = 0; st == TR_OK && threaded && i < workers; i++) {
        if (pthread_create(&L->threads[i], NULL, worker, L) != 0) {
            stop_workers(L, i);
            st = tr_error_set(TR_ERR_INTERNAL, "data: cannot start loader thread %d of %d", i + 1, workers);
        } else {
            L->n_workers = i + 1;
        }
    }
    if (st != TR_OK) {
        L->n_workers = 0;
        tr_loader_destroy(L);
        return st;
    }
    *out = L;
    return TR_OK;
}

void tr_loader_destroy(tr_loader *L) {
    if (!L) return;
    if (L->n_workers) stop_workers(L, L->n_workers);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
    for (int i = 0; L->slots && i < L->n_slots; i++) {
        tr_free(L->slots[i].b.x);
        tr_free(L->slots[i].b.y);
        tr_free(L->slots[i].other_x);
        tr_free(L->slots[i].other_y);
    }
    tr_free(L->threads);
    tr_free(L->slots);
    tr_free(L->perm);
    tr_free(L);
}

tr_status tr_loader_start_epoch(tr_loader *L, int64_t epoch, int64_t start_batch) {
    int64_t n_batches = tr_sampler_batches(&L->s);
    if (start_batch < 0 || start_batch > n_batches)
        return tr_error_set(TR_ERR_INVALID, "data: resume batch %lld outside the epoch's %lld",
                            (long long)start_batch, (long long)n_batches);
    /* Stop the workers and wait until none reads the permutation. */
    pthread_mutex_lock(&L->mu);
    L->running = 0;
    L->generation++;
    while (L->busy) pthread_cond_wait(&L->cv, &L->mu);
    pthread_mutex_unlock(&L->mu);
    tr_sampler_permutation(&L->s, epoch, L->perm);
    pthread_mutex_lock(&L->mu);
    L->epoch = epoch;
    L->n_batches = n_batches;
    L->next_claim = L->next_take = start_batch;
    for (int i = 0; i < L->n_slots; i++) L->slots[i].ready = -1;
    L->running = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return TR_OK;
}

tr_status tr_loader_next(tr_loader *L, const tr_host_batch **out) {
    *out = NULL;
    if (!L->n_workers) {
        if (L->next_take >= L->n_batches) return TR_OK;
        slot *sl = &L->slots[0];
        TR_CHECK(fill(L, sl, L->next_take));
        L->next_take++;
        *out = &sl->b;
        return TR_OK;
    }
    pthread_mutex_lock(&L->mu);
    if (L->next_take >= L->n_batches) {
        pthread_mutex_unlock(&L->mu);
        return TR_OK;
    }
    slot *sl = &L->slots[L->next_take % L->n_slots];
    if (L->next_claim == L->next_take) pthread_cond_broadcast(&L->cv); /* unclaimed: a worker must run */
    while (sl->ready != L->next_take) pthread_cond_wait(&L->cv, &L->mu);
    L->next_take++; /* the slot handed out before this one may now be refilled */
    /* Waking a sleeping worker costs the waker an inter-processor interrupt (5% of a short
     * step in a VM), so the workers are woken only once the batches claimed ahead fall to
     * half the ring, or below the prefetch asked for (the extra depth of small batches is
     * what the hysteresis spends): they then refill it in one go. */
    if (L->next_claim - L->next_take <= L->wake_ahead && L->next_claim < L->n_batches) pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    if (sl->status != TR_OK) return tr_error_set(sl->status, "%s", sl->msg);
    *out = &sl->b;
    return TR_OK;
}
