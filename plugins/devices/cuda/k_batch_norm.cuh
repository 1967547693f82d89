/* The CUDA plugin's batch-norm; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
/* ---- batch-norm over x viewed as (N, C, S): core/src/ops/batch_norm.inc's sequence ---- */

/* The sum of x[0, n) in double, and the sum in double of the squared deviations from its
 * float mean (each product rounded to float): the mean. A block's threads together (sh: its
 * shared scratch; every thread gets the sums), or one thread alone (sh NULL). */
__device__ float row_moments(const float *x, int64_t n, double *sum, double *sqdev, double *sh) {
    int64_t j0 = sh ? threadIdx.x : 0, step = sh ? blockDim.x : 1;
    double s = 0, q = 0;
    for (int64_t j = j0; j < n; j += step) s += (double)x[j];
    if (sh) s = block_sum(s, sh);
    float m = (float)(s / (double)n);
    for (int64_t j = j0; j < n; j += step) {
        float e = x[j] - m;
        q += (double)__fmul_rn(e, e);
    }
    if (sh) q = block_sum(q, sh);
    *sum = s, *sqdev = q;
    return m;
}

/* Plane p's sum and its squared deviations from (float)(sum / S), in double: a block per
 * plane. */
extern "C" __global__ void k_bn_planes(double *ps, const float *x, int64_t NC, int64_t S) {
    __shared__ double sh[CUDA_BLOCK / 32];
    ROW_LOOP(p, NC) {
        double s, q;
        row_moments(x + p * S, S, &s, &q, sh);
        if (threadIdx.x == 0) ps[2 * p] = s, ps[2 * p + 1] = q;
    }
}

/* The same for planes of fewer than 32 values (2-D input: S = 1): a thread per plane. */
extern "C" __global__ void k_bn_planes_short(double *ps, const float *x, int64_t NC, int64_t S) {
    GRID_LOOP(p, NC) {
        double s, q;
        row_moments(x + p * S, S, &s, &q, NULL);
        ps[2 * p] = s, ps[2 * p + 1] = q;
    }
}

extern "C" __global__ void k_bn_plane_sums(double *s, const double *ps, int64_t N, int64_t C) {
    GRID_LOOP(c, C) {
        double t = 0;
        for (int64_t n = 0; n < N; n++) t += ps[2 * (n * C + c)];
        s[c] = t;
    }
}

/* sum (x - m)^2 = sum (x - c)^2 + 2 (c - m) sum (x - c) + S (c - m)^2 for each plane's c. */
extern "C" __global__ void k_bn_plane_sqdevs(double *q, const double *ps, const float *mean, int64_t N, int64_t C,
                                             int64_t S) {
    GRID_LOOP(c, C) {
        double t = 0, m = mean[c];
        for (int64_t n = 0; n < N; n++) {
            const double *p = ps + 2 * (n * C + c);
            double cp = (double)(float)(p[0] / (double)S), e = cp - m;
            t += p[1] + 2 * e * (p[0] - (double)S * cp) + (double)S * e * e;
        }
        q[c] = t;
    }
}

extern "C" __global__ void k_bn_divide(float *out, const double *s, double M, int64_t C) {
    GRID_LOOP(c, C) out[c] = (float)(s[c] / M);
}

/* The running statistics (when rm), then var = 1 / sqrt(var + eps) in place. */
extern "C" __global__ void k_bn_finish(float *var, float *rm, float *rv, const float *mean, int64_t C,
                                       double momentum, double unbias, double eps) {
    GRID_LOOP(c, C) {
        if (rm) {
            rm[c] = (float)((1 - momentum) * (double)rm[c] + momentum * (double)mean[c]);
            rv[c] = (float)((1 - momentum) * (double)rv[c] + momentum * (double)var[c] * unbias);
        }
        var[c] = (float)(1.0 / sqrt((double)var[c] + eps));
    }
}

extern "C" __global__ void k_bn_fwd(float *y, const float *x, const float *mean, const float *invstd,
                                    const float *gamma, const float *beta, int64_t N, int64_t C, int64_t S) {
    GRID_LOOP(i, N * C * S) {
        int64_t c = (i / S) % C;
        float a = invstd[c] * (gamma ? gamma[c] : 1.0f), b = (beta ? beta[c] : 0.0f) - mean[c] * a;
        y[i] = x[i] * a + b;
    }
}

/* sdy[c] = sum of dy, sdyx[c] = sum of dy * (x - mean) * invstd over channel c, in double: a
 * block per channel. */
extern "C" __global__ void k_bn_dsums(double *sdy, double *sdyx, const float *dy, const float *x, const float *mean,
                                      const float *invstd, int64_t N, int64_t C, int64_t S) {
    __shared__ double sh[CUDA_BLOCK / 32];
    ROW_LOOP(c, C) {
        float mu = mean[c], is = invstd[c];
        double a = 0, b = 0;
        for (int64_t n = 0; n < N; n++) {
            const float *g = dy + (n * C + c) * S, *xp = x + (n * C + c) * S;
            for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
                a += (double)g[j];
                b += (double)(g[j] * ((xp[j] - mu) * is));
            }
        }
        a = block_sum(a, sh);
        b = block_sum(b, sh);
        if (threadIdx.x == 0) sdy[c] = a, sdyx[c] = b;
    }
}

/* dx (=, or += with acc) = gamma invstd (dy - b - xhat q), b and q the sums over M (0 when
 * !batch: running statistics do not depend on x). */
extern "C" __global__ void k_bn_dx(float *dx, const float *dy, const float *x, const float *mean, const float *invstd,
                                   const float *gamma, const double *sdy, const double *sdyx, int batch, double M,
                                   int64_t N, int64_t C, int64_t S, int acc) {
    GRID_LOOP(i, N * C * S) {
        int64_t c = (i / S) % C;
        float mu = mean[c], is = invstd[c], a = (gamma ? gamma[c] : 1.0f) * is;
        float b = batch ? (float)(sdy[c] / M) : 0.0f, q = batch ? (float)(sdyx[c] / M) : 0.0f;
        float v = a * (dy[i] - b - (x[i] - mu) * is * q);
        dx[i] = acc ? dx[i] + v : v;
    }
}

extern "C" __global__ void k_bn_param_grads(float *dgamma, float *dbeta, const double *sdy, const double *sdyx,
                                            int64_t C) {
    GRID_LOOP(c, C) {
        if (dbeta) dbeta[c] += (float)sdy[c];
        if (dgamma) dgamma[c] += (float)sdyx[c];
    }
}
