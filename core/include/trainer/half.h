/* bf16 and IEEE fp16 conversions to and from float, round to nearest even, header-only.
 *
 *   uint16_t h = tr_f32_to_f16(1.0f / 3);   // 0x3555
 *   float f = tr_f16_to_f32(h);              // 0.33325195
 *
 * NaN stays NaN (quiet), infinities stay infinities, fp16 overflow rounds to infinity and
 * fp16 subnormals are kept (no flush to zero). */
#ifndef TRAINER_HALF_H
#define TRAINER_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float tr_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint16_t tr_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* x as its bf16 rounding reads back (round to nearest even). */
static inline float tr_bf16_round(float x) { return tr_bf16_to_f32(tr_f32_to_bf16(x)); }

static inline float tr_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        float f = (float)m * 5.9604644775390625e-8f; /* m * 2^-24 */
        return sign ? -f : f;
    }
    x = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint16_t tr_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return (uint16_t)(sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: rounds to inf */
    if (mag < 0x38800000u) { /* below 2^-14: a subnormal (or zero) in units of 2^-24 */
        float a;
        memcpy(&a, &mag, sizeof a);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    uint32_t h = (((mag >> 23) - 112u) << 10) | ((mag >> 13) & 0x3ffu), rem = mag & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

#endif
