/* attention: multi-head scaled-dot-product attention, softmax(q k^T / sqrt(D)) v per head,
 * q (B, T, C), k and v (B, S, C), C = n_head * D -> (B, T, C); optional causal mask (query t
 * sees keys s <= t, PyTorch's is_causal semantics also when T != S). The probabilities
 * (B, n_head, T, S) stay in the arena for backward: memory is O(B n_head T S), no
 * flash-style tiling. f32 and f64; the f32 softmax uses the vectorisable exp of vmath.h
 * (<= 2 ulp), as softmax.c does. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "ops/gemm.h"
#include "ops/vmath.h"

static int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#define TR_GENERIC "ops/attention.inc"
#include "ops/generic.h"

/* Whether the (b, h) pairs run on OpenMP threads, each calling GEMM for its own head. The
 * core links OpenBLAS's OpenMP build, which runs a GEMM called inside a parallel region on the
 * calling thread: with at least as many heads as threads, heads in parallel (single-threaded
 * GEMMs, no fork per GEMM) win; with fewer, heads run one after another and OpenBLAS threads
 * each GEMM while OpenMP threads the softmax rows. */
static int parallel_heads(int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH) {
    (void)T; (void)S; (void)C;
    return max_threads() > 1 && B * NH >= max_threads();
}

/* The table's entries (trainer/kernels.h): heads one after another (par 0), one head's
 * T x S scores of scratch. */
static void att_forward(float *out, float *att, const float *q, const float *k, const float *v, int64_t B, int64_t T,
                        int64_t S, int64_t C, int64_t NH, int causal) {
    attention_forward_f32(out, att, q, k, v, B, T, S, C, NH, causal, 0);
}

static size_t att_work(int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH) {
    (void)B, (void)C, (void)NH;
    return (size_t)(T * S) * sizeof(float);
}

static void att_backward(float *dq, float *dk, float *dv, void *work, const float *dout, const float *att,
                         const float *q, const float *k, const float *v, int64_t B, int64_t T, int64_t S, int64_t C,
                         int64_t NH) {
    attention_backward_f32(dq, dk, dv, work, dout, att, q, k, v, B, T, S, C, NH, 0);
}

void ops_kernels_attention(tr_kernels *k) {
    k->attention_forward = att_forward;
    k->attention_work = att_work;
    k->attention_backward = att_backward;
}

static void attention_backward(tr_graph *g, tr_node *n) {
    tr_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int64_t B = n->i[0], T = n->i[1], S = n->i[2], C = n->i[3], NH = n->i[4];
    void *dq = op_grad(g, q), *dk = op_grad(g, k), *dv = op_grad(g, v);
    if (tr_graph_status(g) != TR_OK || (!dq && !dk && !dv)) return;
    const tr_kernels *kern = op_kernels(g);
    if (kern) { /* a device's kernels, with the scratch they ask for */
        void *work;
        if (op_work(g, kern->attention_work(B, T, S, C, NH), &work))
            kern->attention_backward(dq, dk, dv, work, n->out->grad, n->saved[0], q->data, k->data, v->data, B, T,
                                     S, C, NH);
        return;
    }
    /* dq, dk, dv may be one buffer (self-attention, or views of one base: same numel, B and C,
     * hence T == S): the (b, h) blocks still coincide, so threads write disjoint blocks. */
    int par = parallel_heads(B, T, S, C, NH);
    void *scratch = NULL;
    if (dq || dk) {
        size_t slots = par ? (size_t)max_threads() : 1;
        scratch = op_data(g, slots * (size_t)(T * S) * tr_dtype_size(q->dtype) + 1);
        if (!scratch) return;
    }
    TR_DISPATCH(q->dtype, attention_backward, dq, dk, dv, scratch, n->out->grad, n->saved[0],
                q->data, k->data, v->data, B, T, S, C, NH, par);
}

tr_tensor *tr_attention(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v, int n_head,
                        int causal) {
    if (!op_check(g, "attention", 3, q, k, v)) return NULL;
    if (!OP_DEVICE(g, "attention", attention_forward, attention_work, attention_backward)) return NULL;
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3)
        return op_fail(g, TR_ERR_INVALID,
                       "attention: q %s, k %s, v %s must be 3-D (B, T, C), (B, S, C), (B, S, C)",
                       op_shape(q), op_shape(k), op_shape(v));
    int64_t B = q->shape[0], T = q->shape[1], C = q->shape[2], S = k->shape[1];
    if (!tr_tensor_same_shape(k, v) || k->shape[0] != B || k->shape[2] != C)
        return op_fail(g, TR_ERR_INVALID,
                       "attention: q %s, k %s, v %s do not match: expected k and v (%lld, S, "
                       "%lld)",
                       op_shape(q), op_shape(k), op_shape(v), (long long)B, (long long)C);
    if (n_head < 1 || C % n_head != 0 || C == 0)
        return op_fail(g, TR_ERR_INVALID,
                       "attention: %lld channels of q %s do not split into %d heads",
                       (long long)C, op_shape(q), n_head);
    if (S == 0)
        return op_fail(g, TR_ERR_INVALID, "attention: k %s has no keys (S = 0)", op_shape(k));
    int64_t NH = n_head;
    tr_tensor *y = op_out(g, q->dtype, 3, q->shape);
    if (!y) return NULL;
    size_t att_bytes = (size_t)(B * NH * T * S) * tr_dtype_size(q->dtype);
    void *att = op_data(g, att_bytes ? att_bytes : 1);
    if (!att) return NULL;
    if (op_kernels(g))
        op_kernels(g)->attention_forward(y->data, att, q->data, k->data, v->data, B, T, S, C, NH, causal != 0);
    else
        TR_DISPATCH(q->dtype, attention_forward, y->data, att, q->data, k->data, v->data, B, T, S, C, NH, causal != 0,
                    parallel_heads(B, T, S, C, NH));
    if (op_needs_grad(g, 3, q, k, v)) {
        tr_node *n = op_record(g, "attention", attention_backward, y, 3, q, k, v);
        if (!n) return NULL;
        n->i[0] = B;
        n->i[1] = T;
        n->i[2] = S;
        n->i[3] = C;
        n->i[4] = NH;
        n->i[5] = causal != 0;
        n->saved[0] = att;
    }
    return y;
}
