/* One replica trained by this process, on the CPU or on a device (see trainer/solo.h). */
#include "trainer/solo.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/node.h"
#include "run/replica_impl.h"
#include "trainer/memory.h"
#include "trainer/profile.h"

struct tr_solo {
    tr_accel *accel;  /* owned; NULL: the CPU */
    tr_replica *r;
    tr_optim *opt;
    tr_fusion *fusion; /* r's (lent to its graph): the sums and deferred gradients ops note */
    double *sumsq;    /* per parameter, from the last micro-batch's ready hook */
    int last;         /* the backward running is the step's last */
    int defer;        /* tr_solo_set_defer */
    /* The step waits for its device once a micro-batch: the hook queues each parameter's
     * sum into res (the device's memory, the host's on the CPU: a double per parameter, then
     * the loss as a float), and train_micro downloads res into hres at the end. */
    double *res, *hres;
    size_t np;             /* parameters: res holds np + 1 doubles */
    unsigned char *queued; /* per parameter: its sum is in res this step */
    tr_status hook_status; /* the first failure in the hook, its message in hook_msg */
    char hook_msg[256];
};

/* res's bytes: a sum per parameter, then the loss (a double's room). */
static size_t res_bytes(const tr_solo *s) { return (s->np + 1) * sizeof(double); }

static void grad_ready(void *user, int p) {
    tr_solo *s = user;
    if (!s->last) return;
    tr_tensor *t = tr_params_get(tr_replica_params(s->r), p);
    s->queued[p] = 0;
    if (tr_fusion_grad_sumsq_(s->fusion, p, &s->sumsq[p])) return; /* the op that wrote it summed it */
    tr_status st = tr_accel_grad_sumsq_to(s->accel, &s->res[p], t->grad, (size_t)tr_tensor_numel(t));
    s->queued[p] = st == TR_OK;
    if (st != TR_OK && s->hook_status == TR_OK) {
        s->hook_status = st;
        snprintf(s->hook_msg, sizeof s->hook_msg, "%s", tr_error_msg());
    }
}

void tr_solo_destroy(void *ctx) {
    tr_solo *s = ctx;
    if (!s) return;
    tr_optim_destroy(s->opt);
    tr_replica_destroy(s->r);
    tr_accel_free(s->accel, s->res, res_bytes(s));
    tr_accel_close(s->accel); /* after what holds its memory */
    tr_free(s->hres);
    tr_free(s->queued);
    tr_free(s->sumsq);
    tr_free(s);
}

tr_status tr_solo_create(const tr_strategy_env *env, tr_accel *accel, tr_solo **out) {
    *out = NULL;
    tr_solo *s = tr_calloc(1, sizeof *s);
    if (!s) {
        tr_accel_close(accel);
        return tr_error_set(TR_ERR_NOMEM, "strategy: out of memory");
    }
    s->accel = accel;
    tr_status st;
    if (accel) TR_CHECK_GOTO(tr_accel_bind(accel), fail);
    TR_CHECK_GOTO(tr_replica_create_on(env->models, accel, &s->r), fail); /* NULL: a host replica */
    s->fusion = s->r->fusion;
    TR_CHECK_GOTO(tr_optim_create(&s->opt, &env->optim, tr_params_numel(s->r->P)), fail);
    if (accel) TR_CHECK_GOTO(tr_optim_place(s->opt, accel), fail);
    s->sumsq = tr_calloc((size_t)tr_params_count(s->r->P) + 1, sizeof *s->sumsq);
    s->np = (size_t)tr_params_count(s->r->P);
    s->hres = tr_calloc(res_bytes(s), 1);
    s->queued = tr_calloc((size_t)tr_params_count(s->r->P) + 1, 1);
    if (s->hres && s->queued) TR_CHECK_GOTO(tr_accel_alloc(accel, res_bytes(s), (void **)&s->res), fail);
    if (!s->sumsq || !s->hres || !s->queued) {
        st = tr_error_set(TR_ERR_NOMEM, "strategy: out of memory");
        goto fail;
    }
    tr_graph_set_grad_hook(s->r->g, grad_ready, s);
    *out = s;
    return TR_OK;
fail:
    tr_solo_destroy(s);
    return st;
}

tr_replica *tr_solo_replica(tr_solo *s) { return s->r; }

void tr_solo_set_defer(tr_solo *s, int on) { s->defer = on && !s->accel; }

tr_status tr_solo_train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    tr_solo *s = ctx;
    tr_model_out out;
    TR_CHECK(tr_replica_forward(s->r, mb->hb, 0, mb->hb->size, mb->normaliser, mb->step, 1, 1, &out));
    if (mb->first) TR_CHECK(tr_graph_write_param_grads(s->r->g));
    /* A step of one micro-batch on the host: ops may leave weight gradients to the update */
    TR_CHECK(tr_fusion_defer_grads_(s->fusion, tr_replica_params(s->r), s->defer && mb->first && mb->last));
    s->last = mb->last;
    TR_CHECK(tr_fusion_note_grad_sumsq_(s->fusion, tr_replica_params(s->r), mb->last)); /* what grad_ready reads */
    s->hook_status = TR_OK;
    tr_status st = tr_backward(s->r->g, out.loss, NULL);
    s->last = 0;
    TR_CHECK(st);
    if (s->hook_status != TR_OK) return tr_error_set(s->hook_status, "%s", s->hook_msg);
    /* The one wait of the step (of each micro-batch): the loss, and in the last micro-batch
     * the gradients' sums with it. */
    size_t np = s->np, from = mb->last ? 0 : np;
    tr_accel_copy(s->accel, &s->res[np], out.loss->data, sizeof(float));
    TR_CHECK(tr_accel_download(s->accel, &s->hres[from], &s->res[from], (np + 1 - from) * sizeof(double)));
    float v;
    memcpy(&v, &s->hres[np], sizeof v);
    *loss = v;
    for (size_t p = 0; mb->last && p < np; p++)
        if (s->queued[p]) s->sumsq[p] = s->hres[p];
    return tr_accel_sync(s->accel); /* a kernel's error, if any (nothing left to wait for) */
}

/* The stored gradients [lo, hi): clipped, then updated. */
static tr_status step_stored(tr_solo *s, float *p, float *g, size_t lo, size_t hi, double lr, double max_norm,
                             double sumsq) {
    if (max_norm > 0) tr_clip_grad_norm(g + lo, hi - lo, max_norm, sumsq);
    return tr_optim_step_at(s->opt, p + lo, g + lo, lo, hi, lr);
}

/* The update when backward deferred weight gradients (tr_fusion_defer_grads_): the stored
 * gradients between them as usual, each deferred one recomputed inside the update (a linear
 * layer's by tr_optim_step_tn, fused with Adam where it can be), in the same bits. */
static tr_status step_deferred(tr_solo *s, float *p, float *g, double lr, double max_norm, double sumsq) {
    tr_params *P = tr_replica_params(s->r);
    float coef = max_norm > 0 ? (float)tr_clip_coef(max_norm, sumsq) : 1.0f;
    size_t lo = 0;
    for (int k = 0; k < tr_params_count(P); k++) {
        const op_deferred *d = tr_fusion_deferred_(s->fusion, k);
        if (!d) continue;
        size_t at = tr_params_offset(P, k);
        TR_CHECK(step_stored(s, p, g, lo, at, lr, max_norm, sumsq));
        if (d->tn)
            TR_CHECK(tr_optim_step_tn(s->opt, p + at, at, d->rows, d->cols, (size_t)d->i[0], d->a, d->b, coef, lr));
        else
            TR_CHECK(tr_optim_step_tiles(s->opt, p + at, at, d->rows, d->cols, d->tile, d, coef, lr));
        lo = at + d->rows * d->cols;
    }
    TR_CHECK(step_stored(s, p, g, lo, tr_params_numel(P), lr, max_norm, sumsq));
    tr_optim_step_done(s->opt);
    tr_fusion_drop_deferred_(s->fusion);
    return TR_OK;
}

tr_status tr_solo_optim_step(void *ctx, double lr, double max_norm, double *grad_norm) {
    tr_solo *s = ctx;
    tr_params *P = tr_replica_params(s->r);
    float *p = tr_params_data(P), *g = tr_params_grad(P);
    size_t n = tr_params_numel(P);
    double sumsq = 0;
    for (int k = 0; k < tr_params_count(P); k++) sumsq += s->sumsq[k];
    *grad_norm = sqrt(sumsq);
    if (!isfinite(sumsq)) { /* never applied: the trainer stops or skips the step, and looks */
        tr_fusion_settle_deferred_(s->fusion, P);
        return TR_OK;
    }
    if (tr_fusion_deferred_any_(s->fusion)) return step_deferred(s, p, g, lr, max_norm, sumsq);
    if (max_norm > 0) tr_accel_clip_grad_norm(s->accel, g, n, max_norm, sumsq);
    /* Queued, not waited for: the host goes on to the next batch (its loading and upload
     * overlap the update), whose train_micro reports a kernel error; so do forward and state.
     * Under trainer.profile it is waited for, so that it counts in optim_step's region. */
    tr_status st = tr_optim_step(s->opt, p, g, n, lr);
    if (st == TR_OK && tr_profile_current()) st = tr_accel_sync(s->accel);
    return st;
}

tr_status tr_solo_forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    tr_solo *s = ctx;
    TR_CHECK(tr_replica_forward(s->r, hb, 0, hb->size, 1.0, 0, 0, with_y, out));
    TR_CHECK(tr_replica_outputs_to_host(s->r, out));
    return tr_accel_sync(s->accel);
}

tr_status tr_solo_state(void *ctx, tr_params **P, tr_optim **opt) {
    tr_solo *s = ctx;
    TR_CHECK(tr_replica_download(s->r));
    TR_CHECK(tr_optim_download(s->opt));
    TR_CHECK(tr_accel_sync(s->accel)); /* what a checkpoint gets came from error-free steps */
    *P = s->r->P;
    *opt = s->opt;
    return TR_OK;
}

tr_status tr_solo_sync(void *ctx) {
    tr_solo *s = ctx;
    TR_CHECK(tr_replica_upload(s->r));
    TR_CHECK(tr_optim_upload(s->opt));
    return tr_accel_sync(s->accel);
}

tr_status tr_solo_memory(void *ctx, tr_strategy_memory *m) {
    tr_solo *s = ctx;
    *m = (tr_strategy_memory){0};
    tr_replica_memory(s->r, s->opt, m);
    return TR_OK;
}

tr_status tr_solo_nonfinite(void *ctx, double *flags, int n, char *activation, size_t size) {
    tr_solo *s = ctx;
    (void)n;
    tr_replica_find_nonfinite(s->r, flags, activation, size);
    return TR_OK;
}

tr_status tr_solo_estimate(const tr_options *o, const tr_strategy_estimate_env *env, tr_strategy_estimate *out) {
    (void)o;
    out->world = 1;
    out->rank_batch = env->global_batch;
    return tr_estimate_replica(env, 0, env->global_batch, &out->memory);
}
