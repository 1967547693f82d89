/* embedding: rows of a table picked by TR_I32 ids. ids (...), table (V, C) f32/f64 ->
 * (..., C). An id outside [0, V) is an error naming the id and where it is. Backward adds
 * each row of dout into dtable[id] (repeated ids accumulate); ids get no gradient. */
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/node.h"
#include "ops/gemm.h" /* TR_PAR_MIN */

/* dtable[ids[i]] += dout[i] for the N ids. Threads split the channels, so two threads never
 * touch the same element even when ids repeat. */
static void embedding_backward_kernel(tr_dtype dt, void *dtable, const void *dout,
                                      const int32_t *ids, int64_t N, int64_t C) {
#pragma omp parallel if (N * C > TR_PAR_MIN)
    {
        int64_t c0 = 0, c1 = C;
#ifdef _OPENMP
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        c0 = C * t / nt;
        c1 = C * (t + 1) / nt;
#endif
        for (int64_t i = 0; i < N; i++) {
            int64_t r = ids[i];
            if (dt == TR_F64) {
                double *d = (double *)dtable + r * C;
                const double *s = (const double *)dout + i * C;
                for (int64_t c = c0; c < c1; c++) d[c] += s[c];
            } else {
                float *d = (float *)dtable + r * C;
                const float *s = (const float *)dout + i * C;
                for (int64_t c = c0; c < c1; c++) d[c] += s[c];
            }
        }
    }
}

static void embedding_backward(tr_graph *g, tr_node *n) {
    void *dtable = op_grad(g, n->in[0]);
    if (dtable)
        embedding_backward_kernel(n->out->dtype, dtable, n->out->grad, n->saved[0], n->i[0],
                                  n->i[1]);
}

/* "(1, 2)": the multi-index of flat position i in t, for messages. */
static const char *index_str(const tr_tensor *t, int64_t i, char *buf, size_t size) {
    int64_t idx[TR_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = t->shape[d] ? i % t->shape[d] : 0;
        i = t->shape[d] ? i / t->shape[d] : 0;
    }
    tr_tensor v = tr_tensor_view(NULL, t->dtype, t->ndim, idx);
    return tr_shape_str(&v, buf, size);
}

tr_tensor *tr_embedding(tr_graph *g, tr_tensor *ids, tr_tensor *table) {
    if (!op_check(g, "embedding", 1, table)) return NULL;
    if (!OP_HOST_ONLY(g, "embedding")) return NULL;
    if (!ids)
        return op_fail(g, TR_ERR_INVALID, "embedding: ids are NULL (an earlier op failed?)");
    if (ids->dtype != TR_I32)
        return op_fail(g, TR_ERR_INVALID, "embedding: ids %s have dtype %s; expected i32",
                       op_shape(ids), tr_dtype_name(ids->dtype));
    if (table->ndim != 2)
        return op_fail(g, TR_ERR_INVALID, "embedding: table %s must be 2-D (V, C)",
                       op_shape(table));
    if (ids->ndim >= TR_MAX_DIMS)
        return op_fail(g, TR_ERR_INVALID, "embedding: ids %s have %d dims (at most %d)",
                       op_shape(ids), ids->ndim, TR_MAX_DIMS - 1);
    int64_t V = table->shape[0], C = table->shape[1], N = tr_tensor_numel(ids);
    const int32_t *id = ids->data;
    for (int64_t i = 0; i < N; i++) {
        if (id[i] < 0 || id[i] >= V) {
            char at[96];
            return op_fail(g, TR_ERR_INVALID,
                           "embedding: id %d at position %s of ids %s is outside [0, %lld) for "
                           "table %s",
                           (int)id[i], index_str(ids, i, at, sizeof at), op_shape(ids),
                           (long long)V, op_shape(table));
        }
    }
    int64_t shape[TR_MAX_DIMS];
    for (int d = 0; d < ids->ndim; d++) shape[d] = ids->shape[d];
    shape[ids->ndim] = C;
    tr_tensor *y = op_out(g, table->dtype, ids->ndim + 1, shape);
    if (!y) return NULL;
    size_t row = (size_t)C * tr_dtype_size(table->dtype);
#pragma omp parallel for if (N * C > TR_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < N; i++)
        memcpy((char *)y->data + (size_t)i * row, (const char *)table->data + (size_t)id[i] * row,
               row);
    if (op_needs_grad(g, 1, table)) {
        tr_node *n = op_record(g, "embedding", embedding_backward, y, 1, table);
        if (!n) return NULL;
        /* The ids' data lives in the arena or with the caller until backward, like any input. */
        n->saved[0] = ids->data;
        n->i[0] = N;
        n->i[1] = C;
    }
    return y;
}
