/* trainer plot's axes (run/plot_axis.h): 1-2-5 steps, ranges rounded out to ticks, exact tick
 * values, a single value, integer (step) axes, log10 axes over a decade and over many, the map
 * to pixels and the tick labels. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "run/plot_axis.h"

static void check_ticks(const plot_axis *a, const double *want, int n, const char *what) {
    CHECK(a->n_ticks == n, "%s: %d ticks, expected %d", what, a->n_ticks, n);
    for (int i = 0; i < n && i < a->n_ticks; i++)
        CHECK(a->tick[i] == want[i], "%s: tick %d = %.17g, expected %.17g", what, i, a->tick[i], want[i]);
    if (a->n_ticks > 0) {
        CHECK(a->lo == a->tick[0] && a->hi == a->tick[a->n_ticks - 1], "%s: range %g..%g is not the ticks' %g..%g", what,
              a->lo, a->hi, a->tick[0], a->tick[a->n_ticks - 1]);
    }
}

static void check_label(const plot_axis *a, double v, const char *want) {
    char buf[32];
    const char *got = plot_axis_label(a, v, buf);
    CHECK(strcmp(got, want) == 0, "label of %.17g: '%s', expected '%s'", v, got, want);
}

static void nice_steps(void) {
    static const double raw[] = {0.7, 1, 1.01, 2, 3, 5, 5.5, 0.013, 1234, 3e-5, 0.378};
    static const double want[] = {1, 1, 2, 2, 5, 5, 10, 0.02, 2000, 5e-5, 0.5};
    for (int i = 0; i < 11; i++) {
        double s = plot_nice_step(raw[i]);
        CHECK(s == want[i], "plot_nice_step(%g) = %.17g, expected %g", raw[i], s, want[i]);
    }
}

static void linear(void) {
    plot_axis a;
    plot_axis_fit(&a, 0.043, 2.31, 6, 0); /* a loss curve */
    check_ticks(&a, (double[]){0, 0.5, 1, 1.5, 2, 2.5}, 6, "loss 0.043..2.31");
    CHECK(a.step == 0.5, "step %g", a.step);
    check_label(&a, 0.5, "0.5");
    check_label(&a, 2, "2.0");
    check_label(&a, -0.0, "0.0"); /* never "-0.0" */
    plot_axis_place(&a, 420, 40);
    CHECK_NEAR(plot_axis_px(&a, 1.0), 268, 1e-9);
    CHECK_NEAR(plot_axis_px(&a, 0), 420, 1e-9);
    CHECK_NEAR(plot_axis_px(&a, 2.5), 40, 1e-9);
    CHECK_NEAR(plot_axis_px(&a, 0.043), 420 - 0.043 / 2.5 * 380, 1e-9);

    plot_axis_fit(&a, 0, 0.3, 3, 0); /* ticks from their index: 3 x 0.1 is the literal 0.3 */
    check_ticks(&a, (double[]){0, 0.1, 0.2, 0.3}, 4, "0..0.3");

    plot_axis_fit(&a, 0.61, 0.987, 6, 0); /* accuracy */
    check_ticks(&a, (double[]){0.6, 0.7, 0.8, 0.9, 1.0}, 5, "accuracy 0.61..0.987");
    check_label(&a, 0.7, "0.7");

    plot_axis_fit(&a, -1, 1, 4, 0);
    check_ticks(&a, (double[]){-1, -0.5, 0, 0.5, 1}, 5, "-1..1");

    plot_axis_fit(&a, 0, 2.4e6, 5, 0); /* samples_per_sec */
    check_ticks(&a, (double[]){0, 5e5, 1e6, 1.5e6, 2e6, 2.5e6}, 6, "0..2.4e6");
    check_label(&a, 1.5e6, "1.5e+06");
    check_label(&a, 0, "0");

    plot_axis_fit(&a, 1e-5, 2.9e-4, 6, 0); /* a learning rate */
    CHECK(a.step == 5e-5, "lr step %g", a.step);
    check_label(&a, 1.5e-4, "0.00015");
    check_label(&a, 5e-5, "5e-05");
}

static void integer_and_single(void) {
    plot_axis a;
    plot_axis_fit(&a, 1, 97, 7, 1); /* steps */
    check_ticks(&a, (double[]){0, 20, 40, 60, 80, 100}, 6, "steps 1..97");
    check_label(&a, 40, "40");
    plot_axis_fit(&a, 1, 3, 8, 1); /* no step between steps */
    check_ticks(&a, (double[]){1, 2, 3}, 3, "steps 1..3");
    plot_axis_fit(&a, 5, 5, 6, 1); /* one step: a step either side */
    check_ticks(&a, (double[]){4, 5, 6}, 3, "step 5 alone");
    plot_axis_fit(&a, 0, 0, 5, 0); /* zero alone: a range that stays >= 0 */
    check_ticks(&a, (double[]){0, 0.2, 0.4, 0.6, 0.8, 1}, 6, "0 alone");
    plot_axis_fit(&a, -3, -3, 2, 0);
    CHECK(a.lo <= -3.3 + 1e-12 && a.hi >= -2.7 - 1e-12 && a.hi <= 0, "-3 alone: %g..%g", a.lo, a.hi);
    plot_axis_fit(&a, 1, 1 + 1e-15, 6, 0); /* alike to 15 digits: as one value */
    CHECK(a.n_ticks >= 2 && a.lo <= 0.9 && a.hi >= 1.1 && a.hi <= 1.5, "1 and 1+1e-15: %g..%g", a.lo, a.hi);
    plot_axis_fit(&a, 1e10, 1e10 + 1e-5, 6, 0);
    CHECK(a.n_ticks >= 2 && a.lo < 1e10 && a.hi > 1e10 + 1e-5, "1e10 and 1e10+1e-5: %g..%g", a.lo, a.hi);
    plot_axis_fit(&a, 5e-324, 1e-320, 6, 0); /* denormals: as 0 */
    check_ticks(&a, (double[]){0, 0.2, 0.4, 0.6, 0.8, 1}, 6, "denormals");
    plot_axis_fit(&a, -1e300, 1e300, 6, 0); /* the widest values an axis holds */
    CHECK(a.n_ticks >= 3 && a.lo <= -1e300 && a.hi >= 1e300 && isfinite(a.lo) && isfinite(a.hi) &&
          isfinite(a.hi - a.lo), "-1e300..1e300: %g..%g", a.lo, a.hi);
    plot_axis_place(&a, 0, 100);
    CHECK_NEAR(plot_axis_px(&a, 0), 50, 1e-9);
    plot_axis_fit(&a, 0, 1e9, 1000, 1); /* more ticks than fit: at most PLOT_AXIS_MAX_TICKS */
    CHECK(a.n_ticks <= PLOT_AXIS_MAX_TICKS && a.hi >= 1e9, "%d ticks up to %g", a.n_ticks, a.hi);
}

static void logarithmic(void) {
    plot_axis a;
    plot_axis_fit_log(&a, 0.0123, 2.4, 6); /* three decades: a tick a decade */
    check_ticks(&a, (double[]){0.01, 0.1, 1, 10}, 4, "log 0.0123..2.4");
    CHECK(a.log == 1 && a.step == 1, "log %d step %g", a.log, a.step);
    plot_axis_place(&a, 0, 300);
    CHECK_NEAR(plot_axis_px(&a, 0.1), 100, 1e-9);
    CHECK_NEAR(plot_axis_px(&a, 1), 200, 1e-9);
    CHECK_NEAR(plot_axis_px(&a, sqrt(10)), 250, 1e-9);
    check_label(&a, 0.01, "0.01");
    check_label(&a, 10, "10");

    plot_axis_fit_log(&a, 0.3, 0.9, 6); /* within a decade: 1, 2, 5 */
    check_ticks(&a, (double[]){0.2, 0.5, 1}, 3, "log 0.3..0.9");
    CHECK(a.step == 0, "1-2-5 ticks: step %g", a.step);

    plot_axis_fit_log(&a, 0.2, 5, 6); /* two decades, on ticks at both ends */
    check_ticks(&a, (double[]){0.2, 0.5, 1, 2, 5}, 5, "log 0.2..5");
    plot_axis_fit_log(&a, 0.2, 50, 6); /* three decades: decades again */
    check_ticks(&a, (double[]){0.1, 1, 10, 100}, 4, "log 0.2..50");

    plot_axis_fit_log(&a, 1e-6, 1e3, 4); /* nine decades, four ticks: every third */
    check_ticks(&a, (double[]){1e-6, 1e-3, 1, 1e3}, 4, "log 1e-6..1e3");
    CHECK(a.step == 3, "decades between ticks %g", a.step);
    check_label(&a, 1e-6, "1e-06");
    check_label(&a, 1e-3, "0.001");

    plot_axis_fit_log(&a, 1e-300, 1e300, 6); /* the widest a log axis holds */
    CHECK(a.n_ticks >= 2 && a.n_ticks <= 8 && a.lo == 1e-300 && a.hi == 1e300 && a.step == 100,
          "log 1e-300..1e300: %d ticks %g..%g every %g decades", a.n_ticks, a.lo, a.hi, a.step);
    plot_axis_fit_log(&a, 100, 100, 6); /* one value */
    CHECK(a.n_ticks >= 2 && a.lo <= 100 && a.hi > 100, "log 100 alone: %g..%g", a.lo, a.hi);
}

int main(void) {
    nice_steps();
    linear();
    integer_and_single();
    logarithmic();
    return test_finish();
}
