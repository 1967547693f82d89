/* Private: classification metrics of an evaluation (docs/config.md "trainer eval").
 *
 *   class_counts cc;
 *   TR_CHECK(class_counts_init(&cc, C, 1));       // 1: keep the confusion matrix too
 *   class_counts_add(&cc, label, prediction);     // per sample
 *   all_sum(cc.v, cc.n);                          // one reduction over ranks
 *   class_scores s;
 *   TR_CHECK(class_scores_compute(&s, &cc));      // s.f1_macro, s.precision[c], ...
 *
 * The counts are doubles, so one sum over ranks reduces them exactly (integers below 2^53).
 * The scores are scikit-learn's precision_recall_fscore_support with zero_division=0 and its
 * default labels: a class's precision is tp / predicted (0 when it is never predicted),
 * recall tp / support (0 without support), F1 2tp / (2tp + fp + fn) (0 when tp is 0); the
 * macro averages are over the classes that occur among the labels or the predictions, the
 * weighted ones weigh each class by its support. */
#ifndef TRAINER_RUN_CLASS_METRICS_H
#define TRAINER_RUN_CLASS_METRICS_H

#include <stdint.h>

#include "trainer/status.h"

/* Classes up to which an evaluation keeps the confusion matrix (C x C counts). */
#define CLASS_MATRIX_MAX 1024

typedef struct class_counts {
    int64_t C;
    int matrix;        /* the confusion matrix is kept */
    double *v;         /* (n) owned: tp (C), predicted (C), support (C), then the matrix
                        * (C, C) row label, column prediction, when kept */
    int64_t n;
} class_counts;

/* Zeroed counts of C classes (with the C x C matrix when `matrix`). */
tr_status class_counts_init(class_counts *cc, int64_t C, int matrix);
/* One sample of class `label` predicted as `pred` (both in [0, C)). */
void class_counts_add(class_counts *cc, int64_t label, int64_t pred);
/* The matrix's cell (label, pred); the counts must keep it. */
double class_counts_cell(const class_counts *cc, int64_t label, int64_t pred);
void class_counts_free(class_counts *cc);

typedef struct class_scores {
    int64_t C;
    double *precision, *recall, *f1, *support;  /* (C) each, one owned allocation */
    int64_t present;      /* classes among the labels or the predictions */
    double total;         /* samples */
    double accuracy;      /* NAN without samples */
    double precision_macro, recall_macro, f1_macro;           /* NAN without samples */
    double precision_weighted, recall_weighted, f1_weighted;  /* NAN without samples */
} class_scores;

tr_status class_scores_compute(class_scores *s, const class_counts *cc);
void class_scores_free(class_scores *s);

#endif
