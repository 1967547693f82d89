/* The engine's communication: each bucket reduced as soon as backward has made its last
 * gradient final, in order from the last bucket down (the same order on every rank), through
 * the comm hook when there is one; host staging for device buffers over a host backend;
 * the parameters' all-gathers. */
#include <stdio.h>

#include "sync_impl.h"

/* A reduction that failed during backward: kept to be reported after it, and the
 * communicator broken at once. This rank issues no more buckets while backward goes on (a
 * stage-3 gather, a synchronised batch norm's sums): its peers must not wait for them until
 * their deadline, and a collective this rank then meets fails promptly too. */
static void hook_fail(tr_grad_sync *e, tr_status st) {
    if (e->hook_status != TR_OK) return;
    e->hook_status = st;
    snprintf(e->hook_msg, sizeof e->hook_msg, "%s", tr_error_msg());
    tr_comm_abort(e->c.comm);
}

/* The host staging of the flat buffers (device buffers over a host backend). */
static float *grad_stage(tr_grad_sync *e) { return e->c.grad_stage ? e->c.grad_stage : tr_params_grad(e->host); }
static float *param_stage(tr_grad_sync *e) { return e->c.param_stage ? e->c.param_stage : tr_params_data(e->host); }

/* What the reduction of bucket i works on: its gradients, or their host staging. */
static tr_grad_bucket describe(tr_grad_sync *e, int i) {
    const tr_grad_sync_range *r = &e->b[i].at;
    float *g = e->staged ? grad_stage(e) + r->lo : tr_grad_sync_grads(e, i);
    return (tr_grad_bucket){.index = i, .count = e->n, .reduce = e->c.reduce, .grad = g, .numel = r->hi - r->lo,
                            .offset = r->lo, .device = e->c.accel && !e->staged, .rank = e->rank,
                            .world = e->world, .comm = e->c.comm};
}

tr_status sync_reduce_issue(tr_grad_sync *e, int i) {
    sync_bucket *b = &e->b[i];
    tr_grad_bucket d = describe(e, i);
    if (e->staged) TR_CHECK(tr_accel_download(e->c.accel, d.grad, tr_grad_sync_grads(e, i), sync_bytes(d.numel)));
    tr_status st;
    if (e->hook.reduce) st = e->hook.reduce(e->hook_state, &d, &b->work);
    else if (d.reduce == TR_GRAD_ALL_REDUCE)
        st = tr_comm_iall_reduce(e->c.comm, d.grad, d.grad, d.numel, TR_F32, TR_RED_SUM, &b->work);
    else
        st = tr_comm_ireduce_scatter(e->c.comm, d.grad, d.grad + (size_t)e->rank * b->at.len, b->at.len, TR_F32,
                                     TR_RED_SUM, &b->work);
    b->issued = st == TR_OK;
    return st;
}

/* Waits for bucket i's reduction; the hook's finish; staged, the sum (all of it, or this
 * rank's slice) back onto the device. */
tr_status sync_reduce_wait(tr_grad_sync *e, int i) {
    sync_bucket *b = &e->b[i];
    tr_status st = b->work ? tr_comm_wait(b->work) : TR_OK;
    b->work = NULL;
    b->issued = 0;
    tr_grad_bucket d = describe(e, i);
    if (st == TR_OK && e->hook.finish) st = e->hook.finish(e->hook_state, &d);
    if (st != TR_OK || !e->staged) return st;
    size_t at = d.reduce == TR_GRAD_ALL_REDUCE ? 0 : (size_t)e->rank * b->at.len;
    size_t n = d.reduce == TR_GRAD_ALL_REDUCE ? d.numel : b->at.len;
    return tr_accel_upload(e->c.accel, tr_grad_sync_grads(e, i) + at, d.grad + at, sync_bytes(n));
}

/* Issues every final bucket from next_issue down, in order. A bucket whose parameters
 * backward never reached still sends its (zero) share. */
static void issue_ready(tr_grad_sync *e, int in_backward) {
    while (e->next_issue >= 0 && e->b[e->next_issue].pending == 0) {
        int i = e->next_issue;
        if (e->hook_status == TR_OK) {
            tr_status st = e->c.prepare ? e->c.prepare(e->c.user, i) : TR_OK;
            if (st == TR_OK) {
                st = sync_reduce_issue(e, i);
                if (st != TR_OK) e->b[i].work = NULL;
            }
            if (st == TR_OK && e->c.issued) st = e->c.issued(e->c.user, i);
            if (st != TR_OK) hook_fail(e, st);
        }
        e->next_issue--;
        e->issued_in_backward += in_backward;
    }
}

void sync_grad_ready(void *user, int param) {
    tr_grad_sync *e = user;
    if (!e->syncing || param < 0) return;
    sync_bucket *b = &e->b[e->bucket_of[param]];
    if (b->pending > 0 && --b->pending == 0) {
        issue_ready(e, 1);
        if (!e->c.eager) return;
        tr_status st = tr_grad_sync_finish(e, 0, 0); /* gives back what is done already */
        if (st != TR_OK) hook_fail(e, st);
    }
}

void tr_grad_sync_begin(tr_grad_sync *e, int sync) {
    e->syncing = sync;
    if (!sync) return;
    for (int i = 0; i < e->n; i++) e->b[i].pending = e->b[i].at.np;
    e->next_issue = e->next_done = e->n - 1;
    e->hook_status = TR_OK;
    e->issued_in_backward = 0;
}

tr_status tr_grad_sync_end(tr_grad_sync *e) {
    if (!e->syncing) return TR_OK;
    e->syncing = 0;
    for (int i = e->next_issue; i >= 0; i--) e->b[i].pending = 0; /* none should be left */
    issue_ready(e, 0);
    return e->hook_status == TR_OK ? TR_OK : tr_error_set(e->hook_status, "%s", e->hook_msg);
}

tr_status tr_grad_sync_finish(tr_grad_sync *e, int down_to, int block) {
    tr_status st = TR_OK;
    for (; e->next_done >= down_to && e->next_done > e->next_issue && st == TR_OK; e->next_done--) {
        sync_bucket *b = &e->b[e->next_done];
        if (b->issued) {
            int done = 1;
            if (!block && b->work && tr_comm_test(b->work, &done) != TR_OK) done = 1; /* the wait reports it */
            if (!done) break;
            st = sync_reduce_wait(e, e->next_done);
        }
        if (st == TR_OK && e->c.reduced) st = e->c.reduced(e->c.user, e->next_done);
    }
    return st;
}

int tr_grad_sync_in_flight(const tr_grad_sync *e) { return e->next_done > e->next_issue ? e->next_done : -1; }

tr_status tr_grad_sync_gather(tr_grad_sync *e, int bucket) {
    sync_bucket *b = &e->b[bucket];
    const float *src = tr_grad_sync_param_slice(e, bucket);
    if (!e->staged) return tr_comm_iall_gather(e->c.comm, src, tr_grad_sync_params(e, bucket), b->at.len, TR_F32, &b->gather);
    float *h = param_stage(e) + b->at.lo, *mine = h + (size_t)e->rank * b->at.len;
    TR_CHECK(tr_accel_download(e->c.accel, mine, src, sync_bytes(b->at.len)));
    return tr_comm_iall_gather(e->c.comm, mine, h, b->at.len, TR_F32, &b->gather);
}

tr_status tr_grad_sync_wait_gather(tr_grad_sync *e, int bucket) {
    sync_bucket *b = &e->b[bucket];
    if (!b->gather) return TR_OK;
    tr_status st = tr_comm_wait(b->gather);
    b->gather = NULL;
    if (st == TR_OK && e->staged)
        st = tr_accel_upload(e->c.accel, tr_grad_sync_params(e, bucket), param_stage(e) + b->at.lo,
                             sync_bytes(b->at.hi - b->at.lo));
    return st;
}

tr_status tr_grad_sync_drain(tr_grad_sync *e) {
    tr_status st = TR_OK;
    for (int i = 0; i < e->n; i++) {
        sync_bucket *b = &e->b[i];
        tr_status a = tr_grad_sync_wait_gather(e, i), w = b->work ? tr_comm_wait(b->work) : TR_OK;
        b->work = NULL;
        b->issued = 0;
        if (st == TR_OK) st = a != TR_OK ? a : w;
    }
    return st;
}

tr_status tr_grad_sync_broke(tr_grad_sync *e, tr_status st) {
    char msg[1024]; /* drain's waits fail with messages of their own */
    snprintf(msg, sizeof msg, "%s", tr_error_msg());
    if (e->hook_status != TR_OK) { /* what failed first: the rest (an ABORTED backward) follows from it */
        st = e->hook_status;
        snprintf(msg, sizeof msg, "%s", e->hook_msg);
    }
    tr_comm_abort(e->c.comm);
    tr_grad_sync_drain(e);
    return tr_error_set(st, "%s", msg);
}
