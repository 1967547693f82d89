/* attention: multi-head scaled-dot-product attention, softmax(q k^T / sqrt(D)) v per head,
 * q (B, T, C), k and v (B, S, C), C = n_head * D -> (B, T, C); optional causal mask (query t
 * sees keys s <= t, PyTorch's is_causal semantics also when T != S) and key padding mask
 * (B, S) (ops.h: a row that sees no key is 0; an all-ones mask takes the unmasked path).
 * On the CPU the probabilities (B, n_head, T, S) are never all in memory at once (flash
 * attention's idea, attention.inc): blocks of a head's query rows are made, used and dropped
 * in per-thread scratch; training keeps each row's max and 1 / sum, O(B n_head T), and
 * backward makes the probabilities again. On a device the table's entries keep them. Dropout
 * on the probabilities (tr_attention_dropout, training mode): the mask tr_dropout's of them,
 * kept (one byte each); p 0 and eval mode take the code without it. f32 and f64; the f32
 * softmax uses the vectorisable exp of vmath.h (<= 2 ulp), as softmax.c does. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include <string.h>

#include "autograd/node.h"
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "ops/cpu_kernels.h"
#include "ops/dropout.h"
#include "trainer/ops.h"
#include "trainer/rng.h"

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

/* Query rows per block: the block's scores at most ATT_BLOCK values (128 KiB of f32, in L2),
 * and at least 16 rows where T has them (the products' depth in backward). Causal, at most
 * ATT_CAUSAL_ROWS: a block's products stop at the keys its last row sees (at T 128, two
 * blocks do 75% of the work of one; smaller ones would fall below the packed GEMM's sizes). */
#define ATT_BLOCK 32768
#define ATT_CAUSAL_ROWS 64
static int64_t attention_rows(int64_t T, int64_t S, int causal) {
    int64_t tb = ATT_BLOCK / (S > 0 ? S : 1);
    if (causal && tb > ATT_CAUSAL_ROWS) tb = ATT_CAUSAL_ROWS;
    if (tb < 16) tb = 16;
    return tb < T ? tb : T;
}

/* Scratch values one thread's head needs: a block of probabilities and one of their gradients. */
static int64_t attention_scratch(int64_t T, int64_t S) { return 2 * attention_rows(T, S, 0) * S; }


#if defined(__AVX512F__)
#include <immintrin.h>

/* The f32 softmax row's two reductions in explicit vectors: written as `omp simd` reductions
 * gcc kept the partial maxima and sums on the stack and folded them lane by lane (a store that
 * the next vector load could not forward), 36% of all-MiniLM-L6-v2's attention forward on
 * rows of 128. */

/* The lanes of vector j of a row of n: the keys 16 j.. below n. */
static inline __mmask16 row_lanes(int64_t n, int j) {
    int64_t left = n - 16 * (int64_t)j;
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}

/* The max of row[s], s < n, over the keys with mk[s] != 0 (mk NULL: all); *seen: whether
 * there was one (-inf and 0 when not). A NaN may or may not win: the row's exps are NaN anyway. */
static float row_max_f32(const float *row, const int32_t *mk, int64_t n, int *seen) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    __mmask16 any = 0;
    for (int j = 0; 16 * (int64_t)j < n; j++) {
        int64_t s = 16 * (int64_t)j;
        __mmask16 lanes = row_lanes(n, j);
        if (mk) lanes = _mm512_mask_cmpneq_epi32_mask(lanes, _mm512_maskz_loadu_epi32(lanes, mk + s), _mm512_setzero_si512());
        m = _mm512_mask_max_ps(m, lanes, m, _mm512_maskz_loadu_ps(lanes, row + s));
        any |= lanes;
    }
    *seen = any != 0;
    return _mm512_reduce_max_ps(m);
}

/* The sum of row[s], s < n. */
static float row_sum_f32(const float *row, int64_t n) {
    __m512 a = _mm512_setzero_ps();
    for (int j = 0; 16 * (int64_t)j < n; j++) a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(row_lanes(n, j), row + 16 * j));
    return _mm512_reduce_add_ps(a);
}

/* vmath.h's fast_exp_f32 on 16 lanes, operation for operation as gcc vectorises it (-O3,
 * -ffp-contract=fast: the same contractions), so the bits are the scalar loop's, NaN kept. */
static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654475f), hi = _mm512_set1_ps(88.72283905f);
    const __m512 sh = _mm512_set1_ps(12582912.0f);
    __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x)); /* the second operand where x is NaN */
    __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), sh);
    __m512 n = _mm512_sub_ps(t, sh);
    __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000));
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(y), _mm512_slli_epi32(ni, 23)));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
}

/* Two unmasked f32 rows of 1 to ATT_PAIR_KEYS keys each, held in registers: each read once,
 * its max, exps, sum and scaling done there, written once, the two rows' chains of dependent
 * steps (max, exp, sum, 1 / sum) interleaved. One row alone in registers ran no faster than the
 * loops: the chain, not the passes over memory, was the cost. The same operations in the same
 * order per row as attention_softmax_row's loops and reductions, so the same bits. st[r] as
 * there (NULL: not wanted). */
#define ATT_PAIR_KEYS 128
static void softmax_2rows_regs_f32(float *r0, float *r1, int64_t n0, int64_t n1, float *s0, float *s1, int known) {
    enum { NV = ATT_PAIR_KEYS / 16 };
    float *row[2] = {r0, r1}, *st[2] = {s0, s1};
    const int64_t n[2] = {n0, n1};
    __m512 v[2][NV], a[2];
    float mx[2] = {0, 0}, inv[2] = {0, 0};
#pragma GCC unroll 2
    for (int r = 0; r < 2; r++) {
#pragma GCC unroll 8
        for (int j = 0; j < NV; j++) v[r][j] = _mm512_maskz_loadu_ps(row_lanes(n[r], j), row[r] + 16 * j);
        if (known) {
            mx[r] = st[r][0], inv[r] = st[r][1];
        } else {
            __m512 m = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 8
            for (int j = 0; j < NV; j++) m = _mm512_mask_max_ps(m, row_lanes(n[r], j), m, v[r][j]);
            mx[r] = _mm512_reduce_max_ps(m);
        }
        a[r] = _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (int j = 0; j < NV; j++) {
#pragma GCC unroll 2
        for (int r = 0; r < 2; r++)
            if (16 * j < n[r]) {
                v[r][j] = exp16(_mm512_sub_ps(v[r][j], _mm512_set1_ps(mx[r])));
                if (!known) a[r] = _mm512_add_ps(a[r], _mm512_maskz_mov_ps(row_lanes(n[r], j), v[r][j]));
            }
    }
#pragma GCC unroll 2
    for (int r = 0; r < 2; r++) {
        if (!known) {
            inv[r] = 1 / _mm512_reduce_add_ps(a[r]);
            if (st[r]) st[r][0] = mx[r], st[r][1] = inv[r];
        }
#pragma GCC unroll 8
        for (int j = 0; j < NV; j++)
            _mm512_mask_storeu_ps(row[r] + 16 * j, row_lanes(n[r], j), _mm512_mul_ps(v[r][j], _mm512_set1_ps(inv[r])));
    }
}
#define ATT_ROW_REDUCE 1
#else
#define ATT_ROW_REDUCE 0
#endif

#define TR_GENERIC "ops/attention.inc"
#include "ops/generic.h"

/* Whether the (b, h) pairs run on OpenMP threads, each calling GEMM for its own head (which
 * then runs on the calling thread): with at least as many heads as threads; with fewer, heads
 * run one after another, each GEMM threaded, OpenMP threading the softmax rows. */
static int parallel_heads(int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH) {
    (void)T; (void)S; (void)C;
    return max_threads() > 1 && B * NH >= max_threads();
}

/* The table's entries (trainer/kernels.h): the probabilities kept in att, threads as the op's
 * own, so that a device running them (the test device fake_gpu) gets the CPU graph's bits. */
static void att_forward(float *out, float *att, const float *q, const float *k, const float *v, int64_t B, int64_t T,
                        int64_t S, int64_t C, int64_t NH, int causal) {
    attention_forward_f32(out, att, NULL, NULL, NULL, q, k, v, NULL, NULL, C, B, T, S, C, NH, causal,
                          parallel_heads(B, T, S, C, NH));
}

static void att_mask_forward(float *out, float *att, const float *q, const float *k, const float *v,
                             const int32_t *mask, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH, int causal) {
    attention_forward_f32(out, att, NULL, NULL, NULL, q, k, v, mask, NULL, C, B, T, S, C, NH, causal,
                          parallel_heads(B, T, S, C, NH));
}

static size_t att_work(int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH) {
    return (parallel_heads(B, T, S, C, NH) ? (size_t)max_threads() : 1) * (size_t)attention_scratch(T, S) *
           sizeof(float);
}

static void att_backward(float *dq, float *dk, float *dv, void *work, const float *dout, const float *att,
                         const float *q, const float *k, const float *v, int64_t B, int64_t T, int64_t S, int64_t C,
                         int64_t NH) {
    attention_backward_f32(dq, dk, dv, work, dout, att, NULL, NULL, NULL, 1, q, k, v, C, B, T, S, C, NH, 0, 1,
                           parallel_heads(B, T, S, C, NH));
}

static void att_qkv_forward(float *out, float *att, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                            int causal) {
    attention_forward_f32(out, att, NULL, NULL, NULL, qkv, qkv + C, qkv + 2 * C, NULL, NULL, 3 * C, B, T, T, C, NH,
                          causal, parallel_heads(B, T, T, C, NH));
}

static void att_qkv_mask_forward(float *out, float *att, const float *qkv, const int32_t *mask, int64_t B, int64_t T,
                                 int64_t C, int64_t NH, int causal) {
    attention_forward_f32(out, att, NULL, NULL, NULL, qkv, qkv + C, qkv + 2 * C, mask, NULL, 3 * C, B, T, T, C, NH,
                          causal, parallel_heads(B, T, T, C, NH));
}

static void att_qkv_backward(float *dqkv, void *work, const float *dout, const float *att, const float *qkv, int64_t B,
                             int64_t T, int64_t C, int64_t NH, int acc) {
    attention_backward_f32(dqkv, dqkv + C, dqkv + 2 * C, work, dout, att, NULL, NULL, NULL, 1, qkv, qkv + C,
                           qkv + 2 * C, 3 * C, B, T, T, C, NH, 0, acc, parallel_heads(B, T, T, C, NH));
}

static void att_dropout_forward(float *out, float *att, uint8_t *keep, void *work, const float *q, const float *k,
                                const float *v, const int32_t *mask, const tr_dropout_draw *d, int64_t ld, int64_t B,
                                int64_t T, int64_t S, int64_t C, int64_t NH, int causal) {
    attention_forward_f32(out, att, NULL, keep, work, q, k, v, mask, d, ld, B, T, S, C, NH, causal,
                          parallel_heads(B, T, S, C, NH));
}

static void att_dropout_backward(float *dq, float *dk, float *dv, void *work, const float *dout, const float *att,
                                 const uint8_t *keep, double scale, const float *q, const float *k, const float *v,
                                 int64_t ld, int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH, int acc) {
    attention_backward_f32(dq, dk, dv, work, dout, att, NULL, NULL, keep, scale, q, k, v, ld, B, T, S, C, NH, 0, acc,
                           parallel_heads(B, T, S, C, NH));
}

void ops_kernels_attention(tr_kernels *k) {
    k->attention_forward = att_forward;
    k->attention_work = att_work;
    k->attention_backward = att_backward;
    k->attention_qkv_forward = att_qkv_forward;
    k->attention_qkv_backward = att_qkv_backward;
    k->attention_mask_forward = att_mask_forward;
    k->attention_qkv_mask_forward = att_qkv_mask_forward;
    k->attention_dropout_forward = att_dropout_forward;
    k->attention_dropout_backward = att_dropout_backward;
}

/* The node: in q, k, v (packed: qkv alone); i B, T, S, C, NH, causal, packed; saved the
 * probabilities (on a device) or the rows' statistics (the CPU), with dropout its mask (f[0]
 * its scale), and the key padding mask (NULL: none). */
enum { I_B, I_T, I_S, I_C, I_NH, I_CAUSAL, I_PACKED };

static void attention_backward(tr_graph *g, tr_node *n) {
    int64_t B = n->i[I_B], T = n->i[I_T], S = n->i[I_S], C = n->i[I_C], NH = n->i[I_NH], ld = C;
    const tr_kernels *kern = op_kernels(g);
    const uint8_t *keep = n->saved[1];
    const void *q, *k, *v;
    void *dq, *dk, *dv, *scratch = NULL;
    int acc = 1;
    if (n->i[I_PACKED]) { /* one gradient, each element written by one GEMM: written when fresh */
        size_t cb = (size_t)C * tr_dtype_size(n->out->dtype);
        char *d = op_grad_write(g, n->in[0], &acc);
        const char *x = n->in[0]->data;
        if (!d) return;
        ld = 3 * C;
        q = x, k = x + cb, v = x + 2 * cb;
        dq = d, dk = d + cb, dv = d + 2 * cb;
    } else {
        q = n->in[0]->data, k = n->in[1]->data, v = n->in[2]->data;
        dq = op_grad(g, n->in[0]), dk = op_grad(g, n->in[1]), dv = op_grad(g, n->in[2]);
        if (tr_graph_status(g) != TR_OK || (!dq && !dk && !dv)) return;
    }
    if (kern) { /* a device's kernels, with the scratch they ask for */
        if (!op_work(g, kern->attention_work(B, T, S, C, NH), &scratch)) return;
        if (keep)
            kern->attention_dropout_backward(dq, dk, dv, scratch, n->out->grad, n->saved[0], keep, n->f[0], q, k, v,
                                             ld, B, T, S, C, NH, acc);
        else if (n->i[I_PACKED])
            kern->attention_qkv_backward(dq, scratch, n->out->grad, n->saved[0], q, B, T, C, NH, acc);
        else
            kern->attention_backward(dq, dk, dv, scratch, n->out->grad, n->saved[0], q, k, v, B, T, S, C, NH);
        return;
    }
    /* dq, dk, dv may be one buffer (self-attention, or views of one base: same numel, B and C,
     * hence T == S): the (b, h) blocks still coincide, so threads write disjoint blocks. */
    int par = parallel_heads(B, T, S, C, NH);
    scratch = op_data(g, (par ? (size_t)max_threads() : 1) * (size_t)attention_scratch(T, S) *
                             tr_dtype_size(n->out->dtype));
    if (!scratch) return;
    TR_DISPATCH(n->out->dtype, attention_backward, dq, dk, dv, scratch, n->out->grad, NULL, n->saved[0], n->saved[2],
                keep, n->f[0], q, k, v, ld, B, T, S, C, NH, (int)n->i[I_CAUSAL], acc, par);
}

/* Attention over (B, T, S) of q, k and v (rows at stride ld), keys masked by mask (B, S) in
 * data memory (NULL: none), dropout p on the probabilities (0: none): its output, computed,
 * and the node recording the inputs in[0..n_in) when any needs a gradient (n_in 1: the fused
 * projection whose thirds q, k and v are). NULL: failed, the graph says why. */
static tr_tensor *attention_run(tr_graph *g, const char *op, tr_tensor *const *in, int n_in, const void *q,
                                const void *k, const void *v, const int32_t *mask, int64_t ld, int64_t B, int64_t T,
                                int64_t S, int64_t C, int64_t NH, int causal, double p) {
    tr_dtype dt = in[0]->dtype;
    const tr_kernels *kern = op_kernels(g);
    if (p > 0 && !OP_DEVICE(g, op, attention_dropout_forward, attention_dropout_backward, attention_work)) return NULL;
    tr_tensor *y = op_out(g, dt, 3, (int64_t[]){B, T, C});
    if (!y) return NULL;
    causal = causal != 0;
    int needs = n_in == 1 ? op_needs_grad(g, 1, in[0]) : op_needs_grad(g, 3, in[0], in[1], in[2]);
    int par = parallel_heads(B, T, S, C, NH);
    size_t es = tr_dtype_size(dt), n_att = (size_t)(B * NH * T * S);
    void *att = NULL, *stats = NULL, *work = NULL;
    if (kern) { /* the device's kernels keep the probabilities */
        if (!(att = op_data(g, n_att * es + 1))) return NULL;
    } else { /* the CPU's: the rows' statistics when backward will want them, and scratch */
        if (needs && !(stats = op_data(g, (size_t)(B * NH * T) * 2 * es + 1))) return NULL;
        work = op_data(g, ((par ? (size_t)max_threads() : 1) * (size_t)attention_scratch(T, S) + 1) * es);
        if (!work) return NULL;
    }
    uint8_t *keep = NULL;
    tr_dropout_draw d = {0};
    if (p > 0) { /* tr_dropout's mask of the probabilities (B, NH, T, S): dim 0 the sample */
        uint64_t step, sample_base, call;
        tr_graph_rng_(g, &d.seed, &step, &sample_base, &call);
        d.stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, step, call);
        d.first = sample_base * (uint64_t)(NH * T * S);
        d.thr = ops_dropout_threshold(p);
        d.scale = 1.0 / (1.0 - p);
        keep = op_data(g, n_att + 1);
        if (!keep) return NULL;
        if (kern) {
            if (!op_work(g, kern->attention_work(B, T, S, C, NH), &work)) return NULL;
            kern->attention_dropout_forward(y->data, att, keep, work, q, k, v, mask, &d, ld, B, T, S, C, NH, causal);
        } else {
            TR_DISPATCH(dt, attention_forward, y->data, NULL, stats, keep, work, q, k, v, mask, &d, ld, B, T, S, C, NH,
                        causal, par);
        }
    } else if (kern && mask && n_in == 1) {
        kern->attention_qkv_mask_forward(y->data, att, q, mask, B, T, C, NH, causal);
    } else if (kern && mask) {
        kern->attention_mask_forward(y->data, att, q, k, v, mask, B, T, S, C, NH, causal);
    } else if (kern && n_in == 1) {
        kern->attention_qkv_forward(y->data, att, q, B, T, C, NH, causal);
    } else if (kern) {
        kern->attention_forward(y->data, att, q, k, v, B, T, S, C, NH, causal);
    } else {
        TR_DISPATCH(dt, attention_forward, y->data, NULL, stats, NULL, work, q, k, v, mask, NULL, ld, B, T, S, C, NH,
                    causal, par);
    }
    if (!needs) return y;
    tr_node *n = n_in == 1 ? op_record(g, "attention", attention_backward, y, 1, in[0])
                           : op_record(g, "attention", attention_backward, y, 3, in[0], in[1], in[2]);
    if (!n) return NULL;
    int64_t args[] = {[I_B] = B, [I_T] = T, [I_S] = S, [I_C] = C, [I_NH] = NH, [I_CAUSAL] = causal,
                      [I_PACKED] = n_in == 1};
    memcpy(n->i, args, sizeof args);
    n->saved[0] = kern ? att : stats;
    n->saved[1] = keep;
    n->saved[2] = (void *)mask;
    n->f[0] = d.scale;
    return y;
}

static tr_tensor *heads_fail(tr_graph *g, const char *op, int64_t C, const tr_tensor *x, int n_head) {
    return op_fail(g, TR_ERR_INVALID, "%s: %lld channels of %s do not split into %d heads", op, (long long)C,
                   op_shape(x), n_head);
}

/* The key padding mask of an attention over B samples of S keys: NULL for none or all ones
 * (the unmasked path), else its data; *ok 0 after recording an error. */
static const int32_t *key_mask(tr_graph *g, const char *op, tr_tensor *mask, int64_t B, int64_t S,
                               const tr_tensor *with, int *ok) {
    *ok = 1;
    if (!mask) return NULL;
    *ok = 0;
    if (mask->dtype != TR_I32 || mask->ndim != 2 || mask->shape[0] != B || mask->shape[1] != S) {
        op_fail(g, TR_ERR_INVALID, "%s: mask %s of dtype %s must be i32 (B, S) = (%lld, %lld) for %s", op,
                op_shape(mask), tr_dtype_name(mask->dtype), (long long)B, (long long)S, op_shape(with));
        return NULL;
    }
    const int32_t *m = op_host_indices(g, op, "mask", mask, "q", with);
    if (!m) return NULL;
    *ok = 1;
    for (int64_t i = 0; i < B * S; i++)
        if (!m[i]) return mask->data;
    return NULL;
}

/* The dropout probability p an attention op applies: p in training mode, 0 in eval mode (no
 * randomness drawn); -1 after recording a p outside [0, 1). */
static double dropout_p(tr_graph *g, const char *op, double p, const tr_tensor *x) {
    if (!(p >= 0 && p < 1)) {
        op_fail(g, TR_ERR_INVALID, "%s: dropout p = %g must be in [0, 1) (input %s)", op, p, op_shape(x));
        return -1;
    }
    return tr_graph_training(g) ? p : 0;
}

static tr_tensor *attention_op(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v, tr_tensor *mask, int n_head,
                               int causal, double p, const char *op) {
    if (!op_check(g, op, 3, q, k, v)) return NULL;
    if (!OP_DEVICE(g, op, attention_forward, attention_work, attention_backward)) return NULL;
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3)
        return op_fail(g, TR_ERR_INVALID,
                       "%s: q %s, k %s, v %s must be 3-D (B, T, C), (B, S, C), (B, S, C)", op,
                       op_shape(q), op_shape(k), op_shape(v));
    int64_t B = q->shape[0], T = q->shape[1], C = q->shape[2], S = k->shape[1];
    if (!tr_tensor_same_shape(k, v) || k->shape[0] != B || k->shape[2] != C)
        return op_fail(g, TR_ERR_INVALID,
                       "%s: q %s, k %s, v %s do not match: expected k and v (%lld, S, "
                       "%lld)", op,
                       op_shape(q), op_shape(k), op_shape(v), (long long)B, (long long)C);
    if (n_head < 1 || C % n_head != 0 || C == 0) return heads_fail(g, op, C, q, n_head);
    if (S == 0)
        return op_fail(g, TR_ERR_INVALID, "%s: k %s has no keys (S = 0)", op, op_shape(k));
    if ((p = dropout_p(g, op, p, q)) < 0) return NULL;
    int ok;
    const int32_t *m = key_mask(g, op, mask, B, S, k, &ok);
    if (!ok) return NULL;
    if (m && !OP_DEVICE(g, op, attention_mask_forward)) return NULL;
    return attention_run(g, op, (tr_tensor *[]){q, k, v}, 3, q->data, k->data, v->data, m, C, B, T, S, C, n_head,
                         causal, p);
}

tr_tensor *tr_attention(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v, int n_head, int causal) {
    return attention_op(g, q, k, v, NULL, n_head, causal, 0, "attention");
}

tr_tensor *tr_attention_masked(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v, tr_tensor *mask, int n_head,
                               int causal) {
    return attention_op(g, q, k, v, mask, n_head, causal, 0, mask ? "attention_masked" : "attention");
}

tr_tensor *tr_attention_dropout(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v, tr_tensor *mask, int n_head,
                                int causal, double p) {
    return attention_op(g, q, k, v, mask, n_head, causal, p, "attention_dropout");
}

static tr_tensor *attention_qkv_op(tr_graph *g, tr_tensor *qkv, tr_tensor *mask, int n_head, int causal, double p,
                                   const char *op) {
    if (!op_check(g, op, 1, qkv)) return NULL;
    if (qkv->ndim != 3 || qkv->shape[2] % 3 != 0)
        return op_fail(g, TR_ERR_INVALID, "%s: qkv %s must be 3-D (B, T, 3C)", op, op_shape(qkv));
    int64_t B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3;
    if (n_head < 1 || C % n_head != 0 || C == 0) return heads_fail(g, op, C, qkv, n_head);
    if (T == 0) return op_fail(g, TR_ERR_INVALID, "%s: qkv %s has no keys (T = 0)", op, op_shape(qkv));
    if ((p = dropout_p(g, op, p, qkv)) < 0) return NULL;
    const tr_kernels *kern = op_kernels(g);
    int ok;
    const int32_t *m = key_mask(g, op, mask, B, T, qkv, &ok);
    if (!ok) return NULL;
    /* A device without the fused entries: q, k and v as copies (the dropout entries read the
     * fused layout themselves). */
    if (kern && p == 0 &&
        (!kern->attention_qkv_forward || !kern->attention_qkv_backward || !kern->attention_work ||
         (m && !kern->attention_qkv_mask_forward)))
        return attention_op(g, tr_slice(g, qkv, 2, 0, C), tr_slice(g, qkv, 2, C, C), tr_slice(g, qkv, 2, 2 * C, C),
                            m ? mask : NULL, n_head, causal, 0, m ? "attention_masked" : "attention");
    const char *x = qkv->data;
    size_t cb = (size_t)C * tr_dtype_size(qkv->dtype);
    return attention_run(g, op, &qkv, 1, x, x + cb, x + 2 * cb, m, 3 * C, B, T, T, C, n_head, causal, p);
}

tr_tensor *tr_attention_qkv(tr_graph *g, tr_tensor *qkv, int n_head, int causal) {
    return attention_qkv_op(g, qkv, NULL, n_head, causal, 0, "attention_qkv");
}

tr_tensor *tr_attention_qkv_masked(tr_graph *g, tr_tensor *qkv, tr_tensor *mask, int n_head, int causal) {
    return attention_qkv_op(g, qkv, mask, n_head, causal, 0, mask ? "attention_qkv_masked" : "attention_qkv");
}

tr_tensor *tr_attention_qkv_dropout(tr_graph *g, tr_tensor *qkv, tr_tensor *mask, int n_head, int causal, double p) {
    return attention_qkv_op(g, qkv, mask, n_head, causal, p, "attention_qkv_dropout");
}
