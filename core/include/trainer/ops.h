/* Differentiable ops. Each runs its CPU kernel now and records a tape node when a gradient
 * is needed (see graph.h). Inputs are borrowed; outputs live in the graph's arena until the
 * next tr_graph_reset. Float ops accept TR_F32 and TR_F64 (all inputs of one dtype); index
 * inputs (targets, token ids) are TR_I32. Any op returns NULL after an error.
 *
 *   tr_tensor *h = tr_gelu(g, tr_linear(g, x, w, b), TR_GELU_TANH);   // x (B, C) -> (B, OC)
 *   tr_tensor *y = tr_attention(g, q, k, v, n_head, 1);                 // causal, (B, T, C)
 *
 * Shapes are written (dims...). Weight layouts follow PyTorch, so state dicts map 1:1. */
#ifndef TRAINER_OPS_H
#define TRAINER_OPS_H

#include "trainer/export.h"

#include <stdint.h>

#include "trainer/graph.h"
#include "trainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- linear algebra ---- */

/* x (..., C), w (OC, C), b (OC) or NULL -> (..., OC). */
TR_API tr_tensor *tr_linear(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b);
/* a (..., M, K) @ b (..., K, N) -> (..., M, N); batch dims equal, or b is 2-D (shared). */
TR_API tr_tensor *tr_matmul(tr_graph *g, tr_tensor *a, tr_tensor *b);

/* ---- elementwise ---- */

/* b has the shape of a, or the shape of a's trailing dims (broadcast over leading dims). */
TR_API tr_tensor *tr_add(tr_graph *g, tr_tensor *a, tr_tensor *b);
TR_API tr_tensor *tr_mul(tr_graph *g, tr_tensor *a, tr_tensor *b);
/* x (..., C) + b (C). */
TR_API tr_tensor *tr_bias_add(tr_graph *g, tr_tensor *x, tr_tensor *b);
TR_API tr_tensor *tr_scale(tr_graph *g, tr_tensor *x, double s);
TR_API tr_tensor *tr_relu(tr_graph *g, tr_tensor *x);
typedef enum tr_gelu_approx { TR_GELU_EXACT = 0, TR_GELU_TANH = 1 } tr_gelu_approx;
TR_API tr_tensor *tr_gelu(tr_graph *g, tr_tensor *x, tr_gelu_approx approx);
/* ABI 0.20: gelu(linear(x, w, b)), and r + dropout(linear(x, w, b), p) (r of the output's
 * shape: a transformer's residual), with the bits of those ops; on the CPU the GELU, or the
 * residual where the dropout is off, is applied as the product is stored. */
TR_API tr_tensor *tr_linear_gelu(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, tr_gelu_approx approx);
TR_API tr_tensor *tr_linear_residual(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, double p, tr_tensor *r);
/* layer_norm(tr_linear_residual(x, w, b, p, r), gamma, beta, eps): a post-LN encoder's
 * sublayer end. Without gradients, on the CPU, each row is normalised as the product stores
 * it; else those two ops. */
TR_API tr_tensor *tr_linear_residual_norm(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, double p,
                                          tr_tensor *r, tr_tensor *gamma, tr_tensor *beta, double eps);
TR_API tr_tensor *tr_tanh(tr_graph *g, tr_tensor *x);
TR_API tr_tensor *tr_sigmoid(tr_graph *g, tr_tensor *x);
/* Zeroes each element with probability p and scales the rest by 1/(1-p) in training mode;
 * identity otherwise. Randomness per graph.h's tr_graph_set_rng (dim 0 is the sample). */
TR_API tr_tensor *tr_dropout(tr_graph *g, tr_tensor *x, double p);

/* ---- softmax and losses ---- */

/* Over the last dim. */
TR_API tr_tensor *tr_softmax(tr_graph *g, tr_tensor *x);
TR_API tr_tensor *tr_log_softmax(tr_graph *g, tr_tensor *x);
/* logits (N, C) (any leading dims flattened into N), targets TR_I32 (N). Returns the scalar
 * sum over samples of the per-sample loss divided by `normaliser` (pass the global batch size
 * for a mean that is exact under any data split). Targets equal to ignore_index contribute
 * nothing; with label_smoothing e the target distribution is (1-e) one-hot + e/C. */
TR_API tr_tensor *tr_cross_entropy(tr_graph *g, tr_tensor *logits, tr_tensor *targets,
                            double normaliser, int ignore_index, double label_smoothing);
/* sum((pred - target)^2) / normaliser; target has pred's shape, no gradient to target. */
TR_API tr_tensor *tr_mse(tr_graph *g, tr_tensor *pred, tr_tensor *target, double normaliser);
/* Cosine similarity over the last dim: a, b (..., E) -> (...); each norm clamped below at
 * eps (torch.nn.functional.cosine_similarity, eps 1e-8 there). */
TR_API tr_tensor *tr_cosine_similarity(tr_graph *g, tr_tensor *a, tr_tensor *b, double eps);

/* ---- convolution and pooling (NCHW) ---- */

/* x (N, C, H, W), w (OC, C, KH, KW), b (OC) or NULL -> (N, OC, OH, OW). */
TR_API tr_tensor *tr_conv2d(tr_graph *g, tr_tensor *x, tr_tensor *w, tr_tensor *b, int stride,
                     int padding);
TR_API tr_tensor *tr_max_pool2d(tr_graph *g, tr_tensor *x, int kernel, int stride, int padding);
/* Padding counts toward the divisor (PyTorch's count_include_pad=True). */
TR_API tr_tensor *tr_avg_pool2d(tr_graph *g, tr_tensor *x, int kernel, int stride, int padding);

/* ---- normalisation ---- */

/* x (N, C) or (N, C, H, W); gamma, beta (C). In training mode normalises with the batch
 * statistics and updates running_mean / running_var (C, no gradient; unbiased variance)
 * with `momentum` as PyTorch does; in eval mode uses the running statistics. */
TR_API tr_tensor *tr_batch_norm(tr_graph *g, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
                         tr_tensor *running_mean, tr_tensor *running_var, double momentum,
                         double eps);
/* relu(max_pool2d(batch_norm(x, ...), 2, 2, 0)), which equals max_pool2d(relu(batch_norm(x))):
 * a conv block's tail as one op, x (N, C, H, W) with H, W >= 2. The three ops' results
 * (statistics, running statistics, sync_batchnorm included; f32 gradients to rounding) in fewer
 * passes over memory: the normalised tensor and its full-size gradient are never written. */
TR_API tr_tensor *tr_batch_norm_pool_relu(tr_graph *g, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
                                   tr_tensor *running_mean, tr_tensor *running_var,
                                   double momentum, double eps);
/* Over the last dim C; gamma, beta (C). */
TR_API tr_tensor *tr_layer_norm(tr_graph *g, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
                         double eps);

/* ---- embedding and attention ---- */

/* Padding. A token id TR_PAD_ID (-1) is padding: the position holds no token (datasets pad
 * shorter samples with it, on the right or the left, and `padding: longest` batches carry
 * only their longest sample's positions). tr_embedding gives padding a zero row and no
 * gradient; tr_padding_mask turns ids into the mask that tr_attention_masked,
 * tr_attention_qkv_masked and tr_mean_masked take, so that results at the real positions do
 * not depend on how much padding there is. Losses: pass TR_PAD_ID as cross_entropy's
 * ignore_index for next-token targets at padding.
 *
 *   tr_tensor *mask = tr_padding_mask(g, ids);                  // ids (B, T) -> i32 (B, T)
 *   tr_tensor *x = tr_embedding(g, ids, wte);                     // zero rows at padding
 *   tr_tensor *a = tr_attention_qkv_masked(g, qkv, mask, NH, 0); // keys at padding unseen
 *   tr_tensor *e = tr_mean_masked(g, x, mask);                    // (B, C), real tokens only */
#define TR_PAD_ID (-1)

/* ids TR_I32 (...), table (V, C) -> (..., C). An id TR_PAD_ID (-1) gives a zero row and no
 * gradient; any other id outside [0, V) is an error. */
TR_API tr_tensor *tr_embedding(tr_graph *g, tr_tensor *ids, tr_tensor *table);
/* ids TR_I32 (...) -> a TR_I32 tensor of their shape: 1 where the id is a token, 0 where it
 * is padding (TR_PAD_ID): Hugging Face's attention_mask. No gradient. */
TR_API tr_tensor *tr_padding_mask(tr_graph *g, tr_tensor *ids);
/* Multi-head scaled-dot-product attention. q (B, T, C), k and v (B, S, C), C = n_head * D;
 * softmax(q k^T / sqrt(D)) v per head, with the causal mask (query t sees keys <= t) when
 * `causal`. -> (B, T, C). On the CPU the probabilities (B, n_head, T, S) are never all in
 * memory: blocks of query rows in scratch, and for backward each row's max and sum, made
 * again there (docs/architecture.md, Kernels and dtypes); a device keeps them. */
TR_API tr_tensor *tr_attention(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v, int n_head,
                        int causal);
/* Self-attention on a fused projection: q, k and v the column blocks [0, C), [C, 2C) and
 * [2C, 3C) of qkv (B, T, 3C), read in place and their gradient written in place: tr_attention
 * of the three tr_slice copies without the copies. -> (B, T, C). On a device whose plugin has
 * no kernel for it, it is that composition. */
TR_API tr_tensor *tr_attention_qkv(tr_graph *g, tr_tensor *qkv, int n_head, int causal);
/* tr_attention and tr_attention_qkv with a key padding mask: mask TR_I32 (B, S) (S = T for
 * the fused form), key s of sample b is attended only where mask[b, s] != 0 (Hugging Face's
 * attention_mask; left or right padding alike), on top of the causal mask when `causal`.
 * A query that sees no key (a fully padded sample; causal with left padding) gets a zero
 * output and no gradient, never NaN. Queries at padded positions otherwise attend as any
 * query does (as Hugging Face's encoders): finite, and left out by tr_mean_masked and by the
 * loss. mask NULL, or all nonzero, is the unmasked op, at its speed. */
TR_API tr_tensor *tr_attention_masked(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v,
                               tr_tensor *mask, int n_head, int causal);
TR_API tr_tensor *tr_attention_qkv_masked(tr_graph *g, tr_tensor *qkv, tr_tensor *mask, int n_head,
                                   int causal);
/* tr_attention_masked and tr_attention_qkv_masked (mask NULL: no key padding) with dropout on
 * the attention probabilities: in training mode each probability is zeroed with probability
 * p and the others scaled by 1/(1-p) before they weight v (Hugging Face's
 * attention_probs_dropout_prob, torch's MultiheadAttention dropout). The mask is tr_dropout's
 * of the probabilities (B, n_head, T, S), sample dim 0: probability (b, h, t, s) is kept when
 * tr_rng_uniform(seed, stream, (sample_base + b) * n_head * T * S + (h * T + t) * S + s) >= p,
 * the stream that of the step's next dropout call (graph.h's tr_graph_set_rng), so a sample's
 * mask does not depend on how the batch is split. In eval mode, or with p == 0, they are
 * tr_attention_masked and tr_attention_qkv_masked, bit for bit and at their speed, and draw
 * no randomness. p outside [0, 1) is an error. Memory: one byte per probability more. */
TR_API tr_tensor *tr_attention_dropout(tr_graph *g, tr_tensor *q, tr_tensor *k, tr_tensor *v,
                                tr_tensor *mask, int n_head, int causal, double p);
TR_API tr_tensor *tr_attention_qkv_dropout(tr_graph *g, tr_tensor *qkv, tr_tensor *mask, int n_head,
                                    int causal, double p);

/* ---- shape ---- */

/* A view: same data and gradient, new shape of the same numel. A -1 dim is inferred. */
TR_API tr_tensor *tr_reshape(tr_graph *g, tr_tensor *x, int ndim, const int64_t *shape);
/* Dims [start_dim, ndim) merged into one. */
TR_API tr_tensor *tr_flatten(tr_graph *g, tr_tensor *x, int start_dim);
TR_API tr_tensor *tr_transpose(tr_graph *g, tr_tensor *x, int dim0, int dim1);
TR_API tr_tensor *tr_permute(tr_graph *g, tr_tensor *x, const int *perm);
/* Concatenation of n tensors along dim (other dims equal). */
TR_API tr_tensor *tr_concat(tr_graph *g, tr_tensor *const *xs, int n, int dim);
/* x[..., start:start+len, ...] along dim. */
TR_API tr_tensor *tr_slice(tr_graph *g, tr_tensor *x, int dim, int64_t start, int64_t len);

/* ---- reductions ---- */

TR_API tr_tensor *tr_sum(tr_graph *g, tr_tensor *x);   /* -> scalar (shape (1)) */
TR_API tr_tensor *tr_mean(tr_graph *g, tr_tensor *x);  /* -> scalar (shape (1)) */
/* Over one dim, which is removed. */
TR_API tr_tensor *tr_sum_dim(tr_graph *g, tr_tensor *x, int dim);
TR_API tr_tensor *tr_mean_dim(tr_graph *g, tr_tensor *x, int dim);
/* Mean over dim 1 of x (B, T, C) of the positions where mask TR_I32 (B, T) is nonzero:
 * sum(x mask) / max(sum(mask), 1e-9) (sentence-transformers' mean pooling): (B, C), zeros
 * for a sample with no position. mask NULL or all nonzero: tr_mean_dim(x, 1). */
TR_API tr_tensor *tr_mean_masked(tr_graph *g, tr_tensor *x, tr_tensor *mask);

#ifdef __cplusplus
}
#endif
#endif
