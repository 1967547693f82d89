/* The CUDA plugin's attention: per-head batched cuBLAS GEMMs around the softmax and dropout kernels: the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- attention: per head h, one batched GEMM over the batch for each product (head h of
 * batch b is q's columns [h D, (h + 1) D) of rows b T.., read in place with leading dimension
 * ld: C for q, k and v of their own, 3C for the blocks of one fused projection), and the
 * softmax over every row of att at once. Dropout on the probabilities (keep non-NULL) is
 * dropout's own kernel on att, into scratch P = att * keep * scale that the product with v
 * reads (the backward makes P again for dv, then scales the probabilities' gradient by keep
 * * scale in place) ---- */

static void attention_fwd(cuda_device *d, float *out, float *att, uint8_t *keep, const tr_dropout_draw *r,
                          const float *q, const float *k, const float *v, const int32_t *mask, int64_t ld, int64_t B,
                          int64_t T, int64_t S, int64_t C, int64_t NH, int causal) {
    int64_t D = C / NH, TS = T * S, R = B * NH * T, n = R * S;
    float scale = 1.0f / sqrtf((float)D);
    const char *what = "attention (cuBLAS)";
    for (int64_t h = 0; h < NH; h++) /* scores = q k^T / sqrt(D) */
        cuda_rgemm(d, what, 0, 1, T, S, D, scale, q + h * D, ld, T * ld, k + h * D, ld, S * ld, 0.0f, att + h * TS, S,
              NH * TS, B);
    if (mask) /* the key padding mask (B, S) */
        LAUNCH("attention (masked softmax)", k_softmax_mask_fwd, blocks_rows(R), &att, &att, &mask, &R, &T, &NH, &S,
               &causal);
    else
        LAUNCH("attention (softmax)", k_softmax_fwd, blocks_rows(R), &att, &att, &R, &T, &S, &causal);
    float *p = att;
    if (keep) {
        float sf = (float)r->scale;
        uint64_t seed = r->seed, stream = r->stream, first = r->first;
        uint32_t thr = r->thr;
        if (!(p = cuda_scratch(d, (size_t)n * sizeof(float), "attention (dropout scratch)"))) return;
        LAUNCH("attention (dropout)", k_dropout_fwd, blocks_for(n), &p, &keep, &att, &n, &seed, &stream, &first, &thr,
               &sf);
    }
    for (int64_t h = 0; h < NH; h++) /* out = P v */
        cuda_rgemm(d, what, 0, 0, T, D, S, 1.0f, p + h * TS, S, NH * TS, v + h * D, ld, S * ld, 0.0f, out + h * D, C,
              T * C, B);
    if (keep) cuda_free(d, p);
}

/* dq, dk, dv (each may be NULL, leading dimension ld) = (acc 0) or += (acc 1) the gradients:
 * each block of each is one GEMM's output. */
static void attention_bwd(cuda_device *d, float *dq, float *dk, float *dv, const float *dout, const float *att,
                          const uint8_t *keep, double dscale, const float *q, const float *k, const float *v,
                          int64_t ld, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH, int acc) {
    int64_t D = C / NH, TS = T * S, R = B * NH * T, n = R * S;
    float scale = 1.0f / sqrtf((float)D), beta = acc ? 1.0f : 0.0f, sf = (float)dscale;
    int set = 0;
    const char *what = "attention backward (cuBLAS)";
    if (!dq && !dk && !(dv && keep)) {
        for (int64_t h = 0; dv && h < NH; h++) /* dv = att^T dout */
            cuda_rgemm(d, what, 1, 0, S, D, T, 1.0f, att + h * TS, S, NH * TS, dout + h * D, C, T * C, beta, dv + h * D,
                  ld, S * ld, B);
        return;
    }
    float *ds = cuda_scratch(d, (size_t)n * sizeof(float), "attention backward (scratch)");
    if (!ds) return;
    const float *p = att;
    if (dv && keep) { /* the forward's P = att * keep * scale, again */
        LAUNCH("attention backward (dropout)", k_dropout_bwd, blocks_for(n), &ds, &att, &keep, &n, &sf, &set);
        p = ds;
    }
    for (int64_t h = 0; dv && h < NH; h++) /* dv = P^T dout */
        cuda_rgemm(d, what, 1, 0, S, D, T, 1.0f, p + h * TS, S, NH * TS, dout + h * D, C, T * C, beta, dv + h * D, ld,
              S * ld, B);
    if (dq || dk) {
        for (int64_t h = 0; h < NH; h++) /* dP = dout v^T */
            cuda_rgemm(d, what, 0, 1, T, S, D, 1.0f, dout + h * D, C, T * C, v + h * D, ld, S * ld, 0.0f, ds + h * TS, S,
                  NH * TS, B);
        if (keep) /* the probabilities' gradient: dP * keep * scale, in place */
            LAUNCH("attention backward (dropout)", k_dropout_bwd, blocks_for(n), &ds, &ds, &keep, &n, &sf, &set);
        /* the scores' gradient from the probabilities', in place */
        LAUNCH("attention backward (softmax)", k_softmax_bwd, blocks_rows(R), &ds, &ds, &att, &R, &S, &set);
        for (int64_t h = 0; h < NH; h++) {
            if (dq) /* dq = dscores k / sqrt(D) */
                cuda_rgemm(d, what, 0, 0, T, D, S, scale, ds + h * TS, S, NH * TS, k + h * D, ld, S * ld, beta, dq + h * D,
                      ld, T * ld, B);
            if (dk) /* dk = dscores^T q / sqrt(D) */
                cuda_rgemm(d, what, 1, 0, S, D, T, scale, ds + h * TS, S, NH * TS, q + h * D, ld, T * ld, beta, dk + h * D,
                      ld, S * ld, B);
        }
    }
    cuda_free(d, ds);
}

static void attention_forward(float *out, float *att, const float *q, const float *k, const float *v, int64_t B,
                              int64_t T, int64_t S, int64_t C, int64_t NH, int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, q, k, v, NULL, C, B, T, S, C, NH, causal);
}

static void attention_mask_forward(float *out, float *att, const float *q, const float *k, const float *v,
                                   const int32_t *mask, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH,
                                   int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, q, k, v, mask, C, B, T, S, C, NH, causal);
}

/* The scores' gradient (B, NH, T, S) is scratch of the caching allocator for the call (the
 * graph's arena would keep one per layer until the step ends). */
static size_t attention_work(int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH) {
    (void)B, (void)T, (void)S, (void)C, (void)NH;
    return 0;
}

static void attention_backward(float *dq, float *dk, float *dv, void *work, const float *dout, const float *att,
                               const float *q, const float *k, const float *v, int64_t B, int64_t T, int64_t S,
                               int64_t C, int64_t NH) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d) attention_bwd(d, dq, dk, dv, dout, att, NULL, 1, q, k, v, C, B, T, S, C, NH, 1);
}

static void attention_qkv_forward(float *out, float *att, const float *qkv, int64_t B, int64_t T, int64_t C,
                                  int64_t NH, int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, qkv, qkv + C, qkv + 2 * C, NULL, 3 * C, B, T, T, C, NH, causal);
}

static void attention_qkv_mask_forward(float *out, float *att, const float *qkv, const int32_t *mask, int64_t B,
                                       int64_t T, int64_t C, int64_t NH, int causal) {
    cuda_device *d = cuda_current();
    if (d) attention_fwd(d, out, att, NULL, NULL, qkv, qkv + C, qkv + 2 * C, mask, 3 * C, B, T, T, C, NH, causal);
}

static void attention_qkv_backward(float *dqkv, void *work, const float *dout, const float *att, const float *qkv,
                                   int64_t B, int64_t T, int64_t C, int64_t NH, int acc) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d)
        attention_bwd(d, dqkv, dqkv + C, dqkv + 2 * C, dout, att, NULL, 1, qkv, qkv + C, qkv + 2 * C, 3 * C, B, T, T,
                      C, NH, acc);
}

static void attention_dropout_forward(float *out, float *att, uint8_t *keep, void *work, const float *q,
                                      const float *k, const float *v, const int32_t *mask, const tr_dropout_draw *r,
                                      int64_t ld, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH,
                                      int causal) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d) attention_fwd(d, out, att, keep, r, q, k, v, mask, ld, B, T, S, C, NH, causal);
}

static void attention_dropout_backward(float *dq, float *dk, float *dv, void *work, const float *dout,
                                       const float *att, const uint8_t *keep, double scale, const float *q,
                                       const float *k, const float *v, int64_t ld, int64_t B, int64_t T, int64_t S,
                                       int64_t C, int64_t NH, int acc) {
    cuda_device *d = cuda_current();
    (void)work;
    if (d) attention_bwd(d, dq, dk, dv, dout, att, keep, scale, q, k, v, ld, B, T, S, C, NH, acc);
}

void cuda_fill_attention(tr_kernels *t) {
    t->attention_forward = attention_forward;
    t->attention_work = attention_work;
    t->attention_backward = attention_backward;
    t->attention_qkv_forward = attention_qkv_forward;
    t->attention_qkv_backward = attention_qkv_backward;
    t->attention_mask_forward = attention_mask_forward;
    t->attention_qkv_mask_forward = attention_qkv_mask_forward;
    t->attention_dropout_forward = attention_dropout_forward;
    t->attention_dropout_backward = attention_dropout_backward;
}
