/* Finite-difference gradient check (see gradcheck.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "trainer/rng.h"

#define GC_EPS 1e-6
#define GC_MAX_IN 8

typedef struct state {
    gc_fn fn;
    void *ctx;
    int n;
    const gc_input *spec;
    double *vals[GC_MAX_IN];
    int64_t numel[GC_MAX_IN];
    double *R;
    int64_t out_numel;
} state;

static tr_tensor *build(tr_graph *g, state *s, tr_tensor **in, int with_grad) {
    tr_graph_reset(g);
    tr_graph_set_rng(g, 1234, 0, 0);
    tr_graph_set_grad_enabled(g, with_grad);
    for (int i = 0; i < s->n; i++) {
        const gc_input *sp = &s->spec[i];
        if (sp->dtype == TR_I32) {
            in[i] = tr_graph_input(g, TR_I32, sp->ndim, sp->shape);
            if (in[i]) memcpy(in[i]->data, sp->ivalues, (size_t)s->numel[i] * sizeof(int32_t));
        } else {
            in[i] = with_grad && !sp->no_grad ? tr_graph_leaf(g, TR_F64, sp->ndim, sp->shape)
                                              : tr_graph_input(g, TR_F64, sp->ndim, sp->shape);
            if (in[i]) memcpy(in[i]->data, s->vals[i], (size_t)s->numel[i] * sizeof(double));
        }
    }
    return s->fn(g, in, s->ctx);
}

static double eval_loss(tr_graph *g, state *s) {
    tr_tensor *in[GC_MAX_IN];
    tr_tensor *out = build(g, s, in, 0);
    if (!out) return NAN;
    double L = 0;
    const double *o = out->data;
    for (int64_t i = 0; i < s->out_numel; i++) L += o[i] * s->R[i];
    return L;
}

double gradcheck(const char *name, gc_fn fn, void *ctx, int n, const gc_input *spec,
                 double tol) {
    state s = {.fn = fn, .ctx = ctx, .n = n, .spec = spec};
    tr_graph *g;
    if (tr_graph_create(&g, 1 << 20) != TR_OK || n > GC_MAX_IN) {
        test_fail_at(__FILE__, __LINE__, "%s: setup failed", name);
        return INFINITY;
    }
    for (int i = 0; i < n; i++) {
        int64_t ne = 1;
        for (int d = 0; d < spec[i].ndim; d++) ne *= spec[i].shape[d];
        s.numel[i] = ne;
        s.vals[i] = malloc((size_t)(ne ? ne : 1) * sizeof(double));
        if (spec[i].dtype != TR_F64) continue;
        for (int64_t e = 0; e < ne; e++) {
            double lo = spec[i].lo, hi = spec[i].hi;
            if (lo == 0 && hi == 0) { lo = -1; hi = 1; }
            s.vals[i][e] = spec[i].values ? spec[i].values[e]
                                          : lo + (hi - lo) * tr_rng_uniform(42, 7 + (uint64_t)i, (uint64_t)e);
        }
    }
    tr_tensor *in[GC_MAX_IN];
    tr_tensor *out = build(g, &s, in, 1);
    double worst = INFINITY;
    if (!out || tr_graph_status(g) != TR_OK) {
        test_fail_at(__FILE__, __LINE__, "%s: forward failed: %s", name, tr_error_msg());
        goto done;
    }
    if (out->dtype != TR_F64) {
        test_fail_at(__FILE__, __LINE__, "%s: output dtype %s, expected f64", name,
                     tr_dtype_name(out->dtype));
        goto done;
    }
    s.out_numel = tr_tensor_numel(out);
    s.R = malloc((size_t)s.out_numel * sizeof(double));
    for (int64_t e = 0; e < s.out_numel; e++)
        s.R[e] = -1 + 2 * (double)tr_rng_uniform(42, 99, (uint64_t)e);
    if (tr_backward(g, out, s.R) != TR_OK) {
        test_fail_at(__FILE__, __LINE__, "%s: backward failed: %s", name, tr_error_msg());
        goto done;
    }
    /* Keep analytic gradients: the arena is reset by the perturbed evaluations. */
    double *analytic[GC_MAX_IN] = {0};
    for (int i = 0; i < n; i++) {
        if (spec[i].dtype != TR_F64 || spec[i].no_grad) continue;
        analytic[i] = malloc((size_t)(s.numel[i] ? s.numel[i] : 1) * sizeof(double));
        memcpy(analytic[i], in[i]->grad, (size_t)s.numel[i] * sizeof(double));
    }
    worst = 0;
    for (int i = 0; i < n; i++) {
        if (!analytic[i]) continue;
        double max_err = 0, max_num = 0;
        for (int64_t e = 0; e < s.numel[i]; e++) {
            double keep = s.vals[i][e];
            s.vals[i][e] = keep + GC_EPS;
            double lp = eval_loss(g, &s);
            s.vals[i][e] = keep - GC_EPS;
            double lm = eval_loss(g, &s);
            s.vals[i][e] = keep;
            double num = (lp - lm) / (2 * GC_EPS);
            double err = fabs(num - analytic[i][e]);
            if (!(err <= max_err)) max_err = err; /* NaN propagates */
            if (fabs(num) > max_num) max_num = fabs(num);
        }
        double rel = max_err / (max_num > 1e-3 ? max_num : 1e-3);
        printf("gradcheck %-28s input %d: max|analytic-numeric| = %.2e, rel %.2e\n", name, i,
               max_err, rel);
        if (!(rel <= worst)) worst = rel;
        free(analytic[i]);
    }
    test_checks++;
    if (!(worst <= tol)) {
        test_failures++;
        fprintf(stderr, "FAIL gradcheck %s: relative error %.3e above %.1e\n", name, worst, tol);
    }
done:
    for (int i = 0; i < n; i++) free(s.vals[i]);
    free(s.R);
    tr_graph_destroy(g);
    return worst;
}
