/* The CUDA plugin's layer-norm; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
/* ---- layer-norm: a block per row, sums in double ---- */

extern "C" __global__ void k_ln_fwd(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                                    const float *beta, double eps, int64_t R, int64_t C) {
    __shared__ double sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        const float *xr = x + r * C;
        float *o = out + r * C;
        double s, q;
        float m = row_moments(xr, C, &s, &q, sh);
        float rs = (float)(1.0 / sqrt(q / (double)C + eps));
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float xhat = (xr[j] - m) * rs;
            o[j] = xhat * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
        }
        if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
    }
}

/* dx (=, or += with acc) rstd (g - mean(g) - xhat mean(g xhat)), g = dout gamma. */
extern "C" __global__ void k_ln_dx(float *dx, const float *dout, const float *x, const float *mean, const float *rstd,
                                   const float *gamma, int64_t R, int64_t C, int acc) {
    __shared__ double sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        const float *xr = x + r * C, *dy = dout + r * C;
        float *d = dx + r * C, m = mean[r], rs = rstd[r];
        double s1 = 0, s2 = 0;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float g = dy[j] * (gamma ? gamma[j] : 1.0f);
            s1 += g;
            s2 += (double)(g * ((xr[j] - m) * rs));
        }
        float a = (float)(block_sum(s1, sh) / (double)C), b = (float)(block_sum(s2, sh) / (double)C);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float g = dy[j] * (gamma ? gamma[j] : 1.0f), v = rs * (g - a - (xr[j] - m) * rs * b);
            d[j] = acc ? d[j] + v : v;
        }
    }
}

/* dgamma[c] += sum over rows of dout xhat, dbeta[c] += sum of dout (either may be NULL): a
 * block per 32 columns, its 8 warps taking every 8th row, their partial sums added in warp
 * order: the same result every run. */
extern "C" __global__ void k_ln_params(float *dgamma, float *dbeta, const float *dout, const float *x,
                                       const float *mean, const float *rstd, int64_t R, int64_t C) {
    enum { LANES = CUDA_BLOCK / 32 };
    __shared__ float pg[LANES][32], pb[LANES][32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int64_t c0 = (int64_t)blockIdx.x * 32; c0 < C; c0 += (int64_t)gridDim.x * 32) {
        int64_t c = c0 + lane;
        float sg = 0, sb = 0;
        if (c < C)
            for (int64_t r = w; r < R; r += LANES) {
                float dy = dout[r * C + c];
                sg += dy * ((x[r * C + c] - mean[r]) * rstd[r]);
                sb += dy;
            }
        pg[w][lane] = sg, pb[w][lane] = sb;
        __syncthreads();
        if (w == 0 && c < C) {
            float tg = 0, tb = 0;
            for (int u = 0; u < LANES; u++) tg += pg[u][lane], tb += pb[u][lane];
            if (dgamma) dgamma[c] += tg;
            if (dbeta) dbeta[c] += tb;
        }
        __syncthreads();
    }
}
