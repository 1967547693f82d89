/* Private to the kernels: 16 rows of 16 floats transposed in AVX-512 registers, shared by the
 * packed GEMM and the bf16 GEMM's packing. Compiled for AVX-512F whatever -march says (the
 * bf16 GEMM is built for AVX512-BF16 by target attributes), inlined into either caller. */
#ifndef TRAINER_KERNELS_TRANSPOSE16_H
#define TRAINER_KERNELS_TRANSPOSE16_H

#include <immintrin.h>

/* out[j] is column j of r. */
static inline __attribute__((always_inline, target("avx512f"))) void tr_transpose16(const __m512 r[16],
                                                                                     __m512 out[16]) {
    __m512 t[16], u[16], v[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++) {
            v[8 * h + j] = _mm512_shuffle_f32x4(u[8 * h + j], u[8 * h + 4 + j], 0x88);
            v[8 * h + 4 + j] = _mm512_shuffle_f32x4(u[8 * h + j], u[8 * h + 4 + j], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        out[j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88);
        out[8 + j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0xDD);
    }
}

#endif
