/* A job: the config, plugins, datasets, loaders and strategy that `trainer run`, `eval` and
 * `predict` share. Internal to libtrainer's run/ parts. */
#ifndef TRAINER_RUN_JOB_H
#define TRAINER_RUN_JOB_H

#include <stdint.h>
#include <stdio.h>

#include "classes.h"
#include "monitor.h"
#include "progress.h"
#include "run/class_metrics.h"
#include "run/logger.h"
#include "run/regress_metrics.h"
#include "run/run_limits.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/data.h"
#include "trainer/devices.h"
#include "trainer/optim.h"
#include "trainer/strategy.h"

/* Every typed value the job reads from the config (see docs/config.md). */
typedef struct job_settings {
    const char *name, *outdir;
    int64_t seed, batch, prefetch, workers, max_epochs, max_steps, accum, log_every, threads;
    double val_fraction, grad_clip;
    int shuffle, drop_last, progress;
    int profile;          /* trainer.profile: TR_PROFILE_OPS_OFF, _OPS or _OPS_SHAPES (profile.h) */
    int flush_denormals;  /* tr_set_flush_denormals for the run's threads */
    int precision;        /* tr_precision: tr_set_precision for the devices the run opens */
    int act_ckpt;         /* trainer.activation_checkpointing: 0 off, N every N-th block */
    int64_t val_every_n_steps;
    int64_t val_every_n_epochs;  /* at the end of every n-th epoch and the last (0: never at epoch ends) */
    run_limits lim;              /* limit_train_batches, limit_val_batches, val_check_interval, fast_dev_run */
    tr_sched_config sched;
    tr_optim_config optim;
    int64_t devices, max_restarts;     /* devices: as chosen (tr_choose_devices) */
    int accelerator;                   /* tr_accelerator asked */
    int devices_asked;                 /* N, TR_DEVICES_AUTO or TR_DEVICES_ALL */
    int device_ids[TR_MAX_DEVICE_IDS], n_device_ids;
    int64_t ck_epochs, ck_steps, keep_last;
    int resume;  /* 0 auto, 1 never */
    int on_nan;  /* ON_NAN_STOP or ON_NAN_SKIP */
    int64_t max_consecutive_skips;  /* on_nan skip: more steps in a row left out stop the job (0: never) */
    unsigned loggers;  /* trainer.loggers: RUN_LOGGER_* bits (logger.h) */
    monitor ck_monitor;    /* checkpoint.monitor and mode (metric MONITOR_OFF: none) */
    int64_t save_top_k;    /* checkpoints kept by ck_monitor (-1: every validation's) */
    int save_last;         /* checkpoints/last points at the newest checkpoint */
    monitor es_monitor;    /* trainer.early_stopping (metric MONITOR_OFF: off) */
    int64_t es_patience;
    double es_min_delta;
    const char *init_from; /* model.init_from as given (NULL: none) */
} job_settings;

enum { ON_NAN_STOP, ON_NAN_SKIP };

typedef struct job {
    tr_config *cfg;
    const tr_cfg_node *root;
    char cfg_dir[1024];
    job_settings s;
    tr_registry *reg;
    const tr_plugin *model_p, *data_p, *strat_p;
    tr_options *model_opts, *strat_opts;
    tr_model_factory *models;
    void *train_ds, *val_ds;      /* val_ds NULL: the data has no validation split */
    const tr_dataset_ops *dops;   /* = &dops_table */
    tr_dataset_ops dops_table;    /* the plugin's table, entries past its ops_size NULL */
    tr_data_spec spec;
    run_classes classes;          /* classification: the classes the model is built for */
    run_classes ckpt_classes;     /* eval/predict: the checkpoint's, read before the model is made */
    char ckpt_path[1200];         /* eval/predict: the checkpoint folder */
    int labels_optional;          /* predict: the validation split may have no labels */
    int val_unlabelled;           /* the validation split has none (dataset's labelled()) */
    char why[512];                /* why this strategy: "named in trainer.strategy", auto's reason */
    tr_gpu_scan gpus;             /* what the device plugins see (not asked for a CPU-only request) */
    int strategy_auto;            /* trainer.strategy was auto */
    char strategy_asked[64];      /* trainer.strategy as the config says it (auto or a name) */
    int accelerator;              /* tr_accelerator chosen: cpu or gpu */
    int gpu_ids[TR_MAX_DEVICE_IDS]; /* the GPUs chosen (gpu), n_gpu_ids of them */
    int n_gpu_ids;
    int choice_made;              /* the selection rule accepted the request */
    char picked[64];              /* the strategy the rule chose */
    char gpu_refused[300];        /* why the chosen strategy cannot run on the GPUs chosen ("" none) */
    int gpu_fallback;             /* accelerator auto found GPUs it could not use: cpu chosen */
    const tr_strategy_ops *sops;  /* = &sops_table */
    tr_strategy_ops sops_table;   /* the plugin's table, entries past its ops_size NULL */
    void *strat;
    tr_strategy_info info;
    uint64_t startup_peak;        /* run: this process's peak resident bytes when set up (0: unknown) */
    tr_loader *train_L, *val_L;
    tr_sampler train_sampler;
    FILE *log;                   /* rank 0, `run` only */
    run_loggers loggers;         /* trainer.loggers: rank 0, `run` only (none open elsewhere) */
    char io_error[1400];         /* the first failed write to the log or a logger ("" none) */
    char run_dir[1024];
    progress prog;
} job;

/* Writes text as key's value when the config does not set key (or sets it to null), so that
 * the run's config.yaml is the resolved one. */
tr_status job_set_default(job *j, const char *key, const char *text);
/* Checks j->cfg's sections and reads every setting into j->s, writing absent keys' defaults
 * into the config (so that the run's config.yaml is the resolved one): all of job_plan that
 * needs neither files nor plugins (tests/fuzz/config.c runs it on fuzzed configs). */
tr_status job_read_settings(job *j);
/* The config's paths made absolute (config_paths.c): run.output_dir, plugins, and the model's
 * and dataset's options that name an existing file or folder. After the plugins are found. */
tr_status job_absolute_paths(job *j);
/* Loads the config with overrides, reads every setting and finds the model and dataset
 * plugins (paths made absolute): the part of job_plan that a job without a strategy (trainer
 * export) needs; job_open_model may follow. */
tr_status job_plan_model(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                         const char *const *plugin_dirs);
/* job_plan_model, then picks the strategy (with its resolved options) and checks the world
 * (job_check_world): enough to know how many processes the job needs, and that they fit how
 * this one was started. */
tr_status job_plan(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                   const char *const *plugin_dirs);
/* A strategy plugin's ops table, padded with NULL past the entries it was built with; a
 * table short of the first version's entries or lacking a required one is refused. */
tr_status job_strategy_ops(const tr_plugin *p, tr_strategy_ops *out);
/* Processes per host the planned strategy runs (1 unless it says otherwise). */
int job_processes(const job *j);
/* The world checks (world.c), run by job_plan once the strategy is chosen: a launcher's ranks
 * (trainer launch, torchrun, mpirun, srun) against the strategy and trainer.devices, and the
 * global batch against the ranks, so that `trainer plan`, `trainer run` before it starts any
 * rank, and every rank another launcher started refuse the same configs alike. */
tr_status job_check_world(const job *j);
/* The ranks of the job (the launcher's, when one started several; else the strategy's
 * processes) and, into *local (may be NULL), those on this host. */
int job_world(const job *j, int *local);

/* After job_plan (or job_plan_model): the datasets (their specs checked) and the model
 * factory, no strategy. A caller that set j->dops and j->train_ds first (trainer embed's
 * texts) keeps them: the config's dataset is then not opened, and there is no validation
 * split. */
tr_status job_open_model(job *j);
/* The end of job_open_model: j->models, made for j->ckpt_path when that is a checkpoint
 * folder (job_models.c). */
tr_status job_make_models(job *j);
/* job_plan, then the datasets, the strategy and the loaders. On failure the job is left for
 * job_close. */
tr_status job_open(job *j, const char *config_path, const char *const *overrides,
                   int n_overrides, const char *const *plugin_dirs);
/* job_open after job_plan (eval reads the checkpoint's classes in between). */
tr_status job_open_planned(job *j);
/* The second half of job_open_planned, after job_open_model: the strategy (which makes the
 * replicas) and the loaders (trainer generate checks the model's kind in between, `trainer run`
 * tells the model factory about a resume). */
tr_status job_open_strategy(job *j);
void job_close(job *j);

/* The checkpoint a user's path means (tr_checkpoint_find): a checkpoint folder, a weights file
 * (.safetensors), RUN/best, or the newest one in a checkpoints/ folder or in a run folder's
 * checkpoints/. */
tr_status job_find_checkpoint(const char *path, char *out, size_t size);
/* The same, where `best` and `last` alone mean those of the config's run
 * (run.output_dir/run.name): its newest version that has one. */
tr_status job_resolve_checkpoint(const job *j, const char *path, char *out, size_t size);
/* The train state of the checkpoint at path; one of another model than the config's is
 * refused, naming both. A weights file has none: *state zeroed. */
tr_status job_checkpoint_state(const job *j, const char *path, tr_train_state *state);
/* Loads a checkpoint into the strategy's state (weights; the optimizer state too with
 * with_optim), then syncs the replicas. A checkpoint of another model is refused first. A
 * weights file (.safetensors) loads its weights alone (state zeroed; with_optim refused). */
tr_status job_load_checkpoint(job *j, const char *path, int with_optim, tr_train_state *state);

/* model.init_from, in a fresh run (resuming 0): the weights of the checkpoint or weights file
 * it names (init_from.c); *line (cap bytes) is what to log. A resumed run (from checkpoint
 * `resumed`) ignores it, and *line says so. A refusal names the key and why. */
tr_status job_init_from(job *j, int resuming, const char *resumed, char *line, size_t cap);

/* A line to stdout (above the progress bar) and to log.txt. */
void job_say(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Text to the job's log file f (NULL: nothing), flushed; a failure is kept for
 * job_io_status (the first one, naming the file and the reason). */
void job_write(job *j, FILE *f, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A metrics record to every logger open (none: nothing); a failure is kept as job_write's. */
void job_record(job *j, const run_record *r);
/* TR_OK, or the first failed write of job_write as an error. */
tr_status job_io_status(const job *j);

/* Metrics of one pass over a loader in eval mode, summed over ranks. Targets below 0 (-100,
 * which the losses ignore) are left out of every figure, as the loss leaves them out. */
typedef struct eval_totals {
    double loss_sum;     /* summed per-sample (per-token for LMs) losses */
    int64_t hits;        /* argmax hits (classification, LM next token) */
    int64_t count;       /* targets scored: samples, or tokens for LMs */
    int64_t samples;     /* samples the pass went over */
    class_counts cls;    /* classification: per-class counts (and the confusion matrix) */
    regress_sums reg;    /* regression: error sums and the labels' spread */
} eval_totals;

/* Called per batch with the outputs in sample order (predict writes its CSV from it). */
typedef tr_status (*eval_batch_fn)(void *user, const tr_host_batch *hb, const tr_model_out *out);

/* How a pass goes. */
typedef struct eval_pass {
    int confusion;       /* keep the confusion matrix (trainer eval; up to CLASS_MATRIX_MAX classes) */
    int unlabelled;      /* the split has no labels (trainer predict): outputs only, nothing scored */
    eval_batch_fn fn;    /* NULL, or called per batch */
    void *user;
    int64_t max_batches; /* stop after this many batches (trainer.limit_val_batches; 0: all) */
} eval_pass;

/* One pass over L (epoch `epoch`, no shuffling assumed) summed over ranks into *t, which
 * eval_totals_free releases (also after an error). */
tr_status job_evaluate(job *j, tr_loader *L, int64_t epoch, const eval_pass *how, eval_totals *t);
void eval_totals_free(eval_totals *t);

/* Digest of the config keys that change the math of a run (everything but cadence, paths and
 * length keys such as trainer.max_epochs), 16 hex digits. */
void job_config_digest(const tr_cfg_node *root, char out[17]);
/* Writes up to `size` bytes naming the keys whose values differ between a and b (ignoring
 * the same keys as the digest): "optimizer.lr (3e-4 -> 1e-3), ...". */
void job_config_diff(const tr_cfg_node *a, const tr_cfg_node *b, char *out, size_t size);

#endif
