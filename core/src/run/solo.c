/* One replica trained by this process, on the CPU or on a device (see trainer/solo.h). */
#include "trainer/solo.h"

#include <math.h>

#include "autograd/node.h"
#include "trainer/memory.h"

struct tr_solo {
    tr_accel *accel;  /* owned; NULL: the CPU */
    tr_replica *r;
    tr_optim *opt;
    double *sumsq;    /* per parameter, from the last micro-batch's ready hook */
    int last;         /* the backward running is the step's last */
    int defer;        /* tr_solo_set_defer */
};

static void grad_ready(void *user, int p) {
    tr_solo *s = user;
    if (!s->last) return;
    tr_tensor *t = tr_params_get(tr_replica_params(s->r), p);
    if (!tr_graph_grad_sumsq_(s->r->g, p, &s->sumsq[p])) /* else the op that wrote it summed it */
        s->sumsq[p] = tr_accel_grad_sumsq(s->accel, t->grad, (size_t)tr_tensor_numel(t));
}

void tr_solo_destroy(void *ctx) {
    tr_solo *s = ctx;
    if (!s) return;
    tr_optim_destroy(s->opt);
    tr_replica_destroy(s->r);
    tr_accel_close(s->accel); /* after what holds its memory */
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
    if (accel) {
        TR_CHECK_GOTO(tr_accel_bind(accel), fail);
        TR_CHECK_GOTO(tr_replica_create_on(env->models, accel, &s->r), fail);
    } else {
        TR_CHECK_GOTO(tr_replica_create(env->models, &s->r), fail);
    }
    TR_CHECK_GOTO(tr_optim_create(&s->opt, &env->optim, tr_params_numel(s->r->P)), fail);
    if (accel) TR_CHECK_GOTO(tr_optim_place(s->opt, accel), fail);
    s->sumsq = tr_calloc((size_t)tr_params_count(s->r->P) + 1, sizeof *s->sumsq);
    if (!s->sumsq) {
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
    TR_CHECK(tr_graph_defer_grads_(s->r->g, s->defer && mb->first && mb->last));
    s->last = mb->last;
    TR_CHECK(tr_graph_note_grad_sumsq_(s->r->g, mb->last)); /* what grad_ready reads */
    tr_status st = tr_backward(s->r->g, out.loss, NULL);
    s->last = 0;
    TR_CHECK(st);
    float v;
    TR_CHECK(tr_accel_download(s->accel, &v, out.loss->data, sizeof v));
    *loss = v;
    return tr_accel_sync(s->accel);
}

/* The stored gradients [lo, hi): clipped, then updated. */
static tr_status step_stored(tr_solo *s, float *p, float *g, size_t lo, size_t hi, double lr, double max_norm,
                             double sumsq) {
    if (max_norm > 0) tr_clip_grad_norm(g + lo, hi - lo, max_norm, sumsq);
    return tr_optim_step_at(s->opt, p + lo, g + lo, lo, hi, lr);
}

/* The update when backward deferred weight gradients (tr_graph_defer_grads_): the stored
 * gradients between them as usual, each deferred one recomputed inside the update (a linear
 * layer's by tr_optim_step_tn, fused with Adam where it can be), in the same bits. */
static tr_status step_deferred(tr_solo *s, float *p, float *g, double lr, double max_norm, double sumsq) {
    tr_params *P = tr_replica_params(s->r);
    float coef = max_norm > 0 ? (float)tr_clip_coef(max_norm, sumsq) : 1.0f;
    size_t lo = 0;
    for (int k = 0; k < tr_params_count(P); k++) {
        const op_deferred *d = tr_graph_deferred_(s->r->g, k);
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
    tr_graph_drop_deferred_(s->r->g);
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
        tr_graph_settle_deferred_(s->r->g);
        return TR_OK;
    }
    if (tr_graph_deferred_any_(s->r->g)) return step_deferred(s, p, g, lr, max_norm, sumsq);
    if (max_norm > 0) tr_accel_clip_grad_norm(s->accel, g, n, max_norm, sumsq);
    TR_CHECK(tr_optim_step(s->opt, p, g, n, lr));
    return tr_accel_sync(s->accel);
}

tr_status tr_solo_forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    tr_solo *s = ctx;
    TR_CHECK(tr_replica_forward(s->r, hb, 0, hb->size, 1.0, 0, 0, with_y, out));
    return tr_replica_outputs_to_host(s->r, out);
}

tr_status tr_solo_state(void *ctx, tr_params **P, tr_optim **opt) {
    tr_solo *s = ctx;
    TR_CHECK(tr_replica_download(s->r));
    TR_CHECK(tr_optim_download(s->opt));
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
