/* Checkpoints: weights and optimizer state as safetensors, trainer state as JSON, written so
 * that a crash never leaves a broken "latest" (DESIGN.md decision 11).
 *
 *   tr_train_state s = {.epoch = 2, .step = 120, .batch_in_epoch = 0, .seed = 1};
 *   TR_CHECK(tr_checkpoint_save("runs/q/0/checkpoints", "step-00000120", P, opt, &s));
 *   TR_CHECK(tr_checkpoint_prune("runs/q/0/checkpoints", 3));       // keep the newest 3
 *   char path[1024];
 *   if (tr_checkpoint_latest("runs/q/0/checkpoints", path, sizeof path) == TR_OK)
 *       TR_CHECK(tr_checkpoint_load(path, P, opt, &s));               // exact resume
 *
 * A checkpoint is a directory <dir>/<name>/ holding model.safetensors (parameters by name,
 * then buffers by name), optimizer.safetensors ("<state>" flat buffers, e.g. "exp_avg", plus
 * the step count in metadata) and state.json. It is written as <name>.tmp-<pid>/, each file
 * fsync'ed, then renamed into place, and the directory fsync'ed: a directory without the
 * .tmp suffix is always complete. `latest` is the newest complete checkpoint by its step. */
#ifndef TRAINER_CHECKPOINT_H
#define TRAINER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/optim.h"
#include "trainer/params.h"
#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_train_state {
    int64_t epoch;            /* epoch to run next (or the one in progress) */
    int64_t step;             /* optimizer steps taken */
    int64_t batch_in_epoch;   /* batches of `epoch` already consumed (resume mid-epoch) */
    uint64_t seed;
    char config_hash[65];     /* hex digest of the training-relevant config */
    char model[64];           /* model plugin name */
} tr_train_state;

/* opt may be NULL (weights only). */
tr_status tr_checkpoint_save(const char *dir, const char *name, tr_params *P, tr_optim *opt,
                             const tr_train_state *s);
/* Loads into P (names and shapes must match exactly: a mismatch names the tensor and both
 * shapes), opt (may be NULL; its length must match) and s (may be NULL). Nothing is changed
 * when the checkpoint is refused. */
tr_status tr_checkpoint_load(const char *path, tr_params *P, tr_optim *opt, tr_train_state *s);
/* Only the train state of the checkpoint at path (its state.json). */
tr_status tr_checkpoint_read_state(const char *path, tr_train_state *s);
/* Path of the complete checkpoint with the highest step in dir; TR_ERR_NOT_FOUND if none. */
tr_status tr_checkpoint_latest(const char *dir, char *out, size_t size);
/* Removes all but the newest keep_last complete checkpoints and any stale .tmp dirs. */
tr_status tr_checkpoint_prune(const char *dir, int keep_last);

#ifdef __cplusplus
}
#endif
#endif
