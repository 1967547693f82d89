/* Private: 2-D convolution at stride 1 computed directly, without im2col and a GEMM, for
 * inputs with few channels (C*KH*KW <= CONV_DIRECT_MAX_TAPS: the one-channel 3x3 first layer
 * of an MNIST CNN has 9 taps). Such a GEMM has an inner dimension of 9, far too short for
 * BLAS: its output is read and written once per 9 multiply-adds and then copied out of the
 * chunk layout. (At 27 taps, RGB 3x3, the weight gradient's 27 dot products at once are
 * bound by their loads and im2col's GEMM is as fast.) Here every output row is computed in registers from a
 * zero-padded copy of the image and stored once, with the bias. f32 with AVX-512 only; the
 * functions return 0 (nothing done) elsewhere and the caller uses im2col. */
#ifndef TR_OPS_CONV2D_DIRECT_H
#define TR_OPS_CONV2D_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/kernels.h"

/* input (N, C, H, W), weight (OC, C, KH, KW), stride S, padding P, output (N, OC, OH, OW) */
typedef tr_conv2d_dims conv_dims;

#define CONV_DIRECT_MAX_TAPS 16

/* Floats of scratch the direct kernels need (one padded image per thread), or 0 when the
 * direct path does not apply to these dims and this dtype size. */
size_t conv_direct_scratch(const conv_dims *d, size_t elem);

/* out (N, OC, OH, OW) = conv(inp, weight) + bias (bias may be NULL); ps, unless NULL, the
 * plane statistics of out (2 per plane, op_note_plane_stats), taken while an image's planes
 * are in cache. */
int conv_direct_forward_f32(float *out, const float *inp, const float *weight, const float *bias,
                            float *scratch, double *ps, const conv_dims *d);

/* A producer of output-gradient planes: plane p = n * OC + o (OH * OW reals of the conv's
 * dtype) into dy. */
typedef void (*conv_dy_plane_fn)(void *ctx, int64_t p, void *dy);

/* dweight += the weight gradient, dbias += the bias gradient (either may be NULL), from the
 * output gradient dout, or (make not NULL) from its planes made one at a time by make(ctx, ...)
 * into the thread's scratch (in cache): the same values, so the same results bit for bit. */
int conv_direct_backward_params_f32(float *dweight, float *dbias, const float *dout,
                                    conv_dy_plane_fn make, void *ctx, const float *inp,
                                    float *scratch, const conv_dims *d);

/* Whether node n is a conv2d (f32) whose backward conv2d_backward_from can run. (conv2d.c) */
struct tr_node;
struct tr_graph;
int conv2d_takes_planes(const struct tr_node *n);

/* Runs the backward of such a node in place of the graph's backward pass (its inputs told to
 * the use hook as its own node would), with its output gradient made plane by plane by make,
 * never read from n->out->grad: an op that consumes the convolution's output hands its input
 * gradient over that way and never writes it whole (batch_norm_pool.c). The planes land where
 * the kernels would have copied them (a chunk's dy buffer, or a thread's scratch), so the
 * results are the same bit for bit. (conv2d.c) */
void conv2d_backward_from(struct tr_graph *g, struct tr_node *n, conv_dy_plane_fn make, void *ctx);

#endif
