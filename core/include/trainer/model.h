/* The model and dataset plugin interfaces: what a dataset describes, what a batch holds and
 * what a model's forward returns.
 *
 *   // in a model plugin
 *   static tr_status create(void **ctx, const tr_options *o, const tr_data_spec *d, tr_params *P) {
 *       mlp *m = calloc(1, sizeof *m);              // state hangs off ctx, never globals
 *       TR_CHECK(tr_params_add(P, "fc1.weight", 2, (int64_t[]){H, d->x_numel}, ...));
 *       *ctx = m;
 *       return TR_OK;
 *   }
 *   static tr_status forward(void *ctx, tr_graph *g, tr_params *P, const tr_batch *b,
 *                            tr_model_out *out) {
 *       out->logits = ...;                          // core ops on g
 *       if (b->y) out->loss = tr_cross_entropy(g, out->logits, b->y, b->normaliser, -100, 0);
 *       return tr_graph_status(g);
 *   }
 *
 * The core calls a model's create once per replica with the dataset's spec (parameters are
 * registered, not yet allocated: the core finalizes P and initialises or loads it), then
 * forward once per micro-batch. Loss normalisation is the batch's `normaliser` (the global
 * batch size, times tokens per sample for LMs), so summed gradients over ranks are the exact
 * mean (docs/design.md "Strategy invariance"). */
#ifndef TRAINER_MODEL_H
#define TRAINER_MODEL_H

#include <stdint.h>

#include "trainer/graph.h"
#include "trainer/params.h"
#include "trainer/plugin.h"
#include "trainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tr_task {
    TR_TASK_CLASSIFY = 0,  /* y: one class id per sample (TR_I32, shape ()) */
    TR_TASK_LM = 1,        /* x: token ids (T); y: next tokens (T), TR_I32 */
    TR_TASK_REGRESS = 2    /* y: TR_F32 targets of y_shape */
} tr_task;

/* What one sample of a dataset looks like. */
typedef struct tr_data_spec {
    tr_task task;
    tr_dtype x_dtype;                   /* TR_F32 features/images, TR_I32 tokens */
    int x_ndim;                         /* per-sample dims: (784), (1, 28, 28), (T) */
    int64_t x_shape[TR_MAX_DIMS - 1];
    int64_t x_numel;
    tr_dtype y_dtype;
    int y_ndim;                         /* 0 for a class id */
    int64_t y_shape[TR_MAX_DIMS - 1];
    int64_t y_numel;
    int64_t n_classes;                  /* classes, or vocabulary size for LM */
    int64_t vocab;                      /* token inputs: ids lie in [0, vocab); -1 marks padding
                                         * (a model gives it no embedding, masks it as an
                                         * attention key and leaves it out of pooling); 0 for
                                         * other inputs */
    /* ABI 0.9: 1 when x holds TR_I32 token ids padded with -1 at the end of its last dim and
     * the loader may cut each batch's last dim to the longest unpadded length in that batch
     * (Hugging Face's DataCollatorWithPadding): tr_host_batch.x_len, and a model then sees
     * batches of T <= x_shape[x_ndim - 1]. The core sets it to 0 for a model or strategy built
     * for an older minor (they get every batch at the spec's length). 0 otherwise. */
    int x_trim_pad;
} tr_data_spec;

typedef struct tr_batch {
    tr_tensor *x;         /* (B, x_shape...); with x_trim_pad its last dim may be shorter */
    tr_tensor *y;         /* (B, y_shape...), NULL when predicting */
    int64_t size;         /* B: samples in this (rank's, replica's) batch */
    int64_t first;        /* global index of this batch's first sample (dropout keys) */
    double normaliser;    /* divide summed losses by this */
} tr_batch;

typedef struct tr_model_out {
    tr_tensor *loss;      /* (1): summed per-sample (or per-token) loss / normaliser */
    tr_tensor *logits;    /* (B, C) or (B, T, V) */
    tr_tensor *embedding; /* (B, E) pooled embedding, when the model provides one */
} tr_model_out;

/* What `trainer export` asks of a model (ABI 0.11): the core allocates it and may append
 * fields (docs/abi.md). Every pointer is borrowed for the call. */
typedef struct tr_model_export {
    const char *format;              /* "hf": a Hugging Face model folder */
    const char *dir;                 /* the folder to write into: made empty by the core, which
                                      * renames it into place after TR_OK and removes it after an
                                      * error (so write nothing elsewhere) */
    int64_t n_classes;               /* classification: the run's classes; 0 otherwise */
    const char *const *class_names;  /* (n_classes) their names, or NULL: integer labels */
    const char *tokenizer;           /* the run's data.params.tokenizer (absolute), or NULL */
} tr_model_export;

typedef struct tr_model_ops {
    /* Registers parameters and buffers in P (not finalized) and makes *ctx. */
    tr_status (*create)(void **ctx, const tr_options *opts, const tr_data_spec *data,
                        tr_params *P);
    void (*destroy)(void *ctx);
    /* Records the forward pass on g (training mode is tr_graph_training(g)); fills out. */
    tr_status (*forward)(void *ctx, tr_graph *g, tr_params *P, const tr_batch *batch,
                         tr_model_out *out);
    /* ABI 0.11, optional (NULL: the model cannot be exported; `trainer export` refuses it by
     * name). Writes the model with the weights in P (a checkpoint's, on the host) in
     * env->format into env->dir; a format it does not write is TR_ERR_UNSUPPORTED naming it.
     * Every failure names the file. */
    tr_status (*export_to)(void *ctx, tr_params *P, const tr_model_export *env);
} tr_model_ops;

typedef enum tr_split { TR_SPLIT_TRAIN = 0, TR_SPLIT_VAL = 1 } tr_split;

typedef struct tr_dataset_env {
    tr_split split;
    uint64_t seed;            /* run seed: synthetic data and split shuffles derive from it */
    const char *base_dir;     /* relative paths in options resolve against this (config dir) */
    double val_fraction;      /* for datasets without a validation file: the held-out share */
    /* ABI 0.7: the validation split made from data.val_params: the train split's options
     * (borrowed; opts are these with val_params' keys over them). A file named in opts that
     * differs from the train split's is a validation file, scored whole; statistics and class
     * ids come from the train split's file. NULL otherwise. */
    const tr_options *train_opts;
    /* ABI 0.13: 1 when the split is read for `trainer predict`, which takes data without
     * labels: a file that has none (a CSV without the label column, text lines without a
     * label) may then be loaded, its samples' features alone, and `labelled` says so. 0 (run,
     * eval, and a core built for an older minor): labels are required, as before. */
    int labels_optional;
} tr_dataset_env;

/* The validation split (ABI 0.7): a dataset whose options give it none (nothing held out, no
 * validation file) returns an empty one (size 0) from create; an error from create means the
 * split the user asked for cannot be made, and stops the job. (Plugins built for an older
 * minor may return an error for "none": the core then treats it so unless the config has
 * data.val_params.) */
typedef struct tr_dataset_ops {
    tr_status (*create)(void **ctx, const tr_options *opts, const tr_dataset_env *env);
    void (*destroy)(void *ctx);
    void (*spec)(void *ctx, tr_data_spec *out);
    int64_t (*size)(void *ctx);
    /* Writes sample `index` (0 <= index < size) into x (x_numel of x_dtype) and y (y_numel
     * of y_dtype; y may be NULL). Safe to call from several threads at once. */
    tr_status (*get)(void *ctx, int64_t index, void *x, void *y);
    /* ABI 0.7, optional. Classification: the name of class `id` (0 <= id < n_classes;
     * borrowed, valid while ctx lives), given when the options declare the classes (a count or
     * a list of names) or the labels are names; NULL (entry or return): the classes are the
     * integer labels found in the data. Named classes are saved with checkpoints and must be
     * the same, in the same order, when one is evaluated; `predict` writes the names. */
    const char *(*class_name)(void *ctx, int64_t id);
    /* ABI 0.13, optional: 0 when this split was loaded without labels (only ever under
     * env->labels_optional): get then writes no y (the core reads none; the classes are the
     * train split's, or the checkpoint's). NULL, or any other value: the split has labels. */
    int (*labelled)(void *ctx);
} tr_dataset_ops;

#ifdef __cplusplus
}
#endif
#endif
