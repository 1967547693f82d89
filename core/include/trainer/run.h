/* `trainer run`: a training job from a YAML config.
 *
 *   const char *overrides[] = {"trainer.max_epochs=3", "optimizer.lr=3e-4"};
 *   tr_run_result r;
 *   TR_CHECK(tr_run_train("configs/quickstart.yaml", overrides, 2, NULL, &r));
 *   printf("val accuracy %.2f%% in %s\n", 100 * r.val_accuracy, r.run_dir);
 *
 * The job loads the config (with overrides), finds the model and dataset plugins it names,
 * trains on CPU, validates every epoch and writes runs/<name>/<version>/ with the resolved
 * config.yaml, metrics.jsonl and log.txt. See docs/config.md for every key. */
#ifndef TRAINER_RUN_H
#define TRAINER_RUN_H

#include <stdint.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_run_result {
    char run_dir[1024];
    int64_t steps;
    int64_t epochs;
    double train_loss;       /* mean over the last epoch */
    double val_loss;         /* NAN when there is no validation */
    double val_accuracy;     /* classification; NAN otherwise */
    double samples_per_sec;
} tr_run_result;

/* plugin_dirs: NULL-terminated folders searched after the config's `plugins:` list and
 * TRAINER_PLUGIN_PATH (the CLI passes the build tree and the install prefix). */
tr_status tr_run_train(const char *config_path, const char *const *overrides, int n_overrides,
                       const char *const *plugin_dirs, tr_run_result *out);

#ifdef __cplusplus
}
#endif
#endif
