/* `trainer plot RUN... [--metric NAME[,NAME...]] [--output FILE.svg|FILE.png|-] [--log-y]
 * [--size WxH]`: curves of runs from their metrics.jsonl (tr_plot_svg, run/plot_api.h),
 * written as SVG, or PNG through librsvg (plot_png.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli_flag.h"
#include "help.h"
#include "plot_cmd.h"
#include "plot_png.h"
#include "run/plot_api.h"
#include "trainer/io.h"

#define MAX_ARGS 64

static int usage(FILE *out) {
    fprintf(out, "usage: trainer plot RUN... [--metric NAME[,NAME...]] [--output FILE.svg|FILE.png|-] [--log-y] [--size WxH]\n"
                 "  RUN: a run folder (runs/<name>/<version>), a runs/<name> folder (its newest version) or a\n"
                 "  metrics.jsonl; several RUNs are drawn together, the legend naming each (name/version)\n"
                 "  --metric   metrics.jsonl keys against the step (loss, val_loss, val_accuracy, lr, grad_norm,\n"
                 "             samples_per_sec, train_loss, ...; repeat it or separate by commas); default: loss and val_loss\n"
                 "  --output   FILE.svg (default plot.svg), FILE.png, or - for the SVG on stdout\n"
                 "  --log-y    a log10 y axis (for a metric that spans decades)\n"
                 "  --size     the picture's size in pixels (default 800x500)\n"
                 "Each run also writes its own curves.svg (loss and val_loss) into its folder (docs/plot.md).\n");
    return out == stdout ? 0 : 2;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n > k && strcasecmp(s + n - k, tail) == 0;
}

/* "WxH" into *w and *h; 0 when it is not that. */
static int parse_size(const char *s, int *w, int *h) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X')) return 0;
    const char *p = end + 1;
    long b = strtol(p, &end, 10);
    if (end == p || *end || a < 1 || b < 1 || a > 100000 || b > 100000) return 0;
    *w = (int)a;
    *h = (int)b;
    return 1;
}

/* --metric's value: names separated by commas, appended to names[] (copied into store). */
static int add_metrics(const char *value, char *store, size_t cap, const char **names, int *n) {
    size_t used = 0;
    for (int i = 0; i < *n; i++) used += strlen(names[i]) + 1;
    const char *p = value;
    while (1) {
        size_t k = strcspn(p, ",");
        if (k == 0 || *n == MAX_ARGS || used + k + 1 > cap) return -1;
        memcpy(store + used, p, k);
        store[used + k] = '\0';
        names[(*n)++] = store + used;
        used += k + 1;
        if (!p[k]) return 0;
        p += k + 1;
    }
}

static int write_output(const char *output, const char *svg, size_t len) {
    if (strcmp(output, "-") == 0) {
        if (fwrite(svg, 1, len, stdout) != len || fflush(stdout) != 0) {
            perror("trainer plot: stdout");
            return 1;
        }
        return 0;
    }
    if (ends_with(output, ".svg")) {
        if (tr_file_write(output, svg, len) != TR_OK) {
            fprintf(stderr, "trainer plot: %s\n", tr_error_msg());
            return 1;
        }
        return 0;
    }
    unsigned char *png;
    size_t png_len;
    char why[512];
    if (plot_png_render(svg, len, &png, &png_len, why, sizeof why) != 0) {
        fprintf(stderr, "trainer plot: %s: %s\n", output, why);
        return 1;
    }
    int rc = 0;
    if (tr_file_write(output, png, png_len) != TR_OK) {
        fprintf(stderr, "trainer plot: %s\n", tr_error_msg());
        rc = 1;
    }
    free(png);
    return rc;
}

int trainer_plot_cmd(int argc, char **argv) {
    if (trainer_wants_help(argc, argv)) return usage(stdout);
    const char *runs[MAX_ARGS], *metrics[MAX_ARGS], *output = "plot.svg", *value;
    char metric_names[4096];
    int n_runs = 0, n_metrics = 0;
    tr_plot_options o = {0};
    for (int i = 0; i < argc; i++) {
        int r = cli_flag(argc, argv, &i, "--metric", &value);
        if (r > 0) {
            if (add_metrics(value, metric_names, sizeof metric_names, metrics, &n_metrics) != 0) {
                fprintf(stderr, "trainer plot: --metric '%s': expected NAME or NAME,NAME,... (at most %d names)\n", value,
                        MAX_ARGS);
                return 2;
            }
            continue;
        }
        if (r == 0) r = cli_flag(argc, argv, &i, "--output", &output);
        if (r == 0 && (r = cli_flag(argc, argv, &i, "--size", &value)) > 0 && !parse_size(value, &o.width, &o.height)) {
            fprintf(stderr, "trainer plot: --size '%s': expected WIDTHxHEIGHT in pixels, as 1200x700\n", value);
            return 2;
        }
        if (r < 0) {
            fprintf(stderr, "trainer plot: %s needs a value\n", argv[i]);
            return usage(stderr);
        }
        if (r > 0) continue;
        if (strcmp(argv[i], "--log-y") == 0) {
            o.log_y = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "trainer plot: unknown option '%s'\n", argv[i]);
            return usage(stderr);
        } else if (n_runs == MAX_ARGS) {
            fprintf(stderr, "trainer plot: more than %d runs\n", MAX_ARGS);
            return 2;
        } else {
            runs[n_runs++] = argv[i];
        }
    }
    if (n_runs == 0) {
        fprintf(stderr, "trainer plot: RUN is required (a run folder, runs/<name> or a metrics.jsonl)\n");
        return usage(stderr);
    }
    char why[512];
    if (strcmp(output, "-") != 0 && !ends_with(output, ".svg") && !ends_with(output, ".png")) {
        fprintf(stderr, "trainer plot: --output '%s': expected FILE.svg, FILE.png or - (SVG on stdout)\n", output);
        return 2;
    }
    if (ends_with(output, ".png") && !plot_png_available(why, sizeof why)) {
        fprintf(stderr, "trainer plot: --output %s: %s\n", output, why);
        return 2;
    }
    o.metrics = metrics;
    o.n_metrics = n_metrics;
    char *svg;
    size_t len;
    if (tr_plot_svg(runs, n_runs, &o, &svg, &len) != TR_OK) {
        fprintf(stderr, "trainer plot: %s\n", tr_error_msg());
        return 1;
    }
    int rc = write_output(output, svg, len);
    tr_plot_free(svg);
    if (rc == 0 && strcmp(output, "-") != 0) printf("wrote %s\n", output);
    return rc;
}
