/* Finite-difference gradient check in double precision.
 *
 *   static tr_tensor *f(tr_graph *g, tr_tensor **in, void *ctx) {
 *       return tr_linear(g, in[0], in[1], in[2]);
 *   }
 *   gc_input in[3] = {GC_F64(2, 4, 3), GC_F64(2, 5, 3), GC_F64(1, 5)};
 *   gradcheck("linear", f, NULL, 3, in, 1e-6);
 *
 * The checker makes the inputs (f64 leaves filled from a fixed seed in [lo, hi), or given
 * values), runs f, and back-propagates a fixed random upstream gradient R, i.e. differentiates
 * L = sum(out * R). Each input element is then perturbed by +-eps (1e-6) and L re-evaluated;
 * the failure criterion is max|analytic - numeric| / max(max|numeric|, 1e-3) > tol. */
#ifndef TRAINER_TEST_GRADCHECK_H
#define TRAINER_TEST_GRADCHECK_H

#include <stdint.h>

#include "trainer/graph.h"

typedef struct gc_input {
    tr_dtype dtype;          /* TR_F64 (differentiated unless no_grad) or TR_I32 */
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    double lo, hi;           /* fill range for f64 when values is NULL (default -1..1) */
    const double *values;    /* optional explicit f64 values */
    const int32_t *ivalues;  /* values for TR_I32 inputs */
    int no_grad;             /* f64 input that is not differentiated (e.g. running stats) */
} gc_input;

#define GC_F64(nd, ...) ((gc_input){.dtype = TR_F64, .ndim = (nd), .shape = {__VA_ARGS__}, .lo = -1, .hi = 1})

typedef tr_tensor *(*gc_fn)(tr_graph *g, tr_tensor **in, void *ctx);

/* Returns the worst relative error; records a test failure above tol. Prints one line. */
double gradcheck(const char *name, gc_fn fn, void *ctx, int n, const gc_input *inputs,
                 double tol);

#endif
