/* An axis of `trainer plot`: range, 1-2-5 ticks, labels, data to pixels (plot_axis.h). */
#include "run/plot_axis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* m x 10^e as the nearest double, as strtod reads "me" (2e-05 is exactly the literal 2e-5). */
static double decimal(int m, int e) {
    char s[32];
    snprintf(s, sizeof s, "%de%d", m, e);
    return strtod(s, NULL);
}

double plot_nice_step(double raw) {
    int e = (int)floor(log10(raw));
    static const int mantissa[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++) {
        double s = decimal(mantissa[i], e);
        if (s >= raw * (1 - 1e-9)) return s;
    }
    return decimal(1, e + 1);
}

void plot_axis_fit(plot_axis *a, double min, double max, int max_ticks, int integer) {
    if (max_ticks < 1) max_ticks = 1;
    if (max_ticks > PLOT_AXIS_MAX_TICKS - 2) max_ticks = PLOT_AXIS_MAX_TICKS - 2;
    double big = fmax(fabs(min), fabs(max));
    if (max - min <= big * 1e-9 || big < 1e-290) {
        /* One value (or values alike to 9 digits, or all but 0): a range around it that keeps
         * its sign. */
        double mid = min / 2 + max / 2, d = big >= 1e-290 ? big * 0.1 : 1;
        if (integer && d < 1) d = 1;
        max = mid + d;
        min = mid >= 0 && mid - d < 0 ? 0 : mid - d;
    }
    double step = plot_nice_step((max - min) / max_ticks);
    if (integer && step < 1) step = 1;
    /* Ticks are whole multiples of the step, computed from their index so that 0.1 x 3 is
     * the tick 0.3 (the nearest double to it), not 0.30000000000000004. */
    double k0 = floor(min / step + 1e-9), k1 = ceil(max / step - 1e-9), inverse = round(1 / step);
    *a = (plot_axis){.step = step};
    for (double k = k0; k <= k1 && a->n_ticks < PLOT_AXIS_MAX_TICKS; k++) /* 1/step whole: 3 / 10 = 0.3 */
        a->tick[a->n_ticks++] = step < 1 && inverse < 0x1p53 ? k / inverse : k * step;
    a->lo = a->tick[0];
    a->hi = a->tick[a->n_ticks - 1];
}

/* The 1-2-5 values of decades e0..e1 in turn, ascending: value i. */
static double one_two_five(int e0, int i) { return decimal((int[]){1, 2, 5}[i % 3], e0 + i / 3); }

void plot_axis_fit_log(plot_axis *a, double min, double max, int max_ticks) {
    if (max_ticks < 1) max_ticks = 1;
    if (max_ticks > PLOT_AXIS_MAX_TICKS - 2) max_ticks = PLOT_AXIS_MAX_TICKS - 2;
    int e0 = (int)floor(log10(min) + 1e-12), e1 = (int)ceil(log10(max) - 1e-12);
    if (e1 <= e0) e1 = e0 + 1;
    *a = (plot_axis){.log = 1};
    if (e1 - e0 <= 2) { /* 1, 2, 5 x 10^k: the range rounded out to them */
        int n = 3 * (e1 - e0) + 1, first = 0, last = n - 1;
        while (first + 1 < n && one_two_five(e0, first + 1) <= min * (1 + 1e-12)) first++;
        while (last - 1 >= 0 && one_two_five(e0, last - 1) >= max * (1 - 1e-12)) last--;
        if (last <= first) { /* one value on a tick: the ticks either side of it too */
            first = first > 0 ? first - 1 : first;
            last = first + 2;
        }
        for (int i = first; i <= last; i++) a->tick[a->n_ticks++] = one_two_five(e0, i);
    } else { /* every k-th decade */
        int k = (e1 - e0 + max_ticks - 1) / max_ticks;
        int d0 = (int)floor((double)e0 / k) * k, d1 = (int)ceil((double)e1 / k) * k;
        a->step = k;
        for (int e = d0; e <= d1 && a->n_ticks < PLOT_AXIS_MAX_TICKS; e += k) a->tick[a->n_ticks++] = decimal(1, e);
    }
    a->lo = a->tick[0];
    a->hi = a->tick[a->n_ticks - 1];
}

void plot_axis_place(plot_axis *a, double px_lo, double px_hi) {
    a->px_lo = px_lo;
    a->px_hi = px_hi;
}

double plot_axis_px(const plot_axis *a, double v) {
    double t = a->log ? (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo)) : (v - a->lo) / (a->hi - a->lo);
    return a->px_lo + t * (a->px_hi - a->px_lo);
}

const char *plot_axis_label(const plot_axis *a, double v, char buf[32]) {
    if (a->log) {
        snprintf(buf, 32, "%g", v);
        return buf;
    }
    if (fabs(v) < a->step * 1e-6) v = 0; /* no "-0.0" */
    double big = fmax(fabs(a->lo), fabs(a->hi));
    if (big >= 1e6 || a->step < 1e-4) { /* 2.5e+06, 5e-05: the digits the step needs */
        int digits = (int)floor(log10(big)) - (int)floor(log10(a->step) + 1e-9) + 1;
        snprintf(buf, 32, "%.*g", digits < 1 ? 1 : digits > 17 ? 17 : digits, v);
    } else {
        int decimals = a->step >= 1 ? 0 : (int)ceil(-log10(a->step) - 1e-9);
        snprintf(buf, 32, "%.*f", decimals, v);
    }
    return buf;
}
