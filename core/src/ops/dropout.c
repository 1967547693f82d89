/* Dropout. In training mode each element is zeroed with probability p and the others are
 * scaled by 1/(1-p); in eval mode, or with p == 0, tr_dropout returns x itself (no copy, no
 * node: the gradient flows to x directly) and draws no randomness.
 *
 * The mask comes from the counter-based RNG, not from any hidden state: element e of sample s
 * (dim 0 is the sample dim, per_sample = numel / shape[0]) is kept when
 * tr_rng_uniform(seed, stream, (sample_base + s) * per_sample + e) >= p, with
 * stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, step, call) and `call` counting the training
 * mode dropout calls of the step (tr_graph_rng_). A sample's mask is thus the same however
 * the global batch is split over ranks. The mask (one byte per element) is kept for
 * backward. */
#include "autograd/node.h"
#include "kernels/gemm.h"
#include "ops/cpu_kernels.h"
#include "ops/dropout.h"
#include "trainer/ops.h"
#include "trainer/rng.h"

/* Elements per parallel chunk: a multiple of 4, the Philox block size. */
#define DROPOUT_CHUNK 4096

uint32_t ops_dropout_threshold(double p) {
    double thr_d = p * 16777216.0;
    return (uint32_t)thr_d + ((double)(uint32_t)thr_d < thr_d);
}

/* Philox blocks 64 at a time (tr_rng_uniform's numbers, in bulk). */
void ops_dropout_mask(uint8_t *mask, int64_t n, uint64_t seed, uint64_t stream, uint64_t first, uint32_t thr) {
    enum { BLOCKS = 64 };
    uint32_t r[4 * BLOCKS];
    int64_t i = 0;
    if (first & 3) { /* the head of a block another chunk began */
        tr_philox4x32(r, seed, stream, first >> 2);
        for (unsigned lane = (unsigned)(first & 3); lane < 4 && i < n; lane++, i++) mask[i] = (r[lane] >> 8) >= thr;
    }
    while (i < n) { /* element first + i starts a block here */
        int64_t len = n - i < 4 * BLOCKS ? n - i : 4 * BLOCKS;
        tr_philox4x32_blocks(r, (size_t)(len + 3) / 4, seed, stream, (first + (uint64_t)i) >> 2);
        for (int64_t j = 0; j < len; j++) mask[i + j] = (r[j] >> 8) >= thr;
        i += len;
    }
}

void ops_dropout_apply(void *out, const void *inp, const uint8_t *mask, double scale, tr_dtype dt, int64_t n,
                       int accumulate) {
    if (dt == TR_F64) {
        double *y = out, s = scale;
        const double *x = inp;
        if (accumulate) {
            for (int64_t i = 0; i < n; i++) y[i] += x[i] * (mask[i] ? s : 0);
        } else {
            for (int64_t i = 0; i < n; i++) y[i] = x[i] * (mask[i] ? s : 0);
        }
    } else {
        float *y = out, s = (float)scale;
        const float *x = inp;
        if (accumulate) {
            for (int64_t i = 0; i < n; i++) y[i] += x[i] * (mask[i] ? s : 0);
        } else {
            for (int64_t i = 0; i < n; i++) y[i] = x[i] * (mask[i] ? s : 0);
        }
    }
}

/* The kernels of both directions over whole tensors, chunked for threads. */
static void dropout_fwd(void *out, uint8_t *mask, const void *x, tr_dtype dt, int64_t N, uint64_t seed,
                        uint64_t stream, uint64_t first, uint32_t thr, double scale) {
    size_t es = tr_dtype_size(dt);
    int64_t nchunks = (N + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    /* Philox costs ~10x a multiply per element: worth threads earlier than a plain loop. */
#pragma omp parallel for if (N > TR_PAR_MIN / 8) schedule(static)
    for (int64_t ch = 0; ch < nchunks; ch++) {
        int64_t i0 = ch * DROPOUT_CHUNK, len = N - i0 < DROPOUT_CHUNK ? N - i0 : DROPOUT_CHUNK;
        ops_dropout_mask(mask + i0, len, seed, stream, first + (uint64_t)i0, thr);
        ops_dropout_apply((char *)out + (size_t)i0 * es, (const char *)x + (size_t)i0 * es, mask + i0, scale, dt, len, 0);
    }
}

static void dropout_bwd(void *dx, const void *dout, const uint8_t *mask, tr_dtype dt, int64_t N, double scale,
                        int acc) {
    size_t es = tr_dtype_size(dt);
    int64_t nchunks = (N + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
#pragma omp parallel for if (N > TR_PAR_MIN) schedule(static)
    for (int64_t ch = 0; ch < nchunks; ch++) {
        int64_t i0 = ch * DROPOUT_CHUNK, len = N - i0 < DROPOUT_CHUNK ? N - i0 : DROPOUT_CHUNK;
        ops_dropout_apply((char *)dx + (size_t)i0 * es, (const char *)dout + (size_t)i0 * es, mask + i0, scale, dt, len, acc);
    }
}

static void dropout_forward_f32(float *out, uint8_t *mask, const float *x, int64_t N, uint64_t seed, uint64_t stream,
                                uint64_t first, uint32_t thr, double scale) {
    dropout_fwd(out, mask, x, TR_F32, N, seed, stream, first, thr, scale);
}

static void dropout_backward_f32(float *dx, const float *dout, const uint8_t *mask, int64_t N, double scale, int acc) {
    dropout_bwd(dx, dout, mask, TR_F32, N, scale, acc);
}

static void dropout_backward(tr_graph *g, tr_node *n) {
    int acc;
    void *dx = op_grad_write(g, n->in[0], &acc);
    if (!dx) return;
    int64_t N = tr_tensor_numel(n->out);
    if (op_kernels(g))
        op_kernels(g)->dropout_backward(dx, n->out->grad, n->saved[0], N, n->f[0], acc);
    else
        dropout_bwd(dx, n->out->grad, n->saved[0], n->out->dtype, N, n->f[0], acc);
}

tr_tensor *tr_dropout(tr_graph *g, tr_tensor *x, double p) {
    if (!op_check(g, "dropout", 1, x)) return NULL;
    if (!(p >= 0 && p < 1))
        return op_fail(g, TR_ERR_INVALID, "dropout: p = %g must be in [0, 1) (input %s)", p,
                       op_shape(x));
    if (!tr_graph_training(g) || p == 0) return x;
    if (!OP_DEVICE(g, "dropout", dropout_forward, dropout_backward)) return NULL;
    uint64_t seed, step, sample_base, call;
    tr_graph_rng_(g, &seed, &step, &sample_base, &call);
    uint64_t stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, step, call);
    int64_t N = tr_tensor_numel(x);
    int64_t per_sample = x->ndim > 0 && x->shape[0] > 0 ? N / x->shape[0] : N;
    /* Element e of sample s is element s * per_sample + e of x: its stream index is
     * sample_base * per_sample + that flat index. */
    uint64_t first = sample_base * (uint64_t)per_sample;
    uint32_t thr = ops_dropout_threshold(p);
    double scale = 1.0 / (1.0 - p);
    tr_tensor *y = op_out(g, x->dtype, x->ndim, x->shape);
    uint8_t *mask = op_data(g, (size_t)N + 1);
    if (!y || !mask) return NULL;
    if (op_kernels(g))
        op_kernels(g)->dropout_forward(y->data, mask, x->data, N, seed, stream, first, thr, scale);
    else
        dropout_fwd(y->data, mask, x->data, x->dtype, N, seed, stream, first, thr, scale);
    if (op_needs_grad(g, 1, x)) {
        tr_node *n = op_record(g, "dropout", dropout_backward, y, 1, x);
        if (!n) return NULL;
        n->saved[0] = mask;
        n->f[0] = scale;
    }
    return y;
}

void ops_kernels_dropout(tr_kernels *k) {
    k->dropout_forward = dropout_forward_f32;
    k->dropout_backward = dropout_backward_f32;
}
