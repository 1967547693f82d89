/* Strategy `sharded`'s unit buffer pool: buffers of a unit's full parameters or gradients,
 * reused step after step. */
#ifndef TR_SHARDED_POOL_H
#define TR_SHARDED_POOL_H

#include "trainer/accel.h"

/* Unit buffers reused step after step: a unit's full parameters (stage 3) or full gradients
 * (stages 2-3) live in one only while needed. They stay in memory, so nothing is page-faulted
 * back each step; a unit takes the smallest free buffer it fits in, and a new one of its own
 * size when none does, so the pool settles at the units needed at once. */
typedef struct pool {
    tr_accel *accel;       /* whose memory the buffers are (NULL: host) */
    float **buf;
    size_t *cap;           /* floats */
    int *busy;
    int n;
    size_t bytes;          /* all buffers together */
} pool;

/* A free buffer of at least size floats, marked busy, in *slot; what: for the error. */
tr_status pool_get(pool *pl, size_t size, const char *what, int *slot);
void pool_free(pool *pl);

#endif
