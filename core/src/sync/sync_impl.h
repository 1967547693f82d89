/* The gradient-synchronisation engine's insides, shared by its files: the buckets and what
 * is in flight for each. */
#ifndef TRAINER_SYNC_IMPL_H
#define TRAINER_SYNC_IMPL_H

#include "trainer/grad_sync.h"

typedef struct sync_bucket {
    tr_grad_sync_range at;
    int pending;            /* parameters whose gradient is not final in this backward */
    float *grads, *params;  /* the full gradients / gathered parameters elsewhere (NULL: flat) */
    int issued;             /* its reduction started and not yet finished */
    tr_comm_work *work;     /* that reduction's collective (NULL: a hook finished it at once) */
    tr_comm_work *gather;   /* the all-gather of its parameters not yet waited */
} sync_bucket;

struct tr_grad_sync {
    tr_grad_sync_config c;
    tr_params *host;           /* the replica's host parameters: the layout */
    tr_graph *graph;
    int rank, world;
    int staged;                /* a device over a host backend: collectives through the stages */
    sync_bucket *b;
    int n;
    int *bucket_of;            /* parameter -> bucket */
    size_t shard;
    float *param_shard, *grad_shard;
    int syncing;               /* this backward reduces */
    int next_issue;            /* next bucket (counting down) whose reduction is issued */
    int next_done;             /* next bucket (counting down) whose reduction is finished */
    int issued_in_backward;
    int state_stale;           /* full_state: the others' slices of the optimizer state are old */
    tr_status hook_status;     /* a failure inside the grad-ready hook, reported by end() */
    char hook_msg[512];
    /* the comm hook (NULL ops.reduce: plain fp32 sums) */
    const tr_plugin *hook_plugin;
    tr_comm_hook_ops hook;
    void *hook_state;
    char hook_desc[96];
};

/* The buckets of c->layout over e->host (grad_sync_layout.c). */
tr_status sync_layout(tr_grad_sync *e);
/* The comm hook named in the config, created (comm_hook.c); none: nothing. */
tr_status sync_hook_open(tr_grad_sync *e, size_t numel);
void sync_hook_close(tr_grad_sync *e);
/* Starts bucket i's reduction / finishes it once its work is done (sync_reduce.c). */
tr_status sync_reduce_issue(tr_grad_sync *e, int i);
tr_status sync_reduce_wait(tr_grad_sync *e, int i);
/* The grad-ready hook (sync_reduce.c). */
void sync_grad_ready(void *user, int param);

static inline size_t sync_bytes(size_t floats) { return floats * sizeof(float); }

#endif
