/* The evaluation metrics (run/class_metrics.h, run/regress_metrics.h) on hand-checked cases:
 * scikit-learn's documented f1_score/precision_score/recall_score example, zero division
 * (a class never predicted scores 0), a class absent from labels and predictions left out of
 * the macro averages as scikit-learn's default labels leave it; regression sums of labels far
 * from 0 against a two-pass reference in double, several targets averaged, constant labels
 * (R^2 1 when exact, else 0), and counts split over 3 "ranks" merging to the whole. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "run/class_metrics.h"
#include "run/regress_metrics.h"

static void scores_of(class_scores *s, int64_t C, const int *label, const int *pred, int n) {
    class_counts cc;
    CHECK(class_counts_init(&cc, C, 1) == TR_OK, "init: %s", tr_error_msg());
    for (int i = 0; i < n; i++) class_counts_add(&cc, label[i], pred[i]);
    CHECK(class_scores_compute(s, &cc) == TR_OK, "scores: %s", tr_error_msg());
    class_counts_free(&cc);
}

static void classification(void) {
    /* sklearn.metrics.f1_score's docstring: y_true [0, 1, 2, 0, 1, 2], y_pred [0, 2, 1, 0, 0, 1]:
     * macro F1 0.26666..., weighted 0.26666...; precision_score macro 0.22222...; recall 0.33333... */
    const int y[] = {0, 1, 2, 0, 1, 2}, p[] = {0, 2, 1, 0, 0, 1};
    class_scores s;
    scores_of(&s, 3, y, p, 6);
    CHECK_NEAR(s.f1_macro, 0.26666666666666666, 1e-15);
    CHECK_NEAR(s.f1_weighted, 0.26666666666666666, 1e-15);
    CHECK_NEAR(s.precision_macro, 0.2222222222222222, 1e-15);
    CHECK_NEAR(s.recall_macro, 0.3333333333333333, 1e-15);
    CHECK_NEAR(s.accuracy, 1.0 / 3.0, 1e-15);
    CHECK_NEAR(s.f1[0], 0.8, 1e-15);
    CHECK(s.present == 3 && s.total == 6, "present %lld, total %g", (long long)s.present, s.total);
    class_scores_free(&s);

    /* Zero division: class 1 is never predicted (precision 0, not NaN); F1 [2/3, 0]. */
    const int y2[] = {0, 0, 1, 1}, p2[] = {0, 0, 0, 0};
    scores_of(&s, 2, y2, p2, 4);
    CHECK_NEAR(s.precision[1], 0.0, 0);
    CHECK_NEAR(s.precision[0], 0.5, 1e-15);
    CHECK_NEAR(s.f1_macro, 1.0 / 3.0, 1e-15);
    CHECK_NEAR(s.precision_weighted, 0.25, 1e-15);
    CHECK_NEAR(s.recall_weighted, 0.5, 1e-15);
    class_scores_free(&s);

    /* Class 3 of 4 occurs nowhere: the macro averages are the 3-class ones above; class 2 is
     * only predicted (support 0): it counts in the macro average, with recall 0. */
    scores_of(&s, 4, y, p, 6);
    CHECK(s.present == 3, "present %lld", (long long)s.present);
    CHECK_NEAR(s.f1_macro, 0.26666666666666666, 1e-15);
    class_scores_free(&s);
    const int y3[] = {0, 0, 1}, p3[] = {0, 2, 1};
    scores_of(&s, 3, y3, p3, 3);
    /* precision [1, 1, 0], recall [0.5, 1, 0]: macro over 3 present classes */
    CHECK_NEAR(s.precision_macro, 2.0 / 3.0, 1e-15);
    CHECK_NEAR(s.recall_macro, 0.5, 1e-15);
    CHECK_NEAR(s.f1_macro, (2.0 / 3.0 + 1.0 + 0.0) / 3.0, 1e-15);
    class_scores_free(&s);

    /* The matrix: rows labels, columns predictions; a split over ranks sums to the whole. */
    class_counts a, b;
    CHECK(class_counts_init(&a, 3, 1) == TR_OK && class_counts_init(&b, 3, 1) == TR_OK, "init");
    for (int i = 0; i < 6; i++) class_counts_add(i < 4 ? &a : &b, y[i], p[i]);
    for (int64_t i = 0; i < a.n; i++) a.v[i] += b.v[i];
    CHECK(class_counts_cell(&a, 1, 2) == 1 && class_counts_cell(&a, 2, 1) == 2 && class_counts_cell(&a, 0, 0) == 2 &&
              class_counts_cell(&a, 1, 0) == 1 && class_counts_cell(&a, 2, 2) == 0,
          "confusion matrix cells");
    class_counts_free(&a);
    class_counts_free(&b);
    /* Past CLASS_MATRIX_MAX the matrix is not kept; the scores still are. */
    CHECK(class_counts_init(&a, CLASS_MATRIX_MAX + 1, 1) == TR_OK && !a.matrix && a.n == 3 * (CLASS_MATRIX_MAX + 1),
          "no matrix past %d classes", CLASS_MATRIX_MAX);
    class_counts_free(&a);
    CHECK(class_counts_init(&a, 0, 1) != TR_OK, "0 classes refused");
}

/* Two-pass reference of n samples of K targets. */
static void reference(const float *y, const float *p, int64_t n, int64_t K, double *mae, double *rmse, double *r2) {
    *mae = *rmse = *r2 = 0;
    for (int64_t k = 0; k < K; k++) {
        double mean = 0, ae = 0, se = 0, tot = 0;
        for (int64_t i = 0; i < n; i++) mean += y[i * K + k];
        mean /= (double)n;
        for (int64_t i = 0; i < n; i++) {
            double e = (double)p[i * K + k] - y[i * K + k], d = y[i * K + k] - mean;
            ae += fabs(e);
            se += e * e;
            tot += d * d;
        }
        *mae += ae / (double)n / (double)K;
        *rmse += sqrt(se / (double)n) / (double)K;
        *r2 += (tot > 0 ? 1 - se / tot : se == 0 ? 1 : 0) / (double)K;
    }
}

static void regression(void) {
    enum { N = 257, K = 2 };
    static float y[N * K], p[N * K];
    for (int i = 0; i < N; i++) {
        y[i * K] = (float)(1e5 + 3 * test_value((uint64_t)i, 1)); /* far from 0: a naive sum of squares cancels */
        p[i * K] = y[i * K] + (float)(0.5 * test_value((uint64_t)i, 2));
        y[i * K + 1] = (float)test_value((uint64_t)i, 3);
        p[i * K + 1] = (float)(0.8 * y[i * K + 1] + 0.1);
    }
    double mae, rmse, r2;
    reference(y, p, N, K, &mae, &rmse, &r2);
    regress_sums r;
    CHECK(regress_sums_init(&r, K) == TR_OK, "init");
    for (int i = 0; i < N; i += 50) regress_sums_add(&r, y + i * K, p + i * K, N - i < 50 ? N - i : 50);
    regress_scores s;
    regress_scores_of(&r, &s);
    CHECK_NEAR(s.mae, mae, 1e-12);
    CHECK_NEAR(s.rmse, rmse, 1e-12);
    CHECK_NEAR(s.r2, r2, 1e-9);
    CHECK(r2 > 0.5 && r2 < 1, "a meaningful R^2: %g", r2);

    /* Three ranks (the last one empty), packed, summed and merged: the same scores. */
    enum { W = 3 };
    regress_sums part[W];
    int64_t at[W + 1] = {0, 100, N, N};
    double *buf[W], *sum = calloc((size_t)regress_sums_packed(&r, W), sizeof *sum);
    for (int w = 0; w < W; w++) {
        CHECK(regress_sums_init(&part[w], K) == TR_OK, "init");
        regress_sums_add(&part[w], y + at[w] * K, p + at[w] * K, at[w + 1] - at[w]);
        buf[w] = malloc((size_t)regress_sums_packed(&r, W) * sizeof *buf[w]);
        regress_sums_pack(&part[w], w, W, buf[w]);
        for (int64_t i = 0; i < regress_sums_packed(&r, W); i++) sum[i] += buf[w][i];
    }
    regress_sums_unpack(&part[0], W, sum);
    regress_scores s3;
    regress_scores_of(&part[0], &s3);
    CHECK_NEAR(s3.mae, mae, 1e-12);
    CHECK_NEAR(s3.rmse, rmse, 1e-12);
    CHECK_NEAR(s3.r2, r2, 1e-9);
    CHECK(part[0].n == N, "merged count %g", part[0].n);
    for (int w = 0; w < W; w++) {
        regress_sums_free(&part[w]);
        free(buf[w]);
    }
    free(sum);
    regress_sums_free(&r);

    /* Constant labels: R^2 1 when predicted exactly, else 0 (r2_score's force_finite). */
    const float c[] = {2, 2, 2}, off[] = {2, 2, 3};
    CHECK(regress_sums_init(&r, 1) == TR_OK, "init");
    regress_sums_add(&r, c, c, 3);
    regress_scores_of(&r, &s);
    CHECK_NEAR(s.r2, 1.0, 0);
    CHECK_NEAR(s.mae, 0.0, 0);
    regress_sums_free(&r);
    CHECK(regress_sums_init(&r, 1) == TR_OK, "init");
    regress_sums_add(&r, c, off, 3);
    regress_scores_of(&r, &s);
    CHECK_NEAR(s.r2, 0.0, 0);
    CHECK_NEAR(s.rmse, sqrt(1.0 / 3.0), 1e-15);
    regress_sums_free(&r);
    /* No samples: not a number. */
    CHECK(regress_sums_init(&r, 1) == TR_OK, "init");
    regress_scores_of(&r, &s);
    CHECK(isnan(s.mae) && isnan(s.r2), "no samples: NaN");
    regress_sums_free(&r);
}

int main(void) {
    classification();
    regression();
    return test_finish();
}
