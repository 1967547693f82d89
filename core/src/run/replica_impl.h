/* The replica's fields, private to the core: plugins see an opaque tr_replica and its
 * accessors (trainer/replica.h). Plugins built before ABI 0.13 read these fields directly,
 * so their order and types stay as they are until the next major. */
#ifndef TRAINER_RUN_REPLICA_IMPL_H
#define TRAINER_RUN_REPLICA_IMPL_H

#include "trainer/replica.h"

struct tr_replica {
    void *model;               /* the model plugin's ctx */
    const tr_model_ops *ops;   /* borrowed from the factory: the plugin's table, zero-extended */
    tr_params *P;              /* owned: parameters, gradients, buffers */
    tr_graph *g;               /* owned: the eager tape, reset every forward */
    tr_data_spec spec;
    uint64_t seed;
    /* On a device (tr_replica_create_on), else NULL: */
    struct tr_accel *accel;    /* borrowed */
    tr_params *dP;             /* owned: P's layout over the device buffers below; what ops use */
    float *d_data, *d_grad, *d_buffers; /* owned, device memory */
    float *h_out;              /* owned: host copies of the outputs (tr_replica_outputs_to_host) */
    size_t h_cap;              /* floats of h_out */
    tr_tensor h_t[3];
    struct tr_fusion *fusion;  /* owned, lent to g: what its ops note (autograd/fusion.h) */
};

#endif
