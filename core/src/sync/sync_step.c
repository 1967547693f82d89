/* The engine's optimizer step: every reduction finished, the global gradient norm, clipping
 * and the update. All-reduce: each rank updates everything; reduce-scatter: each updates its
 * slice of every bucket (ZeRO's update, ddp's shard_update and sharded's stages alike), then
 * the slices are all-gathered. Without clipping or on_nan skip a bucket is updated as soon as
 * its sum arrives, overlapping the optimizer with the reductions still running; a non-finite
 * bucket or slice is never applied, and a non-finite global norm leaves the step out. */
#include <math.h>
#include <stdio.h>

#include "sync_impl.h"

#include "trainer/profile.h"

static void region(const tr_grad_sync *e, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "%s: %s", e->c.name ? e->c.name : "gradient sync", what);
    tr_profile_enter("strategy", name);
}

/* Every rank updates every bucket. */
static tr_status all_reduce_step(tr_grad_sync *e, tr_optim *opt, double lr, double max_norm, double *grad_norm) {
    tr_params *P = tr_replica_params(e->c.replica); /* where the replica's buffers live */
    float *p = tr_params_data(P), *g = tr_params_grad(P);
    size_t n = tr_params_numel(e->host);
    int overlap = max_norm <= 0 && !e->c.skip_nonfinite;
    double sumsq = 0;
    tr_status st = TR_OK;
    for (int i = e->n - 1; i >= 0 && st == TR_OK; i--) {
        const tr_grad_sync_range *r = &e->b[i].at;
        region(e, "waiting for all-reduces");
        st = tr_grad_sync_finish(e, i, 1);
        if (!overlap || st != TR_OK) continue;
        region(e, "update");
        double s = tr_accel_grad_sumsq(e->c.accel, g + r->lo, r->hi - r->lo);
        sumsq += s;
        if (isfinite(s)) st = tr_optim_step_at(opt, p + r->lo, g + r->lo, r->lo, r->hi, lr);
    }
    if (st != TR_OK) return tr_grad_sync_broke(e, st);
    if (overlap) {
        if (isfinite(sumsq)) tr_optim_step_done(opt);
        *grad_norm = sqrt(sumsq);
        return TR_OK;
    }
    region(e, "update");
    sumsq = tr_accel_grad_sumsq(e->c.accel, g, n);
    *grad_norm = sqrt(sumsq);
    if (!isfinite(sumsq)) return TR_OK; /* left out: the trainer stops or skips the step */
    if (max_norm > 0) tr_accel_clip_grad_norm(e->c.accel, g, n, max_norm, sumsq);
    return tr_optim_step(opt, p, g, n, lr);
}

/* This rank's slice of bucket i updated (unless apply is 0: its gradient is not finite),
 * then with gather_params the all-gather of the slices, which every rank issues either way. */
static tr_status update(tr_grad_sync *e, tr_optim *opt, int i, double lr, int apply) {
    const tr_grad_sync_range *r = &e->b[i].at;
    size_t at = e->c.full_state ? r->lo + (size_t)e->rank * r->len : r->soff;
    if (apply)
        TR_CHECK(tr_optim_step_at(opt, tr_grad_sync_param_slice(e, i), tr_grad_sync_grad_slice(e, i), at, at + r->len, lr));
    if (!e->c.gather_params) return TR_OK;
    e->state_stale |= e->c.full_state;
    return tr_grad_sync_gather(e, i);
}

/* Each rank updates its slices. The gradients a strategy's nonfinite() then reads are summed
 * only in each rank's own slices: a value that made a sum non-finite shows in its owner's
 * slice, and the trainer adds every rank's flags. */
static tr_status scatter_step(tr_grad_sync *e, tr_optim *opt, double lr, double max_norm, double *grad_norm) {
    int overlap = max_norm <= 0 && !e->c.skip_nonfinite;
    double sumsq = 0;
    tr_status st = TR_OK;
    for (int i = e->n - 1; i >= 0 && st == TR_OK; i--) {
        region(e, "waiting for reduce-scatters");
        st = tr_grad_sync_finish(e, i, 1); /* this bucket's (later ones' are done) */
        if (st != TR_OK) break;
        region(e, "update");
        double s = tr_accel_grad_sumsq(e->c.accel, tr_grad_sync_grad_slice(e, i), e->b[i].at.len);
        sumsq += s;
        if (overlap) st = update(e, opt, i, lr, isfinite(s));
    }
    if (st == TR_OK) st = tr_comm_all_reduce(e->c.comm, &sumsq, &sumsq, 1, TR_F64, TR_RED_SUM);
    if (st != TR_OK) return tr_grad_sync_broke(e, st);
    *grad_norm = sqrt(sumsq);
    if (isfinite(sumsq)) { /* else every rank agrees: the trainer stops or skips the step */
        for (int i = e->n - 1; !overlap && i >= 0; i--) {
            if (max_norm > 0)
                tr_accel_clip_grad_norm(e->c.accel, tr_grad_sync_grad_slice(e, i), e->b[i].at.len, max_norm, sumsq);
            st = update(e, opt, i, lr, 1);
            if (st != TR_OK) return tr_grad_sync_broke(e, st);
        }
        tr_optim_step_done(opt);
    }
    if (!e->c.wait_gathers) return TR_OK; /* waited by the next use of each bucket */
    region(e, "waiting for all-gathers");
    for (int i = e->n - 1; i >= 0; i--) {
        tr_status w = tr_grad_sync_wait_gather(e, i);
        if (st == TR_OK) st = w;
    }
    return st == TR_OK ? TR_OK : tr_grad_sync_broke(e, st);
}

tr_status tr_grad_sync_step(tr_grad_sync *e, tr_optim *opt, double lr, double max_norm, double *grad_norm) {
    if (e->c.reduce == TR_GRAD_ALL_REDUCE) return all_reduce_step(e, opt, lr, max_norm, grad_norm);
    return scatter_step(e, opt, lr, max_norm, grad_norm);
}

tr_status tr_grad_sync_gather_state(tr_grad_sync *e, tr_optim *opt) {
    if (!e->state_stale) return TR_OK;
    for (int k = 0; k < tr_optim_state_count(opt); k++) {
        float *m = tr_optim_state(opt, k);
        for (int i = e->n - 1; i >= 0; i--) {
            const tr_grad_sync_range *r = &e->b[i].at;
            TR_CHECK(tr_comm_all_gather(e->c.comm, m + r->lo + (size_t)e->rank * r->len, m + r->lo, r->len, TR_F32));
        }
    }
    e->state_stale = 0;
    return TR_OK;
}

void tr_grad_sync_fresh_state(tr_grad_sync *e) { e->state_stale = 0; }
