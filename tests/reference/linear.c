/* linear and relu against PyTorch, forward and backward. */
#include "check.h"
#include "reftest.h"
#include "trainer/ops.h"

static tr_tensor *lin(tr_graph *g, tr_tensor **in, void *ctx) {
    return tr_linear(g, in[0], in[1], ctx ? NULL : in[2]);
}
static tr_tensor *relu(tr_graph *g, tr_tensor **in, void *ctx) { return tr_relu(g, in[0]); }

int main(void) {
    reftest_op("linear", lin, NULL, (const char *[]){"x", "w", "b", NULL}, 1e-5);
    reftest_op("linear_nobias", lin, (void *)1, (const char *[]){"x", "w", NULL}, 1e-5);
    reftest_op("relu", relu, NULL, (const char *[]){"x", NULL}, 1e-5);
    return test_finish();
}
