/* Classification metrics from per-class counts (class_metrics.h): scikit-learn's rules with
 * zero_division=0, in double. */
#include "run/class_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tr_status class_counts_init(class_counts *cc, int64_t C, int matrix) {
    memset(cc, 0, sizeof *cc);
    if (C < 1) return tr_error_set(TR_ERR_INVALID, "metrics: %lld classes", (long long)C);
    cc->C = C;
    cc->matrix = matrix && C <= CLASS_MATRIX_MAX;
    cc->n = 3 * C + (cc->matrix ? C * C : 0);
    cc->v = calloc((size_t)cc->n, sizeof *cc->v);
    if (!cc->v) return tr_error_set(TR_ERR_NOMEM, "metrics: out of memory for the counts of %lld classes", (long long)C);
    return TR_OK;
}

void class_counts_add(class_counts *cc, int64_t label, int64_t pred) {
    int64_t C = cc->C;
    cc->v[pred] += label == pred;
    cc->v[C + pred] += 1;
    cc->v[2 * C + label] += 1;
    if (cc->matrix) cc->v[3 * C + label * C + pred] += 1;
}

double class_counts_cell(const class_counts *cc, int64_t label, int64_t pred) {
    return cc->v[3 * cc->C + label * cc->C + pred];
}

void class_counts_free(class_counts *cc) {
    free(cc->v);
    memset(cc, 0, sizeof *cc);
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

tr_status class_scores_compute(class_scores *s, const class_counts *cc) {
    memset(s, 0, sizeof *s);
    int64_t C = cc->C;
    const double *tp = cc->v, *pred = cc->v + C, *sup = cc->v + 2 * C;
    s->C = C;
    s->precision = calloc((size_t)(4 * C), sizeof *s->precision);
    if (!s->precision) return tr_error_set(TR_ERR_NOMEM, "metrics: out of memory for the scores of %lld classes", (long long)C);
    s->recall = s->precision + C;
    s->f1 = s->recall + C;
    s->support = s->f1 + C;
    double hits = 0, pm = 0, rm = 0, fm = 0, pw = 0, rw = 0, fw = 0;
    for (int64_t c = 0; c < C; c++) {
        double fp = pred[c] - tp[c], fn = sup[c] - tp[c];
        s->precision[c] = ratio(tp[c], pred[c]);
        s->recall[c] = ratio(tp[c], sup[c]);
        s->f1[c] = ratio(2 * tp[c], 2 * tp[c] + fp + fn);
        s->support[c] = sup[c];
        s->total += sup[c];
        hits += tp[c];
        if (sup[c] > 0 || pred[c] > 0) {
            s->present++;
            pm += s->precision[c];
            rm += s->recall[c];
            fm += s->f1[c];
        }
        pw += s->precision[c] * sup[c];
        rw += s->recall[c] * sup[c];
        fw += s->f1[c] * sup[c];
    }
    if (s->total <= 0) {
        s->accuracy = s->precision_macro = s->recall_macro = s->f1_macro = NAN;
        s->precision_weighted = s->recall_weighted = s->f1_weighted = NAN;
        return TR_OK;
    }
    s->accuracy = hits / s->total;
    s->precision_macro = pm / (double)s->present;
    s->recall_macro = rm / (double)s->present;
    s->f1_macro = fm / (double)s->present;
    s->precision_weighted = pw / s->total;
    s->recall_weighted = rw / s->total;
    s->f1_weighted = fw / s->total;
    return TR_OK;
}

void class_scores_free(class_scores *s) {
    free(s->precision);
    memset(s, 0, sizeof *s);
}
