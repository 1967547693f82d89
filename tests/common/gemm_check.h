/* Helpers for the GEMM unit tests (tests/unit/gemm_*.c): C's initial values, a sentinel in
 * each row's padding past N, and C's error against a double reference. */
#ifndef TRAINER_TEST_GEMM_CHECK_H
#define TRAINER_TEST_GEMM_CHECK_H

#include <stdint.h>

/* A test product: op(A) (M, K) and op(B) (K, N) filled with test values, stored transposed
 * where ta / tb say, leading dimensions wider than the matrices (lda, ldb, ldc), C (M rows of
 * ldc), and op(A) op(B) summed in double: of the values as stored (ref32, or ref when round is
 * NULL) and, with round, of their roundings (ref). */
typedef struct gemm_mats {
    int ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    float *A, *B, *C;
    double *ref, *ref32; /* ref32: NULL without round */
} gemm_mats;
void gemm_mats_make(gemm_mats *m, int ta, int tb, int64_t M, int64_t N, int64_t K, uint64_t salt, float (*round)(float));
void gemm_mats_drop(gemm_mats *m);

/* What each row of C holds past N: a GEMM must leave it. */
#define GEMM_SENTINEL 12345.0f

/* C's initial value at (i, j) (the C0 of beta C0). */
float gemm_c0(int64_t i, int64_t j, int64_t N);
/* C (M rows of ldc) set to gemm_c0 (from_values) or to fill in its N columns, and to the
 * sentinel past them. */
void gemm_reset_c(float *C, int64_t M, int64_t N, int64_t ldc, int from_values, float fill);
/* max |C - (alpha ref + beta C0)| / max |alpha ref + beta C0|, ref (M, N) row-major; NaN in C
 * counts as infinitely wrong. */
double gemm_error(const float *C, int64_t ldc, const double *ref, int64_t M, int64_t N, float alpha, float beta);
/* Whether every row's padding past N still holds the sentinel. */
int gemm_padding_kept(const float *C, int64_t M, int64_t N, int64_t ldc);

#endif
