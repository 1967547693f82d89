/* The CUDA plugin's elementwise ops and dropout: the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- elementwise ---- */

static void add_forward(float *out, const float *a, const float *b, int64_t R, int64_t M) {
    LAUNCH("add", k_add_fwd, blocks_for(R * M), &out, &a, &b, &R, &M);
}

static void add_backward(float *da, float *db, const float *dout, int64_t R, int64_t M, int acc) {
    int64_t n = R * M;
    float one = 1.0f;
    const float *none = NULL;
    if (da) LAUNCH("add backward", k_accum, blocks_for(n), &da, &dout, &n, &one, &acc);
    if (db) LAUNCH("add backward", k_colsum, blocks_for(M), &db, &dout, &none, &R, &M);
}

static void mul_forward(float *out, const float *a, const float *b, int64_t R, int64_t M) {
    LAUNCH("mul", k_mul_fwd, blocks_for(R * M), &out, &a, &b, &R, &M);
}

static void mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t R,
                         int64_t M) {
    if (da) LAUNCH("mul backward", k_mul_bwd_da, blocks_for(R * M), &da, &dout, &b, &R, &M);
    if (db) LAUNCH("mul backward", k_colsum, blocks_for(M), &db, &dout, &a, &R, &M);
}

static void bias_add_forward(float *out, const float *x, const float *bias, int64_t B, int64_t C) {
    LAUNCH("bias_add", k_add_fwd, blocks_for(B * C), &out, &x, &bias, &B, &C);
}

static void bias_add_backward(float *dx, float *dbias, const float *dout, int64_t B, int64_t C) {
    int64_t n = B * C;
    float one = 1.0f;
    int acc = 1;
    const float *none = NULL;
    if (dx) LAUNCH("bias_add backward", k_accum, blocks_for(n), &dx, &dout, &n, &one, &acc);
    if (dbias) LAUNCH("bias_add backward", k_colsum, blocks_for(C), &dbias, &dout, &none, &B, &C);
}

static void scale_forward(float *out, const float *x, double s, int64_t N) {
    float sf = (float)s;
    int acc = 0;
    LAUNCH("scale", k_accum, blocks_for(N), &out, &x, &N, &sf, &acc);
}

static void scale_backward(float *dx, const float *dout, double s, int64_t N) {
    float sf = (float)s;
    int acc = 1;
    LAUNCH("scale backward", k_accum, blocks_for(N), &dx, &dout, &N, &sf, &acc);
}

static void relu_forward(float *out, const float *inp, int64_t N) {
    LAUNCH("relu", k_relu_fwd, blocks_for(N), &out, &inp, &N);
}

static void relu_backward(float *dinp, const float *dout, const float *out, int64_t N, int acc) {
    LAUNCH("relu backward", k_relu_bwd, blocks_for(N), &dinp, &dout, &out, &N, &acc);
}

static void gelu_forward(float *out, const float *x, int64_t N, int approx) {
    LAUNCH("gelu", k_gelu_fwd, blocks_for(N), &out, &x, &N, &approx);
}

static void gelu_backward(float *dx, const float *dout, const float *x, int64_t N, int approx, int acc) {
    LAUNCH("gelu backward", k_gelu_bwd, blocks_for(N), &dx, &dout, &x, &N, &approx, &acc);
}

static void tanh_forward(float *out, const float *x, int64_t N) {
    LAUNCH("tanh", k_tanh_fwd, blocks_for(N), &out, &x, &N);
}

static void tanh_backward(float *dx, const float *dout, const float *out, int64_t N) {
    LAUNCH("tanh backward", k_tanh_bwd, blocks_for(N), &dx, &dout, &out, &N);
}

static void sigmoid_forward(float *out, const float *x, int64_t N) {
    LAUNCH("sigmoid", k_sigmoid_fwd, blocks_for(N), &out, &x, &N);
}

static void sigmoid_backward(float *dx, const float *dout, const float *out, int64_t N) {
    LAUNCH("sigmoid backward", k_sigmoid_bwd, blocks_for(N), &dx, &dout, &out, &N);
}

static void dropout_forward(float *out, uint8_t *mask, const float *x, int64_t N, uint64_t seed, uint64_t stream,
                            uint64_t first, uint32_t thr, double scale) {
    float sf = (float)scale;
    LAUNCH("dropout", k_dropout_fwd, blocks_for(N), &out, &mask, &x, &N, &seed, &stream, &first, &thr, &sf);
}

static void dropout_backward(float *dx, const float *dout, const uint8_t *mask, int64_t N, double scale, int acc) {
    float sf = (float)scale;
    LAUNCH("dropout backward", k_dropout_bwd, blocks_for(N), &dx, &dout, &mask, &N, &sf, &acc);
}

void cuda_fill_elementwise(tr_kernels *t) {
    t->add_forward = add_forward;
    t->add_backward = add_backward;
    t->mul_forward = mul_forward;
    t->mul_backward = mul_backward;
    t->bias_add_forward = bias_add_forward;
    t->bias_add_backward = bias_add_backward;
    t->scale_forward = scale_forward;
    t->scale_backward = scale_backward;
    t->relu_forward = relu_forward;
    t->relu_backward = relu_backward;
    t->gelu_forward = gelu_forward;
    t->gelu_backward = gelu_backward;
    t->tanh_forward = tanh_forward;
    t->tanh_backward = tanh_backward;
    t->sigmoid_forward = sigmoid_forward;
    t->sigmoid_backward = sigmoid_backward;
    t->dropout_forward = dropout_forward;
    t->dropout_backward = dropout_backward;
}
