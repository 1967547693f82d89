/* Test helpers (see check.h). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include <string.h>

#include "check.h"
#include "trainer/graph.h"

int test_failures;
int test_checks;

void test_fail_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    test_failures++;
}

void test_skip(const char *why) {
    printf("SKIP: %s\n", why);
    exit(77);
}

static double rel_err(const char *name, double max_diff, double max_ref, int finite,
                      double tol) {
    double err = max_ref > 0 ? max_diff / max_ref : max_diff;
    test_checks++;
    int ok = finite && err <= tol;
    printf("%-40s max|d|/max|ref| = %.3e  (max|ref| %.3e)%s\n", name, err, max_ref,
           ok ? "" : "  <-- FAIL");
    if (!ok) {
        fprintf(stderr, "FAIL %s: relative error %.3e above %.1e%s\n", name, err, tol,
                finite ? "" : " (non-finite values)");
        test_failures++;
    }
    return err;
}

/* max|ours - ref| and max|ref|; whether every value is finite. */
static int diff_f32(const float *ours, const float *ref, int64_t n, double *md, double *mr) {
    int finite = 1;
    *md = *mr = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ours[i]) || !isfinite(ref[i])) finite = 0;
        double d = fabs((double)ours[i] - (double)ref[i]);
        if (d > *md) *md = d;
        if (fabs((double)ref[i]) > *mr) *mr = fabs((double)ref[i]);
    }
    return finite;
}

double check_tensor(const char *name, const float *ours, const float *ref, int64_t n,
                    double tol) {
    double md, mr;
    int finite = diff_f32(ours, ref, n, &md, &mr);
    return rel_err(name, md, mr, finite, tol);
}

double tensor_error(const float *ours, const float *ref, int64_t n) {
    double md, mr;
    if (!diff_f32(ours, ref, n, &md, &mr)) return NAN;
    return mr > 0 ? md / mr : md;
}

double check_tensor_f64(const char *name, const double *ours, const double *ref, int64_t n,
                        double tol) {
    double md = 0, mr = 0;
    int finite = 1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ours[i]) || !isfinite(ref[i])) finite = 0;
        double d = fabs(ours[i] - ref[i]);
        if (d > md) md = d;
        if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
    }
    return rel_err(name, md, mr, finite, tol);
}

int test_finish(void) {
    printf("%d passed, %d failed\n", test_checks - test_failures, test_failures);
    return test_failures ? 1 : 0;
}

void check_op_error(struct tr_graph *g, const char *file, int line, struct tr_tensor *y,
                    const char *n1, const char *n2) {
    const char *msg = tr_error_msg();
    test_checks++;
    if (y != NULL) test_fail_at(file, line, "expected NULL");
    else if (tr_graph_status(g) == TR_OK) test_fail_at(file, line, "no error recorded");
    else if (!strstr(msg, n1)) test_fail_at(file, line, "message '%s' lacks '%s'", msg, n1);
    else if (n2 && !strstr(msg, n2)) test_fail_at(file, line, "message '%s' lacks '%s'", msg, n2);
    tr_graph_reset(g);
}

double test_value(uint64_t i, uint64_t salt) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    return (double)(z >> 11) / (double)(1ull << 52) - 1.0;
}

void test_fill(tr_tensor *t, uint64_t salt) {
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = test_value((uint64_t)i, salt);
        if (t->dtype == TR_F64) ((double *)t->data)[i] = v;
        else ((float *)t->data)[i] = (float)v;
    }
}
