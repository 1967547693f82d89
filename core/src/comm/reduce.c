/* Elementwise reduction kernels for the communicators: every dtype x SUM/MAX/MIN/PROD (AVG
 * reduces as SUM, then tr_scale_div). Integers wrap (two's complement, as NCCL); bf16/f16
 * compute in float and round once per pair. Loops are written for the vectoriser. */
#include <stdint.h>

#include "trainer/comm.h"
#include "trainer/half.h"

#define RED_LOOP(T, expr)                                                                   \
    do {                                                                                    \
        T *d = dst;                                                                         \
        const T *x = a, *y = b;                                                             \
        for (size_t i = 0; i < n; i++) {                                                    \
            T u = x[i], v = y[i];                                                           \
            d[i] = (expr);                                                                  \
        }                                                                                   \
    } while (0)

#define RED_TYPED(T)                                                                        \
    switch (op) {                                                                           \
    case TR_RED_MAX: RED_LOOP(T, u > v ? u : v); break;                                     \
    case TR_RED_MIN: RED_LOOP(T, u < v ? u : v); break;                                     \
    case TR_RED_PROD: RED_LOOP(T, (T)(u * v)); break;                                       \
    default: RED_LOOP(T, (T)(u + v)); break;                                                \
    }

/* Integers: wrap-around arithmetic done in the unsigned type (no UB on overflow). */
#define RED_INT(T, U)                                                                       \
    switch (op) {                                                                           \
    case TR_RED_MAX: RED_LOOP(T, u > v ? u : v); break;                                     \
    case TR_RED_MIN: RED_LOOP(T, u < v ? u : v); break;                                     \
    case TR_RED_PROD: RED_LOOP(T, (T)((U)u * (U)v)); break;                                 \
    default: RED_LOOP(T, (T)((U)u + (U)v)); break;                                          \
    }

#define RED_HALF(to_f, from_f)                                                              \
    do {                                                                                    \
        uint16_t *d = dst;                                                                  \
        const uint16_t *x = a, *y = b;                                                      \
        for (size_t i = 0; i < n; i++) {                                                    \
            float u = to_f(x[i]), v = to_f(y[i]), r;                                        \
            switch (op) {                                                                   \
            case TR_RED_MAX: r = u > v ? u : v; break;                                      \
            case TR_RED_MIN: r = u < v ? u : v; break;                                      \
            case TR_RED_PROD: r = u * v; break;                                             \
            default: r = u + v; break;                                                      \
            }                                                                               \
            d[i] = from_f(r);                                                               \
        }                                                                                   \
    } while (0)

void tr_reduce2(void *dst, const void *a, const void *b, size_t n, tr_dtype dtype, tr_red_op op) {
    switch (dtype) {
    case TR_F32: RED_TYPED(float); break;
    case TR_F64: RED_TYPED(double); break;
    case TR_I32: RED_INT(int32_t, uint32_t); break;
    case TR_I64: RED_INT(int64_t, uint64_t); break;
    case TR_U8: RED_INT(uint8_t, unsigned); break;
    case TR_BF16: RED_HALF(tr_bf16_to_f32, tr_f32_to_bf16); break;
    case TR_F16: RED_HALF(tr_f16_to_f32, tr_f32_to_f16); break;
    default: break;
    }
}

void tr_reduce_into(void *dst, const void *src, size_t count, tr_dtype dtype, tr_red_op op) {
    tr_reduce2(dst, dst, src, count, dtype, op);
}

#define DIV_LOOP(T)                                                                         \
    do {                                                                                    \
        T *p = buf;                                                                         \
        for (size_t i = 0; i < n; i++) p[i] = (T)(p[i] / (T)divisor);                       \
    } while (0)

void tr_scale_div(void *buf, size_t n, tr_dtype dtype, int divisor) {
    if (divisor <= 1) return;
    switch (dtype) {
    case TR_F32: DIV_LOOP(float); break;
    case TR_F64: DIV_LOOP(double); break;
    case TR_I32: DIV_LOOP(int32_t); break;
    case TR_I64: DIV_LOOP(int64_t); break;
    case TR_U8: DIV_LOOP(uint8_t); break;
    case TR_BF16: {
        uint16_t *p = buf;
        for (size_t i = 0; i < n; i++) p[i] = tr_f32_to_bf16(tr_bf16_to_f32(p[i]) / (float)divisor);
        break;
    }
    case TR_F16: {
        uint16_t *p = buf;
        for (size_t i = 0; i < n; i++) p[i] = tr_f32_to_f16(tr_f16_to_f32(p[i]) / (float)divisor);
        break;
    }
    default: break;
    }
}
