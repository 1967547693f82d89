/* transpose and permute: copies into the permuted layout (tensors are contiguous, so unlike
 * PyTorch these are not strided views), with a backward node that scatters the gradient
 * back. f32 and f64; negative dims count from the end. */
#include <string.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/transpose.inc"
#include "ops/generic.h"

void ops_kernels_permute(tr_kernels *k) { k->permute = permute_f32; }

/* The layout of x permuted by perm: output shape and per-output-dim input strides. */
static tr_permute_dims permuted(const tr_tensor *x, const int64_t *perm) {
    tr_permute_dims p = {.ndim = x->ndim};
    int64_t stride[TR_MAX_DIMS], s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= x->shape[d];
    }
    for (int d = 0; d < x->ndim; d++) {
        p.shape[d] = x->shape[perm[d]];
        p.stride[d] = stride[perm[d]];
    }
    return p;
}

static void permute_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0];
    void *dx = op_grad(g, x);
    if (!dx) return;
    tr_permute_dims p = permuted(x, n->i);
    OP_RUN(g, x->dtype, permute, n->out->grad, dx, &p, 1);
}

/* perm: normalised, validated dims (perm[d] is the input dim of output dim d). */
static tr_tensor *permute_impl(tr_graph *g, const char *name, tr_tensor *x, const int64_t *perm) {
    tr_permute_dims p = permuted(x, perm);
    tr_tensor *y = op_out(g, x->dtype, x->ndim, p.shape);
    if (!y) return NULL;
    OP_RUN(g, x->dtype, permute, y->data, x->data, &p, 0);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, name, permute_backward, y, 1, x);
        if (!n) return NULL;
        memcpy(n->i, perm, (size_t)x->ndim * sizeof *perm); /* TR_MAX_DIMS <= 8 slots */
    }
    return y;
}

tr_tensor *tr_permute(tr_graph *g, tr_tensor *x, const int *perm) {
    if (!op_check(g, "permute", 1, x)) return NULL;
    if (!OP_DEVICE(g, "permute", permute)) return NULL;
    if (!perm) return op_fail(g, TR_ERR_INVALID, "permute: perm is NULL for %s", op_shape(x));
    int64_t p[TR_MAX_DIMS];
    int seen[TR_MAX_DIMS] = {0};
    for (int d = 0; d < x->ndim; d++) {
        int v = perm[d] < 0 ? perm[d] + x->ndim : perm[d];
        if (v < 0 || v >= x->ndim || seen[v]++)
            return op_fail(g, TR_ERR_INVALID,
                           "permute: perm[%d] = %d is out of range or repeated for %s (a "
                           "permutation of 0..%d expected)",
                           d, perm[d], op_shape(x), x->ndim - 1);
        p[d] = v;
    }
    return permute_impl(g, "permute", x, p);
}

tr_tensor *tr_transpose(tr_graph *g, tr_tensor *x, int dim0, int dim1) {
    if (!op_check(g, "transpose", 1, x)) return NULL;
    if (!OP_DEVICE(g, "transpose", permute)) return NULL;
    int a = dim0 < 0 ? dim0 + x->ndim : dim0, b = dim1 < 0 ? dim1 + x->ndim : dim1;
    if (a < 0 || a >= x->ndim || b < 0 || b >= x->ndim)
        return op_fail(g, TR_ERR_INVALID, "transpose: dims (%d, %d) out of range for %s", dim0,
                       dim1, op_shape(x));
    int64_t p[TR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) p[d] = d;
    p[a] = b;
    p[b] = a;
    return permute_impl(g, "transpose", x, p);
}
