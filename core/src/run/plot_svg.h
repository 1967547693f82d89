/* Private: the SVG document of `trainer plot` (docs/plot.md): curves against the optimizer
 * step on 1-2-5 ticks (plot_axis.h), axis titles, a title, a legend in the corner the curves
 * leave emptiest. A curve is a polyline per stretch of values it can draw (null, beyond
 * +-1e300 and on a log axis below 1e-300 are gaps); sparse curves (validations, epoch ends) get a marker at each point;
 * a curve of more points than 4 per pixel column keeps each column's first, lowest, highest
 * and last (it looks the same). Text is XML-escaped, bytes that are not UTF-8 become U+FFFD.
 *
 *   plot_curve c[] = {{.s = loss, .run = "m/0", .label = "loss", .colour = 0}};
 *   plot_frame f = {.width = 800, .height = 500, .title = "m/0", .y_title = "loss"};
 *   TR_CHECK(plot_svg_write(out, &f, c, 1)); */
#ifndef TRAINER_RUN_PLOT_SVG_H
#define TRAINER_RUN_PLOT_SVG_H

#include <stdio.h>

#include "run/plot_metrics.h"
#include "trainer/status.h"

typedef struct plot_curve {
    const plot_series *s;   /* borrowed */
    const char *run;        /* the run's label (data-run); borrowed */
    const char *label;      /* its legend entry; borrowed */
    int colour;             /* index into the palette (cycles) */
    int dash;               /* 0 solid, 1.. dash patterns (cycle) */
    int marker;             /* sparse curves: 0 circle, 1 square, 2 triangle, 3 diamond (cycle) */
} plot_curve;

typedef struct plot_frame {
    int width, height;      /* pixels */
    int log_y;
    const char *title;      /* borrowed */
    const char *y_title;    /* borrowed */
} plot_frame;

/* Writes the document to out. An error when no curve has a value to draw (naming none: the
 * caller knows what was asked). *left_out: the finite values no axis can hold (beyond +-1e300;
 * on a log axis, below 1e-300 as well: <= 0 among them), left out. */
tr_status plot_svg_write(FILE *out, const plot_frame *f, const plot_curve *c, int n, long *left_out);

#endif
