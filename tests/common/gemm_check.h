/* Helpers for the GEMM unit tests (tests/unit/gemm_*.c): C's initial values, a sentinel in
 * each row's padding past N, and C's error against a double reference. */
#ifndef TRAINER_TEST_GEMM_CHECK_H
#define TRAINER_TEST_GEMM_CHECK_H

#include <stdint.h>

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
