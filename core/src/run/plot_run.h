/* Private: which metrics.jsonl a RUN argument of `trainer plot` names, and the run's name in
 * the legend. RUN is a run folder (runs/<name>/<version>: its metrics.jsonl), a runs/<name>
 * folder (its newest version, by number, that has a metrics.jsonl) or a metrics.jsonl file;
 * the label is the run folder's last two names, "name/version".
 *
 *   char metrics[1100], label[256];
 *   TR_CHECK(plot_run_find("runs/quickstart", metrics, sizeof metrics, label, sizeof label));
 *   // metrics: runs/quickstart/3/metrics.jsonl, label: quickstart/3 */
#ifndef TRAINER_RUN_PLOT_RUN_H
#define TRAINER_RUN_PLOT_RUN_H

#include <stddef.h>

#include "trainer/status.h"

tr_status plot_run_find(const char *run, char *metrics, size_t metrics_cap, char *label, size_t label_cap);

#endif
