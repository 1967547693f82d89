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
 * around every barrier and shuffle. The kernels live by op family in k_*.cuh, included below
 * into this one translation unit. */
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

#include "k_elementwise.cuh"
#include "k_rows.cuh"
#include "k_optim.cuh"
#include "k_conv_pool.cuh"
#include "k_batch_norm.cuh"
#include "k_layout.cuh"
#include "k_layer_norm.cuh"
#include "k_reduce.cuh"
