/* trainer plot's reading of metrics.jsonl (run/plot_metrics.h) on a file written by hand: the
 * curves of step, validation and epoch records; null as a NaN point; a resume dropping the
 * points after its step; the last record of a step (of an epoch, for epoch records) counting;
 * skipped-step, early-stop and memory records holding no curve; a record cut short at the end
 * left out; a line that is not a record refused naming the file and line. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "run/plot_metrics.h"

static char dir[64], path[128];

static void write_file(const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The series `metric` has exactly these (step, value) points (NaN: a gap). */
static void check_series(const plot_data *d, const char *metric, int sparse, const double *step, const double *value,
                         size_t n) {
    const plot_series *s = plot_data_find(d, metric);
    CHECK(s != NULL, "no series %s", metric);
    if (!s) return;
    CHECK(s->sparse == sparse, "%s: sparse %d, expected %d", metric, s->sparse, sparse);
    CHECK(s->n == n, "%s: %zu points, expected %zu", metric, s->n, n);
    for (size_t i = 0; i < n && i < s->n; i++) {
        CHECK(s->step[i] == step[i], "%s[%zu]: step %g, expected %g", metric, i, s->step[i], step[i]);
        CHECK(isnan(value[i]) ? isnan(s->value[i]) : s->value[i] == value[i], "%s[%zu]: %.17g, expected %.17g", metric, i,
              s->value[i], value[i]);
    }
}

static void rules(void) {
    write_file("{\"step\": 1, \"epoch\": 1, \"loss\": 2.5, \"lr\": 0.1}\n"
               "{\"step\": 1, \"epoch\": 1, \"loss\": 2.0, \"lr\": 0.1}\n" /* the last record of step 1 counts */
               "{\"step\": 2, \"epoch\": 1, \"loss\": null, \"lr\": 0.1}\n"
               "{\"step\": 2, \"skipped\": true, \"loss_finite\": false}\n"
               "{\"step\": 2, \"epoch\": 1, \"val_loss\": 1.5, \"val_accuracy\": 0.5}\n"
               "{\"epoch\": 1, \"step\": 2, \"train_loss\": 1.9, \"partial\": true}\n"
               "{\"step\": 3, \"epoch\": 2, \"loss\": 1.0, \"lr\": 0.1}\n"
               "{\"step\": 4, \"epoch\": 2, \"loss\": 0.9, \"lr\": 0.05}\n"
               "{\"step\": 4, \"epoch\": 2, \"val_loss\": 1.2, \"val_accuracy\": 0.6}\n"
               "{\"resumed_from_step\": 2}\n" /* steps 3 and 4 are run again */
               "\n"
               "{\"step\": 3, \"epoch\": 2, \"loss\": 1.1, \"lr\": 0.1}\n"
               "{\"epoch\": 1, \"step\": 3, \"train_loss\": 1.8}\n" /* epoch 1, longer now: replaces the partial one */
               "{\"step\": 3, \"epoch\": 2, \"early_stopped\": true, \"best_val_loss\": 1.5, \"best_step\": 2, "
               "\"patience\": 1}\n"
               "{\"memory\": {\"parameters\": 10}}\n"
               "{\"step\": 5, \"epoch\": 2, \"lo"); /* cut short by a kill */
    plot_data d;
    tr_status st = plot_data_read(&d, path);
    CHECK(st == TR_OK, "read: %s", tr_error_msg());
    if (st != TR_OK) return;
    check_series(&d, "loss", 0, (double[]){1, 2, 3}, (double[]){2.0, NAN, 1.1}, 3);
    check_series(&d, "lr", 0, (double[]){1, 2, 3}, (double[]){0.1, 0.1, 0.1}, 3);
    check_series(&d, "val_loss", 1, (double[]){2}, (double[]){1.5}, 1);
    check_series(&d, "val_accuracy", 1, (double[]){2}, (double[]){0.5}, 1);
    check_series(&d, "train_loss", 1, (double[]){3}, (double[]){1.8}, 1);
    CHECK(d.n == 5, "%d series, expected loss, lr, val_loss, val_accuracy, train_loss", d.n);
    static const char *const none[] = {"step", "epoch", "partial", "skipped", "loss_finite", "early_stopped",
                                       "best_val_loss", "best_step", "patience", "memory", "resumed_from_step"};
    for (int i = 0; i < 11; i++) CHECK(plot_data_find(&d, none[i]) == NULL, "a series named %s", none[i]);
    plot_data_free(&d);
}

static void refusals(void) {
    write_file("{\"step\": 1, \"loss\": 2.0}\nnot json\n{\"step\": 2, \"loss\": 1.0}\n");
    plot_data d;
    char want[256];
    tr_status st = plot_data_read(&d, path);
    snprintf(want, sizeof want, "%s:2: not a metrics record", path);
    CHECK(st == TR_ERR_PARSE && strstr(tr_error_msg(), want), "a broken line: %d %s", st, tr_error_msg());
    CHECK(d.n == 0 && d.s == NULL, "nothing kept after a refusal");

    write_file("[1, 2]\n");
    st = plot_data_read(&d, path);
    snprintf(want, sizeof want, "%s:1: not a metrics record (a JSON object a line): another JSON value", path);
    CHECK(st == TR_ERR_PARSE && strstr(tr_error_msg(), want), "an array: %s", tr_error_msg());

    write_file("{\"step\": -1, \"loss\": 2.0}\n");
    st = plot_data_read(&d, path);
    snprintf(want, sizeof want, "%s:1: 'step' must be a non-negative integer", path);
    CHECK(st == TR_ERR_PARSE && strstr(tr_error_msg(), want), "a negative step: %s", tr_error_msg());

    unlink(path);
    st = plot_data_read(&d, path);
    CHECK(st == TR_ERR_IO && strstr(tr_error_msg(), path) && strstr(tr_error_msg(), "No such file"), "missing: %s",
          tr_error_msg());
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/trainer-plot-metrics-XXXXXX");
    if (!mkdtemp(dir)) test_skip("mkdtemp failed");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    rules();
    refusals();
    unlink(path);
    rmdir(dir);
    return test_finish();
}
