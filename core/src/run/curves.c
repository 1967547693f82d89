/* curves.svg at the end of a run (curves.h). */
#include "run/curves.h"

#include <stdio.h>

#include "run/logger.h"
#include "run/plot_api.h"
#include "trainer/io.h"

void job_curves(job *j) {
    if (j->info.rank != 0 || !j->log || !(j->s.loggers & RUN_LOGGER_JSONL)) return;
    char kept[2048], path[1200];
    snprintf(kept, sizeof kept, "%s", tr_error_msg()); /* the run's own error, if any */
    snprintf(path, sizeof path, "%s/curves.svg", j->run_dir);
    const char *runs[] = {j->run_dir};
    char *svg;
    size_t len;
    tr_status st = tr_plot_svg(runs, 1, NULL, &svg, &len);
    if (st == TR_OK) st = tr_file_write(path, svg, len);
    /* A run that stopped before its first record (or logged only nulls) has nothing to draw. */
    if (st != TR_OK && st != TR_ERR_NOT_FOUND) job_say(j, "warning: curves.svg not written: %s", tr_error_msg());
    tr_plot_free(svg);
    tr_error_set(TR_OK, "%s", kept);
}
