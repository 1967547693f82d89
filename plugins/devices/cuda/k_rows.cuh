/* The CUDA plugin's row kernels: softmax, log-softmax, cross-entropy; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
/* ---- rows: one block per row of C ---- */

__device__ float row_max(const float *xr, int64_t C, float *sh) {
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) m = fmaxf(m, xr[j]);
    return block_max(m, sh);
}

/* o[0, n) = softmax of x[0, n), o[n, C) = 0 (a causal row's hidden keys); o may be x. */
__device__ void softmax_row(float *o, const float *x, int64_t n, int64_t C, float *sh) {
    float m = row_max(x, n, sh), s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        float e = expf(x[j] - m);
        o[j] = e;
        s += e;
    }
    float inv = 1 / block_sum(s, sh);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) o[j] = j < n ? o[j] * inv : 0.0f;
}

/* Softmax of each row; causal: row r is query r % T of its group and sees keys [0, r % T]
 * (attention's probabilities, rows of C = S keys). out may be x. */
extern "C" __global__ void k_softmax_fwd(float *out, const float *x, int64_t R, int64_t T, int64_t C, int causal) {
    __shared__ float sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        int64_t t = r % T;
        softmax_row(out + r * C, x + r * C, causal && t + 1 < C ? t + 1 : C, C, sh);
    }
}

/* k_softmax_fwd with a key padding mask (B, C) over rows r = (b NH + h) T + t: key j of row r
 * takes part where mask[b C + j] != 0 (and j <= t when causal); the rest are 0, and a row that
 * sees no key is all 0 (attention_mask_forward's contract). out may be x. */
extern "C" __global__ void k_softmax_mask_fwd(float *out, const float *x, const int32_t *mask, int64_t R, int64_t T,
                                              int64_t NH, int64_t C, int causal) {
    __shared__ float sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        int64_t t = r % T, n = causal && t + 1 < C ? t + 1 : C;
        const int32_t *mk = mask + (r / (NH * T)) * C;
        const float *xr = x + r * C;
        float *o = out + r * C, m = -INFINITY, any = 0, s = 0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
            if (mk[j]) m = fmaxf(m, xr[j]), any = 1;
        m = block_max(m, sh);
        any = block_max(any, sh);
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            float e = any && mk[j] ? expf(xr[j] - m) : 0.0f;
            o[j] = e;
            s += e;
        }
        s = block_sum(s, sh);
        float inv = any ? 1 / s : 0.0f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) o[j] = j < n ? o[j] * inv : 0.0f;
    }
}

/* dx (+)= out (dout - sum(dout out)); with acc 0, dx may be dout (each thread rewrites only the
 * elements it read, after the row's sum). */
extern "C" __global__ void k_softmax_bwd(float *dx, const float *dout, const float *out, int64_t R, int64_t C, int acc) {
    __shared__ float sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        const float *d = dout + r * C, *o = out + r * C;
        float *g = dx + r * C, dot = 0;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) dot += d[j] * o[j];
        dot = block_sum(dot, sh);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float v = o[j] * (d[j] - dot);
            g[j] = acc ? g[j] + v : v;
        }
    }
}

/* out = (x - max) - log sum exp(x - max) */
extern "C" __global__ void k_log_softmax_fwd(float *out, const float *x, int64_t R, int64_t C) {
    __shared__ float sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        const float *xr = x + r * C;
        float *o = out + r * C;
        float m = row_max(xr, C, sh), s = 0;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += expf(xr[j] - m);
        float ls = logf(block_sum(s, sh));
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) o[j] = (xr[j] - m) - ls;
    }
}

/* dx += dout - exp(out) sum(dout) */
extern "C" __global__ void k_log_softmax_bwd(float *dx, const float *dout, const float *out, int64_t R, int64_t C) {
    __shared__ float sh[CUDA_BLOCK / 32];
    ROW_LOOP(r, R) {
        const float *d = dout + r * C, *o = out + r * C;
        float *g = dx + r * C, sd = 0;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) sd += d[j];
        sd = block_sum(sd, sh);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) g[j] += d[j] - expf(o[j]) * sd;
    }
}

/* Cross-entropy with label smoothing e: loss[i] = (1 - e)(ls - (x_t - m)) + e (ls - sum(x - m) / C)
 * with m the row max and ls = log sum exp(x - m); stats (N, 2) = (m, ls) when not NULL. */
extern "C" __global__ void k_ce_fwd(double *loss, float *stats, const float *x, const int32_t *targets, int64_t N,
                                    int64_t C, int ignore_index, float e, float invC) {
    __shared__ float sh[CUDA_BLOCK / 32];
    ROW_LOOP(i, N) {
        int32_t t = targets[i];
        if (t == ignore_index) { /* block-uniform: every thread read the same target */
            if (threadIdx.x == 0) {
                loss[i] = 0;
                if (stats) stats[2 * i] = stats[2 * i + 1] = 0;
            }
            continue;
        }
        const float *xr = x + i * C;
        float m = row_max(xr, C, sh), s = 0, sd = 0;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float d = xr[j] - m;
            s += expf(d);
            sd += d;
        }
        s = block_sum(s, sh);
        sd = block_sum(sd, sh);
        if (threadIdx.x == 0) {
            float ls = logf(s);
            if (stats) {
                stats[2 * i] = m;
                stats[2 * i + 1] = ls;
            }
            loss[i] = (double)((1 - e) * (ls - (xr[t] - m)) + e * (ls - sd * invC));
        }
    }
}

/* dx += gs softmax - ge, and -= gt at the target (gs = dscale, ge = dscale e / C,
 * gt = dscale (1 - e)), in the CPU's order of operations. */
extern "C" __global__ void k_ce_bwd(float *dx, const float *x, const float *stats, const int32_t *targets, int64_t N,
                                    int64_t C, int ignore_index, float gs, float ge, float gt) {
    GRID_LOOP(i, N * C) {
        int64_t row = i / C, j = i - row * C;
        int32_t t = targets[row];
        if (t == ignore_index) continue;
        float g = dx[i] + (gs * expf((x[i] - stats[2 * row]) - stats[2 * row + 1]) - ge);
        if (j == t) g -= gt;
        dx[i] = g;
    }
}

/* out[0] = sum of loss[0, n) in order / normaliser: one thread, the CPU's order. */
extern "C" __global__ void k_loss_total(float *out, const double *loss, int64_t n, double normaliser) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double t = 0;
    for (int64_t i = 0; i < n; i++) t += loss[i];
    out[0] = (float)(t / normaliser);
}
