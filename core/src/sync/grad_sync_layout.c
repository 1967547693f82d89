/* The engine's buckets over the flat buffer, in buffer order: ddp's (built from the last
 * parameter down, a small first bucket so that communication starts early) or sharded's
 * units (from the first parameter up, at most TR_GRAD_MAX_UNITS: tr_grad_sync_units). */
#include "sync_impl.h"

#include "trainer/memory.h"

enum { MAX_BUCKETS = 4096 };

/* ddp: the first bucket (the last parameters) holds up to first_mb, the others bucket_mb;
 * padded, a bucket ends where the next parameter's aligned start would be. Built backwards,
 * then put in buffer order. */
static int buckets(tr_grad_sync *e, int np) {
    size_t cap = (size_t)(e->c.first_mb * 1048576.0 / 4), used = 0, align = tr_params_align(e->host);
    int nb = 0;
    for (int p = np - 1; p >= 0; p--) {
        size_t lo = tr_params_offset(e->host, p), hi = lo + (size_t)tr_tensor_numel(tr_params_get(e->host, p));
        sync_bucket *b = &e->b[nb];
        if (b->at.np > 0 && used + (hi - lo) > cap && nb + 1 < MAX_BUCKETS) {
            b = &e->b[++nb];
            used = 0;
            cap = (size_t)(e->c.bucket_mb * 1048576.0 / 4);
        }
        if (b->at.np == 0) b->at.hi = e->c.pad ? (hi + align - 1) / align * align : hi;
        b->at.lo = lo; /* going down the buffer: the bucket grows toward lower offsets */
        b->at.p0 = p;
        b->at.np++;
        used += hi - lo;
        e->bucket_of[p] = nb;
    }
    int n = np ? nb + 1 : 0;
    for (int i = 0; i < n / 2; i++) {
        sync_bucket t = e->b[i];
        e->b[i] = e->b[n - 1 - i];
        e->b[n - 1 - i] = t;
    }
    for (int p = 0; p < np; p++) e->bucket_of[p] = n - 1 - e->bucket_of[p];
    return n;
}

/* Greedy grouping from the first parameter up at a size cap: a unit is closed when the next
 * parameter would take it past cap. Two neighbouring units together exceed cap, so n units
 * hold more than (n - 1) / 2 caps: the count is bounded but can pass TR_GRAD_MAX_UNITS. */
static int group(const size_t *len, int np, size_t cap, int *unit_of) {
    size_t cur = 0;
    int n = 0;
    for (int p = 0; p < np; p++) {
        if (n == 0 || (cur > 0 && cur + len[p] > cap)) {
            n++;
            cur = 0;
        }
        cur += len[p];
        unit_of[p] = n - 1;
    }
    return n;
}

int tr_grad_sync_units(const size_t *len, int np, double unit_mb, int *unit_of) {
    size_t total = 0, cap = (size_t)(unit_mb * 1048576.0 / 4);
    for (int p = 0; p < np; p++) total += len[p];
    if (cap < total / (TR_GRAD_MAX_UNITS - 1) + 1) cap = total / (TR_GRAD_MAX_UNITS - 1) + 1;
    int n = group(len, np, cap, unit_of);
    /* Doubled once, cap > 2 total / (MAX - 1): n / 2 pairs over cap each, so n <= MAX. */
    while (n > TR_GRAD_MAX_UNITS) n = group(len, np, cap *= 2, unit_of);
    return n;
}

/* sharded: tr_grad_sync_units over each parameter with its padding (up to the next one's
 * start), then the units' ranges. */
static tr_status units(tr_grad_sync *e, int np, int *n) {
    size_t numel = tr_params_numel(e->host);
    size_t *len = tr_calloc((size_t)(np ? np : 1), sizeof *len);
    if (!len) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory for the units", e->c.name);
    for (int p = 0; p < np; p++)
        len[p] = (p + 1 < np ? tr_params_offset(e->host, p + 1) : numel) - tr_params_offset(e->host, p);
    *n = tr_grad_sync_units(len, np, e->c.bucket_mb, e->bucket_of);
    tr_free(len);
    if (*n > TR_GRAD_MAX_UNITS) /* never: tr_grad_sync_units regroups until they fit */
        return tr_error_set(TR_ERR_INTERNAL, "%s: %d units, more than %d", e->c.name, *n, TR_GRAD_MAX_UNITS);
    for (int p = 0; p < np; p++) {
        sync_bucket *b = &e->b[e->bucket_of[p]];
        if (b->at.np++ == 0) {
            b->at.lo = tr_params_offset(e->host, p);
            b->at.p0 = p;
        }
        b->at.hi = p + 1 < np ? tr_params_offset(e->host, p + 1) : numel;
    }
    return TR_OK;
}

tr_status sync_layout(tr_grad_sync *e) {
    int np = tr_params_count(e->host);
    e->bucket_of = tr_calloc((size_t)(np ? np : 1), sizeof *e->bucket_of);
    e->b = tr_calloc(e->c.layout == TR_GRAD_UNITS ? TR_GRAD_MAX_UNITS : MAX_BUCKETS, sizeof *e->b);
    if (!e->bucket_of || !e->b) return tr_error_set(TR_ERR_NOMEM, "gradient sync: out of memory for buckets");
    if (e->c.layout == TR_GRAD_UNITS) TR_CHECK(units(e, np, &e->n));
    else e->n = buckets(e, np);
    size_t soff = 0;
    for (int i = 0; i < e->n; i++) {
        tr_grad_sync_range *r = &e->b[i].at;
        if (e->c.reduce == TR_GRAD_REDUCE_SCATTER && (r->hi - r->lo) % (size_t)e->world)
            return tr_error_set(TR_ERR_INTERNAL, "gradient sync: bucket %d of %zu floats does not split %d ways", i,
                                r->hi - r->lo, e->world);
        r->len = (r->hi - r->lo) / (size_t)e->world;
        r->soff = soff;
        soff += r->len;
    }
    e->shard = soff;
    return TR_OK;
}
