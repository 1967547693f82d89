/* Private: an axis of `trainer plot` (docs/plot.md): the range shown, its ticks and their
 * labels, and the map from data to pixels. Linear axes round their range out to ticks 1, 2 or
 * 5 x 10^k apart; log10 axes put their ticks at 1, 2 and 5 x 10^k over up to two decades, at
 * every decade (or every k-th) over more.
 *
 *   plot_axis a;
 *   plot_axis_fit(&a, 0.043, 2.31, 6, 0);          // range 0 .. 2.5, ticks 0, 0.5, ... 2.5
 *   plot_axis_place(&a, 420, 40);                  // pixels of 0 and 2.5 (y grows down)
 *   double y = plot_axis_px(&a, 1.0);              // 268
 *   char buf[32]; plot_axis_label(&a, a.tick[1], buf);   // "0.5" */
#ifndef TRAINER_RUN_PLOT_AXIS_H
#define TRAINER_RUN_PLOT_AXIS_H

#define PLOT_AXIS_MAX_TICKS 32

typedef struct plot_axis {
    int log;                          /* a log10 scale */
    double lo, hi;                    /* the range shown, in data units (log: both > 0) */
    double step;                      /* linear: the ticks' spacing; log: decades between ticks (0: 1-2-5 ticks) */
    int n_ticks;
    double tick[PLOT_AXIS_MAX_TICKS]; /* in data units, ascending, inside [lo, hi] */
    double px_lo, px_hi;              /* the pixels of lo and hi */
} plot_axis;

/* The smallest 1, 2 or 5 x 10^k at least `raw` (> 0). */
double plot_nice_step(double raw);
/* A linear axis over [min, max] (min <= max, both within +-1e300) with at most max_ticks + 2
 * ticks; integer: its step is at least 1 (optimizer steps). A single value (or values alike
 * to 9 digits) gets a range around it. */
void plot_axis_fit(plot_axis *a, double min, double max, int max_ticks, int integer);
/* A log10 axis over [min, max] (1e-300 <= min <= max <= 1e300). */
void plot_axis_fit_log(plot_axis *a, double min, double max, int max_ticks);
/* Sets the pixels of the range's ends. */
void plot_axis_place(plot_axis *a, double px_lo, double px_hi);
/* The pixel of v (log: v > 0). */
double plot_axis_px(const plot_axis *a, double v);
/* A tick's label, as short as the ticks' spacing allows ("0.5", "250", "1e-05", "2e+06"). */
const char *plot_axis_label(const plot_axis *a, double v, char buf[32]);

#endif
