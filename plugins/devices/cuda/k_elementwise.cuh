/* The CUDA plugin's elementwise kernels and dropout; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
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
