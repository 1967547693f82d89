/* The SVG document of `trainer plot` (plot_svg.h): frame, 1-2-5 ticks, curves, legend. Text
 * widths are estimated (7 px a character at 12 px), which the margins and the legend box
 * allow for; the picture is laid out for DejaVu Sans, Helvetica or Arial. */
#include "run/plot_svg.h"

#include <math.h>
#include <string.h>
#include <utf8proc.h>

#include "run/plot_axis.h"

#define CHAR_W 7.0   /* px per character of 12 px text, DejaVu Sans' average and then some */
#define ROW_H 18.0   /* px per legend entry */

/* matplotlib's default colours (Tableau 10): distinct, and readable on white. */
static const char *const PALETTE[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
static const char *const DASHES[] = {NULL, "7,4", "2,3", "9,3,2,3"};

typedef struct box {
    double x, y, w, h;
} box;

/* Values an axis can hold with room for its rounded-out ticks: up to +-1e300; on a log axis
 * from 1e-300. */
static int drawable(double v, int log) { return fabs(v) <= 1e300 && (!log || v >= 1e-300); }

/* Text as XML character data or an attribute value: & < > " ' escaped; control characters and
 * bytes that are not UTF-8 (a run folder's name may hold any) as U+FFFD. */
static void xml_text(FILE *out, const char *s) {
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t left = strlen(s);
    while (left > 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, (utf8proc_ssize_t)left, &cp);
        if (k <= 0 || (cp < 0x20 && cp != '\t') || cp == 0xFFFE || cp == 0xFFFF) {
            fputs("\xEF\xBF\xBD", out);
            k = k > 0 ? k : 1;
        } else if (cp == '&') {
            fputs("&amp;", out);
        } else if (cp == '<') {
            fputs("&lt;", out);
        } else if (cp == '>') {
            fputs("&gt;", out);
        } else if (cp == '"') {
            fputs("&quot;", out);
        } else if (cp == '\'') {
            fputs("&apos;", out);
        } else {
            fwrite(p, 1, (size_t)k, out);
        }
        p += k;
        left -= (size_t)k;
    }
}

static double text_w(const char *s) {
    double n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80; /* code points */
    return n * CHAR_W;
}

static void marker(FILE *out, int shape, double x, double y, double r) {
    switch (shape % 4) {
    case 0: fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.1f\"/>", x, y, r); break;
    case 1: fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.1f\" height=\"%.1f\"/>", x - r, y - r, 2 * r, 2 * r); break;
    case 2: fprintf(out, "<path d=\"M%.2f %.2fL%.2f %.2fL%.2f %.2fZ\"/>", x, y - 1.2 * r, x + 1.1 * r, y + 0.8 * r, x - 1.1 * r,
                    y + 0.8 * r); break;
    default: fprintf(out, "<path d=\"M%.2f %.2fL%.2f %.2fL%.2f %.2fL%.2f %.2fZ\"/>", x, y - 1.3 * r, x + 1.3 * r, y, x,
                     y + 1.3 * r, x - 1.3 * r, y); break;
    }
}

static void style(FILE *out, const plot_curve *c) {
    const char *colour = PALETTE[c->colour % 10], *dash = DASHES[c->dash % 4];
    fprintf(out, " stroke=\"%s\" fill=\"none\" stroke-width=\"1.6\" stroke-linejoin=\"round\" stroke-linecap=\"round\"",
            colour);
    if (dash) fprintf(out, " stroke-dasharray=\"%s\"", dash);
}

/* Points i0..i1-1 (all drawable) as one polyline. Over `thin` points, a pixel column's points
 * are its first, lowest, highest and last, in order (M4 aggregation: the same picture). */
static void polyline(FILE *out, const plot_series *s, size_t i0, size_t i1, const plot_axis *x, const plot_axis *y,
                     int thin) {
    fputs("<polyline points=\"", out);
    const char *sep = "";
    for (size_t i = i0; i < i1;) {
        size_t j = i + 1;
        double col = floor(plot_axis_px(x, s->step[i]));
        if (thin)
            while (j < i1 && floor(plot_axis_px(x, s->step[j])) == col) j++;
        size_t lo = i, hi = i;
        for (size_t k = i; k < j; k++) {
            if (s->value[k] < s->value[lo]) lo = k;
            if (s->value[k] > s->value[hi]) hi = k;
        }
        size_t keep[4] = {i, lo < hi ? lo : hi, lo < hi ? hi : lo, j - 1};
        for (int k = 0; k < 4; k++) {
            if (k > 0 && keep[k] == keep[k - 1]) continue;
            fprintf(out, "%s%.2f,%.2f", sep, plot_axis_px(x, s->step[keep[k]]), plot_axis_px(y, s->value[keep[k]]));
            sep = " ";
        }
        i = j;
    }
    fputs("\"/>\n", out);
}

static void curve(FILE *out, const plot_curve *c, const plot_axis *x, const plot_axis *y, double plot_w) {
    const plot_series *s = c->s;
    fputs("<g class=\"curve\" data-run=\"", out);
    xml_text(out, c->run);
    fputs("\" data-metric=\"", out);
    xml_text(out, s->metric);
    fputc('"', out);
    style(out, c);
    fputs(">\n", out);
    int thin = (double)s->n > 4 * plot_w;
    for (size_t i = 0; i < s->n;) { /* a polyline per stretch of drawable values */
        while (i < s->n && !drawable(s->value[i], y->log)) i++;
        size_t j = i;
        while (j < s->n && drawable(s->value[j], y->log)) j++;
        if (j - i > 1) polyline(out, s, i, j, x, y, thin);
        i = j;
    }
    /* Markers: every point of a sparse curve; a point alone between gaps of the others. */
    fprintf(out, "<g class=\"markers\" fill=\"%s\" stroke=\"none\">", PALETTE[c->colour % 10]);
    for (size_t i = 0; i < s->n; i++) {
        if (!drawable(s->value[i], y->log)) continue;
        int alone = (i == 0 || !drawable(s->value[i - 1], y->log)) && (i + 1 == s->n || !drawable(s->value[i + 1], y->log));
        if (s->sparse || alone)
            marker(out, s->sparse ? c->marker : 0, plot_axis_px(x, s->step[i]), plot_axis_px(y, s->value[i]),
                   s->sparse ? 3.2 : 2);
    }
    fputs("</g>\n</g>\n", out);
}

static void ticks(FILE *out, const plot_axis *a, int vertical, const box *p) {
    fprintf(out, "<g class=\"axis\" id=\"%s-axis\" data-scale=\"%s\" stroke=\"#333333\">\n", vertical ? "y" : "x",
            a->log ? "log" : "linear");
    for (int i = 0; i < a->n_ticks; i++) {
        char label[32];
        plot_axis_label(a, a->tick[i], label);
        double t = plot_axis_px(a, a->tick[i]);
        if (vertical)
            fprintf(out, "<g class=\"tick\"><line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>"
                         "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" stroke=\"none\" fill=\"#333333\">%s</text></g>\n",
                    p->x - 5, t, p->x, t, p->x - 8, t + 4, label);
        else
            fprintf(out, "<g class=\"tick\"><line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>"
                         "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" stroke=\"none\" fill=\"#333333\">%s</text></g>\n",
                    t, p->y + p->h, t, p->y + p->h + 5, t, p->y + p->h + 19, label);
    }
    fputs("</g>\n", out);
}

static void grid(FILE *out, const plot_axis *x, const plot_axis *y, const box *p) {
    fputs("<g class=\"grid\" stroke=\"#e8e8e8\" stroke-width=\"1\">\n", out);
    for (int i = 0; i < x->n_ticks; i++) {
        double t = plot_axis_px(x, x->tick[i]);
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", t, p->y, t, p->y + p->h);
    }
    for (int i = 0; i < y->n_ticks; i++) {
        double t = plot_axis_px(y, y->tick[i]);
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", p->x, t, p->x + p->w, t);
    }
    fputs("</g>\n", out);
}

/* The corner of the plot area (top right, top left, bottom right, bottom left) whose legend
 * box would cover the fewest points. */
static box legend_box(const plot_curve *c, int n, const plot_axis *x, const plot_axis *y, const box *p) {
    double w = 0;
    for (int i = 0; i < n; i++) w = fmax(w, text_w(c[i].label));
    w += 52;
    double h = n * ROW_H + 8, inset = 8;
    box best = {0}, b;
    long fewest = -1;
    for (int corner = 0; corner < 4; corner++) {
        b = (box){corner % 2 ? p->x + inset : p->x + p->w - inset - w, corner < 2 ? p->y + inset : p->y + p->h - inset - h,
                  w, h};
        long covered = 0;
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < c[i].s->n; k++) {
                if (!drawable(c[i].s->value[k], y->log)) continue;
                double px = plot_axis_px(x, c[i].s->step[k]), py = plot_axis_px(y, c[i].s->value[k]);
                covered += px >= b.x && px <= b.x + b.w && py >= b.y && py <= b.y + b.h;
            }
        if (fewest < 0 || covered < fewest) {
            fewest = covered;
            best = b;
        }
    }
    return best;
}

static void legend(FILE *out, const plot_curve *c, int n, const box *b) {
    fprintf(out, "<g class=\"legend\">\n<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#ffffff\" "
                 "fill-opacity=\"0.9\" stroke=\"#bbbbbb\"/>\n", b->x, b->y, b->w, b->h);
    for (int i = 0; i < n; i++) {
        double y = b->y + 4 + ROW_H * (i + 0.5);
        fputs("<g class=\"entry\"", out);
        style(out, &c[i]);
        fprintf(out, "><line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>", b->x + 8, y, b->x + 36, y);
        if (c[i].s->sparse) {
            fprintf(out, "<g fill=\"%s\" stroke=\"none\">", PALETTE[c[i].colour % 10]);
            marker(out, c[i].marker, b->x + 22, y, 3.2);
            fputs("</g>", out);
        }
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" stroke=\"none\" fill=\"#222222\">", b->x + 44, y + 4);
        xml_text(out, c[i].label);
        fputs("</text></g>\n", out);
    }
    fputs("</g>\n", out);
}

tr_status plot_svg_write(FILE *out, const plot_frame *f, const plot_curve *c, int n, long *left_out) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    *left_out = 0;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < c[i].s->n; k++) {
            double v = c[i].s->value[k];
            if (!drawable(v, f->log_y)) {
                *left_out += isfinite(v);
                continue;
            }
            x0 = fmin(x0, c[i].s->step[k]);
            x1 = fmax(x1, c[i].s->step[k]);
            y0 = fmin(y0, v);
            y1 = fmax(y1, v);
        }
    if (!(x0 <= x1)) return tr_error_set(TR_ERR_NOT_FOUND, "no finite value to draw");
    box p = {0, f->title ? 36 : 14, 0, 0};
    p.h = f->height - p.y - 48;
    plot_axis x, y;
    int y_ticks = (int)(p.h / 45) < 2 ? 2 : (int)(p.h / 45);
    if (f->log_y) plot_axis_fit_log(&y, y0, y1, y_ticks);
    else plot_axis_fit(&y, y0, y1, y_ticks, 0);
    double label_w = 0;
    for (int i = 0; i < y.n_ticks; i++) {
        char label[32];
        label_w = fmax(label_w, text_w(plot_axis_label(&y, y.tick[i], label)));
    }
    p.x = 40 + label_w;
    p.w = f->width - p.x - 18;
    plot_axis_fit(&x, x0, x1, (int)(p.w / 90) < 2 ? 2 : (int)(p.w / 90), 1);
    plot_axis_place(&x, p.x, p.x + p.w);
    plot_axis_place(&y, p.y + p.h, p.y);

    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
            f->width, f->height, f->width, f->height);
    if (f->title) {
        fputs("<title>", out);
        xml_text(out, f->title);
        fputs("</title>\n", out);
    }
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", f->width, f->height);
    grid(out, &x, &y, &p);
    fprintf(out, "<rect class=\"frame\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
                 "stroke=\"#333333\"/>\n", p.x, p.y, p.w, p.h);
    ticks(out, &x, 0, &p);
    ticks(out, &y, 1, &p);
    fprintf(out, "<text class=\"axis-title\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" fill=\"#222222\">step</text>\n",
            p.x + p.w / 2, p.y + p.h + 38);
    fprintf(out, "<text class=\"axis-title\" transform=\"rotate(-90 %.2f %.2f)\" x=\"%.2f\" y=\"%.2f\" "
                 "text-anchor=\"middle\" fill=\"#222222\">", 18.0, p.y + p.h / 2, 18.0, p.y + p.h / 2);
    xml_text(out, f->y_title);
    fputs(f->log_y ? " (log scale)</text>\n" : "</text>\n", out);
    for (int i = 0; i < n; i++) curve(out, &c[i], &x, &y, p.w);
    box b = legend_box(c, n, &x, &y, &p);
    legend(out, c, n, &b);
    if (f->title) {
        fprintf(out, "<text class=\"title\" x=\"%.2f\" y=\"22\" text-anchor=\"middle\" font-size=\"14\" "
                     "fill=\"#222222\">", p.x + p.w / 2);
        xml_text(out, f->title);
        fputs("</text>\n", out);
    }
    fputs("</svg>\n", out);
    return TR_OK;
}
