/* trainer plot's SVG (run/plot_svg.h) from series made here: a curve of more points than four
 * per pixel column thinned to each column's first, lowest, highest and last (its extremes
 * kept); null a gap, a point alone between gaps a dot; text escaped (XML's five, control
 * characters and bytes that are not UTF-8); the legend away from the curve; nothing to draw
 * an error. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "run/plot_svg.h"

static plot_series series(const char *metric, size_t n) {
    plot_series s = {.metric = (char *)metric, .n = n, .cap = n};
    s.key = calloc(n, sizeof *s.key);
    s.step = calloc(n, sizeof *s.step);
    s.value = calloc(n, sizeof *s.value);
    for (size_t i = 0; i < n; i++) s.key[i] = (int64_t)i + 1, s.step[i] = (double)i + 1;
    return s;
}

static void series_free(plot_series *s) {
    free(s->key);
    free(s->step);
    free(s->value);
}

static char *render(const plot_curve *c, int n, long *left_out, tr_status *st) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    plot_frame f = {.width = 800, .height = 500, .title = "t", .y_title = "loss"};
    *st = plot_svg_write(out, &f, c, n, left_out);
    fclose(out);
    return buf;
}

static size_t count(const char *s, const char *what) {
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* The points of the document's polylines, in order: x into xs, y into ys; their number. */
static size_t points(const char *svg, double *xs, double *ys, size_t cap) {
    size_t n = 0;
    for (const char *p = svg; (p = strstr(p, "<polyline points=\"")); ) {
        p += strlen("<polyline points=\"");
        while (*p != '"' && n < cap) {
            char *end;
            xs[n] = strtod(p, &end);
            ys[n++] = strtod(end + 1, &end);
            p = end + (*end == ' ');
        }
    }
    return n;
}

static void thinned(void) {
    plot_series s = series("loss", 20000);
    for (size_t i = 0; i < s.n; i++) s.value[i] = 1 + sin(0.37 * (double)i) * exp(-(double)i / 8000);
    s.value[12345] = 3; /* a spike: one column's highest */
    plot_curve c = {.s = &s, .run = "r/0", .label = "loss"};
    long left;
    tr_status st;
    char *svg = render(&c, 1, &left, &st);
    CHECK(st == TR_OK, "render: %s", tr_error_msg());
    static double xs[100000], ys[100000];
    size_t n = points(svg, xs, ys, 100000);
    CHECK(n > 1000 && n <= 4 * 800, "20000 points thinned to %zu (at most 4 a column)", n);
    double top = 1e9, bottom = -1e9;
    int ordered = 1;
    for (size_t i = 0; i < n; i++) {
        top = fmin(top, ys[i]);
        bottom = fmax(bottom, ys[i]);
        ordered &= i == 0 || xs[i] >= xs[i - 1];
    }
    CHECK(ordered, "thinned points in step order");
    /* The spike (3) and the lowest value keep their pixels: the curve spans the same height. */
    double lo = 1e9;
    for (size_t i = 0; i < s.n; i++) lo = fmin(lo, s.value[i]);
    const char *frame = strstr(svg, "class=\"frame\"");
    double fy = 0, fh = 0;
    if (frame) sscanf(strstr(frame, "y=\"") + 3, "%lf", &fy), sscanf(strstr(frame, "height=\"") + 8, "%lf", &fh);
    CHECK(fh > 0 && top < fy + fh && bottom > top + 0.5 * fh, "the spike and the lowest point kept: y %g..%g in a frame "
          "of %g from %g", top, bottom, fh, fy);
    CHECK(count(svg, "<circle") == 0, "a dense curve has no markers");
    free(svg);
    series_free(&s);
}

static void gaps_and_text(void) {
    plot_series s = series("a&b", 7);
    double v[] = {1, 2, NAN, 3, NAN, 2, 1};
    memcpy(s.value, v, sizeof v);
    plot_curve c = {.s = &s, .run = "x&<y>\"q'\x01\xff", .label = "<&>"};
    long left;
    tr_status st;
    char *svg = render(&c, 1, &left, &st);
    CHECK(st == TR_OK && left == 0, "render: %s", tr_error_msg());
    CHECK(count(svg, "<polyline") == 2, "two polylines either side of the gaps: %zu", count(svg, "<polyline"));
    CHECK(count(svg, "<circle") == 1, "a dot at the point alone between the gaps: %zu", count(svg, "<circle"));
    CHECK(strstr(svg, "data-run=\"x&amp;&lt;y&gt;&quot;q&apos;\xEF\xBF\xBD\xEF\xBF\xBD\"") != NULL,
          "the run's name escaped, its control character and stray byte as U+FFFD");
    CHECK(strstr(svg, "data-metric=\"a&amp;b\"") && strstr(svg, ">&lt;&amp;&gt;</text>"), "metric and label escaped");
    free(svg);

    for (size_t i = 0; i < s.n; i++) s.value[i] = NAN;
    svg = render(&c, 1, &left, &st);
    CHECK(st == TR_ERR_NOT_FOUND, "nothing to draw: an error (%d)", st);
    free(svg);
    series_free(&s);
}

static void legend_place(void) {
    plot_series s = series("val_accuracy", 50); /* rising: the top right is taken */
    for (size_t i = 0; i < s.n; i++) s.value[i] = (double)i / 49;
    s.sparse = 1;
    plot_curve c = {.s = &s, .run = "r/0", .label = "val_accuracy"};
    long left;
    tr_status st;
    char *svg = render(&c, 1, &left, &st);
    const char *leg = strstr(svg, "<g class=\"legend\">");
    double x = 0, y = 0;
    if (leg) sscanf(strstr(leg, "x=\"") + 3, "%lf", &x), sscanf(strstr(leg, "y=\"") + 3, "%lf", &y);
    CHECK(st == TR_OK && leg && x < 400 && y < 250, "the legend in the top left, off a rising curve: at %g,%g", x, y);
    CHECK(count(svg, "<circle") == 51, "a marker at each of the 50 points, and one in the legend: %zu",
          count(svg, "<circle"));
    free(svg);
    series_free(&s);
}

int main(void) {
    thinned();
    gaps_and_text();
    legend_place();
    return test_finish();
}
