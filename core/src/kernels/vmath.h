/* Private: vectorisable f32 exp, tanh and erf for the elementwise templates, each with an
 * f64 twin that is plain libm, so a template can call K(fast_exp) for either type. glibc's
 * expf/tanhf/erff stop gcc vectorising a loop; these are branch-free polynomials that do not.
 * Accuracy: exp <= 2 ulp (0 below ln(FLT_MIN)), tanh within 3e-7, erf within 4.3e-7. */
#ifndef TRAINER_OPS_VMATH_H
#define TRAINER_OPS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Vectorisable exp (<= 2 ulp; 0 below ln(FLT_MIN)) */
static inline float fast_exp_f32(float x) {
    const float lo = -87.33654475f, hi = 88.72283905f;
    float xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    float t = xc * 1.44269504088896341f + 12582912.0f; /* round(x / ln 2) in the low bits */
    float n = t - 12582912.0f;
    int32_t ni;
    memcpy(&ni, &t, sizeof ni);
    ni -= 0x4B400000;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    int32_t yb;
    memcpy(&yb, &y, sizeof yb);
    yb += (int32_t)((uint32_t)ni << 23);
    memcpy(&y, &yb, sizeof y);
    y = x < lo ? 0.0f : y;
    return x > hi ? (float)INFINITY : y;
}
static inline double fast_exp_f64(double x) { return exp(x); }
/* Vectorisable tanh (within 3e-7 relative, exact near 0) */
static inline float fast_tanh_f32(float x) {
    const float c = 7.90531110763549805f; /* tanh rounds to +-1 beyond */
    float xc = x > c ? c : x;
    xc = xc < -c ? -c : xc;
    float x2 = xc * xc;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    float y = xc * p / q;
    return fabsf(x) < 0.0004f ? x : y; /* tanh x = x to float precision */
}
static inline double fast_tanh_f64(double x) { return tanh(x); }
/* erf for f32: Eigen's odd 9/12 rational approximation, clamped to +-1 where erf rounds
 * there; within 4.3e-7 (7 ulp near +-1, where 1 + erf loses digits anyway), NaN propagates. */
static inline float fast_erf_f32(float x) {
    const float c = 3.832506856900711f; /* erf rounds to +-1 beyond */
    float x2 = x * x;
    float p = 0.00022905065861350646f;
    p = p * x2 + 0.0034082910107109506f;
    p = p * x2 + 0.050955695062380861f;
    p = p * x2 + 0.18520832239976145f;
    p = p * x2 + 1.128379143519084f;
    float q = -1.1791602954361697e-7f;
    q = q * x2 + 0.000023547966471313185f;
    q = q * x2 + 0.0010179625278914885f;
    q = q * x2 + 0.014070470171167667f;
    q = q * x2 + 0.11098505178285362f;
    q = q * x2 + 0.49746925110067538f;
    q = q * x2 + 1.0f;
    float y = x * p / q;
    return fabsf(x) >= c ? copysignf(1.0f, x) : y;
}
static inline double fast_erf_f64(double x) { return erf(x); }

#endif
