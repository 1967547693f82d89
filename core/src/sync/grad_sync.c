/* The gradient-synchronisation engine of the rank strategies: its life and its buckets'
 * places (docs/strategies.md, "The gradient synchronisation engine"). */
#include <stddef.h>
#include <string.h>

#include "sync_impl.h"

#include "trainer/memory.h"

tr_status tr_grad_sync_create(tr_grad_sync **out, const tr_grad_sync_config *c) {
    *out = NULL;
    if (!c || c->size < offsetof(tr_grad_sync_config, reduced) + sizeof c->reduced)
        return tr_error_set(TR_ERR_INVALID, "gradient sync: a config of %zu bytes (set .size = sizeof config)",
                            c ? c->size : 0);
    if (!c->comm || !c->replica) return tr_error_set(TR_ERR_INVALID, "gradient sync: no communicator or replica");
    tr_grad_sync *e = tr_calloc(1, sizeof *e);
    if (!e) return tr_error_set(TR_ERR_NOMEM, "gradient sync: out of memory");
    memcpy(&e->c, c, c->size < sizeof e->c ? c->size : sizeof e->c);
    e->host = tr_replica_host_params(c->replica);
    e->graph = tr_replica_graph(c->replica);
    e->rank = tr_comm_rank(c->comm);
    e->world = tr_comm_size(c->comm);
    e->staged = c->accel && !tr_comm_device_memory(c->comm);
    e->next_issue = e->next_done = -1;
    tr_status st = sync_layout(e);
    if (st == TR_OK) st = sync_hook_open(e, tr_params_numel(e->host));
    if (st != TR_OK) {
        tr_grad_sync_destroy(e);
        return st;
    }
    tr_graph_set_grad_hook(e->graph, sync_grad_ready, e);
    *out = e;
    return TR_OK;
}

void tr_grad_sync_destroy(tr_grad_sync *e) {
    if (!e) return;
    tr_grad_sync_drain(e);
    sync_hook_close(e);
    tr_free(e->b);
    tr_free(e->bucket_of);
    tr_free(e);
}

int tr_grad_sync_count(const tr_grad_sync *e) { return e->n; }
const tr_grad_sync_range *tr_grad_sync_at(const tr_grad_sync *e, int bucket) { return &e->b[bucket].at; }
int tr_grad_sync_bucket_of(const tr_grad_sync *e, int param) { return e->bucket_of[param]; }
size_t tr_grad_sync_shard(const tr_grad_sync *e) { return e->shard; }

void tr_grad_sync_set_shards(tr_grad_sync *e, float *param_shard, float *grad_shard) {
    e->param_shard = param_shard;
    e->grad_shard = grad_shard;
}

void tr_grad_sync_set_grads(tr_grad_sync *e, int bucket, float *grads) { e->b[bucket].grads = grads; }
void tr_grad_sync_set_params(tr_grad_sync *e, int bucket, float *params) { e->b[bucket].params = params; }

/* The replica's flat buffers (on a device its device buffers, NULL where it holds none). */
float *tr_grad_sync_grads(tr_grad_sync *e, int bucket) {
    const sync_bucket *b = &e->b[bucket];
    float *g = tr_params_grad(tr_replica_params(e->c.replica));
    return b->grads ? b->grads : g ? g + b->at.lo : NULL;
}

float *tr_grad_sync_params(tr_grad_sync *e, int bucket) {
    const sync_bucket *b = &e->b[bucket];
    float *p = tr_params_data(tr_replica_params(e->c.replica));
    return b->params ? b->params : p ? p + b->at.lo : NULL;
}

float *tr_grad_sync_param_slice(tr_grad_sync *e, int bucket) {
    const tr_grad_sync_range *r = &e->b[bucket].at;
    if (e->param_shard) return e->param_shard + r->soff;
    float *p = tr_params_data(tr_replica_params(e->c.replica));
    return p ? p + r->lo + (size_t)e->rank * r->len : NULL;
}

float *tr_grad_sync_grad_slice(tr_grad_sync *e, int bucket) {
    const tr_grad_sync_range *r = &e->b[bucket].at;
    if (e->grad_shard) return e->grad_shard + r->soff;
    float *g = tr_grad_sync_grads(e, bucket);
    return g ? g + (size_t)e->rank * r->len : NULL;
}

void tr_grad_sync_trace(const tr_grad_sync *e, int *in_backward, int *finished) {
    *in_backward = e->issued_in_backward;
    *finished = 0;
    for (int i = 0; i < e->n; i++) {
        int f = 0;
        if (e->b[i].work) tr_comm_test(e->b[i].work, &f);
        *finished += f;
    }
}

const char *tr_grad_sync_hook_name(const tr_grad_sync *e) { return e->hook_desc; }
