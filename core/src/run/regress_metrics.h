/* Private: regression metrics of an evaluation (docs/config.md "trainer eval"): MAE, RMSE and
 * R^2 of K targets, each the mean over the targets of the target's own value (scikit-learn's
 * mean_absolute_error, root_mean_squared_error and r2_score with multioutput
 * 'uniform_average'; a target whose labels are all equal has R^2 1 when predicted exactly,
 * else 0, as r2_score's force_finite).
 *
 *   regress_sums r;
 *   TR_CHECK(regress_sums_init(&r, K));
 *   regress_sums_add(&r, labels, predictions, rows);      // per batch, (rows, K) each
 *   double *buf = malloc(regress_sums_packed(&r, W) * sizeof *buf);
 *   regress_sums_pack(&r, rank, W, buf); all_sum(buf); regress_sums_unpack(&r, W, buf);
 *   regress_scores s; regress_scores_of(&r, &s);
 *
 * The labels' spread is kept as count, mean and sum of squared deviations, merged batch by
 * batch and rank by rank with Chan et al.'s pairwise update: no cancellation when the labels
 * sit far from 0. */
#ifndef TRAINER_RUN_REGRESS_METRICS_H
#define TRAINER_RUN_REGRESS_METRICS_H

#include <stdint.h>

#include "trainer/status.h"

typedef struct regress_sums {
    int64_t K;
    double n;            /* samples */
    double *v;           /* (4K) owned: |error| sums (K), squared error sums (K), label means
                          * (K), labels' squared deviations from their mean (K) */
} regress_sums;

tr_status regress_sums_init(regress_sums *r, int64_t K);
/* rows samples: labels and predictions (rows, K) each. */
void regress_sums_add(regress_sums *r, const float *labels, const float *pred, int64_t rows);
/* Doubles in the packed form for a world of W ranks. */
int64_t regress_sums_packed(const regress_sums *r, int W);
/* Rank `rank`'s sums into out (zeros where the other ranks' go): a sum over the ranks of
 * their packed forms is what regress_sums_unpack reads. */
void regress_sums_pack(const regress_sums *r, int rank, int W, double *out);
/* The sums of every rank, merged in rank order, into r. */
void regress_sums_unpack(regress_sums *r, int W, const double *in);
void regress_sums_free(regress_sums *r);

typedef struct regress_scores {
    double mae, rmse, r2;   /* NAN without samples */
} regress_scores;

void regress_scores_of(const regress_sums *r, regress_scores *out);

#endif
