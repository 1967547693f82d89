/* embedding: rows of a table picked by TR_I32 ids. ids (...), table (V, C) f32/f64 ->
 * (..., C). An id TR_PAD_ID (-1) is padding: a zero row, no gradient (ops.h); any other id
 * outside [0, V) is an error naming the id and where it is. Backward adds each row of dout
 * into dtable[id] (repeated ids accumulate); ids get no gradient. */
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/accel.h"
#include "trainer/ops.h"

#define TR_GENERIC "ops/embedding.inc"
#include "ops/generic.h"

void ops_kernels_embedding(tr_kernels *k) {
    k->embedding_forward = embedding_forward_f32;
    k->embedding_backward = embedding_backward_f32;
}

static void embedding_backward(tr_graph *g, tr_node *n) {
    void *dtable = op_grad(g, n->in[0]);
    if (dtable) OP_RUN(g, n->out->dtype, embedding_backward, dtable, n->out->grad, n->saved[0], n->i[0], n->i[1]);
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
    if (!OP_DEVICE(g, "embedding", embedding_forward, embedding_backward)) return NULL;
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
    const int32_t *id = op_host_indices(g, "embedding", "ids", ids, "table", table);
    if (!id) return NULL;
    int64_t pads = 0;
    for (int64_t i = 0; i < N; i++) {
        if (id[i] == TR_PAD_ID) {
            pads++;
            continue;
        }
        if (id[i] < 0 || id[i] >= V) {
            char at[96];
            return op_fail(g, TR_ERR_INVALID,
                           "embedding: id %d at position %s of ids %s is outside [0, %lld) for "
                           "table %s",
                           (int)id[i], index_str(ids, i, at, sizeof at), op_shape(ids),
                           (long long)V, op_shape(table));
        }
    }
    if (pads && op_kernels(g) && !TR_KERNELS_KNOW_PADDING(op_kernels(g)))
        return op_fail(g, TR_ERR_UNSUPPORTED,
                       "embedding: ids %s hold padding (id %d), which device %s's plugin, built for "
                       "an SDK before ABI 0.9, cannot embed (rebuild it, or train on the CPU)",
                       op_shape(ids), TR_PAD_ID, tr_accel_name(tr_graph_accel(g)));
    int64_t shape[TR_MAX_DIMS];
    for (int d = 0; d < ids->ndim; d++) shape[d] = ids->shape[d];
    shape[ids->ndim] = C;
    tr_tensor *y = op_out(g, table->dtype, ids->ndim + 1, shape);
    if (!y) return NULL;
    OP_RUN(g, table->dtype, embedding_forward, y->data, ids->data, table->data, N, C);
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
