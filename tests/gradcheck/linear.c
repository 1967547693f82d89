/* Finite-difference gradient checks: linear and relu. */
#include "check.h"
#include "gradcheck.h"
#include "trainer/ops.h"

static tr_tensor *lin(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_linear(g, in[0], in[1], ctx ? NULL : in[2]);
}
static tr_tensor *relu(tr_graph *g, tr_tensor **in, void *ctx) { return tr_relu(g, in[0]); }

int main(void) {
    gc_input l[3] = {GC_F64(3, 2, 4, 3), GC_F64(2, 5, 3), GC_F64(1, 5)};
    gradcheck("linear", lin, NULL, 3, l, 1e-6);
    gradcheck("linear_nobias", lin, (void *)1, 2, l, 1e-6);
    /* Values kept away from the kink at 0 so central differences are exact. */
    static const double v[8] = {-0.9, -0.5, -0.1, 0.2, 0.4, 0.7, -0.3, 0.9};
    gc_input r[1] = {{.dtype = TR_F64, .ndim = 2, .shape = {2, 4}, .values = v}};
    gradcheck("relu", relu, NULL, 1, r, 1e-6);
    return test_finish();
}
