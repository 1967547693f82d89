/* Private to libtrainer and the trainer CLI, not installed: the application's entry points,
 * exported (TR_API) for the CLI alone, no part of the plugin SDK (docs/abi.md, "What
 * libtrainer exports"). `trainer run`, `eval`, `predict`, `embed`, `export` and `generate`:
 * jobs from a YAML config.
 *
 *   const char *overrides[] = {"trainer.max_epochs=3", "optimizer.lr=3e-4"};
 *   tr_run_result r;
 *   TR_CHECK(tr_run_train("configs/quickstart.yaml", overrides, 2, NULL, &r));
 *   printf("val accuracy %.2f%% in %s\n", 100 * r.val_accuracy, r.run_dir);
 *
 * The job loads the config (with overrides), finds the model, dataset and strategy plugins
 * it names, trains, validates every epoch (or as trainer.val_every_n_steps or
 * val_check_interval say) and writes runs/<name>/<version>/ with the resolved config.yaml,
 * metrics.jsonl, log.txt and checkpoints/ (trainer.fast_dev_run: nothing). Eval and predict
 * build the same job without training and load the weights of a checkpoint; export builds the
 * model from a run's config.yaml and writes a checkpoint's weights in another framework's
 * format. See docs/config.md for every key. */
#ifndef TRAINER_RUN_RUN_API_H
#define TRAINER_RUN_RUN_API_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"
#include "trainer/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_run_result {
    char run_dir[1024];      /* "" under trainer.fast_dev_run, which writes none */
    int64_t steps;
    int64_t epochs;
    double train_loss;       /* mean over the last epoch */
    double val_loss;         /* NAN when there is no validation */
    double val_accuracy;     /* classification; NAN otherwise */
    double samples_per_sec;
} tr_run_result;

/* How a config wants to be run: processes per host its strategy needs (ddp: trainer.devices)
 * and trainer.max_restarts. `trainer run` launches that many ranks of itself when no launcher
 * started it (tr_launched_externally). */
typedef struct tr_run_plan_result {
    int processes;
    int max_restarts;
    char strategy[64];
} tr_run_plan_result;

TR_API tr_status tr_run_plan(const char *config_path, const char *const *overrides, int n_overrides,
                      const char *const *plugin_dirs, tr_run_plan_result *out);
/* `trainer plan`: what a config would run, and the memory per rank it and the alternatives
 * would hold, estimated by each strategy plugin (tr_strategy_ops.estimate) from the model's
 * parameters and activations measured on one forward and backward. Nothing is trained. */
#define TR_PLAN_MAX_ROWS 8
typedef struct tr_plan_row {
    char strategy[64];            /* "ddp", "sharded stage 2" */
    int chosen;                   /* the config's choice (the first row) */
    int estimated;                /* memory, world and rank_batch are filled */
    tr_strategy_memory memory;    /* per rank (dataparallel: replica 0; the process in all_devices) */
    int world;
    int64_t rank_batch;
    char note[320];               /* why there is no estimate */
} tr_plan_row;

typedef struct tr_plan_report {
    char strategy[64];
    char reason[512];             /* "named in trainer.strategy", or auto's reasoning */
    char model[64], data[64];
    size_t params;                /* trainable scalars */
    int64_t train_samples;
    int64_t global_batch, grad_accum, rank_batch;
    int devices, processes, world;
    tr_plan_row rows[TR_PLAN_MAX_ROWS];
    int n_rows;
    char backend[768];            /* the ranks' communication backend and why ("mpi (strategy.backend
                                   * auto: the ranks span 2 hosts ...)"); "" for one process */
    /* ABI 0.18: trainer.activation_checkpointing (0 off, N every N-th block) and one rank's
     * activations at rank_batch measured with it (every block when it is off) and without. */
    int act_ckpt_every;
    uint64_t act_with, act_without;
} tr_plan_report;

TR_API tr_status tr_run_plan_report(const char *config_path, const char *const *overrides, int n_overrides,
                             const char *const *plugin_dirs, tr_plan_report *out);

/* 1 when this process is a rank started by trainer's launcher, torchrun, mpirun or srun. */
TR_API int tr_launched_externally(void);

/* plugin_dirs: NULL-terminated folders searched after the config's `plugins:` list and
 * TRAINER_PLUGIN_PATH (the CLI passes the build tree and the install prefix). */
TR_API tr_status tr_run_train(const char *config_path, const char *const *overrides, int n_overrides,
                       const char *const *plugin_dirs, tr_run_result *out);
/* Asks the training in progress (tr_run_train) to stop at its next optimizer step boundary
 * (every rank at the same step: they agree through the step's all-reduce), save a checkpoint
 * there and return TR_ERR_ABORTED with a message naming the checkpoint and saying that
 * running the same config again resumes from it. signo (SIGINT, SIGTERM) is named in that
 * message. Async-signal-safe: meant for a SIGINT/SIGTERM handler, as `trainer run` installs. */
TR_API void tr_run_interrupt(int signo);

typedef struct tr_eval_result {
    char checkpoint[1024];   /* the checkpoint folder used */
    int64_t samples;
    double loss;             /* mean per sample (per token for LMs) */
    double accuracy;         /* classification, LM next-token; NAN for regression */
    double perplexity;       /* LMs; NAN otherwise */
    /* Classification: scikit-learn's scores with zero_division 0 (macro: over the classes
     * among the labels or the predictions; weighted: by support); NAN otherwise. */
    double precision_macro, recall_macro, f1_macro;
    double precision_weighted, recall_weighted, f1_weighted;
    double mae, rmse, r2;    /* regression, each the mean over the targets; NAN otherwise */
    int labelled;            /* 0: predict on a split without labels (nothing scored: NAN) */
    char record[1300];       /* eval: the metrics.jsonl its record was appended to ("" none) */
} tr_eval_result;

/* Evaluates the weights of `checkpoint` (a checkpoint folder, a checkpoints/ folder or a run
 * folder: its newest checkpoint) on a split: "val" or NULL (the validation split; an error
 * when the data has none, or when the one configured cannot be loaded) or "train". A
 * classification model is built with the checkpoint's classes (an error when the data's
 * named classes differ). Prints the scores (classification: a table per class and the
 * confusion matrix up to 20 classes) and appends them as {"eval": {...}} to the metrics.jsonl
 * of the run holding the checkpoint (RUN/checkpoints/...; none for a weights file elsewhere). */
TR_API tr_status tr_run_eval(const char *config_path, const char *const *overrides, int n_overrides,
                      const char *const *plugin_dirs, const char *checkpoint, const char *split,
                      tr_eval_result *out);
/* Like tr_run_eval (without the table or the record), and writes one CSV row per sample to
 * `output`: index and label, then prediction, confidence and a probability per class
 * (classification: label and prediction by name when the classes have names), loss and
 * next_token (LMs) or prediction_<k> (regression). The validation split may be a file without
 * labels (tr_dataset_env.labels_optional): its rows have no label column, nothing is scored. */
TR_API tr_status tr_run_predict(const char *config_path, const char *const *overrides, int n_overrides,
                         const char *const *plugin_dirs, const char *checkpoint,
                         const char *split, const char *output, tr_eval_result *out);

typedef struct tr_embed_result {
    char checkpoint[1024];   /* the checkpoint folder used ("" none: the model's own start) */
    int64_t texts;           /* lines embedded (texts, or pairs) */
    int64_t dim;             /* embedding width */
    int pairs;               /* the lines were text<TAB>pair */
} tr_embed_result;

/* `trainer embed`: the pooled embedding (the model's out->embedding) of every line of `input`
 * (UTF-8 text, one text per line), tokenized with the config's tokenizer
 * (data.params.tokenizer, else model.params.pretrained's tokenizer.json; max_length
 * data.params.max_length, else the file's truncation, else 512), batched by data.batch_size
 * through the config's strategy (one process), written to `output` as .npy float32 (N, E) in
 * input order. `checkpoint` (may be NULL) as for tr_run_eval; without it the model's own
 * initial weights (hf_encoder: its pretrained folder). The config's dataset is not opened.
 * When the lines are `text<TAB>pair` (every line one TAB) both texts are embedded alone,
 * `output` is (N, 2, E), and `scores` (NULL: output with .npy replaced by .csv) gets
 * `index,score` rows: each pair's cosine similarity. */
TR_API tr_status tr_run_embed(const char *config_path, const char *const *overrides, int n_overrides,
                       const char *const *plugin_dirs, const char *checkpoint, const char *input,
                       const char *output, const char *scores, tr_embed_result *out);

typedef struct tr_export_result {
    char checkpoint[1024];   /* the checkpoint folder exported */
    char config[1100];       /* the run's config.yaml the model was built from */
    char outdir[1100];       /* the folder written */
    int64_t step;            /* the checkpoint's step */
} tr_export_result;

/* `trainer export`: the weights of `checkpoint` (as for tr_run_eval: a checkpoint folder, or
 * the newest in a checkpoints/ or run folder) written by the model plugin as a model folder
 * in `format` ("hf", also for NULL: a Hugging Face folder; any other is refused) at `outdir`.
 * The model is built from the config.yaml of the run folder holding the checkpoint (with
 * overrides) and its data's sample spec, with the checkpoint's classes; a sharded checkpoint
 * is consolidated in memory. A model whose plugin has no export_to (tr_model_ops, ABI 0.11)
 * is refused by name. outdir must be absent or an empty folder (nothing is overwritten); the
 * files are written into a temporary folder beside it, renamed into place at the end, so a
 * failure leaves nothing. */
TR_API tr_status tr_run_export(const char *checkpoint, const char *outdir, const char *format,
                        const char *const *overrides, int n_overrides, const char *const *plugin_dirs,
                        tr_export_result *out);

typedef struct tr_generate_options {
    const char *prompt;        /* borrowed; prompt_len bytes (UTF-8 with a tokenizer) */
    size_t prompt_len;
    int64_t max_new_tokens;    /* >= 0 */
    double temperature;        /* 0: greedy (the most likely token); else > 0 */
    int64_t top_k;             /* 0: off */
    double top_p;              /* in (0, 1]; 1: off */
    int has_seed;              /* 0: the config's run.seed */
    uint64_t seed;
    /* Called with the prompt, then with the text as the tokens come (may be NULL). */
    void (*emit)(void *user, const char *text, size_t len);
    void *user;
} tr_generate_options;

typedef struct tr_generate_result {
    char checkpoint[1024];     /* the checkpoint folder (or weights file) used */
    int64_t prompt_tokens;     /* the prompt's tokens (all of them, not only the context) */
    int64_t new_tokens;        /* tokens generated, the end-of-text token not counted */
    int stopped_at_eos;        /* the tokenizer's end-of-text token came before max_new_tokens */
    char eos_token[64];        /* that token ("" none: bytes, or a tokenizer without one) */
    int64_t context;           /* the most tokens a forward sees (data seq_len) */
    double seconds;            /* generating, without loading */
    char description[256];     /* the strategy's one line: "cpu (16 threads)" */
} tr_generate_result;

/* `trainer generate`: continues `prompt` with a language model (the config's model: the data's
 * task is lm and a model with a mode is in mode lm) and the weights of `checkpoint` (as for
 * tr_run_eval), one token at a time: each a full forward (no KV cache) of the last data
 * seq_len tokens in eval mode on one device (trainer.devices=1 comes before the overrides),
 * the next token picked as Hugging Face's generate() does (temperature, then top-k, then
 * top-p; temperature 0: greedy), a pure function of the seed. Tokens are bytes (a vocabulary
 * of 256), or the ids of data.params.tokenizer when the config names one; it stops after
 * max_new_tokens or at the tokenizer's end-of-text token. The prompt and the text generated
 * go to opt->emit as they come; nothing is logged. docs/config.md, "trainer generate". */
TR_API tr_status tr_run_generate(const char *config_path, const char *const *overrides, int n_overrides,
                          const char *const *plugin_dirs, const char *checkpoint, const tr_generate_options *opt,
                          tr_generate_result *out);

#ifdef __cplusplus
}
#endif
#endif
