/* `trainer plot` (run/plot_api.h): the runs' metrics.jsonl read (plot_run.h, plot_metrics.h),
 * the curves asked for picked and styled, and the SVG document (plot_svg.h). One run: a
 * colour per metric; several: a colour per run, a dash and a marker per metric. */
#include "run/plot_api.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/plot_metrics.h"
#include "run/plot_run.h"
#include "run/plot_svg.h"
#include "trainer/log.h"

#define MAX_RUNS 64
#define MAX_METRICS 16

typedef struct plot_job {
    int n_runs, n_metrics;
    char label[MAX_RUNS][256];
    plot_data data[MAX_RUNS];
    const char *metric[MAX_METRICS];
    plot_curve curve[MAX_RUNS * MAX_METRICS];
    char curve_label[MAX_RUNS * MAX_METRICS][320];
    char title[512], y_title[512];
} plot_job;

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The keys the runs have, sorted, as "a, b, c"; how many. */
static int known_keys(const plot_job *p, char *out, size_t cap) {
    const char *keys[256];
    int n = 0;
    for (int r = 0; r < p->n_runs; r++)
        for (int i = 0; i < p->data[r].n && n < 256; i++) {
            int seen = 0;
            for (int k = 0; k < n && !seen; k++) seen = strcmp(keys[k], p->data[r].s[i].metric) == 0;
            if (!seen) keys[n++] = p->data[r].s[i].metric;
        }
    qsort(keys, (size_t)n, sizeof *keys, by_name);
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < n && k < cap; i++) k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? ", " : "", keys[i]);
    if (n == 0) snprintf(out, cap, "none: no step, validation or epoch record yet");
    return n;
}

static int some_run_has(const plot_job *p, const char *metric) {
    for (int r = 0; r < p->n_runs; r++)
        if (plot_data_find(&p->data[r], metric)) return 1;
    return 0;
}

/* The metrics to draw: those asked for (each must be in some run), else loss and val_loss. */
static tr_status pick_metrics(plot_job *p, const tr_plot_options *o, const char *runs_named) {
    char keys[2048];
    if (o->n_metrics > 0) {
        for (int i = 0; i < o->n_metrics; i++) {
            int dup = 0;
            for (int k = 0; k < p->n_metrics && !dup; k++) dup = strcmp(p->metric[k], o->metrics[i]) == 0;
            if (dup) continue;
            if (p->n_metrics == MAX_METRICS)
                return tr_error_set(TR_ERR_INVALID, "more than %d metrics in one plot", MAX_METRICS);
            if (!some_run_has(p, o->metrics[i])) {
                known_keys(p, keys, sizeof keys);
                return tr_error_set(TR_ERR_NOT_FOUND, "metric '%s': not in the metrics.jsonl of %s (%s: %s)",
                                    o->metrics[i], runs_named, p->n_runs > 1 ? "their metrics" : "its metrics", keys);
            }
            p->metric[p->n_metrics++] = o->metrics[i];
        }
        return TR_OK;
    }
    static const char *const loss[] = {"loss", "val_loss"};
    for (int i = 0; i < 2; i++)
        if (some_run_has(p, loss[i])) p->metric[p->n_metrics++] = loss[i];
    if (p->n_metrics > 0) return TR_OK;
    int n = known_keys(p, keys, sizeof keys);
    return tr_error_set(TR_ERR_NOT_FOUND, "no loss or val_loss in the metrics.jsonl of %s (metrics there: %s%s)",
                        runs_named, keys, n ? "; pick one with --metric" : "");
}

static void pick_curves(plot_job *p, int *n) {
    *n = 0;
    for (int r = 0; r < p->n_runs; r++)
        for (int m = 0; m < p->n_metrics; m++) {
            const plot_series *s = plot_data_find(&p->data[r], p->metric[m]);
            if (!s) {
                if (p->n_runs > 1) TR_WARN("%s has no %s", p->label[r], p->metric[m]);
                continue;
            }
            char *l = p->curve_label[*n];
            if (p->n_runs == 1) snprintf(l, 320, "%s", p->metric[m]);
            else if (p->n_metrics == 1) snprintf(l, 320, "%s", p->label[r]);
            else snprintf(l, 320, "%s %s", p->label[r], p->metric[m]);
            int one = p->n_runs == 1;
            p->curve[*n] = (plot_curve){.s = s, .run = p->label[r], .label = l, .colour = one ? m : r,
                                        .dash = one ? 0 : m, .marker = one ? 0 : m};
            ++*n;
        }
}

static void titles(plot_job *p) {
    size_t k = 0;
    for (int m = 0; m < p->n_metrics; m++)
        k += (size_t)snprintf(p->y_title + k, k < sizeof p->y_title ? sizeof p->y_title - k : 0, "%s%s", m ? ", " : "",
                              p->metric[m]);
    k = 0;
    for (int r = 0; r < p->n_runs; r++)
        k += (size_t)snprintf(p->title + k, k < sizeof p->title ? sizeof p->title - k : 0, "%s%s", r ? ", " : "", p->label[r]);
    if (k > 90) snprintf(p->title, sizeof p->title, "%d runs", p->n_runs);
}

/* Two runs of the same name/version (runs of two output folders): each is named as given. */
static void distinct_labels(plot_job *p, const char *const *runs) {
    for (int a = 0; a < p->n_runs; a++)
        for (int b = a + 1; b < p->n_runs; b++)
            if (strcmp(p->label[a], p->label[b]) == 0) {
                for (int r = 0; r < p->n_runs; r++) snprintf(p->label[r], sizeof p->label[r], "%s", runs[r]);
                return;
            }
}

static tr_status render(plot_job *p, const char *const *runs, const tr_plot_options *o, char **svg, size_t *len) {
    char named[1024];
    size_t k = 0;
    for (int r = 0; r < p->n_runs; r++) {
        char metrics[PATH_MAX];
        TR_CHECK(plot_run_find(runs[r], metrics, sizeof metrics, p->label[r], sizeof p->label[r]));
        TR_CHECK(plot_data_read(&p->data[r], metrics));
        k += (size_t)snprintf(named + k, k < sizeof named ? sizeof named - k : 0, "%s%s", r ? ", " : "", runs[r]);
    }
    distinct_labels(p, runs);
    TR_CHECK(pick_metrics(p, o, named));
    int n;
    pick_curves(p, &n);
    titles(p);
    plot_frame f = {.width = o->width ? o->width : 800, .height = o->height ? o->height : 500, .log_y = o->log_y,
                    .title = p->title, .y_title = p->y_title};
    FILE *out = open_memstream(svg, len);
    if (!out) return tr_error_set(TR_ERR_NOMEM, "plot: out of memory");
    long left_out;
    tr_status st = plot_svg_write(out, &f, p->curve, n, &left_out);
    if (st != TR_OK)
        tr_error_set(st, "%s: no value of %s to draw (null, or beyond %s)", named, p->y_title,
                     o->log_y ? "1e-300..1e300 on a log scale" : "+-1e300");
    int bad = ferror(out);
    if (fclose(out) != 0 || bad) st = tr_error_set(TR_ERR_NOMEM, "plot: out of memory");
    if (st == TR_OK && left_out)
        TR_WARN("%ld value%s left out: a log axis (--log-y) draws from 1e-300 to 1e300 (no value <= 0), a linear one "
                "up to +-1e300", left_out, left_out == 1 ? "" : "s");
    if (st != TR_OK) {
        free(*svg);
        *svg = NULL;
    }
    return st;
}

tr_status tr_plot_svg(const char *const *runs, int n_runs, const tr_plot_options *opt, char **svg, size_t *len) {
    tr_plot_options o = opt ? *opt : (tr_plot_options){0};
    *svg = NULL;
    *len = 0;
    if (n_runs < 1 || n_runs > MAX_RUNS) return tr_error_set(TR_ERR_INVALID, "plot: 1 to %d runs, got %d", MAX_RUNS, n_runs);
    if ((o.width && (o.width < 200 || o.width > 10000)) || (o.height && (o.height < 150 || o.height > 10000)))
        return tr_error_set(TR_ERR_INVALID, "plot size %dx%d: from 200x150 to 10000x10000 pixels", o.width, o.height);
    plot_job *p = calloc(1, sizeof *p);
    if (!p) return tr_error_set(TR_ERR_NOMEM, "plot: out of memory");
    p->n_runs = n_runs;
    tr_status st = render(p, runs, &o, svg, len);
    for (int r = 0; r < n_runs; r++) plot_data_free(&p->data[r]);
    free(p);
    return st;
}

void tr_plot_free(char *svg) { free(svg); }
