/* The accessors of an opaque tr_replica (trainer/replica.h). */
#include <stddef.h>

#include "run/replica_impl.h"

/* Strategies built before ABI 0.13 read these fields in place: the layout stays until the
 * next major (each field right after the one before, as it was). */
#define TR_NEXT(a, b) (offsetof(struct tr_replica, b) == offsetof(struct tr_replica, a) + sizeof(((tr_replica *)0)->a))
_Static_assert(offsetof(struct tr_replica, model) == 0 && TR_NEXT(model, ops) && TR_NEXT(ops, P) && TR_NEXT(P, g) &&
                   TR_NEXT(g, spec) && TR_NEXT(spec, seed) && TR_NEXT(seed, accel) &&
                   TR_NEXT(accel, dP) && TR_NEXT(dP, d_data) && TR_NEXT(d_data, d_grad) && TR_NEXT(d_grad, d_buffers),
               "tr_replica's layout is frozen for strategies built before ABI 0.13");

tr_params *tr_replica_host_params(const tr_replica *r) { return r->P; }
tr_graph *tr_replica_graph(const tr_replica *r) { return r->g; }
float *tr_replica_device_data(const tr_replica *r) { return r->d_data; }
float *tr_replica_device_grad(const tr_replica *r) { return r->d_grad; }
float *tr_replica_device_buffers(const tr_replica *r) { return r->d_buffers; }
