/* The accessors of an opaque tr_replica (trainer/replica.h). */
#include "run/replica_impl.h"

tr_params *tr_replica_host_params(const tr_replica *r) { return r->P; }
tr_graph *tr_replica_graph(const tr_replica *r) { return r->g; }
float *tr_replica_device_data(const tr_replica *r) { return r->d_data; }
float *tr_replica_device_grad(const tr_replica *r) { return r->d_grad; }
float *tr_replica_device_buffers(const tr_replica *r) { return r->d_buffers; }
