/* Strategy `sharded`'s unit buffer pool (pool.h): the smallest free buffer that fits, else a
 * new one of the size asked, at most two per unit. */
#include "pool.h"

#include "trainer/grad_sync.h"
#include "trainer/memory.h"

static size_t bytes(size_t floats) { return floats * sizeof(float); }

tr_status pool_get(pool *pl, size_t size, const char *what, int *slot) {
    int best = -1;
    for (int i = 0; i < pl->n; i++)
        if (!pl->busy[i] && pl->cap[i] >= size && (best < 0 || pl->cap[i] < pl->cap[best])) best = i;
    if (best >= 0) {
        pl->busy[best] = 1;
        *slot = best;
        return TR_OK;
    }
    if (pl->n == 2 * TR_GRAD_MAX_UNITS)
        return tr_error_set(TR_ERR_INTERNAL, "sharded: %d buffers for %s in use", pl->n, what);
    if (!pl->buf) {
        pl->buf = tr_calloc(2 * TR_GRAD_MAX_UNITS, sizeof *pl->buf);
        pl->cap = tr_calloc(2 * TR_GRAD_MAX_UNITS, sizeof *pl->cap);
        pl->busy = tr_calloc(2 * TR_GRAD_MAX_UNITS, sizeof *pl->busy);
        if (!pl->buf || !pl->cap || !pl->busy) return tr_error_set(TR_ERR_NOMEM, "sharded: out of memory");
    }
    tr_status st = tr_accel_alloc(pl->accel, bytes(size), (void **)&pl->buf[pl->n]);
    if (st != TR_OK) {
        tr_error_prefix("sharded: %s (%d buffers of %.1f MiB held): ", what, pl->n, pl->bytes / 1048576.0);
        return st;
    }
    tr_accel_zero(pl->accel, pl->buf[pl->n], bytes(size));
    pl->cap[pl->n] = size;
    pl->busy[pl->n] = 1;
    pl->bytes += bytes(size);
    *slot = pl->n++;
    return TR_OK;
}

void pool_free(pool *pl) {
    for (int i = 0; i < pl->n; i++) tr_accel_free(pl->accel, pl->buf[i], bytes(pl->cap[i]));
    tr_free(pl->buf);
    tr_free(pl->cap);
    tr_free(pl->busy);
}
