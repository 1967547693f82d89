/* The f32 kernel table a device plugin gives the core (tr_device_ops.kernels): what each op
 * of ops.h runs when its tensors live on that device.
 *
 *   static void relu_fwd(float *out, const float *inp, int64_t n) { ... launch ... }
 *   static const tr_kernels table = {.size = sizeof table, .relu_forward = relu_fwd, ...};
 *
 * Every entry has the arguments of the core's own CPU kernel of that name (core/src/ops), and
 * the core's CPU kernels fill the same table (tr_cpu_kernels): they are the reference a
 * device's kernels are tested against, entry by entry, and the fake test device runs them.
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

#include <stddef.h>
#include <stdint.h>

#include "trainer/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

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
} tr_kernels;

/* The core's CPU kernels as a table (every entry set): the reference for device kernels. */
const tr_kernels *tr_cpu_kernels(void);

#ifdef __cplusplus
}
#endif
#endif
