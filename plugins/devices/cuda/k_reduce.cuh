/* The CUDA plugin's reductions and the remaining losses; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
/* ---- attention's softmax over rows of S scores (the GEMMs are cuBLAS's, ops.c) ---- */

/* ---- reductions and losses ---- */

/* x (O, D, I) -> out (O, I) = scale * the sum over D in double, a thread per output. */
extern "C" __global__ void k_sum_dim_fwd(float *out, const float *x, double scale, int64_t O, int64_t D, int64_t I) {
    GRID_LOOP(i, O * I) {
        int64_t o = i / I, k = i - o * I;
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)x[(o * D + d) * I + k];
        out[i] = (float)(s * scale);
    }
}

extern "C" __global__ void k_sum_dim_bwd(float *dx, const float *dout, float scale, int64_t O, int64_t D, int64_t I) {
    GRID_LOOP(i, O * D * I) {
        int64_t o = i / (D * I), k = i % I;
        dx[i] += scale * dout[o * I + k];
    }
}

/* dx += (float)(scale dout[0]) */
extern "C" __global__ void k_sum_all_bwd(float *dx, const float *dout, double scale, int64_t n) {
    float d = (float)(scale * (double)dout[0]);
    GRID_LOOP(i, n) dx[i] += d;
}

/* dpred += (float)(2 (dout[0] / normaliser)) (pred - target) */
extern "C" __global__ void k_mse_bwd(float *dp, const float *dout, const float *p, const float *t, double normaliser,
                                     int64_t n) {
    float k = (float)(2 * ((double)dout[0] / normaliser));
    GRID_LOOP(i, n) dp[i] += k * (p[i] - t[i]);
}

/* A row's a.b, |a| and |b| (clamped below at eps), in double, every thread of the block. */
__device__ void cos_row(const float *a, const float *b, int64_t E, double eps, double *sh, double *dot, double *na,
                        double *nb) {
    double d = 0, x = 0, y = 0;
    for (int64_t k = threadIdx.x; k < E; k += blockDim.x) {
        d += (double)a[k] * (double)b[k];
        x += (double)a[k] * (double)a[k];
        y += (double)b[k] * (double)b[k];
    }
    d = block_sum(d, sh), x = sqrt(block_sum(x, sh)), y = sqrt(block_sum(y, sh));
    *dot = d, *na = x > eps ? x : eps, *nb = y > eps ? y : eps;
}

extern "C" __global__ void k_cos_fwd(float *out, const float *a, const float *b, int64_t N, int64_t E, double eps) {
    __shared__ double sh[CUDA_BLOCK / 32];
    ROW_LOOP(i, N) {
        double d, na, nb;
        cos_row(a + i * E, b + i * E, E, eps, sh, &d, &na, &nb);
        if (threadIdx.x == 0) out[i] = (float)(d / (na * nb));
    }
}

/* da += dout (b / (|a||b|) - cos a / |a|^2), the second term only where |a| > eps; db alike. */
extern "C" __global__ void k_cos_bwd(float *da, float *db, const float *dout, const float *a, const float *b, int64_t N,
                                     int64_t E, double eps) {
    __shared__ double sh[CUDA_BLOCK / 32];
    ROW_LOOP(i, N) {
        const float *ai = a + i * E, *bi = b + i * E;
        double d, na, nb;
        cos_row(ai, bi, E, eps, sh, &d, &na, &nb);
        double go = (double)dout[i], inv = 1.0 / (na * nb), c = d * inv;
        double ka = na > eps ? c / (na * na) : 0.0, kb = nb > eps ? c / (nb * nb) : 0.0;
        for (int64_t k = threadIdx.x; k < E; k += blockDim.x) {
            if (da) da[i * E + k] += (float)(go * ((double)bi[k] * inv - ka * (double)ai[k]));
            if (db) db[i * E + k] += (float)(go * ((double)ai[k] * inv - kb * (double)bi[k]));
        }
    }
}
