/* The f32 kernel table a device plugin gives the core (tr_device_ops.kernels): what each op
 * of ops.h runs when its tensors live on that device.
 *
 *   static void relu_fwd(float *out, const float *inp, int64_t n) { ... launch ... }
 *   static const tr_kernels table = {.size = sizeof table, .relu_forward = relu_fwd, ...};
 *
 * Every entry has the arguments of the core's own CPU kernel of that name (conv2d's without
 * the CPU-only ones), and the core's CPU kernels fill the same table
 * (tr_cpu_kernels): they are the reference a device's kernels are tested against, entry by
 * entry, and the fake test device runs them.
 *
 * Pointers are device memory (from tr_device_ops.alloc, or inside it) unless an entry says
 * host; the core passes device pointers only. Kernels are asynchronous on the device's
 * compute stream, in call order, except those returning a value, which wait for it. `acc`
 * arguments: 0 writes the result (=), 1 adds it (+=). zero, copy, optim_update, sumsq and
 * scale_inplace are required (every training loop uses them; tr_accel_open refuses a table
 * without them); an op's entry left NULL means the device has no kernel for that op: the op
 * then fails naming the op and the device. Entries are only ever appended; `size` says how
 * many the plugin knows. */
#ifndef TRAINER_KERNELS_H
#define TRAINER_KERNELS_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/optim_config.h"
#include "trainer/tensor.h" /* TR_MAX_DIMS */

#ifdef __cplusplus
extern "C" {
#endif

/* conv2d's sizes: input (N, C, H, W), weight (OC, C, KH, KW), one stride S and zero padding P
 * for both dims, output (N, OC, OH, OW). */
typedef struct tr_conv2d_dims {
    int64_t N, C, H, W;
    int64_t OC, KH, KW;
    int64_t S, P;
    int64_t OH, OW;
} tr_conv2d_dims;

/* A 2-D pool's planes: input H x W, output OH x OW, square window k, stride S, padding P. */
typedef struct tr_pool2d_dims {
    int64_t H, W, OH, OW, k, S, P;
} tr_pool2d_dims;

/* A permutation's layout: the output's ndim dims shape[], and stride[k], the input stride
 * (in elements) of output dim k. */
typedef struct tr_permute_dims {
    int64_t ndim;
    int64_t shape[TR_MAX_DIMS];
    int64_t stride[TR_MAX_DIMS];
} tr_permute_dims;

/* Dropout on attention probabilities (ABI 0.11): element i of att (B, NH, T, S) is kept when
 * element first + i of the counter-based stream (seed, stream) is, by dropout_forward's rule
 * (Philox block (first + i) / 4, lane (first + i) % 4, kept when its value >> 8 is >= thr);
 * kept probabilities are multiplied by scale = 1 / (1 - p). */
typedef struct tr_dropout_draw {
    uint64_t seed, stream, first;
    uint32_t thr;
    double scale;
} tr_dropout_draw;

typedef struct tr_kernels {
    size_t size; /* sizeof the plugin's table */

    /* ---- memory ---- */
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes); /* device to device */

    /* ---- linear algebra: out (B, OC) = inp (B, C) weight^T + bias (NULL: none) ---- */
    void (*linear_forward)(float *out, const float *inp, const float *weight, const float *bias,
                           int64_t B, int64_t C, int64_t OC);
    /* Any of dinp, dweight, dbias may be NULL (not needed); acc for dinp, wacc for dweight,
     * dbias always adds. */
    void (*linear_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int64_t B, int64_t C,
                            int64_t OC, int acc, int wacc);

    /* ---- elementwise; a (R, M), b (M) broadcast over R rows or (R, M) when R == 1 ---- */
    void (*add_forward)(float *out, const float *a, const float *b, int64_t R, int64_t M);
    void (*add_backward)(float *da, float *db, const float *dout, int64_t R, int64_t M, int acc);
    void (*mul_forward)(float *out, const float *a, const float *b, int64_t R, int64_t M);
    void (*mul_backward)(float *da, float *db, const float *dout, const float *a, const float *b,
                         int64_t R, int64_t M);
    void (*bias_add_forward)(float *out, const float *x, const float *bias, int64_t B, int64_t C);
    void (*bias_add_backward)(float *dx, float *dbias, const float *dout, int64_t B, int64_t C);
    void (*scale_forward)(float *out, const float *x, double s, int64_t N);
    void (*scale_backward)(float *dx, const float *dout, double s, int64_t N);
    void (*relu_forward)(float *out, const float *inp, int64_t N);
    void (*relu_backward)(float *dinp, const float *dout, const float *out, int64_t N, int acc);
    void (*gelu_forward)(float *out, const float *x, int64_t N, int approx);
    void (*gelu_backward)(float *dx, const float *dout, const float *x, int64_t N, int approx,
                          int acc);
    void (*tanh_forward)(float *out, const float *x, int64_t N);
    void (*tanh_backward)(float *dx, const float *dout, const float *out, int64_t N);
    void (*sigmoid_forward)(float *out, const float *x, int64_t N);
    void (*sigmoid_backward)(float *dx, const float *dout, const float *out, int64_t N);

    /* Dropout: mask[i] = 1 keeps element i, drawn as the core does (trainer/rng.h): Philox
     * block (first + i) / 4 of (seed, stream), lane (first + i) % 4, kept when its value
     * >> 8 is >= thr; out = x * mask * scale. Backward: dx (=, or += with acc) dout * mask *
     * scale. */
    void (*dropout_forward)(float *out, uint8_t *mask, const float *x, int64_t N, uint64_t seed,
                            uint64_t stream, uint64_t first, uint32_t thr, double scale);
    void (*dropout_backward)(float *dx, const float *dout, const uint8_t *mask, int64_t N,
                             double scale, int acc);

    /* ---- softmax over rows of C ---- */
    void (*softmax_forward)(float *out, const float *x, int64_t R, int64_t C);
    void (*softmax_backward)(float *dx, const float *dout, const float *out, int64_t R, int64_t C);
    void (*log_softmax_forward)(float *out, const float *x, int64_t R, int64_t C);
    void (*log_softmax_backward)(float *dx, const float *dout, const float *out, int64_t R,
                                 int64_t C);

    /* ---- cross-entropy: logits x (N, C), targets (N) in [0, C) or ignore_index ---- */
    /* loss[i]: sample i's loss (double); stats (2N floats, NULL without backward): what the
     * backward needs per row (the row maximum and log-sum-exp). */
    void (*cross_entropy_forward)(double *loss, float *stats, const float *x,
                                  const int32_t *targets, int64_t N, int64_t C, int ignore_index,
                                  double smoothing);
    /* dx += dscale * d(loss)/dx. */
    void (*cross_entropy_backward)(float *dx, const float *x, const float *stats,
                                   const int32_t *targets, double dscale, int64_t N, int64_t C,
                                   int ignore_index, double smoothing);
    /* out[0] = (float)(sum of loss[0, n) in order / normaliser). */
    void (*loss_total)(float *out, const double *loss, int64_t n, double normaliser);

    /* ---- optimizer and clipping over flat buffers ---- */
    /* One update of n elements with the optimizer cfg (host) after `steps` updates taken;
     * state[k] (host array of device pointers) as tr_optim_state's buffers, same formulas. */
    void (*optim_update)(const tr_optim_config *cfg, int64_t steps, float *param,
                         const float *grad, float *const *state, size_t n, double lr);
    /* Sum of squares of g[0, n) in double (waits for it). */
    double (*sumsq)(const float *g, size_t n);
    /* g[0, n) *= s. */
    void (*scale_inplace)(float *g, size_t n, float s);

    /* ---- 2-D convolution, NCHW (d: host memory) ---- */
    /* Bytes of device scratch (`work`, from the graph's data memory, which keeps it until the
     * step ends) the two conv2d entries need for d; 0: none (work NULL), as a plugin that
     * takes its scratch per call from its own allocator says. */
    size_t (*conv2d_work)(const tr_conv2d_dims *d);
    /* out = conv(inp, weight) + bias (NULL: none). */
    void (*conv2d_forward)(float *out, const float *inp, const float *weight, const float *bias,
                           void *work, const tr_conv2d_dims *d);
    /* dinp (=, or += with acc), dweight +=, dbias +=; any may be NULL (not needed). */
    void (*conv2d_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, void *work,
                            const tr_conv2d_dims *d, int acc);

    /* ---- 2-D pooling over NC planes (d: host memory) ---- */
    /* Max: argmax gets each output's winning pixel ih * W + iw (the first in scan order; a
     * NaN wins); padding never wins. Backward: dinp (=, or += with acc) gets dout at the
     * winners, 0 elsewhere, each pixel's terms added in output order. */
    void (*max_pool_forward)(float *out, int32_t *argmax, const float *inp, int64_t NC,
                             const tr_pool2d_dims *d);
    void (*max_pool_backward)(float *dinp, const float *dout, const int32_t *argmax, int64_t NC,
                              const tr_pool2d_dims *d, int acc);
    /* Average over k * k, padding counted as zeros; backward adds (+=) to dinp. */
    void (*avg_pool_forward)(float *out, const float *inp, int64_t NC, const tr_pool2d_dims *d);
    void (*avg_pool_backward)(float *dinp, const float *dout, int64_t NC, const tr_pool2d_dims *d);

    /* ---- batch-norm over dim 1 of x viewed as (N, C, S); statistics in double ---- */
    /* Plane statistics of NC planes of S values: ps[2p] = the sum, ps[2p + 1] = the squared
     * deviations from that sum / S rounded to float. */
    void (*batch_norm_planes)(double *ps, const float *inp, int64_t NC, int64_t S);
    /* s[c] = sum over n of plane (n, c)'s sum, n in order. */
    void (*batch_norm_plane_sums)(double *s, const double *ps, int64_t N, int64_t C);
    /* q[c] = sum over channel c of (x - mean[c])^2, from the planes' statistics. */
    void (*batch_norm_plane_sqdevs)(double *q, const double *ps, const float *mean, int64_t N,
                                    int64_t C, int64_t S);
    /* out[c] = (float)(s[c] / M). */
    void (*batch_norm_divide)(float *out, const double *s, double M, int64_t C);
    /* With running_mean (then running_var too): running = (1 - momentum) running + momentum
     * batch, the variance unbiased by M / (M - 1); then invstd (holding the variance on entry)
     * = 1 / sqrt(var + eps), in place. */
    void (*batch_norm_finish)(float *invstd, float *running_mean, float *running_var,
                              const float *mean, int64_t C, double momentum, int64_t M,
                              double eps);
    /* out = (inp - mean) invstd gamma + beta (gamma, beta NULL: 1, 0). */
    void (*batch_norm_forward)(float *out, const float *inp, const float *mean,
                               const float *invstd, const float *gamma, const float *beta,
                               int64_t N, int64_t C, int64_t S);
    /* dgamma, dbeta +=, dinp (=, or += with acc); batch: mean and invstd were the batch's. */
    void (*batch_norm_backward)(float *dinp, float *dgamma, float *dbeta, const float *dout,
                                const float *inp, const float *mean, const float *invstd,
                                const float *gamma, int batch, int64_t N, int64_t C, int64_t S,
                                int acc);
    /* sync_batchnorm's backward: this replica's sums sdy[c] (of dout) and sdyx[c] (of dout
     * xhat); then dgamma += lsdyx, dbeta += lsdy and dinp += the gradient from the global sums
     * over the global count M. */
    void (*batch_norm_dsums_all)(double *sdy, double *sdyx, const float *dout, const float *inp,
                                 const float *mean, const float *invstd, int64_t N, int64_t C,
                                 int64_t S);
    void (*batch_norm_sync_grads)(float *dinp, float *dgamma, float *dbeta, const float *dout,
                                  const float *inp, const float *mean, const float *invstd,
                                  const float *gamma, const double *lsdy, const double *lsdyx,
                                  const double *gsdy, const double *gsdyx, double M, int64_t N,
                                  int64_t C, int64_t S);

    /* ---- copies and layouts ---- */
    /* dst[r * dld + j] (=, or += with acc) src[r * sld + j], r < R, j < W: slice and concat,
     * both directions. */
    void (*copy_rows)(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t W,
                      int acc);
    /* out (d->shape) = inp permuted (d: host memory); with acc the roles flip: inp += out
     * permuted back (the backward). */
    void (*permute)(float *out, float *inp, const tr_permute_dims *d, int acc);

    /* ---- matmul: out (batch, M, N) = a (batch, M, K) b (batch, K, N); backward da, db (each
     * may be NULL) += (a b shared by the batch is batch 1 with the batch folded into M) ---- */
    void (*matmul_forward)(float *out, const float *a, const float *b, int64_t batch, int64_t M,
                           int64_t K, int64_t N);
    void (*matmul_backward)(float *da, float *db, const float *dout, const float *a,
                            const float *b, int64_t batch, int64_t M, int64_t K, int64_t N);

    /* ---- embedding: out (N, C) = rows ids[i] of the table (ids all in range, or -1 for a
     * table that knows padding: TR_KERNELS_KNOW_PADDING); backward dtable[ids[i]] += dout[i],
     * i in order (repeated ids add up) ---- */
    void (*embedding_forward)(float *out, const int32_t *ids, const float *table, int64_t N,
                              int64_t C);
    void (*embedding_backward)(float *dtable, const float *dout, const int32_t *ids, int64_t N,
                               int64_t C);

    /* ---- layer-norm over rows of C (biased variance, eps inside the root); gamma, beta
     * NULL: 1, 0; mean and rstd (R) are kept for backward ---- */
    void (*layer_norm_forward)(float *out, float *mean, float *rstd, const float *inp,
                               const float *gamma, const float *beta, double eps, int64_t R,
                               int64_t C);
    /* Bytes of scratch (`work`, graph memory kept until the step ends) the backward needs; 0:
     * none (work NULL). */
    size_t (*layer_norm_work)(int64_t R, int64_t C);
    /* dinp (=, or += with acc), dgamma +=, dbeta +=; any may be NULL (not needed). */
    void (*layer_norm_backward)(float *dinp, float *dgamma, float *dbeta, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *gamma, void *work, int64_t R, int64_t C, int acc);

    /* ---- attention: softmax(q k^T / sqrt(D)) v per head, q (B, T, C), k and v (B, S, C),
     * C = NH * D, head h the columns [h D, (h + 1) D); att (B, NH, T, S) keeps the
     * probabilities (0 where causal hides a key: query t sees keys s <= t) ---- */
    void (*attention_forward)(float *out, float *att, const float *q, const float *k,
                              const float *v, int64_t B, int64_t T, int64_t S, int64_t C,
                              int64_t NH, int causal);
    /* Bytes of scratch the backward needs, as layer_norm_work. */
    size_t (*attention_work)(int64_t B, int64_t T, int64_t S, int64_t C, int64_t NH);
    /* dq, dk, dv (each may be NULL) +=. */
    void (*attention_backward)(float *dq, float *dk, float *dv, void *work, const float *dout,
                               const float *att, const float *q, const float *k,
                               const float *v, int64_t B, int64_t T, int64_t S, int64_t C,
                               int64_t NH);

    /* ---- reductions and losses (sums in double); dout of a scalar is device memory ---- */
    /* out[0] = (float)(sum of x / normaliser). Backward: dx += (float)(scale dout[0]). */
    void (*sum_all_forward)(float *out, const float *x, int64_t N, double normaliser);
    void (*sum_all_backward)(float *dx, const float *dout, double scale, int64_t N);
    /* x viewed as (outer, D, inner): out (outer, inner) = (float)(scale * sum over D);
     * backward dx[o, d, i] += (float)scale dout[o, i]. */
    void (*sum_dim_forward)(float *out, const float *x, double scale, int64_t outer, int64_t D,
                            int64_t inner);
    void (*sum_dim_backward)(float *dx, const float *dout, double scale, int64_t outer,
                             int64_t D, int64_t inner);
    /* out[0] = (float)(sum of (pred - target)^2 / normaliser); backward dpred +=
     * (float)(2 (dout[0] / normaliser)) (pred - target). */
    void (*mse_forward)(float *out, const float *pred, const float *target, int64_t N,
                        double normaliser);
    void (*mse_backward)(float *dpred, const float *dout, const float *pred, const float *target,
                         double normaliser, int64_t N);
    /* Cosine similarity of the rows of a and b (N, E) -> (N), each norm clamped below at eps;
     * backward da, db (each may be NULL) +=. */
    void (*cosine_forward)(float *out, const float *a, const float *b, int64_t N, int64_t E,
                           double eps);
    void (*cosine_backward)(float *da, float *db, const float *dout, const float *a,
                            const float *b, int64_t N, int64_t E, double eps);

    /* ---- the gradient norm without waiting ---- */
    /* out[0] = what sumsq returns for g[0, n), into device memory, queued like any kernel: a
     * step collects each parameter's sum and downloads them together. NULL: the core calls
     * sumsq and uploads its value (a wait for each). */
    void (*sumsq_to)(double *out, const float *g, size_t n);

    /* ---- self-attention on one fused projection, read in place ---- */
    /* As attention_forward with S = T, q, k and v the column blocks [0, C), [C, 2C) and
     * [2C, 3C) of qkv (B, T, 3C); out (B, T, C). Backward: dqkv (B, T, 3C), all three blocks,
     * = (acc 0) or += (acc 1); the scratch is attention_work(B, T, T, C, NH). */
    void (*attention_qkv_forward)(float *out, float *att, const float *qkv, int64_t B, int64_t T,
                                  int64_t C, int64_t NH, int causal);
    void (*attention_qkv_backward)(float *dqkv, void *work, const float *dout, const float *att,
                                   const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                                   int acc);

    /* ---- padding (ABI 0.9; ops.h's TR_PAD_ID) ---- */
    /* attention_forward and attention_qkv_forward with a key padding mask (B, S) (device
     * memory, i32): key s of sample b takes part only where mask[b, s] != 0 (and causal allows
     * it); att is 0 at every other key, and a row that sees no key is all 0 (its output 0).
     * The backward is attention_backward / attention_qkv_backward unchanged: att's zeros give
     * the masked keys and empty rows no gradient. NULL: masked attention is refused on the
     * device, naming the op.
     * A table whose `size` covers these entries (a plugin built for ABI 0.9 or later) also
     * takes ids TR_PAD_ID (-1) in embedding_forward (a zero row) and embedding_backward
     * (skipped); the core gives padding ids to no older table. */
    void (*attention_mask_forward)(float *out, float *att, const float *q, const float *k,
                                   const float *v, const int32_t *mask, int64_t B, int64_t T,
                                   int64_t S, int64_t C, int64_t NH, int causal);
    void (*attention_qkv_mask_forward)(float *out, float *att, const float *qkv,
                                       const int32_t *mask, int64_t B, int64_t T, int64_t C,
                                       int64_t NH, int causal);

    /* ---- dropout on the attention probabilities (ABI 0.11; d: host memory) ---- */
    /* The four attention forwards in one, with dropout: q, k and v rows ld apart (C for tensors
     * of their own; 3C for the column blocks qkv, qkv + C, qkv + 2C of one fused projection),
     * mask (B, S) a key padding mask or NULL (none). att (B, NH, T, S) gets the probabilities
     * as attention_mask_forward writes them (before dropout), keep (B, NH, T, S) one byte per
     * probability, 1 where d keeps it, and out (B, T, C) = (att * keep * d->scale) v. work:
     * attention_work(B, T, S, C, NH) bytes. */
    void (*attention_dropout_forward)(float *out, float *att, uint8_t *keep, void *work, const float *q,
                                      const float *k, const float *v, const int32_t *mask,
                                      const tr_dropout_draw *d, int64_t ld, int64_t B, int64_t T, int64_t S,
                                      int64_t C, int64_t NH, int causal);
    /* Its backward through att * keep * scale: dq, dk, dv (each may be NULL; rows ld apart, so
     * the three blocks of a fused projection's gradient) = (acc 0) or += (acc 1). work as
     * above. NULL (either entry): attention with dropout is refused on the device, naming
     * the op. */
    void (*attention_dropout_backward)(float *dq, float *dk, float *dv, void *work, const float *dout,
                                       const float *att, const uint8_t *keep, double scale, const float *q,
                                       const float *k, const float *v, int64_t ld, int64_t B, int64_t T,
                                       int64_t S, int64_t C, int64_t NH, int acc);
} tr_kernels;

/* Whether a kernel table k knows the padding contract of ABI 0.9 (see attention_mask_forward). */
#define TR_KERNELS_KNOW_PADDING(k) \
    ((k)->size >= offsetof(tr_kernels, attention_qkv_mask_forward) + sizeof((k)->attention_qkv_mask_forward))

/* The core's CPU kernels as a table (every entry set): the reference for device kernels. */
TR_API const tr_kernels *tr_cpu_kernels(void);

#ifdef __cplusplus
}
#endif
#endif
