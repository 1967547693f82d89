/* The CUDA plugin's row copies, permutes and embedding: the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- copies and layouts ---- */

static void copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t W, int acc) {
    LAUNCH("copy_rows (slice, concat)", k_copy_rows, blocks_for(R * W), &dst, &dld, &src, &sld, &R, &W, &acc);
}

static void permute(float *out, float *inp, const tr_permute_dims *pd, int acc) {
    tr_permute_dims p = *pd;
    int64_t n = 1;
    for (int64_t i = 0; i < p.ndim; i++) n *= p.shape[i];
    LAUNCH(acc ? "permute backward" : "permute", k_permute, blocks_for(n), &out, &inp, &p, &n, &acc);
}

/* ---- embedding ---- */

static void embedding_forward(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C) {
    LAUNCH("embedding", k_embed_fwd, blocks_for(N * C), &out, &ids, &table, &N, &C);
}

static void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N, int64_t C) {
    LAUNCH("embedding backward", k_embed_bwd, blocks_rows(N), &dtable, &dout, &ids, &N, &C);
}

void cuda_fill_layout(tr_kernels *t) {
    t->copy_rows = copy_rows;
    t->permute = permute;
    t->embedding_forward = embedding_forward;
    t->embedding_backward = embedding_backward;
}
