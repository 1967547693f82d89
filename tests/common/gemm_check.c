/* The GEMM unit tests' helpers (gemm_check.h). */
#include "gemm_check.h"

#include <math.h>
#include <stdlib.h>

#include "check.h"

void gemm_mats_make(gemm_mats *m, int ta, int tb, int64_t M, int64_t N, int64_t K, uint64_t salt, float (*round)(float)) {
    m->ta = ta, m->tb = tb, m->M = M, m->N = N, m->K = K;
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    m->lda = ac + 3, m->ldb = bc + 5, m->ldc = N + 7;
    m->A = malloc((size_t)(ar * m->lda) * sizeof(float));
    m->B = malloc((size_t)(br * m->ldb) * sizeof(float));
    m->C = malloc((size_t)(M * m->ldc) * sizeof(float));
    m->ref = malloc((size_t)(M * N) * sizeof(double));
    m->ref32 = round ? malloc((size_t)(M * N) * sizeof(double)) : NULL;
    CHECK(m->A && m->B && m->C && m->ref && (m->ref32 || !round), "out of memory");
    for (int64_t i = 0; i < ar * m->lda; i++) m->A[i] = (float)test_value((uint64_t)i, salt);
    for (int64_t i = 0; i < br * m->ldb; i++) m->B[i] = (float)test_value((uint64_t)i, salt + 1);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, s32 = 0;
            for (int64_t k = 0; k < K; k++) {
                float a = ta ? m->A[k * m->lda + i] : m->A[i * m->lda + k];
                float b = tb ? m->B[j * m->ldb + k] : m->B[k * m->ldb + j];
                s32 += (double)a * (double)b;
                if (round) s += (double)round(a) * (double)round(b);
            }
            m->ref[i * N + j] = round ? s : s32;
            if (round) m->ref32[i * N + j] = s32;
        }
}

void gemm_mats_drop(gemm_mats *m) { free(m->A), free(m->B), free(m->C), free(m->ref), free(m->ref32); }

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
