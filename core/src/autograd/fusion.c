/* The notes ops leave for the step's runner (autograd/fusion.h): per-parameter gradient sums
 * of squares and deferred gradients, in arrays grown to the parameter count, and the last
 * convolution's plane statistics. */
#include "autograd/fusion.h"

#include <math.h>

#include "trainer/memory.h"

struct tr_fusion {
    double *sumsq;          /* per parameter: its gradient's sum of squares as noted by the op
                             * that wrote it this backward, no op since; NaN: none */
    int cap_sumsq;
    int note_sumsq;         /* ops note sums (tr_fusion_note_grad_sumsq_) */
    op_deferred *deferred;  /* per parameter: how to compute its gradient, left unwritten
                             * (op_defer_grad); tile NULL: none */
    int cap_deferred, n_deferred;
    int defer;              /* ops may defer (tr_fusion_defer_grads_) */
    const tr_tensor *ps_t;  /* fusion_note_planes: the tensor, its data then, the stats and */
    const void *ps_data;    /* the op (the graph's op_seq) that noted them */
    const double *ps;
    uint64_t ps_seq;
};

tr_status tr_fusion_create_(tr_fusion **out) {
    *out = tr_calloc(1, sizeof **out);
    return *out ? TR_OK : tr_error_set(TR_ERR_NOMEM, "graph: out of memory for the step's notes");
}

void tr_fusion_destroy_(tr_fusion *f) {
    if (!f) return;
    tr_free(f->sumsq);
    tr_free(f->deferred);
    tr_free(f);
}

/* A per-parameter array grown to P's parameter count; the old contents are not kept. */
static tr_status reserve_per_param(const tr_params *P, void **a, int *cap, size_t elem, const char *what) {
    if (!P) return tr_error_set(TR_ERR_INVALID, "graph: %s needs tr_graph_set_params", what);
    int np = tr_params_count(P);
    if (np <= *cap) return TR_OK;
    void *n = tr_calloc((size_t)np, elem);
    if (!n) return tr_error_set(TR_ERR_NOMEM, "graph: out of memory for %s of %d parameters", what, np);
    tr_free(*a);
    *a = n;
    *cap = np;
    return TR_OK;
}

tr_status tr_fusion_note_grad_sumsq_(tr_fusion *f, const tr_params *P, int on) {
    f->note_sumsq = 0;
    if (!on) return TR_OK;
    TR_CHECK(reserve_per_param(P, (void **)&f->sumsq, &f->cap_sumsq, sizeof *f->sumsq, "noting gradient norms"));
    for (int p = 0; p < f->cap_sumsq; p++) f->sumsq[p] = NAN;
    f->note_sumsq = 1;
    return TR_OK;
}

int tr_fusion_grad_sumsq_(const tr_fusion *f, int p, double *sumsq) {
    if (p < 0 || p >= f->cap_sumsq || isnan(f->sumsq[p])) return 0;
    *sumsq = f->sumsq[p];
    return 1;
}

tr_status tr_fusion_defer_grads_(tr_fusion *f, const tr_params *P, int on) {
    f->defer = 0;
    if (!on) return TR_OK;
    TR_CHECK(reserve_per_param(P, (void **)&f->deferred, &f->cap_deferred, sizeof *f->deferred,
                               "deferring parameter gradients"));
    f->defer = 1;
    return TR_OK;
}

const op_deferred *tr_fusion_deferred_(const tr_fusion *f, int p) {
    return f->n_deferred && p >= 0 && p < f->cap_deferred && f->deferred[p].tile ? &f->deferred[p] : NULL;
}

int tr_fusion_deferred_any_(const tr_fusion *f) { return f->n_deferred > 0; }

void fusion_settle(tr_fusion *f, tr_params *P, int p) {
    const op_deferred *d = tr_fusion_deferred_(f, p);
    if (!d) return;
    d->tile(d, 0, d->rows, 0, d->cols, tr_params_get(P, p)->grad);
    f->deferred[p].tile = NULL;
    f->n_deferred--;
}

void tr_fusion_settle_deferred_(tr_fusion *f, tr_params *P) {
    for (int p = 0; p < f->cap_deferred && f->n_deferred; p++) fusion_settle(f, P, p);
}

void tr_fusion_drop_deferred_(tr_fusion *f) {
    for (int p = 0; p < f->cap_deferred && f->n_deferred; p++)
        if (f->deferred[p].tile) {
            f->deferred[p].tile = NULL;
            f->n_deferred--;
        }
}

int fusion_notes(const tr_fusion *f, int p) { return f->note_sumsq && p < f->cap_sumsq; }

void fusion_note(tr_fusion *f, int p, double sumsq) { f->sumsq[p] = sumsq; }

int fusion_defers(const tr_fusion *f, int p) { return f->defer && p < f->cap_deferred; }

void fusion_defer(tr_fusion *f, int p, const op_deferred *d, double sumsq) {
    f->deferred[p] = *d;
    f->n_deferred++;
    f->sumsq[p] = sumsq;
}

void fusion_forget(tr_fusion *f, int p) {
    if (p >= 0 && p < f->cap_sumsq) f->sumsq[p] = NAN;
}

void fusion_clear_sums(tr_fusion *f) {
    for (int p = 0; p < f->cap_sumsq; p++) f->sumsq[p] = NAN;
}

void fusion_note_planes(tr_fusion *f, const tr_tensor *t, const double *ps, uint64_t seq) {
    f->ps_t = t, f->ps_data = t->data, f->ps = ps, f->ps_seq = seq;
}

const double *fusion_planes(const tr_fusion *f, const tr_tensor *t, uint64_t seq) {
    int fresh = f->ps && f->ps_t == t && f->ps_data == t->data && f->ps_seq + 1 == seq;
    return fresh ? f->ps : NULL;
}

void fusion_forget_planes(tr_fusion *f) { f->ps_t = NULL, f->ps_data = NULL, f->ps = NULL; }
