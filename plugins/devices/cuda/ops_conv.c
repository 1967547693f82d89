/* The CUDA plugin's 2-D convolution (im2col + cuBLAS) and pooling: the
 * kernel-table entries (ops.c) of this family. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops_impl.h"

/* ---- 2-D convolution: per chunk of images, im2col, a cuBLAS GEMM with the weight, and
 * (backward) col2im; the chunk's col and y/dy are scratch of the caching allocator, taken
 * for the call and freed in stream order (the graph's arena would keep every conv's until
 * the step ends), so conv2d_work asks the core for none ---- */

/* Floats of scratch a chunk of images may take (col and y together): 64 MiB. */
#define CONV_WORK_FLOATS ((int64_t)16 << 20)

/* Images per chunk: as many as fit CONV_WORK_FLOATS, at least one, at most N. */
static int64_t conv_images(const tr_conv2d_dims *d) {
    int64_t per = (d->C * d->KH * d->KW + d->OC) * d->OH * d->OW, nc = per > 0 ? CONV_WORK_FLOATS / per : 1;
    if (nc > d->N) nc = d->N;
    return nc < 1 ? 1 : nc;
}

static size_t conv2d_work(const tr_conv2d_dims *d) {
    (void)d;
    return 0;
}

/* A conv entry's plan: the chunks' scratch, col (CKK, images * P) then y or dy (OC, images *
 * P), freed with cuda_free(d, col) after the launches that use it; images per chunk, the
 * sizes, and the dims as the kernels take them. */
typedef struct conv_plan {
    float *col, *second;
    int64_t nc_max, P, CKK, OC;
    tr_conv2d_dims k;
} conv_plan;

/* The start of a conv entry: 0 with nothing to do or after recording the failure (GEMMs
 * beyond cuBLAS's ints, or no memory). */
static int conv_begin(cuda_device *d, const tr_conv2d_dims *cd, const char *what, conv_plan *p) {
    *p = (conv_plan){.nc_max = conv_images(cd), .P = cd->OH * cd->OW, .CKK = cd->C * cd->KH * cd->KW, .OC = cd->OC,
                     .k = *cd};
    int64_t cols = p->nc_max * p->P;
    void *m;
    if (!d || cd->N == 0) return 0;
    if (cols > INT_MAX || p->CKK > INT_MAX || p->OC > INT_MAX) {
        cuda_fail(d, tr_error_set(TR_ERR_UNSUPPORTED, "GEMMs of %lld x %lld x %lld are beyond cuBLAS's int dimensions",
                                  (long long)p->OC, (long long)cols, (long long)p->CKK), what);
        return 0;
    }
    m = cuda_scratch(d, (size_t)((p->CKK + p->OC) * cols) * sizeof(float), what);
    p->col = m;
    p->second = m ? p->col + p->CKK * cols : NULL;
    return m != NULL;
}

/* Images in the chunk starting at image n0 (0 past the last). */
static int64_t conv_chunk(const conv_plan *p, int64_t n0) {
    int64_t left = p->k.N - n0;
    return left < p->nc_max ? left : p->nc_max;
}

/* y (OC, cols) = weight (OC, CKK) col (CKK, cols): column-major y^T (cols x OC) = col^T (cols x
 * CKK) weight^T (CKK x OC), both stored that way: cuda_gemm(N, N). */
static void conv2d_forward(float *out, const float *inp, const float *weight, const float *bias, void *work,
                           const tr_conv2d_dims *cd) {
    cuda_device *d = cuda_current();
    conv_plan p;
    (void)work;
    if (!conv_begin(d, cd, "conv2d", &p)) return;
    float *col = p.col, *y = p.second;
    for (int64_t n0 = 0, nc; (nc = conv_chunk(&p, n0)) > 0; n0 += nc) {
        int64_t cols = nc * p.P;
        LAUNCH("conv2d (im2col)", k_im2col, blocks_for(p.CKK * cols), &col, &inp, &p.k, &n0, &nc);
        cuda_gemm(d, "conv2d (cuBLAS)", 0, 0, cols, p.OC, p.CKK, col, cols, weight, p.CKK, 0.0f, y, cols);
        LAUNCH("conv2d (output)", k_conv_out, blocks_for(p.OC * cols), &out, &y, &bias, &p.OC, &p.P, &n0, &nc);
    }
    cuda_free(d, col);
}

/* dweight (OC, CKK) += dy (OC, cols) col^T: column-major dweight^T (CKK x OC) = col (CKK x cols,
 * stored transposed) dy^T (cols x OC): cuda_gemm(T, N), beta 1. dcol (CKK, cols) = weight^T dy:
 * column-major dcol^T (cols x CKK) = dy^T (cols x OC) weight (OC x CKK, stored transposed):
 * cuda_gemm(N, T). */
static void conv2d_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, void *work, const tr_conv2d_dims *cd, int acc) {
    cuda_device *d = cuda_current();
    conv_plan p;
    (void)work;
    if (!conv_begin(d, cd, "conv2d backward", &p)) return;
    float *col = p.col, *dy = p.second;
    const char *what = "conv2d backward (cuBLAS)";
    for (int64_t n0 = 0, nc; (nc = conv_chunk(&p, n0)) > 0; n0 += nc) {
        int64_t cols = nc * p.P;
        LAUNCH("conv2d backward (dy)", k_conv_dy, blocks_for(p.OC * cols), &dy, &dout, &p.OC, &p.P, &n0, &nc);
        if (dbias) LAUNCH("conv2d backward (bias)", k_rowsum, blocks_rows(p.OC), &dbias, &dy, &p.OC, &cols);
        if (dweight) {
            LAUNCH("conv2d backward (im2col)", k_im2col, blocks_for(p.CKK * cols), &col, &inp, &p.k, &n0, &nc);
            cuda_gemm(d, what, 1, 0, p.CKK, p.OC, cols, col, cols, dy, cols, 1.0f, dweight, p.CKK);
        }
        if (dinp) {
            cuda_gemm(d, what, 0, 1, cols, p.CKK, p.OC, dy, cols, weight, p.CKK, 0.0f, col, cols);
            LAUNCH("conv2d backward (col2im)", k_col2im, blocks_for(nc * cd->C * cd->H * cd->W), &dinp, &col, &p.k, &n0,
                   &nc, &acc);
        }
    }
    cuda_free(d, col);
}

/* ---- pooling ---- */

static void max_pool_forward(float *out, int32_t *argmax, const float *inp, int64_t NC, const tr_pool2d_dims *pd) {
    tr_pool2d_dims k = *pd;
    LAUNCH("max_pool2d", k_maxpool_fwd, blocks_for(NC * pd->OH * pd->OW), &out, &argmax, &inp, &NC, &k);
}

static void max_pool_backward(float *dinp, const float *dout, const int32_t *argmax, int64_t NC,
                              const tr_pool2d_dims *pd, int acc) {
    tr_pool2d_dims k = *pd;
    LAUNCH("max_pool2d backward", k_maxpool_bwd, blocks_for(NC * pd->H * pd->W), &dinp, &dout, &argmax, &NC, &k, &acc);
}

static void avg_pool_forward(float *out, const float *inp, int64_t NC, const tr_pool2d_dims *pd) {
    tr_pool2d_dims k = *pd;
    LAUNCH("avg_pool2d", k_avgpool_fwd, blocks_for(NC * pd->OH * pd->OW), &out, &inp, &NC, &k);
}

static void avg_pool_backward(float *dinp, const float *dout, int64_t NC, const tr_pool2d_dims *pd) {
    tr_pool2d_dims k = *pd;
    LAUNCH("avg_pool2d backward", k_avgpool_bwd, blocks_for(NC * pd->H * pd->W), &dinp, &dout, &NC, &k);
}

void cuda_fill_conv(tr_kernels *t) {
    t->conv2d_work = conv2d_work;
    t->conv2d_forward = conv2d_forward;
    t->conv2d_backward = conv2d_backward;
    t->max_pool_forward = max_pool_forward;
    t->max_pool_backward = max_pool_backward;
    t->avg_pool_forward = avg_pool_forward;
    t->avg_pool_backward = avg_pool_backward;
}
