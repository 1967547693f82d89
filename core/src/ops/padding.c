/* Padding (ops.h's TR_PAD_ID): the mask of a batch of token ids, and the mean over the real
 * positions of a sequence. Both work from the ids' host copy (a batch's own host memory on a
 * device, tr_graph_input_from): the mask is computed on the host and uploaded, and
 * registered as its own host copy so that the ops taking it read it without a download. The
 * masked mean is the product of per-sample weights mask / count (B, 1, T) with x (B, T, C)
 * (tr_matmul, every device's kernel); an all-ones mask is tr_mean_dim's exact mean. */
#include <string.h>

#include "autograd/node.h"
#include "trainer/ops.h"

tr_tensor *tr_padding_mask(tr_graph *g, tr_tensor *ids) {
    if (tr_graph_status(g) != TR_OK) return NULL;
    if (!ids) return op_fail(g, TR_ERR_INVALID, "padding_mask: ids are NULL (an earlier op failed?)");
    if (ids->dtype != TR_I32)
        return op_fail(g, TR_ERR_INVALID, "padding_mask: ids %s have dtype %s; expected i32", op_shape(ids),
                       tr_dtype_name(ids->dtype));
    int64_t N = tr_tensor_numel(ids);
    const int32_t *id = op_host_indices(g, "padding_mask", "ids", ids, "ids", ids);
    if (!id) return NULL;
    tr_tensor *m = op_out(g, TR_I32, ids->ndim, ids->shape);
    if (!m) return NULL;
    int32_t *h = tr_graph_accel(g) ? op_alloc(g, (size_t)(N ? N : 1) * sizeof *h) : m->data;
    if (!h) return NULL;
    for (int64_t i = 0; i < N; i++) h[i] = id[i] != TR_PAD_ID;
    if (h != m->data) {
        if (!op_write(g, m->data, h, (size_t)N * sizeof *h)) return NULL;
        op_note_host_copy(g, m->data, h, (size_t)N * sizeof *h);
    }
    return m;
}

tr_tensor *tr_mean_masked(tr_graph *g, tr_tensor *x, tr_tensor *mask) {
    if (!op_check(g, "mean_masked", 1, x)) return NULL;
    if (x->ndim != 3)
        return op_fail(g, TR_ERR_INVALID, "mean_masked: x %s must be 3-D (B, T, C)", op_shape(x));
    if (!mask) return tr_mean_dim(g, x, 1);
    int64_t B = x->shape[0], T = x->shape[1];
    if (mask->dtype != TR_I32 || mask->ndim != 2 || mask->shape[0] != B || mask->shape[1] != T)
        return op_fail(g, TR_ERR_INVALID, "mean_masked: mask %s of dtype %s must be i32 (B, T) = (%lld, %lld) for x %s",
                       op_shape(mask), tr_dtype_name(mask->dtype), (long long)B, (long long)T, op_shape(x));
    const int32_t *m = op_host_indices(g, "mean_masked", "mask", mask, "x", x);
    if (!m) return NULL;
    int64_t i = 0;
    while (i < B * T && m[i]) i++;
    if (i == B * T) return tr_mean_dim(g, x, 1);
    size_t es = tr_dtype_size(x->dtype), bytes = (size_t)(B * T) * es;
    char *h = op_alloc(g, bytes ? bytes : 1);
    tr_tensor *w = op_out(g, x->dtype, 3, (int64_t[]){B, 1, T});
    if (!h || !w) return NULL;
    for (int64_t b = 0; b < B; b++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++) n += m[b * T + t] != 0;
        double inv = 1.0 / (n > 0 ? (double)n : 1e-9);
        for (int64_t t = 0; t < T; t++) {
            double v = m[b * T + t] ? inv : 0.0;
            if (x->dtype == TR_F64) memcpy(h + (size_t)(b * T + t) * es, &v, es);
            else {
                float f = (float)v;
                memcpy(h + (size_t)(b * T + t) * es, &f, es);
            }
        }
    }
    if (!op_write(g, w->data, h, bytes)) return NULL;
    return tr_reshape(g, tr_matmul(g, w, x), 2, (int64_t[]){B, x->shape[2]});
}
