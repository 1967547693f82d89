/* The CUDA plugin's optimizer updates and double-precision sums; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
/* ---- optimizers: core/src/optim/sgd.c and adam.c, operation by operation ---- */

/* mode 0: no momentum, 1: first step (buf = d), 2: buf = buf mom + damp1 d */
extern "C" __global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, float neg_lr, float wd, float mom,
                                 float damp1, int has_wd, int mode, int nesterov) {
    GRID_LOOP(i, n) {
        float d = g[i];
        if (has_wd) d = d + wd * p[i];
        if (mode != 0) {
            float b = mode == 1 ? d : buf[i] * mom + damp1 * d;
            buf[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        p[i] = p[i] + neg_lr * d;
    }
}

/* wd_mode 0: none, 1: L2 (Adam), 2: decoupled (AdamW) */
extern "C" __global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, float decay, float wd,
                                  float b1, float b1c, float b2, float b2c, float inv_bc2_sqrt, float eps,
                                  float neg_step, int wd_mode) {
    GRID_LOOP(i, n) {
        float pi = p[i], d = g[i];
        if (wd_mode == 2) pi = pi * decay;
        if (wd_mode == 1) d = d + wd * pi;
        float mi = m[i] * b1 + b1c * d;
        float vi = v[i] * b2 + b2c * d * d;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) * inv_bc2_sqrt + eps;
        p[i] = pi + neg_step * mi / denom;
    }
}

/* ---- sums in double: up to CUDA_SUMSQ_PARTS block partials (their number set by the
 * length), then one block (or k_loss_total's one thread) adds them: a fixed order, the same
 * result every run ---- */

/* part[block] = the block's share of the sum of x (mode 0), x^2 (mode 1: the sum of squares)
 * or (x - y)^2 (mode 2: mse), in double. */
extern "C" __global__ void k_dsum_part(double *part, const float *x, const float *y, int64_t n, int mode) {
    __shared__ double sh[CUDA_BLOCK / 32];
    double s = 0;
    GRID_LOOP(i, n) {
        double v = mode == 2 ? (double)x[i] - (double)y[i] : (double)x[i];
        s += mode == 0 ? v : v * v;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

extern "C" __global__ void k_sumsq_final(double *out, const double *part, int n) {
    __shared__ double sh[CUDA_BLOCK / 32];
    double s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += part[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = s;
}
