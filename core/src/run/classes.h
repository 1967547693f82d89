/* Private: a classification run's class list (how many, and their names when the dataset
 * names them): taken from the dataset, saved in checkpoints' state.json as
 * "classes": {"count": N, "names": [...]}, and checked against the data when a checkpoint is
 * evaluated. Checkpoints written before it have none, and are not checked. */
#ifndef TRAINER_RUN_CLASSES_H
#define TRAINER_RUN_CLASSES_H

#include <stdint.h>

#include <jansson.h>

#include "trainer/model.h"

typedef struct run_classes {
    int64_t count;   /* 0: none recorded (not classification, or an older checkpoint) */
    char **names;    /* (count) owned, or NULL: the classes are the integer labels */
} run_classes;

/* The classes of dataset ds (ops->class_name may be NULL) with n_classes classes. */
tr_status classes_of_data(run_classes *out, const tr_dataset_ops *ops, void *ds, int64_t n_classes);
/* The data's classes against the checkpoint's: an error naming both when they differ (named
 * classes must be the checkpoint's list, or its count when it has no names; integer labels
 * must stay below the checkpoint's count).
 * *n_classes becomes the count the model is built with: the checkpoint's. */
tr_status classes_reconcile(const run_classes *data, const run_classes *ckpt, const char *ckpt_path, int64_t *n_classes);
/* state.json's "classes" value, or NULL when there are none (count 0). */
json_t *classes_to_json(const run_classes *c);
/* From state.json's "classes" (v may be NULL: none). */
tr_status classes_from_json(run_classes *out, json_t *v, const char *path);
/* The "classes" of the checkpoint folder ckpt's state.json. */
tr_status classes_read_checkpoint(run_classes *out, const char *ckpt);
void classes_free(run_classes *c);

#endif
