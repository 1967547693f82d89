/* transpose and permute: copies into the permuted layout (tensors are contiguous, so unlike
 * PyTorch these are not strided views), with a backward node that scatters the gradient
 * back. f32 and f64; negative dims count from the end. */
#include <string.h>

#include "autograd/node.h"
#include "ops/gemm.h" /* TR_PAR_MIN */

/* For output row r (all output dims but the last), the input offset of its first element. */
static int64_t row_offset(int64_t r, int ndim, const int64_t *oshape, const int64_t *istride) {
    int64_t off = 0;
    for (int d = ndim - 2; d >= 0; d--) {
        off += (r % oshape[d]) * istride[d];
        r /= oshape[d];
    }
    return off;
}

/* out (oshape) = inp permuted; istride[d] is the input stride of output dim d. With
 * `accumulate` the roles flip: inp[...] += out[...] (the backward scatter). A permutation
 * touches each element once, so rows are independent. */
static void permute_kernel(tr_dtype dt, void *out, void *inp, int ndim, const int64_t *oshape,
                           const int64_t *istride, int accumulate) {
    int64_t L = ndim ? oshape[ndim - 1] : 1, s = ndim ? istride[ndim - 1] : 1, rows = 1;
    for (int d = 0; d + 1 < ndim; d++) rows *= oshape[d];
#pragma omp parallel for if (rows * L > TR_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = row_offset(r, ndim, oshape, istride);
        if (dt == TR_F64) {
            double *o = (double *)out + r * L, *in = (double *)inp + base;
            if (accumulate)
                for (int64_t j = 0; j < L; j++) in[j * s] += o[j];
            else
                for (int64_t j = 0; j < L; j++) o[j] = in[j * s];
        } else {
            float *o = (float *)out + r * L, *in = (float *)inp + base;
            if (accumulate)
                for (int64_t j = 0; j < L; j++) in[j * s] += o[j];
            else
                for (int64_t j = 0; j < L; j++) o[j] = in[j * s];
        }
    }
}

/* Output shape and per-output-dim input strides of x permuted by perm. */
static void permuted(const tr_tensor *x, const int64_t *perm, int64_t *oshape, int64_t *istride) {
    int64_t stride[TR_MAX_DIMS], s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= x->shape[d];
    }
    for (int d = 0; d < x->ndim; d++) {
        oshape[d] = x->shape[perm[d]];
        istride[d] = stride[perm[d]];
    }
}

static void permute_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0];
    void *dx = op_grad(g, x);
    if (!dx) return;
    int64_t oshape[TR_MAX_DIMS], istride[TR_MAX_DIMS];
    permuted(x, n->i, oshape, istride);
    permute_kernel(x->dtype, n->out->grad, dx, x->ndim, oshape, istride, 1);
}

/* perm: normalised, validated dims (perm[d] is the input dim of output dim d). */
static tr_tensor *permute_impl(tr_graph *g, const char *name, tr_tensor *x, const int64_t *perm) {
    int64_t oshape[TR_MAX_DIMS], istride[TR_MAX_DIMS];
    permuted(x, perm, oshape, istride);
    tr_tensor *y = op_out(g, x->dtype, x->ndim, oshape);
    if (!y) return NULL;
    permute_kernel(x->dtype, y->data, x->data, x->ndim, oshape, istride, 0);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, name, permute_backward, y, 1, x);
        if (!n) return NULL;
        memcpy(n->i, perm, (size_t)x->ndim * sizeof *perm); /* TR_MAX_DIMS <= 8 slots */
    }
    return y;
}

tr_tensor *tr_permute(tr_graph *g, tr_tensor *x, const int *perm) {
    if (!op_check(g, "permute", 1, x)) return NULL;
    if (!OP_HOST_ONLY(g, "permute")) return NULL;
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
    if (!OP_HOST_ONLY(g, "transpose")) return NULL;
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
