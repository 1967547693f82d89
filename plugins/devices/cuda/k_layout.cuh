/* The CUDA plugin's copies, permutes and embedding; included by kernels.cu only (one translation unit, one
 * fatbin), its launchers in ops.c. */
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
