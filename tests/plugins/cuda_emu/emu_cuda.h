/* What plugins/devices/cuda/kernels.cu uses of CUDA C++, on the CPU (see emu.cc): the thread
 * and block indexes, __syncthreads, __shfl_xor_sync, __fmul_rn and __shared__ arrays. One block runs at a
 * time on the calling thread; a kernel declared with barriers (kernels.h) runs its threads as
 * fibers that switch at each barrier, the others run their threads one after another. */
#ifndef TR_CUDA_EMU_H
#define TR_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

struct emu_dim3 {
    unsigned x, y, z;
};

extern thread_local emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
/* One block at a time per host thread: a block's shared array is a static of the thread. */
#define __shared__ static thread_local

void __syncthreads(void);

/* A product rounded on its own (never contracted into a multiply-add): C++ does not contract. */
static inline float __fmul_rn(float a, float b) { return a * b; }

/* Lane exchange: every thread of the block posts its value, meets the others, reads its
 * partner's (lane ^ mask) and meets them again: the block-uniform use kernels.cu makes. */
extern thread_local unsigned char emu_lanes[1024][8];
template <typename T> T __shfl_xor_sync(unsigned, T v, int mask) {
    static_assert(sizeof(T) <= 8, "emulated shuffles move at most 8 bytes");
    unsigned t = threadIdx.x;
    memcpy(emu_lanes[t], &v, sizeof v);
    __syncthreads();
    T r;
    memcpy(&r, emu_lanes[t ^ (unsigned)mask], sizeof r);
    __syncthreads();
    return r;
}

#endif
