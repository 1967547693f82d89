/* Scored text pairs for embedding models: the dataset check and the head (see pair_head.h). */
#include "pair_head.h"

#include "trainer/ops.h"

tr_status pair_spec_check(const tr_data_spec *d, const char *who) {
    if (d->task == TR_TASK_REGRESS && d->x_dtype == TR_I32 && d->x_ndim == 2 && d->x_shape[0] == 2 &&
        d->x_shape[1] >= 1 && d->y_dtype == TR_F32 && d->y_numel == 1)
        return TR_OK;
    return tr_error_set(TR_ERR_INVALID, "%s needs scored text pairs: x %s token ids (2, T) and one %s score per "
                                        "sample (the text dataset's mode pairs)",
                        who, tr_dtype_name(TR_I32), tr_dtype_name(TR_F32));
}

tr_tensor *pair_rows(tr_graph *g, tr_tensor *x) {
    tr_graph_set_rows_per_sample(g, 2);
    return tr_reshape(g, x, 2, (int64_t[]){2 * x->shape[0], x->shape[x->ndim - 1]});
}

void pair_head(tr_graph *g, tr_tensor *e, const tr_batch *b, tr_model_out *out) {
    int64_t B = b->x->shape[0], E = e ? e->shape[e->ndim - 1] : 0;
    tr_tensor *pairs = tr_reshape(g, e, 3, (int64_t[]){B, 2, E});
    tr_tensor *q = tr_reshape(g, tr_slice(g, pairs, 1, 0, 1), 2, (int64_t[]){B, E});
    tr_tensor *p = tr_reshape(g, tr_slice(g, pairs, 1, 1, 1), 2, (int64_t[]){B, E});
    tr_tensor *score = tr_cosine_similarity(g, q, p, 1e-8);
    out->embedding = tr_reshape(g, pairs, 2, (int64_t[]){B, 2 * E});
    out->logits = tr_reshape(g, score, 2, (int64_t[]){B, 1});
    if (b->y) out->loss = tr_mse(g, score, tr_reshape(g, b->y, 1, (int64_t[]){B}), b->normaliser);
}
