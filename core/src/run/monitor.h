/* Private: a monitored metric, as Lightning's `monitor` and `mode`: one of the validation
 * metrics metrics.jsonl records (val_loss, val_accuracy, val_perplexity), which of them a run
 * logs, and which of two values is better. checkpoint.monitor (the top k, ckpt_select.h) and
 * trainer.early_stopping (early_stop.h) each name one. */
#ifndef TRAINER_RUN_MONITOR_H
#define TRAINER_RUN_MONITOR_H

#include <stdint.h>

#include "trainer/status.h"

enum { MONITOR_OFF = -1, MONITOR_VAL_LOSS, MONITOR_VAL_ACCURACY, MONITOR_VAL_PERPLEXITY };
enum { MONITOR_MIN, MONITOR_MAX };

typedef struct monitor {
    int metric;         /* MONITOR_OFF or MONITOR_VAL_* */
    int mode;           /* MONITOR_MIN or MONITOR_MAX */
    const char *key;    /* the config key naming it ("checkpoint.monitor"), for messages */
} monitor;

struct job;
/* Reads the config's checkpoint.monitor, mode, save_top_k and save_last and
 * trainer.early_stopping into j->s (their defaults written into the config): a name that is no
 * metric, a key that needs a monitor without one, or a monitor with validation turned off
 * (trainer.val_every_n_epochs and val_every_n_steps 0) is refused naming the key. */
tr_status monitor_read_settings(struct job *j);
/* After the data is open: each monitor must be a metric this run logs (its task's, with a
 * validation split), refused before training naming the key and the metrics it could name. */
tr_status monitor_check_run(const struct job *j);

const char *monitor_name(int metric);
const char *monitor_mode_name(int mode);
/* The monitored value of one validation. */
double monitor_value(const monitor *m, double val_loss, double val_accuracy);
/* Whether a is better than b by more than delta (>= 0); a value that is not finite never is. */
int monitor_better(const monitor *m, double a, double b, double delta);
/* A monitor from state.json's "monitor" and "mode" texts; -1 metric when they name none. */
void monitor_parse(monitor *m, const char *metric, const char *mode);

#endif
