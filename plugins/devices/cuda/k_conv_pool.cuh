/* The CUDA plugin's 2-D convolution (im2col, col2im, bias) and pooling; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
/* ---- 2-D convolution: im2col, one cuBLAS GEMM per chunk of nc images, col2im (ops.c).
 * A chunk's col is (CKK, nc * P) row-major, P = OH * OW: row (c, kh, kw), column n * P + oh *
 * OW + ow holds image n0 + n's pixel under tap (kh, kw) at output (oh, ow), 0 in the padding;
 * its y and dy are (OC, nc * P) the same way. ---- */

extern "C" __global__ void k_im2col(float *col, const float *x, tr_conv2d_dims d, int64_t n0, int64_t nc) {
    int64_t P = d.OH * d.OW, ld = nc * P, KK = d.KH * d.KW;
    GRID_LOOP(i, d.C * KK * ld) {
        int64_t r = i / ld, j = i - r * ld, n = j / P, p = j - n * P;
        int64_t c = r / KK, kh = (r - c * KK) / d.KW, kw = r - c * KK - kh * d.KW;
        int64_t oh = p / d.OW, ow = p - oh * d.OW;
        int64_t ih = oh * d.S - d.P + kh, iw = ow * d.S - d.P + kw;
        col[i] = ih >= 0 && ih < d.H && iw >= 0 && iw < d.W ? x[(((n0 + n) * d.C + c) * d.H + ih) * d.W + iw] : 0.0f;
    }
}

/* The adjoint, gathered: each input pixel of the chunk sums the dcol values that came from it,
 * taps in (kh, kw) order, and is set (acc 0) or added to (acc 1) once. */
extern "C" __global__ void k_col2im(float *dx, const float *dcol, tr_conv2d_dims d, int64_t n0, int64_t nc, int acc) {
    int64_t P = d.OH * d.OW, ld = nc * P, HW = d.H * d.W, CHW = d.C * HW;
    GRID_LOOP(i, nc * CHW) {
        int64_t n = i / CHW, r = i - n * CHW, c = r / HW, ih = (r - c * HW) / d.W, iw = r - c * HW - ih * d.W;
        float s = 0;
        for (int64_t kh = 0; kh < d.KH; kh++) {
            int64_t t = ih + d.P - kh; /* = oh * S */
            if (t < 0 || t % d.S != 0 || t / d.S >= d.OH) continue;
            for (int64_t kw = 0; kw < d.KW; kw++) {
                int64_t u = iw + d.P - kw;
                if (u < 0 || u % d.S != 0 || u / d.S >= d.OW) continue;
                s += dcol[((c * d.KH + kh) * d.KW + kw) * ld + n * P + (t / d.S) * d.OW + u / d.S];
            }
        }
        float *o = dx + n0 * CHW + i;
        *o = acc ? *o + s : s;
    }
}

/* out's images [n0, n0 + nc) (NCHW) = the chunk's y (OC, nc * P) + bias (NULL: none). */
extern "C" __global__ void k_conv_out(float *out, const float *y, const float *bias, int64_t OC, int64_t P,
                                      int64_t n0, int64_t nc) {
    int64_t ld = nc * P;
    GRID_LOOP(i, nc * OC * P) {
        int64_t n = i / (OC * P), r = i - n * OC * P, o = r / P, p = r - o * P;
        out[n0 * OC * P + i] = y[o * ld + n * P + p] + (bias ? bias[o] : 0.0f);
    }
}

/* The chunk's dy (OC, nc * P) from dout's images [n0, n0 + nc). */
extern "C" __global__ void k_conv_dy(float *dy, const float *dout, int64_t OC, int64_t P, int64_t n0, int64_t nc) {
    int64_t ld = nc * P;
    GRID_LOOP(i, nc * OC * P) {
        int64_t n = i / (OC * P), r = i - n * OC * P, o = r / P, p = r - o * P;
        dy[o * ld + n * P + p] = dout[n0 * OC * P + i];
    }
}

/* out[r] += the sum of row r of x (R rows of n): one block per row (the conv's bias gradient). */
extern "C" __global__ void k_rowsum(float *out, const float *x, int64_t R, int64_t n) {
    __shared__ float sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        float s = 0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += x[r * n + j];
        s = block_sum(s, sh);
        if (threadIdx.x == 0) out[r] += s;
    }
}

/* ---- 2-D pooling over NC planes, one thread per output (forward) or input pixel (backward,
 * gathered from the outputs whose window holds it, in output order: the CPU's order) ---- */

/* The window of output (oh, ow) clipped to the plane: rows [*h0, *h1), columns [*w0, *w1). */
__device__ void pool_window(const tr_pool2d_dims &d, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                            int64_t *w1) {
    *h0 = oh * d.S - d.P, *h1 = *h0 + d.k, *w0 = ow * d.S - d.P, *w1 = *w0 + d.k;
    if (*h0 < 0) *h0 = 0;
    if (*h1 > d.H) *h1 = d.H;
    if (*w0 < 0) *w0 = 0;
    if (*w1 > d.W) *w1 = d.W;
}

/* The outputs whose window holds pixel (ih, iw): rows [*o0, *o1], columns [*p0, *p1] (empty
 * when a range's first exceeds its last). */
__device__ void pool_covering(const tr_pool2d_dims &d, int64_t ih, int64_t iw, int64_t *o0, int64_t *o1, int64_t *p0,
                              int64_t *p1) {
    int64_t a = ih + d.P - d.k + 1, b = iw + d.P - d.k + 1;
    *o0 = a <= 0 ? 0 : (a + d.S - 1) / d.S, *o1 = (ih + d.P) / d.S;
    *p0 = b <= 0 ? 0 : (b + d.S - 1) / d.S, *p1 = (iw + d.P) / d.S;
    if (*o1 > d.OH - 1) *o1 = d.OH - 1;
    if (*p1 > d.OW - 1) *p1 = d.OW - 1;
}

/* The window's maximum in scan order, a larger value or a NaN taking the place. */
extern "C" __global__ void k_maxpool_fwd(float *out, int32_t *am, const float *x, int64_t NC, tr_pool2d_dims d) {
    int64_t OHW = d.OH * d.OW;
    GRID_LOOP(i, NC * OHW) {
        int64_t pl = i / OHW, oh = (i - pl * OHW) / d.OW, ow = i - pl * OHW - oh * d.OW, h0, h1, w0, w1;
        pool_window(d, oh, ow, &h0, &h1, &w0, &w1);
        const float *xp = x + pl * d.H * d.W;
        int64_t best = h0 * d.W + w0;
        float m = xp[best];
        for (int64_t ih = h0; ih < h1; ih++)
            for (int64_t iw = w0; iw < w1; iw++) {
                float v = xp[ih * d.W + iw];
                if (v > m || v != v) m = v, best = ih * d.W + iw;
            }
        out[i] = m;
        am[i] = (int32_t)best;
    }
}

extern "C" __global__ void k_maxpool_bwd(float *dx, const float *dy, const int32_t *am, int64_t NC, tr_pool2d_dims d,
                                         int acc) {
    int64_t HW = d.H * d.W, OHW = d.OH * d.OW;
    GRID_LOOP(i, NC * HW) {
        int64_t pl = i / HW, hw = i - pl * HW, o0, o1, p0, p1;
        pool_covering(d, hw / d.W, hw % d.W, &o0, &o1, &p0, &p1);
        float v = acc ? dx[i] : 0.0f;
        for (int64_t oh = o0; oh <= o1; oh++)
            for (int64_t ow = p0; ow <= p1; ow++) {
                int64_t o = pl * OHW + oh * d.OW + ow;
                if (am[o] == hw) v += dy[o];
            }
        dx[i] = v;
    }
}

/* The window's average, padding counted as zeros (a k * k divisor). */
extern "C" __global__ void k_avgpool_fwd(float *out, const float *x, int64_t NC, tr_pool2d_dims d) {
    int64_t OHW = d.OH * d.OW;
    float scale = 1.0f / (float)(d.k * d.k);
    GRID_LOOP(i, NC * OHW) {
        int64_t pl = i / OHW, oh = (i - pl * OHW) / d.OW, ow = i - pl * OHW - oh * d.OW, h0, h1, w0, w1;
        pool_window(d, oh, ow, &h0, &h1, &w0, &w1);
        const float *xp = x + pl * d.H * d.W;
        float s = 0;
        for (int64_t ih = h0; ih < h1; ih++)
            for (int64_t iw = w0; iw < w1; iw++) s += xp[ih * d.W + iw];
        out[i] = s * scale;
    }
}

/* dx += each covering output's dy / (k * k), added one by one in output order. */
extern "C" __global__ void k_avgpool_bwd(float *dx, const float *dy, int64_t NC, tr_pool2d_dims d) {
    int64_t HW = d.H * d.W, OHW = d.OH * d.OW;
    float scale = 1.0f / (float)(d.k * d.k);
    GRID_LOOP(i, NC * HW) {
        int64_t pl = i / HW, hw = i - pl * HW, o0, o1, p0, p1;
        pool_covering(d, hw / d.W, hw % d.W, &o0, &o1, &p0, &p1);
        float v = dx[i];
        for (int64_t oh = o0; oh <= o1; oh++)
            for (int64_t ow = p0; ow <= p1; ow++) v += __fmul_rn(dy[pl * OHW + oh * d.OW + ow], scale); /* the CPU's rounding: no fma */
        dx[i] = v;
    }
}
