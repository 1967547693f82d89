/* Private to libtrainer and the trainer CLI, not installed (exported for the CLI alone, as
 * run/run_api.h). `trainer plot`: training curves of runs, from their metrics.jsonl, as an
 * SVG document.
 *
 *   const char *runs[] = {"runs/quickstart/0", "runs/quickstart_lr"};
 *   const char *metrics[] = {"val_accuracy"};
 *   tr_plot_options o = {.metrics = metrics, .n_metrics = 1};
 *   char *svg;
 *   size_t len;
 *   TR_CHECK(tr_plot_svg(runs, 2, &o, &svg, &len));
 *   TR_CHECK(tr_file_write("accuracy.svg", svg, len));     // <trainer/io.h>
 *   tr_plot_free(svg);
 *
 * A run is a run folder (runs/<name>/<version>), a runs/<name> folder (its newest version that
 * has a metrics.jsonl) or a metrics.jsonl file. metrics.jsonl is read by its rules
 * (docs/config.md "metrics.jsonl": after {"resumed_from_step": N} the records of later steps
 * are superseded; the last record of a step, or of an epoch, counts; null is a gap). Each
 * metric of each run is a curve against the optimizer step, its legend entry naming the run
 * (name/version) and the metric; docs/plot.md has the picture's rules. */
#ifndef TRAINER_RUN_PLOT_API_H
#define TRAINER_RUN_PLOT_API_H

#include "trainer/export.h"

#include <stddef.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_plot_options {
    /* metrics.jsonl keys (loss, val_loss, val_accuracy, lr, ...); borrowed. NULL or 0: loss
     * and val_loss, those of them a run has. A metric no run has is an error naming the keys
     * the runs have. */
    const char *const *metrics;
    int n_metrics;
    int log_y;          /* a log10 y axis (values <= 0 are left out, with a warning) */
    int width, height;  /* pixels; 0: 800 x 500 */
} tr_plot_options;

/* ABI 0.13. The SVG document of the runs' curves (1 to 64 runs, up to 16 metrics, 200x150 to
 * 10000x10000 pixels) into *svg: a NUL-terminated string of *len bytes, owned by the caller
 * (tr_plot_free). opt may be NULL (the defaults). */
TR_API tr_status tr_plot_svg(const char *const *runs, int n_runs, const tr_plot_options *opt, char **svg, size_t *len);
TR_API void tr_plot_free(char *svg);

#ifdef __cplusplus
}
#endif
#endif
