/* The GEMM unit tests' helpers (gemm_check.h). */
#include "gemm_check.h"

#include <math.h>

#include "check.h"

float gemm_c0(int64_t i, int64_t j, int64_t N) { return (float)test_value((uint64_t)(i * N + j), 99); }

void gemm_reset_c(float *C, int64_t M, int64_t N, int64_t ldc, int from_values, float fill) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) C[i * ldc + j] = j >= N ? GEMM_SENTINEL : from_values ? gemm_c0(i, j, N) : fill;
}

double gemm_error(const float *C, int64_t ldc, const double *ref, int64_t M, int64_t N, float alpha, float beta) {
    double d = 0, mx = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double want = alpha * ref[i * N + j] + (beta != 0.0f ? beta * (double)gemm_c0(i, j, N) : 0.0);
            double e = fabs(C[i * ldc + j] - want);
            d = fmax(d, isnan(e) ? INFINITY : e);
            mx = fmax(mx, fabs(want));
        }
    return mx > 0 ? d / mx : d;
}

int gemm_padding_kept(const float *C, int64_t M, int64_t N, int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < ldc; j++)
            if (C[i * ldc + j] != GEMM_SENTINEL) return 0;
    return 1;
}
