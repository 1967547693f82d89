/* Direct stride-1 convolution for inputs with few channels (see conv2d_direct.h).
 *
 * Each thread keeps one image zero-padded in its scratch: xp (C, Hp, Wp) with
 * xp[c][r][q] = x[c][r - P][q - P] inside the image and 0 around it, Hp = H + 2P and Wp wide
 * enough for whole 16-lane vectors of outputs plus the kernel's width. Output (oh, ow) then
 * reads tap (c, kh, kw) at xp[c][oh + kh][ow + kw] with no bounds test: a vector of 16 outputs
 * is one unaligned load per tap. */
#include "ops/conv2d_direct.h"

#include <omp.h>
#include <string.h>

#include "ops/batch_norm.h"
#include "kernels/gemm_bf16.h"

#if defined(__AVX512F__)
#include <immintrin.h>

static int64_t direct_vecs(const conv_dims *d) { return (d->OW + 15) / 16; }
static int64_t direct_wp(const conv_dims *d) { return direct_vecs(d) * 16 + d->KW - 1; }
static int64_t direct_plane(const conv_dims *d) { return d->C * (d->H + 2 * d->P) * direct_wp(d); }
/* A thread's scratch: its padded plane (rounded to an even count of floats), then the double
 * sums of the weight and bias gradients of every output channel, OC * (T + 1), then one plane
 * of the output gradient (made by a producer, conv_direct_backward_params_f32), also
 * rounded to an even count: every thread's doubles stay 8-byte aligned. */
static int64_t direct_per_thread(const conv_dims *d) {
    return (direct_plane(d) + 1) / 2 * 2 + 2 * d->OC * (d->C * d->KH * d->KW + 1) + (d->OH * d->OW + 1) / 2 * 2;
}

static int direct_applies(const conv_dims *d, size_t elem) {
    /* not in bf16 (tr_cpu_bf16): conv2d's products are GEMMs then, rounded like the others */
    return elem == sizeof(float) && !tr_cpu_bf16() && d->S == 1 && d->C * d->KH * d->KW <= CONV_DIRECT_MAX_TAPS &&
           d->OH > 0 && d->OW > 0;
}

size_t conv_direct_scratch(const conv_dims *d, size_t elem) {
    if (!direct_applies(d, elem)) return 0;
    return (size_t)omp_get_max_threads() * (size_t)direct_per_thread(d);
}

static __mmask16 direct_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* Image x (C, H, W) into the padded plane xp, whose border is already zero. */
static void direct_pad(float *xp, const float *x, const conv_dims *d) {
    int64_t Hp = d->H + 2 * d->P, Wp = direct_wp(d);
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t h = 0; h < d->H; h++)
            memcpy(xp + (c * Hp + h + d->P) * Wp + d->P, x + (c * d->H + h) * d->W,
                   sizeof(float) * (size_t)d->W);
}

/* Offsets of the taps (c, kh, kw) in the padded plane, in weight order. */
static int64_t direct_taps(int64_t *off, const conv_dims *d) {
    int64_t Hp = d->H + 2 * d->P, Wp = direct_wp(d), t = 0;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) off[t++] = (c * Hp + kh) * Wp + kw;
    return t;
}

/* 16 outputs (mask m) of one row for every output channel: y[o * plane] = bias + sum over
 * taps of weight * tap. Inlined with a constant T, the T tap vectors stay in registers. */
static inline __attribute__((always_inline)) void
direct_outputs(int64_t T, float *y, const float *base, const int64_t *off, const float *weight,
               const float *bias, int64_t OC, int64_t plane, __mmask16 m, int ahead) {
    __m512 tap[CONV_DIRECT_MAX_TAPS];
    for (int64_t t = 0; t < T; t++) tap[t] = _mm512_loadu_ps(base + off[t]);
    for (int64_t o = 0; o < OC; o++) {
        const float *w = weight + o * T;
        __m512 acc = _mm512_set1_ps(bias ? bias[o] : 0.0f);
        for (int64_t t = 0; t < T; t++) acc = _mm512_fmadd_ps(_mm512_set1_ps(w[t]), tap[t], acc);
        _mm512_mask_storeu_ps(y + o * plane, m, acc);
        /* the plane's line 64 floats on (a few rows; ahead: that is still in the plane), for
         * writing: OC planes are written side by side, more streams than the hardware
         * prefetchers follow, and the stores otherwise wait on each line's fetch (FashionCNN's
         * first conv: 3.3% of a step -> 2.4%) */
        if (ahead) __builtin_prefetch(y + o * plane + 64, 1, 3);
    }
}

/* gw[t] += dy's plane . tap t's shifted plane, *gb += sum of dy's plane, for one image and
 * output channel; float vector sums (registers, with a constant T), then double. */
static inline __attribute__((always_inline)) void
direct_dots(int64_t T, double *gw, double *gb, const float *dy, const float *xp,
            const int64_t *off, const conv_dims *d) {
    int64_t OH = d->OH, OW = d->OW, Wp = direct_wp(d), nv = direct_vecs(d);
    __m512 acc[CONV_DIRECT_MAX_TAPS], sb = _mm512_setzero_ps();
    for (int64_t t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t oh = 0; oh < OH; oh++) {
        for (int64_t v = 0; v < nv; v++) {
            __mmask16 m = direct_mask(OW - v * 16);
            __m512 g = _mm512_maskz_loadu_ps(m, dy + oh * OW + v * 16);
            const float *base = xp + oh * Wp + v * 16;
            sb = _mm512_add_ps(sb, g);
            /* lanes past the row keep acc: their taps are real pixels (0 * inf is NaN) */
            for (int64_t t = 0; t < T; t++)
                acc[t] = _mm512_mask3_fmadd_ps(g, _mm512_loadu_ps(base + off[t]), acc[t], m);
        }
    }
    for (int64_t t = 0; t < T; t++) gw[t] += (double)_mm512_reduce_add_ps(acc[t]);
    *gb += (double)_mm512_reduce_add_ps(sb);
}

int conv_direct_forward_f32(float *out, const float *inp, const float *weight, const float *bias,
                            float *scratch, double *ps, const conv_dims *d) {
    if (!direct_applies(d, sizeof(float))) return 0;
    int64_t off[CONV_DIRECT_MAX_TAPS], T = direct_taps(off, d);
    int64_t plane = direct_plane(d), Wp = direct_wp(d), nv = direct_vecs(d);
    int64_t OC = d->OC, OH = d->OH, OW = d->OW, CHW = d->C * d->H * d->W;
#pragma omp parallel if (d->N * OC * OH * OW * T > (1 << 15))
    {
        float *xp = scratch + (size_t)omp_get_thread_num() * (size_t)direct_per_thread(d);
        memset(xp, 0, sizeof(float) * (size_t)plane);
#pragma omp for schedule(static)
        for (int64_t n = 0; n < d->N; n++) {
            direct_pad(xp, inp + n * CHW, d);
            for (int64_t oh = 0; oh < OH; oh++) {
                for (int64_t v = 0; v < nv; v++) {
                    float *y = out + (n * OC * OH + oh) * OW + v * 16;
                    const float *base = xp + oh * Wp + v * 16;
                    __mmask16 m = direct_mask(OW - v * 16);
                    int ahead = oh * OW + v * 16 + 64 < OH * OW;
                    switch (T) { /* a constant tap count keeps the taps in registers */
                    case 9: direct_outputs(9, y, base, off, weight, bias, OC, OH * OW, m, ahead); break;
                    default: direct_outputs(T, y, base, off, weight, bias, OC, OH * OW, m, ahead); break;
                    }
                }
            }
            for (int64_t o = 0; ps && o < OC; o++) /* the image's planes, still in cache */
                bn_plane_stats_f32(ps + 2 * (n * OC + o), out + (n * OC + o) * OH * OW, OH * OW);
        }
    }
    return 1;
}

int conv_direct_backward_params_f32(float *dweight, float *dbias, const float *dout,
                                    conv_dy_plane_fn make, void *ctx, const float *inp,
                                    float *scratch, const conv_dims *d) {
    if (!direct_applies(d, sizeof(float))) return 0;
    if (!dweight && !dbias) return 1;
    int64_t off[CONV_DIRECT_MAX_TAPS], T = direct_taps(off, d);
    int64_t plane = direct_plane(d);
    int64_t OC = d->OC, OH = d->OH, OW = d->OW, CHW = d->C * d->H * d->W;
    /* Threads split the images; each sums, per (image, output channel), the dot products of
     * dy's plane with each tap's shifted plane in float vectors, then into its own double sums
     * over the images. The threads' sums are added in thread order into thread 0's, and
     * rounded to float once. */
    int64_t per = direct_per_thread(d);
#pragma omp parallel if (d->N * OC * OH * OW * T > (1 << 15))
    {
        float *xp = scratch + (size_t)omp_get_thread_num() * (size_t)per;
        double *gw = (double *)(void *)(xp + (plane + 1) / 2 * 2), *gb = gw + OC * T;
        float *own = (float *)(void *)(gb + OC); /* a plane of dy from `make` */
        memset(xp, 0, sizeof(float) * (size_t)plane);
        memset(gw, 0, sizeof(double) * (size_t)(OC * (T + 1)));
#pragma omp for schedule(static)
        for (int64_t n = 0; n < d->N; n++) {
            direct_pad(xp, inp + n * CHW, d);
            for (int64_t o = 0; o < OC; o++) {
                const float *dy = own;
                if (make) make(ctx, n * OC + o, own);
                else dy = dout + (n * OC + o) * OH * OW;
                switch (T) {
                case 9: direct_dots(9, gw + o * T, gb + o, dy, xp, off, d); break;
                default: direct_dots(T, gw + o * T, gb + o, dy, xp, off, d); break;
                }
            }
        }
        double *gw0 = (double *)(void *)(scratch + (plane + 1) / 2 * 2);
#pragma omp for ordered schedule(static, 1)
        for (int i = 0; i < omp_get_num_threads(); i++) {
#pragma omp ordered
            if (gw != gw0)
                for (int64_t k = 0; k < OC * (T + 1); k++) gw0[k] += gw[k];
        }
#pragma omp single
        {
            for (int64_t k = 0; dweight && k < OC * T; k++) dweight[k] += (float)gw0[k];
            for (int64_t o = 0; dbias && o < OC; o++) dbias[o] += (float)gw0[OC * T + o];
        }
    }
    return 1;
}
#else
size_t conv_direct_scratch(const conv_dims *d, size_t elem) {
    (void)d, (void)elem;
    return 0;
}
int conv_direct_forward_f32(float *out, const float *inp, const float *weight, const float *bias,
                            float *scratch, double *ps, const conv_dims *d) {
    (void)out, (void)inp, (void)weight, (void)bias, (void)scratch, (void)ps, (void)d;
    return 0;
}
int conv_direct_backward_params_f32(float *dweight, float *dbias, const float *dout,
                                    conv_dy_plane_fn make, void *ctx, const float *inp,
                                    float *scratch, const conv_dims *d) {
    (void)dweight, (void)dbias, (void)dout, (void)make, (void)ctx, (void)inp, (void)scratch, (void)d;
    return 0;
}
#endif
