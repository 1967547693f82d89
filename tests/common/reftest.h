/* Reference-test driver for one op: loads a case written by a tools/reference/cases module
 * (inputs, "out", "dout", "<input>.grad"), runs the op in f32, back-propagates dout and
 * compares the output and every input gradient with PyTorch's.
 *
 *   static tr_tensor *f(tr_graph *g, tr_tensor **in, void *ctx) { return tr_relu(g, in[0]); }
 *   reftest_op("relu", f, NULL, (const char *[]){"x", NULL}, 1e-5);
 */
#ifndef TRAINER_TEST_REFTEST_H
#define TRAINER_TEST_REFTEST_H

#include "trainer/graph.h"

typedef tr_tensor *(*reftest_fn)(tr_graph *g, tr_tensor **in, void *ctx);

/* `inputs` is a NULL-terminated list of tensor names in the case, passed to fn in order;
 * float inputs become leaves that require a gradient. Returns the worst error. */
double reftest_op(const char *case_name, reftest_fn fn, void *ctx, const char *const *inputs,
                  double tol);

#endif
