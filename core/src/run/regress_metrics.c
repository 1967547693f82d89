/* Regression metrics from running sums (regress_metrics.h), in double. */
#include "run/regress_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tr_status regress_sums_init(regress_sums *r, int64_t K) {
    memset(r, 0, sizeof *r);
    if (K < 1) return tr_error_set(TR_ERR_INVALID, "metrics: %lld regression targets", (long long)K);
    r->K = K;
    r->v = calloc((size_t)(4 * K), sizeof *r->v);
    if (!r->v) return tr_error_set(TR_ERR_NOMEM, "metrics: out of memory for %lld targets", (long long)K);
    return TR_OK;
}

/* Merges a group of nb labels with mean mb and squared deviations m2b into target k's
 * (Chan, Golub and LeVeque's pairwise update); the caller adds nb to r->n afterwards. */
static void merge(regress_sums *r, int64_t k, double nb, double mb, double m2b) {
    double *mean = r->v + 2 * r->K, *m2 = r->v + 3 * r->K, na = r->n, n = na + nb;
    if (nb <= 0) return;
    double d = mb - mean[k];
    mean[k] += d * nb / n;
    m2[k] += m2b + d * d * na * nb / n;
}

void regress_sums_add(regress_sums *r, const float *labels, const float *pred, int64_t rows) {
    int64_t K = r->K;
    if (rows <= 0) return;
    for (int64_t k = 0; k < K; k++) {
        double ae = 0, se = 0, sum = 0, m2 = 0;
        for (int64_t i = 0; i < rows; i++) {
            double y = labels[i * K + k], e = (double)pred[i * K + k] - y;
            ae += fabs(e);
            se += e * e;
            sum += y;
        }
        double mb = sum / (double)rows;
        for (int64_t i = 0; i < rows; i++) {
            double d = labels[i * K + k] - mb;
            m2 += d * d;
        }
        r->v[k] += ae;
        r->v[K + k] += se;
        merge(r, k, (double)rows, mb, m2);
    }
    r->n += (double)rows;
}

/* Packed: the error sums (2K), summed over ranks as they are, then per rank a slot of its
 * count, means and squared deviations (1 + 2K), merged in order after the sum. */
int64_t regress_sums_packed(const regress_sums *r, int W) { return 2 * r->K + (int64_t)W * (1 + 2 * r->K); }

void regress_sums_pack(const regress_sums *r, int rank, int W, double *out) {
    int64_t K = r->K, slot = 1 + 2 * K;
    memset(out, 0, (size_t)regress_sums_packed(r, W) * sizeof *out);
    memcpy(out, r->v, (size_t)(2 * K) * sizeof *out);
    double *s = out + 2 * K + (int64_t)rank * slot;
    s[0] = r->n;
    memcpy(s + 1, r->v + 2 * K, (size_t)(2 * K) * sizeof *out);
}

void regress_sums_unpack(regress_sums *r, int W, const double *in) {
    int64_t K = r->K, slot = 1 + 2 * K;
    memset(r->v, 0, (size_t)(4 * K) * sizeof *r->v);
    memcpy(r->v, in, (size_t)(2 * K) * sizeof *r->v);
    r->n = 0;
    for (int w = 0; w < W; w++) {
        const double *s = in + 2 * K + (int64_t)w * slot;
        for (int64_t k = 0; k < K; k++) merge(r, k, s[0], s[1 + k], s[1 + K + k]);
        r->n += s[0];
    }
}

void regress_sums_free(regress_sums *r) {
    free(r->v);
    memset(r, 0, sizeof *r);
}

void regress_scores_of(const regress_sums *r, regress_scores *out) {
    int64_t K = r->K;
    if (r->n <= 0) {
        *out = (regress_scores){NAN, NAN, NAN};
        return;
    }
    double mae = 0, rmse = 0, r2 = 0;
    for (int64_t k = 0; k < K; k++) {
        double se = r->v[K + k], m2 = r->v[3 * K + k];
        mae += r->v[k] / r->n;
        rmse += sqrt(se / r->n);
        r2 += m2 > 0 ? 1.0 - se / m2 : se == 0 ? 1.0 : 0.0;
    }
    *out = (regress_scores){mae / (double)K, rmse / (double)K, r2 / (double)K};
}
