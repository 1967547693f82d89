/* The CUDA plugin's device kernels (the host side that launches them is ops.c). Each computes
 * what the core's CPU kernel of the same op computes (the .inc files of core/src/ops), in the same fp32
 * operations and, where the CPU sums in a fixed order, the same order (column sums, the loss
 * total), so results agree to rounding: elementwise math uses CUDA's expf/erff/tanhf where
 * the CPU uses its vectorised approximations (<= 2 ulp), and row reductions add in a tree.
 *
 * Built by nvcc into a fatbin (sm_90 code plus compute_90 PTX for later GPUs) that the
 * plugin embeds and loads through the driver (driver.c); the tests also compile this file
 * as C++ against a CPU emulator of the CUDA execution model (tests/plugins/cuda_emu), so
 * it uses only what that header provides: 1-D grids and blocks of CUDA_BLOCK threads,
 * __syncthreads, __shfl_xor_sync, __fmul_rn, static __shared__ arrays, and block-uniform control flow
 * around every barrier and shuffle. */
#include <math.h>
#include <stdint.h>

#include "kernels.h"

#define GRID_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
/* Rows of a per-row kernel: one block per row (block-uniform). */
#define ROW_LOOP(r, R) for (int64_t r = blockIdx.x; r < (R); r += gridDim.x)

/* ---- block reductions: every thread of the block gets the result ---- */

struct op_sum {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct op_max {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* Reduces v over the block with op (identity: op's neutral value), a warp by shuffles, then
 * the warps' results; sh: CUDA_BLOCK / 32 slots of shared memory, free again on return. */
template <typename T, typename Op> __device__ T block_reduce(T v, T *sh, T identity, Op op) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < CUDA_BLOCK / 32 ? sh[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    return v;
}

template <typename T> __device__ T block_sum(T v, T *sh) { return block_reduce(v, sh, (T)0, op_sum()); }
__device__ float block_max(float v, float *sh) { return block_reduce(v, sh, -INFINITY, op_max()); }

/* ---- elementwise ---- */

/* out = a + b, b (M) broadcast over R rows (R == 1: equal shapes); also bias-add. */
extern "C" __global__ void k_add_fwd(float *out, const float *a, const float *b, int64_t R, int64_t M) {
    GRID_LOOP(i, R * M) out[i] = a[i] + b[i % M];
}

/* y = s * x (acc 0) or y + s * x (acc 1): add's and bias-add's input gradients, scale. */
extern "C" __global__ void k_accum(float *y, const float *x, int64_t n, float s, int acc) {
    GRID_LOOP(i, n) {
        float v = s * x[i];
        y[i] = acc ? y[i] + v : v;
    }
}

/* db[j] += sum over rows r of d[r, j] (* a[r, j] when a): one thread per column, rows in
 * order, as the CPU adds them. */
extern "C" __global__ void k_colsum(float *db, const float *d, const float *a, int64_t R, int64_t M) {
    GRID_LOOP(j, M) {
        float t = db[j];
        for (int64_t r = 0; r < R; r++) t += a ? d[r * M + j] * a[r * M + j] : d[r * M + j];
        db[j] = t;
    }
}

extern "C" __global__ void k_mul_fwd(float *out, const float *a, const float *b, int64_t R, int64_t M) {
    GRID_LOOP(i, R * M) out[i] = a[i] * b[i % M];
}

/* da += dout * b, b broadcast */
extern "C" __global__ void k_mul_bwd_da(float *da, const float *dout, const float *b, int64_t R, int64_t M) {
    GRID_LOOP(i, R * M) da[i] += dout[i] * b[i % M];
}

extern "C" __global__ void k_scale_inplace(float *g, int64_t n, float s) {
    GRID_LOOP(i, n) g[i] *= s;
}

extern "C" __global__ void k_relu_fwd(float *out, const float *x, int64_t n) {
    GRID_LOOP(i, n) out[i] = x[i] > 0 ? x[i] : 0.0f;
}

extern "C" __global__ void k_relu_bwd(float *dx, const float *dout, const float *out, int64_t n, int acc) {
    GRID_LOOP(i, n) {
        float d = out[i] > 0 ? dout[i] : 0.0f;
        dx[i] = acc ? dx[i] + d : d;
    }
}

#define GELU_S2 0.70710678118654752440f
#define GELU_K 0.79788456080286535588f
#define GELU_C 0.044715f
#define GELU_INV_SQRT_2PI 0.39894228040143267794f

/* approx 1: PyTorch's tanh form; 0: exact (erf). */
extern "C" __global__ void k_gelu_fwd(float *out, const float *x, int64_t n, int approx) {
    GRID_LOOP(i, n) {
        float v = x[i];
        out[i] = approx ? 0.5f * v * (1 + tanhf(GELU_K * (v + GELU_C * v * v * v)))
                        : 0.5f * v * (1 + erff(v * GELU_S2));
    }
}

extern "C" __global__ void k_gelu_bwd(float *dx, const float *dout, const float *x, int64_t n, int approx, int acc) {
    GRID_LOOP(i, n) {
        float v = x[i], dy;
        if (approx) {
            float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
            dy = 0.5f * (1 + t) + 0.5f * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * v * v);
        } else {
            float pdf = GELU_INV_SQRT_2PI * expf(-0.5f * v * v);
            dy = 0.5f * (1 + erff(v * GELU_S2)) + v * pdf;
        }
        float d = dout[i] * dy;
        dx[i] = acc ? dx[i] + d : d;
    }
}

extern "C" __global__ void k_tanh_fwd(float *out, const float *x, int64_t n) {
    GRID_LOOP(i, n) out[i] = tanhf(x[i]);
}

/* dx += dout (1 - out^2) */
extern "C" __global__ void k_tanh_bwd(float *dx, const float *dout, const float *out, int64_t n) {
    GRID_LOOP(i, n) dx[i] += dout[i] * (1 - out[i] * out[i]);
}

extern "C" __global__ void k_sigmoid_fwd(float *out, const float *x, int64_t n) {
    GRID_LOOP(i, n) {
        float e = expf(-fabsf(x[i])), s = 1 / (1 + e); /* exp of a non-positive number only */
        out[i] = x[i] >= 0 ? s : e * s;
    }
}

/* dx += dout s (1 - s) */
extern "C" __global__ void k_sigmoid_bwd(float *dx, const float *dout, const float *out, int64_t n) {
    GRID_LOOP(i, n) dx[i] += dout[i] * out[i] * (1 - out[i]);
}

/* ---- dropout: the core's Philox4x32-10 (core/src/util/rng.c), bit for bit ---- */

__device__ __forceinline__ uint32_t philox_lane(uint64_t key, uint64_t hi, uint64_t lo, unsigned lane) {
    uint32_t c0 = (uint32_t)lo, c1 = (uint32_t)(lo >> 32), c2 = (uint32_t)hi, c3 = (uint32_t)(hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;
}

/* Element i is element first + i of stream (seed, stream): block (first + i) / 4, lane
 * (first + i) % 4; kept when the value >> 8 is >= thr. */
extern "C" __global__ void k_dropout_fwd(float *out, uint8_t *mask, const float *x, int64_t n, uint64_t seed,
                                         uint64_t stream, uint64_t first, uint32_t thr, float scale) {
    GRID_LOOP(i, n) {
        uint64_t idx = first + (uint64_t)i;
        uint8_t keep = (philox_lane(seed, stream, idx >> 2, (unsigned)(idx & 3)) >> 8) >= thr;
        mask[i] = keep;
        out[i] = x[i] * (keep ? scale : 0.0f);
    }
}

extern "C" __global__ void k_dropout_bwd(float *dx, const float *dout, const uint8_t *mask, int64_t n, float scale,
                                         int acc) {
    GRID_LOOP(i, n) {
        float d = dout[i] * (mask[i] ? scale : 0.0f);
        dx[i] = acc ? dx[i] + d : d;
    }
}

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

/* ---- copies and layouts ---- */

/* dst[r * dld + j] (=, or += with acc) src[r * sld + j]: slice and concat. */
extern "C" __global__ void k_copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t W,
                                       int acc) {
    GRID_LOOP(i, R * W) {
        int64_t r = i / W, j = i - r * W;
        float v = src[r * sld + j], *d = dst + r * dld + j;
        *d = acc ? *d + v : v;
    }
}

/* out[i] = inp at output index i's input offset; with acc inp there += out[i]. n = numel. */
extern "C" __global__ void k_permute(float *out, float *inp, tr_permute_dims p, int64_t n, int acc) {
    GRID_LOOP(i, n) {
        int64_t off = 0, r = i;
        for (int64_t d = p.ndim - 1; d >= 0; d--) {
            off += (r % p.shape[d]) * p.stride[d];
            r /= p.shape[d];
        }
        if (acc) inp[off] += out[i];
        else out[i] = inp[off];
    }
}

/* ---- embedding ---- */

extern "C" __global__ void k_embed_fwd(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C) {
    GRID_LOOP(i, N * C) {
        int64_t r = i / C;
        int32_t id = ids[r];
        out[i] = id >= 0 ? table[(int64_t)id * C + (i - r * C)] : 0.0f; /* padding (-1): zeros */
    }
}

/* dtable[ids[i]] += dout[i] (padding ids -1 skipped) without atomics, in the CPU's order: the block of token i goes on
 * only if i is its id's first token; it then adds the rows of every token with that id, in
 * token order. The ids pass through shared memory a block at a time. */
extern "C" __global__ void k_embed_bwd(float *dtable, const float *dout, const int32_t *ids, int64_t N, int64_t C) {
    __shared__ int32_t tile[CUDA_BLOCK];
    __shared__ int earlier;
    ROW_LOOP(i, N) {
        int32_t id = ids[i];
        if (id < 0) continue; /* padding: no gradient (block-uniform, before any barrier) */
        float *row = dtable + (int64_t)id * C;
        if (threadIdx.x == 0) earlier = 0;
        __syncthreads();
        for (int64_t j = threadIdx.x; j < i; j += blockDim.x)
            if (ids[j] == id) earlier = 1; /* any thread, the same value */
        __syncthreads();
        int first = !earlier;
        __syncthreads(); /* every thread has read it before the next row resets it */
        if (!first) continue;
        for (int64_t j0 = i; j0 < N; j0 += CUDA_BLOCK) {
            int64_t len = N - j0 < CUDA_BLOCK ? N - j0 : CUDA_BLOCK;
            tile[threadIdx.x] = threadIdx.x < len ? ids[j0 + threadIdx.x] : -1;
            __syncthreads();
            for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
                float a = row[c];
                for (int64_t u = 0; u < len; u++)
                    if (tile[u] == id) a += dout[(j0 + u) * C + c];
                row[c] = a;
            }
            __syncthreads();
        }
    }
}

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

