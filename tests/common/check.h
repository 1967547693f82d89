/* Test helpers: value assertions that count failures, and llm.c-style tensor comparison.
 *
 *   CHECK(n == 3, "expected 3 items, got %d", n);
 *   CHECK_NEAR(loss, 2.302585, 1e-6);
 *   check_tensor("fc1.weight.grad", ours, ref, n, 1e-5);   // prints max|d|/max|ref|
 *   return test_finish();                                   // 0 if no check failed
 */
#ifndef TRAINER_TEST_CHECK_H
#define TRAINER_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

extern int test_failures;
extern int test_checks;

void test_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        test_checks++;                                                                        \
        if (!(cond)) test_fail_at(__FILE__, __LINE__, __VA_ARGS__);                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                 \
    do {                                                                                      \
        double ca_ = (double)(a), cb_ = (double)(b);                                          \
        test_checks++;                                                                        \
        if (!(ca_ - cb_ <= (tol) && cb_ - ca_ <= (tol)))                                      \
            test_fail_at(__FILE__, __LINE__, "%s = %.9g, expected %s = %.9g (tol %g)", #a,   \
                         ca_, #b, cb_, (double)(tol));                                        \
    } while (0)

/* Exits the test with status 77 (ctest's skip) after printing why. */
void test_skip(const char *why);

/* Relative error max|a - b| / max|b| over n floats (0 when both are all zero), printed with
 * the name; a failure when above tol or when any value is not finite. Returns the error. */
double check_tensor(const char *name, const float *ours, const float *ref, int64_t n,
                    double tol);
double check_tensor_f64(const char *name, const double *ours, const double *ref, int64_t n,
                        double tol);
/* The same normalised error, unchecked and unprinted: NaN when a value is not finite. */
double tensor_error(const float *ours, const float *ref, int64_t n);

struct tr_graph;
struct tr_tensor;
/* An op that must have failed: y is NULL, g holds an error whose message contains n1 (and n2
 * when not NULL). Resets g for the next case. */
void check_op_error(struct tr_graph *g, const char *file, int line, struct tr_tensor *y,
                    const char *n1, const char *n2);
#define CHECK_OP_ERROR(g, y, n1, n2) check_op_error((g), __FILE__, __LINE__, (y), (n1), (n2))

/* Prints "N passed, M failed" and returns the exit status. */
int test_finish(void);

/* A deterministic value in [-1, 1) for element i of input `salt` (a mixing hash: no state,
 * the same on every run and machine). */
double test_value(uint64_t i, uint64_t salt);
/* Every element i of host tensor t (f32 or f64) set to test_value(i, salt). */
void test_fill(struct tr_tensor *t, uint64_t salt);

#endif
