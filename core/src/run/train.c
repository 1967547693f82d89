/* `trainer run`: the training loop. The trainer owns epochs, validation, logging and
 * checkpoint cadence; the strategy plugin owns each step (docs/design.md "Step and loop"). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/io_error.h"
#include "interrupt.h"
#include "job.h"
#include "nonfinite.h"
#include "run/checkpoint_impl.h"
#include "run/ckpt_select.h"
#include "run/curves.h"
#include "run/early_stop.h"
#include "run/loop_totals.h"
#include "run/run_limits.h"
#include "run/run_lock.h"
#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/memory.h"
#include "trainer/profile.h"
#include "trainer/run.h"
#include "trainer/runtime.h"

typedef struct loop {
    job *j;
    char ck_dir[1200];
    tr_train_state state;
    int64_t per_epoch, n_batches, total, last_saved; /* n_batches: the epoch's, after limit_train_batches */
    limit_counts lim;  /* trainer.limit_*_batches, val_check_interval (run_limits.h) */
    loop_totals tot;   /* the epoch's and the log window's loss sums, skipped steps: checkpointed */
    int64_t nan_at;    /* fault injection: the step whose batch gets a NaN (0: none) */
    double per_sample_tokens;
    tr_fault_point fault;    /* TRAINER_FAULT_KILL_* for this rank (base/fault.h) */
    int64_t fault_step;
    tr_profile *prof;        /* trainer.profile: attached to this thread from the end of the
                              * first step to the end of the last (neither the warm-up nor the
                              * run's final validation and checkpoint count) */
    int64_t prof_from;       /* the step it was attached after (0: not yet) */
    ckpt_select sel;         /* checkpoint.monitor's top k, best and last: checkpointed */
    early_stop es;           /* trainer.early_stopping: checkpointed */
    int want_save;           /* this step entered the top k: save it */
    int early_stopped;       /* early stopping ended the run at this step */
} loop;

/* Every rank learns whether any failed: TR_OK when none did; else this rank's own error, or
 * "WHAT: OTHERS" when only others failed. */
static tr_status agree(job *j, tr_status st, const char *what, const char *others) {
    char msg[1024] = "";
    if (st != TR_OK) snprintf(msg, sizeof msg, "%s", tr_error_msg());
    double failed = st != TR_OK;
    if (j->sops->all_sum) {
        tr_status a = j->sops->all_sum(j->strat, &failed, 1);
        if (a != TR_OK) return st != TR_OK ? tr_error_set(st, "%s", msg) : a;
    }
    if (failed == 0) return TR_OK;
    return st != TR_OK ? tr_error_set(st, "%s", msg) : tr_error_set(TR_ERR_IO, "%s: %s", what, others);
}

/* A sharded strategy's checkpoint: every rank writes its shard (checkpoint.h). */
static tr_status save_sharded(loop *lp, const char *name, json_t *totals) {
    job *j = lp->j;
    double tag = j->info.rank == 0 ? (double)getpid() : 0;
    if (j->sops->all_sum) TR_CHECK(j->sops->all_sum(j->strat, &tag, 1));
    char tmp[1200], what[1300];
    snprintf(what, sizeof what, "checkpoint %s/%s not saved", lp->ck_dir, name);
    tr_status st = j->info.rank == 0 ? tr_checkpoint_begin(lp->ck_dir, name, (long)tag, tmp, sizeof tmp)
                                     : tr_checkpoint_tmp_path(lp->ck_dir, name, (long)tag, tmp, sizeof tmp);
    TR_CHECK(agree(j, st, what, "rank 0 failed"));
    tr_state_shards sh;
    st = j->sops->shards(j->strat, &sh);
    if (st == TR_OK)
        st = tr_checkpoint_write_shard(tmp, j->info.rank, j->info.world, sh.P, sh.opt, sh.pieces, sh.n_pieces);
    if (st != TR_OK) tr_error_prefix("%s: ", what);
    st = agree(j, st, what, "another rank failed to write its shard");
    if (st != TR_OK) {
        if (j->info.rank == 0) tr_checkpoint_abandon(tmp);
        return st;
    }
    if (j->info.rank == 0) {
        st = ckpt_commit_shards(lp->ck_dir, name, tmp, j->info.world, sh.P, sh.opt, &lp->state, &j->classes, totals);
        if (st == TR_OK) st = select_after_save(&lp->sel, lp->ck_dir, (int)j->s.keep_last, lp->state.step);
    }
    /* No rank goes on before the checkpoint is in place: a failure right after the save
     * (any rank's) then always finds it. */
    return agree(j, st, what, "rank 0 failed");
}

/* Saves step-<step>, prunes to keep_last. */
static tr_status save_checkpoint(loop *lp) {
    job *j = lp->j;
    if (j->s.lim.fast_dev_run) { /* Lightning's fast_dev_run saves nothing */
        lp->want_save = 0;
        return TR_OK;
    }
    tr_profile_enter("loop", "checkpoint");
    if (j->sops->settle) TR_CHECK(j->sops->settle(j->strat));
    if (lp->fault == TR_FAULT_CHECKPOINT && lp->state.step == lp->fault_step) tr_fault_arm(TR_FAULT_CHECKPOINT);
    tr_status st = TR_OK;
    char name[64];
    select_name(name, sizeof name, lp->state.step);
    lp->tot.total_steps = lp->total;
    json_t *totals = loop_totals_json(&lp->tot);
    if (totals && (select_put(&lp->sel, totals) != 0 || early_stop_put(&lp->es, totals) != 0)) {
        json_decref(totals);
        totals = NULL;
    }
    if (!totals) {
        st = tr_error_set(TR_ERR_NOMEM, "checkpoint %s/%s: cannot encode the loop's figures", lp->ck_dir, name);
    } else if (j->sops->shards) {
        st = save_sharded(lp, name, totals);
    } else if (j->info.rank == 0) {
        tr_params *P;
        tr_optim *opt;
        st = j->sops->state(j->strat, &P, &opt);
        if (st == TR_OK) st = ckpt_save(lp->ck_dir, name, P, opt, &lp->state, &j->classes, totals);
        if (st == TR_OK) st = select_after_save(&lp->sel, lp->ck_dir, (int)j->s.keep_last, lp->state.step);
    }
    json_decref(totals);
    tr_fault_disarm(); /* a rank that writes nothing (ddp's others) does not die later instead */
    TR_CHECK(st);
    lp->last_saved = lp->state.step;
    lp->want_save = 0;
    return TR_OK;
}

/* Fault injection for the tests: TRAINER_FAULT_NAN_AT_STEP=N makes the first input value of
 * optimizer step N's first micro-batch (1-based, as logged) NaN; with TRAINER_FAULT_NAN_RANK=r
 * on rank r only. Floating-point inputs only. Read once: the step to poison on this rank, or 0. */
static int64_t fault_nan_step(const job *j) {
    const char *at = getenv("TRAINER_FAULT_NAN_AT_STEP"), *rank = getenv("TRAINER_FAULT_NAN_RANK");
    if (!at || (rank && atoi(rank) != j->info.rank) || j->spec.x_dtype != TR_F32) return 0;
    return atoll(at);
}

static void fault_nan(const loop *lp, int64_t step, const tr_micro_batch *mb) {
    if (lp->nan_at == step && mb->first && mb->hb->size > 0) ((float *)mb->hb->x)[0] = NAN;
}

/* A step whose loss or gradient norm was not finite (optim_step applied no non-finite
 * gradient): stop with the description, or with on_nan skip log it and go on, unless the
 * parameters or buffers themselves are no longer finite. */
static tr_status nonfinite_step(loop *lp, const nonfinite_seen *seen, int64_t step, double loss, double gnorm,
                                int gnorm_bad) {
    job *j = lp->j;
    char what[1024];
    int model_bad;
    TR_CHECK(nonfinite_describe(j, seen, step, gnorm, gnorm_bad, what, sizeof what, &model_bad));
    char newest[96] = "no checkpoint was saved";
    if (lp->last_saved >= 0) snprintf(newest, sizeof newest, "the newest checkpoint is step-%08lld", (long long)lp->last_saved);
    if (j->s.on_nan == ON_NAN_STOP)
        return tr_error_set(TR_ERR_NUMERIC, "%s (trainer.on_nan: stop; %s; on_nan: skip leaves such steps out)", what, newest);
    if (model_bad)
        return tr_error_set(TR_ERR_NUMERIC, "%s: the model itself is not finite, skipping steps cannot help (%s)", what, newest);
    if (!gnorm_bad) { /* a non-finite loss with finite gradients: the update is in */
        job_say(j, "warning: %s; its gradients were finite and the step was applied (trainer.on_nan: skip leaves out "
                   "steps with non-finite gradients)", what);
        return TR_OK;
    }
    lp->tot.skipped++;
    if (++lp->tot.skipped_in_a_row > j->s.max_consecutive_skips && j->s.max_consecutive_skips > 0)
        return tr_error_set(TR_ERR_NUMERIC, "%s: %lld steps in a row left out (trainer.max_consecutive_skips %lld): the model "
                                            "diverged, not a batch (%s)",
                            what, (long long)lp->tot.skipped_in_a_row, (long long)j->s.max_consecutive_skips, newest);
    job_say(j, "warning: %s; step left out (trainer.on_nan: skip; %lld so far)", what, (long long)lp->tot.skipped);
    run_value v[] = {RUN_INT("step", step), RUN_BOOL("skipped", 1), RUN_BOOL("loss_finite", isfinite(loss))};
    job_record(j, &(run_record){.kind = RUN_RECORD_SKIPPED, .v = v, .n = 3});
    return job_io_status(j);
}

/* The version folder of runs/<name>/: with resume auto, the one holding the newest
 * checkpoint of this run name (its path in ckpt); otherwise the first unused one. Sets
 * j->run_dir and *version; returns 1 when resuming. */
static int pick_run_dir(job *j, char *ckpt, size_t size, int *version) {
    int64_t best_step = -1;
    int found = -1;
    for (int v = 0; j->s.resume == 0 && v < 100000; v++) {
        char d[1100], cdir[1200], cand[1200];
        snprintf(d, sizeof d, "%s/%s/%d", j->s.outdir, j->s.name, v);
        struct stat sb;
        if (stat(d, &sb) != 0) break;
        snprintf(cdir, sizeof cdir, "%s/checkpoints", d);
        const char *base;
        long long cstep;
        if (tr_checkpoint_latest(cdir, cand, sizeof cand) == TR_OK && (base = strrchr(cand, '/')) &&
            sscanf(base, "/step-%lld", &cstep) == 1 && cstep > best_step) {
            best_step = cstep;
            found = v;
            snprintf(ckpt, size, "%s", cand);
        }
    }
    if (found >= 0) {
        snprintf(j->run_dir, sizeof j->run_dir, "%s/%s/%d", j->s.outdir, j->s.name, found);
        *version = found;
        return 1;
    }
    for (int v = 0; v < 100000; v++) {
        snprintf(j->run_dir, sizeof j->run_dir, "%s/%s/%d", j->s.outdir, j->s.name, v);
        *version = v;
        struct stat sb;
        if (stat(j->run_dir, &sb) != 0) break;
    }
    return 0;
}

/* Whether the run of the checkpoint at ckpt goes on (*more): it has not reached total steps and
 * early stopping did not end it (*stopped); *step: its step. */
static tr_status run_goes_on(const char *ckpt, int64_t total, int *more, int64_t *step, int *stopped) {
    tr_train_state found;
    TR_CHECK(tr_checkpoint_read_state(ckpt, &found));
    *stopped = early_stop_ended(ckpt);
    *step = found.step;
    *more = found.step < total && !*stopped;
    return TR_OK;
}

/* Whether the run will resume, and from which checkpoint (into ckpt), as pick_locked will
 * decide: read before the strategy exists (so on every rank, without the lock). */
static int probe_resume(job *j, int64_t total, char *ckpt, size_t size) {
    int version, more, stopped;
    int64_t step;
    if (!pick_run_dir(j, ckpt, size, &version)) return 0;
    if (run_goes_on(ckpt, total, &more, &step, &stopped) != TR_OK) { /* rank 0 says why below */
        tr_error_clear();
        return 0;
    }
    return more;
}

/* Rank 0: the run folder, locked (run_lock.h) before any of its checkpoints is read: a
 * trainer still writing it then refuses this one at once, instead of this one reading a
 * checkpoint that the other's keep_last prunes meanwhile. A finished run is let go again
 * for the next version. */
static tr_status pick_locked(job *j, int64_t total, run_lock *lock, char *ckpt, size_t size, int *version,
                             int *resuming) {
    *resuming = pick_run_dir(j, ckpt, size, version);
    TR_CHECK(run_lock_take(lock, j->run_dir));
    if (!*resuming) return TR_OK;
    int more, stopped;
    int64_t step;
    TR_CHECK(run_goes_on(ckpt, total, &more, &step, &stopped));
    if (more) return TR_OK;
    if (stopped)
        job_say(j, "%s is complete (trainer.early_stopping ended it at step %lld); starting a new version", j->run_dir,
                (long long)step);
    else
        job_say(j, "%s is complete (step %lld of %lld); starting a new version", j->run_dir, (long long)step,
                (long long)total);
    run_lock_release(lock);
    int keep = j->s.resume;
    j->s.resume = 1;
    *resuming = pick_run_dir(j, ckpt, size, version);
    j->s.resume = keep;
    return run_lock_take(lock, j->run_dir);
}

/* Rank 0 picks the run directory (a finished run starts the next version), locks it and
 * tells the other ranks, so that all agree before anyone creates a folder. */
static tr_status choose_run_dir(job *j, int64_t total, run_lock *lock, char *ckpt, size_t size, int *resuming) {
    int version = 0;
    *resuming = 0;
    tr_status st = j->info.rank == 0 ? pick_locked(j, total, lock, ckpt, size, &version, resuming) : TR_OK;
    char what[1100];
    snprintf(what, sizeof what, "%s/%s", j->s.outdir, j->s.name);
    TR_CHECK(agree(j, st, what, "rank 0 cannot choose or lock the run folder"));
    if (j->info.world > 1 && j->sops->all_sum) {
        double v[2] = {j->info.rank == 0 ? version : 0, j->info.rank == 0 ? *resuming : 0};
        TR_CHECK(j->sops->all_sum(j->strat, v, 2));
        version = (int)v[0];
        *resuming = v[1] > 0;
        snprintf(j->run_dir, sizeof j->run_dir, "%s/%s/%d", j->s.outdir, j->s.name, version);
        char cdir[1200];
        snprintf(cdir, sizeof cdir, "%s/checkpoints", j->run_dir);
        if (*resuming) TR_CHECK(tr_checkpoint_latest(cdir, ckpt, size));
    }
    return TR_OK;
}

/* Resuming under a config that changes the math would not continue the same run: refused,
 * naming the keys that differ from the run's saved config.yaml. */
static tr_status check_resume_config(job *j, const char *ckpt, const tr_train_state *s, const char *digest) {
    if (!s->config_hash[0] || strcmp(s->config_hash, digest) == 0) return TR_OK;
    char path[1200], diff[1024] = "";
    snprintf(path, sizeof path, "%s/config.yaml", j->run_dir);
    tr_config *old;
    if (tr_config_load(&old, path) == TR_OK) {
        job_config_diff(tr_config_root(old), j->root, diff, sizeof diff);
        tr_config_destroy(old);
    }
    return tr_error_set(TR_ERR_INVALID,
                        "cannot resume from %s: the config changed since it was written%s%s; start a new run "
                        "(another run.name) or set checkpoint.resume: never",
                        ckpt, diff[0] ? ": " : "", diff);
}

/* Rank 0: trainer.loggers' files, and the resolved config (config.yaml, just written) to
 * those that keep texts, at the step the run starts from. */
static tr_status open_loggers(job *j, int resuming, int64_t step) {
    TR_CHECK(run_loggers_open(&j->loggers, j->s.loggers, &(run_logger_env){.run_dir = j->run_dir, .resuming = resuming}));
    char path[1300], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/config.yaml", j->run_dir);
    TR_CHECK(tr_file_read(path, &text, &len));
    tr_status st = run_loggers_text(&j->loggers, "config", text, step);
    tr_free(text);
    return st;
}

/* Rank 0: the run folder, its config, log and metrics files and the checkpoints folder, made
 * and probed before training so that an unwritable place fails at once; the folders a
 * killed save left are removed. */
static tr_status open_run_dir(job *j, int resuming, int64_t step, const char *ck_dir) {
    char path[1300], why[256];
    TR_CHECK(tr_mkdirs(j->run_dir));
    snprintf(path, sizeof path, "%s/config.yaml", j->run_dir);
    TR_CHECK(tr_config_save(j->cfg, path));
    const char *mode = resuming ? "a" : "w";
    snprintf(path, sizeof path, "%s/log.txt", j->run_dir);
    j->log = fopen(path, mode);
    if (!j->log) return tr_error_set(TR_ERR_IO, "%s: cannot write: %s", path, tr_io_reason(errno, why, sizeof why));
    TR_CHECK(open_loggers(j, resuming, step));
    TR_CHECK(tr_mkdirs(ck_dir));
    snprintf(path, sizeof path, "%s/.write-test-%ld", ck_dir, (long)getpid());
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return tr_error_set(TR_ERR_IO, "%s: checkpoints cannot be written there: %s", ck_dir,
                            tr_io_reason(errno, why, sizeof why));
    rmdir(path);
    int removed;
    TR_CHECK(ckpt_remove_stale(ck_dir, &removed));
    if (removed) job_say(j, "removed %d incomplete checkpoint folder%s (*.tmp-*) an interrupted save left in %s", removed,
                         removed == 1 ? "" : "s", ck_dir);
    return TR_OK;
}

/* After a validation: the monitored values offered to early stopping and then to the top k (so
 * that a checkpoint saved at this step holds both decisions). Rank 0's values, on every rank:
 * the ranks take the same decisions from the same numbers, and save and stop at one step. */
static tr_status watch(loop *lp, int64_t epoch, double vloss, double vacc) {
    job *j = lp->j;
    if (lp->sel.m.metric == MONITOR_OFF && lp->es.m.metric == MONITOR_OFF) return TR_OK;
    double v[2] = {monitor_value(&lp->sel.m, vloss, vacc), monitor_value(&lp->es.m, vloss, vacc)};
    if (j->info.rank != 0) v[0] = v[1] = 0;
    if (j->sops->all_sum) TR_CHECK(j->sops->all_sum(j->strat, v, 2));
    int64_t step = lp->state.step;
    early_stop *e = &lp->es;
    if (!lp->early_stopped && early_stop_update(e, step, v[1])) {
        lp->early_stopped = 1;
        job_say(j, "early stopping at step %lld: %s has not improved on its best, %.6g at step %lld, by more than %g in %lld "
                   "validations (trainer.early_stopping.patience %lld)",
                (long long)step, monitor_name(e->m.metric), e->best, (long long)e->best_step, e->min_delta,
                (long long)e->wait, (long long)e->patience);
        char best[48];
        snprintf(best, sizeof best, "best_%s", monitor_name(e->m.metric));
        run_value rec[] = {RUN_INT("step", step), RUN_INT("epoch", epoch + 1), RUN_BOOL("early_stopped", 1),
                           RUN_REAL(best, e->best, "%.9g"), RUN_INT("best_step", e->best_step), RUN_INT("patience", e->patience)};
        job_record(j, &(run_record){.kind = RUN_RECORD_STOPPED, .v = rec, .n = 6});
    }
    int entered = select_offer(&lp->sel, step, v[0]);
    if (entered < 0) return tr_error_set(TR_ERR_NOMEM, "checkpoint.monitor: out of memory");
    if (entered) lp->want_save = 1;
    return job_io_status(j);
}

/* A validation's line and metrics record (t counted something): val_loss, then
 * val_accuracy and the macro and weighted scores (classification), val_perplexity (LMs) or
 * val_mae, val_rmse and val_r2 (regression). */
static tr_status val_report(loop *lp, int64_t epoch, const char *when, const eval_totals *t, double *vloss, double *vacc) {
    job *j = lp->j;
    *vloss = t->loss_sum / (double)t->count;
    if (j->spec.task != TR_TASK_REGRESS) *vacc = (double)t->hits / (double)t->count;
    char extra[96] = "";
    if (isfinite(*vacc)) snprintf(extra, sizeof extra, "  val accuracy %.2f%%", 100 * *vacc); /* not for regression */
    if (j->spec.task == TR_TASK_LM) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "  val perplexity %.3f", exp(*vloss));
    job_say(j, "%s: val loss %.4f%s", when, *vloss, extra);
    run_value v[12] = {RUN_INT("step", lp->state.step), RUN_INT("epoch", epoch + 1), RUN_REAL("val_loss", *vloss, "%.9g")};
    int n = 3;
    if (isfinite(*vacc)) v[n++] = RUN_REAL("val_accuracy", *vacc, "%.6g");
    if (j->spec.task == TR_TASK_LM) v[n++] = RUN_REAL("val_perplexity", exp(*vloss), "%.6g");
    if (t->cls.v) {
        class_scores cs;
        TR_CHECK(class_scores_compute(&cs, &t->cls));
        v[n++] = RUN_REAL("val_precision_macro", cs.precision_macro, "%.6g");
        v[n++] = RUN_REAL("val_recall_macro", cs.recall_macro, "%.6g");
        v[n++] = RUN_REAL("val_f1_macro", cs.f1_macro, "%.6g");
        v[n++] = RUN_REAL("val_precision_weighted", cs.precision_weighted, "%.6g");
        v[n++] = RUN_REAL("val_recall_weighted", cs.recall_weighted, "%.6g");
        v[n++] = RUN_REAL("val_f1_weighted", cs.f1_weighted, "%.6g");
        class_scores_free(&cs);
    }
    if (t->reg.v) {
        regress_scores rs;
        regress_scores_of(&t->reg, &rs);
        v[n++] = RUN_REAL("val_mae", rs.mae, "%.6g");
        v[n++] = RUN_REAL("val_rmse", rs.rmse, "%.6g");
        v[n++] = RUN_REAL("val_r2", rs.r2, "%.6g");
    }
    job_record(j, &(run_record){.kind = RUN_RECORD_VAL, .v = v, .n = n});
    return job_io_status(j);
}

/* Validation: a line, a metrics record; returns loss and accuracy. epoch counts from 0, as the
 * loop's and the checkpoint's; the records, as the log, count from 1. */
static tr_status validate(loop *lp, int64_t epoch, const char *when, double *vloss, double *vacc) {
    job *j = lp->j;
    *vloss = *vacc = NAN;
    if (!j->val_L || lp->lim.val == 0) return TR_OK;
    tr_profile_enter("loop", "validation");
    if (j->sops->settle) TR_CHECK(j->sops->settle(j->strat));
    eval_totals t;
    eval_pass how = {.max_batches = lp->lim.val};
    tr_status st = job_evaluate(j, j->val_L, epoch, &how, &t);
    int counted = st == TR_OK && t.count > 0;
    if (counted) st = val_report(lp, epoch, when, &t, vloss, vacc);
    eval_totals_free(&t);
    TR_CHECK(st);
    return counted ? watch(lp, epoch, *vloss, *vacc) : TR_OK;
}

/* Samples of the optimizer-step group that global batch `index` belongs to (accumulation:
 * `accum` batches per step, the epoch's last group may be shorter and its last batch too). */
static int64_t group_samples(const loop *lp, int64_t index, int *first, int *last) {
    const job *j = lp->j;
    int64_t accum = j->s.accum, g0 = index - index % accum;
    int64_t g1 = g0 + accum < lp->n_batches ? g0 + accum : lp->n_batches;
    int64_t n = (g1 - g0) * j->s.batch;
    if (g1 == lp->lim.train_all && lp->lim.train_all * j->s.batch > j->train_sampler.n) /* the short last batch */
        n -= lp->lim.train_all * j->s.batch - j->train_sampler.n;
    *first = index == g0;
    *last = index + 1 == g1;
    return n;
}

/* The next batch of the epoch (trainer.profile: its own region). */
static tr_status next_batch(loop *lp, const tr_host_batch **hb) {
    tr_profile_enter("data", "next batch");
    return tr_loader_next(lp->j->train_L, hb);
}

/* trainer.profile, at the end of a step: attached after the first (the warm-up: allocations,
 * first touches), detached after the last. */
static void profile_step_done(loop *lp, int64_t step) {
    if (!lp->prof) return;
    if (!lp->prof_from) {
        tr_profile_attach(lp->prof);
        lp->prof_from = step;
    }
    if (step == lp->total) tr_profile_attach(NULL);
}

/* trainer.profile: the table into the run folder (rank r > 0: profile-rank<r>.*) and a line in
 * the log. The run's results are saved by now: a table that cannot be written is a warning. */
static void write_profile(loop *lp) {
    job *j = lp->j;
    tr_profile_attach(NULL);
    int64_t steps = lp->state.step - lp->prof_from;
    if (j->s.lim.fast_dev_run) {
        job_say(j, "profile: not written (trainer.fast_dev_run makes no run folder)");
        return;
    }
    if (!lp->prof_from || steps <= 0) {
        job_say(j, "profile: nothing recorded (the first step of a run is left out as warm-up; run more steps)");
        return;
    }
    char txt[1300], json[1300], rank[32] = "", line[512];
    if (j->info.rank) snprintf(rank, sizeof rank, "-rank%d", j->info.rank);
    snprintf(txt, sizeof txt, "%s/profile%s.txt", j->run_dir, rank);
    snprintf(json, sizeof json, "%s/profile%s.json", j->run_dir, rank);
    if (tr_profile_write(lp->prof, steps, txt, json) != TR_OK) {
        TR_WARN("rank %d: the profile was not written: %s", j->info.rank, tr_error_msg());
        return;
    }
    tr_profile_summary(lp->prof, steps, line, sizeof line);
    job_say(j, "profile: %s (%s)", line, txt);
}

/* The schedule over a run of `total` optimizer steps (cosine decays over what follows the
 * warm-up). */
static tr_sched_config sched_over(const job *j, int64_t total) {
    tr_sched_config sc = j->s.sched;
    sc.total_steps = total - sc.warmup_steps > 1 ? total - sc.warmup_steps : 1;
    return sc;
}

/* Ctrl-C or SIGTERM (tr_run_interrupt) on some rank, agreed by all at this step: saved here
 * (mid-epoch, resumed exactly as checkpoint.every_n_steps is) so that nothing is lost. */
static tr_status stop_interrupted(loop *lp, int64_t ep, const tr_host_batch *hb, int signo) {
    lp->state.epoch = ep;
    lp->state.batch_in_epoch = hb->index + 1;
    if (lp->last_saved != lp->state.step) TR_CHECK(save_checkpoint(lp));
    signo = run_interrupt_signal() ? run_interrupt_signal() : signo; /* the sum over ranks is no signal */
    if (lp->j->s.lim.fast_dev_run)
        return tr_error_set(TR_ERR_ABORTED, "stopped by %s at step %lld of %lld (trainer.fast_dev_run: nothing saved)",
                            signo == SIGTERM ? "SIGTERM" : signo == SIGINT ? "SIGINT (Ctrl-C)" : "a signal",
                            (long long)lp->state.step, (long long)lp->total);
    return tr_error_set(TR_ERR_ABORTED, "stopped by %s at step %lld of %lld: saved %s/step-%08lld; run the same "
                                        "command again to resume from it",
                        signo == SIGTERM ? "SIGTERM" : signo == SIGINT ? "SIGINT (Ctrl-C)" : "a signal",
                        (long long)lp->state.step, (long long)lp->total, lp->ck_dir, (long long)lp->state.step);
}

static tr_status train_loop(loop *lp, tr_run_result *res) {
    job *j = lp->j;
    job_settings *s = &j->s;
    tr_sched_config sc = sched_over(j, lp->total);
    int64_t step = lp->state.step, ep, resume_epoch = lp->state.epoch, resume_batch = lp->state.batch_in_epoch;
    double t0 = tr_now(), samples = 0, epoch_loss = NAN, vloss = NAN, vacc = NAN;
    progress_init(&j->prog, j->info.rank == 0 ? s->progress : 2, step); /* one bar: rank 0's */
    for (ep = lp->state.epoch; ep < s->max_epochs && step < lp->total && !lp->early_stopped; ep++) {
        int64_t start_batch = ep == resume_epoch ? resume_batch : 0;
        tr_profile_enter("loop", "epoch start");
        TR_CHECK(tr_loader_start_epoch(j->train_L, ep, start_batch));
        /* An epoch resumed part-way goes on with the sums its checkpoint saved. */
        if (start_batch == 0) {
            lp->tot.epoch_loss_sum = lp->tot.window_loss_sum = 0;
            lp->tot.epoch_steps = lp->tot.window_steps = 0;
        }
        double step_loss = 0, win_t = tr_now(), win_samples = 0;
        int64_t consumed = start_batch; /* batches of the epoch done */
        int64_t before = start_batch;   /* ... before this optimizer step */
        int64_t validated = -1;         /* the step validated last in this epoch */
        int end_due = 0;                /* the run's last step calls for a validation: at its end */
        const tr_host_batch *hb = NULL;
        nonfinite_seen seen = {0};
        tr_status st = TR_OK;
        while (step < lp->total && consumed < lp->n_batches && (st = next_batch(lp, &hb)) == TR_OK && hb) {
            tr_micro_batch mb = {.hb = hb, .step = step};
            int64_t gs = group_samples(lp, hb->index, &mb.first, &mb.last);
            mb.normaliser = (double)gs * lp->per_sample_tokens;
            if (mb.first && lp->fault == TR_FAULT_COLLECTIVE && step + 1 == lp->fault_step)
                tr_fault_arm(TR_FAULT_COLLECTIVE); /* the communicator fires it (comm.c) */
            double loss;
            fault_nan(lp, step + 1, &mb);
            tr_profile_set_ops((int)s->profile);
            tr_profile_enter("forward", "(before the first op)");
            st = j->sops->train_micro(j->strat, &mb, &loss);
            tr_profile_set_ops(TR_PROFILE_OPS_OFF);
            TR_CHECK(st);
            if (!isfinite(loss)) nonfinite_note(&seen, &j->spec, hb, loss);
            seen.last = hb;
            consumed = hb->index + 1;
            step_loss += loss;
            samples += (double)hb->size;
            win_samples += (double)hb->global_size;
            if (!mb.last) continue;
            double lr = tr_sched_lr(&sc, s->optim.lr, step), gnorm;
            tr_profile_enter("strategy", "optim_step");
            TR_CHECK(j->sops->optim_step(j->strat, lr, s->grad_clip, &gnorm));
            tr_profile_enter("loop", "logging and metrics");
            /* The step's loss over all ranks, whether any rank's gradient norm was not finite
             * (a strategy's norm may be its rank's own) and whether any was asked to stop
             * (Ctrl-C, SIGTERM): every rank agrees on them. */
            double agreed[3] = {step_loss, !isfinite(gnorm), run_interrupt_signal()};
            if (j->sops->all_sum) TR_CHECK(j->sops->all_sum(j->strat, agreed, 3));
            step_loss = agreed[0];
            step++;
            if (!isfinite(step_loss) || agreed[1] > 0) {
                TR_CHECK(nonfinite_step(lp, &seen, step, step_loss, gnorm, agreed[1] > 0));
            } else {
                lp->tot.skipped_in_a_row = 0;
                lp->tot.window_loss_sum += step_loss;
                lp->tot.epoch_loss_sum += step_loss;
                lp->tot.window_steps++;
                lp->tot.epoch_steps++;
            }
            step_loss = 0;
            seen = (nonfinite_seen){0};
            int log_now = step % s->log_every == 0 || step == lp->total;
            if (log_now || j->prog.bar) {
                loop_totals *t = &lp->tot;
                double wl = t->window_steps ? t->window_loss_sum / (double)t->window_steps : NAN;
                double dt = tr_now() - win_t, sps = dt > 0 ? win_samples / dt : 0;
                progress_update(&j->prog, ep, s->max_epochs, step, lp->total, wl, sps);
                if (log_now) {
                    char line[256];
                    snprintf(line, sizeof line, "epoch %lld  step %lld/%lld  loss %.4f  lr %.3g  grad norm %.3g  %.0f samples/s",
                             (long long)ep + 1, (long long)step, (long long)lp->total, wl, lr, gnorm, sps);
                    if (j->spec.task == TR_TASK_LM)
                        snprintf(line + strlen(line), sizeof line - strlen(line), "  %.0f tokens/s", sps * lp->per_sample_tokens);
                    if (j->prog.bar) {
                        job_write(j, j->log, "%s\n", line);
                    } else {
                        job_say(j, "%s", line);
                    }
                    run_value v[7] = {RUN_INT("step", step), RUN_INT("epoch", ep + 1), RUN_REAL("loss", wl, "%.9g"),
                                      RUN_REAL("lr", lr, "%.6g"), RUN_REAL("grad_norm", gnorm, "%.6g"),
                                      RUN_REAL("samples_per_sec", sps, "%.1f")};
                    if (j->spec.task == TR_TASK_LM) /* samples are not tokens for the other tasks */
                        v[6] = RUN_REAL("tokens_per_sec", sps * lp->per_sample_tokens, "%.1f");
                    job_record(j, &(run_record){.kind = RUN_RECORD_TRAIN, .v = v, .n = j->spec.task == TR_TASK_LM ? 7 : 6});
                    TR_CHECK(job_io_status(j));
                    /* The loss window restarts at log_every's multiples only: a record at the
                     * run's last step ends this run, and one that extends it (a larger
                     * max_steps) continues the window the checkpoint saved, as an
                     * uninterrupted run would. */
                    if (step % s->log_every == 0) {
                        t->window_loss_sum = 0;
                        t->window_steps = 0;
                    }
                    win_samples = 0;
                    win_t = tr_now();
                }
            }
            lp->state.step = step;
            double paused = tr_now(); /* validation and saving are not training: out of samples/s */
            int due = limits_val_due(j, &lp->lim, ep, step, before, consumed);
            before = consumed;
            /* Before this step's checkpoint, which then holds the validation's decisions; the run's
             * last step validates at its end, as the run's end does (outside trainer.profile). */
            if (due && step == lp->total) end_due = 1;
            else if (due) {
                validated = step;
                char when[64];
                snprintf(when, sizeof when, "step %lld", (long long)step);
                TR_CHECK(validate(lp, ep, when, &vloss, &vacc));
            }
            /* The run's last step is saved at its end, after its validation. */
            if ((lp->want_save || (s->ck_steps > 0 && step % s->ck_steps == 0)) && lp->last_saved != step && step < lp->total) {
                lp->state.epoch = ep;
                lp->state.batch_in_epoch = consumed;
                TR_CHECK(save_checkpoint(lp));
            }
            win_t += tr_now() - paused;
            if (step == lp->fault_step && lp->fault != TR_FAULT_NONE) {
                tr_fault_disarm(); /* a collective point whose step had no collective */
                if (lp->fault == TR_FAULT_STEP)
                    tr_fault_kill("rank %d after step %lld", j->info.rank, (long long)step);
            }
            profile_step_done(lp, step);
            if (lp->early_stopped) break; /* decided by this step's validation; the epoch's end saves */
            /* At the run's last step the run ends here anyway: it finishes (its epoch end,
             * validation and last checkpoint) rather than leave a checkpoint at its end that
             * a rerun takes for a finished run and so never completes. */
            if (agreed[2] > 0 && step < lp->total) return stop_interrupted(lp, ep, hb, (int)agreed[2]);
        }
        TR_CHECK(st);
        tr_profile_enter("loop", "epoch end");
        /* trainer.max_steps can end the run part-way through an epoch: its checkpoint then
         * says where, and a run that extends it (a larger max_steps) goes on from there. */
        int complete = !hb || consumed >= lp->n_batches;
        epoch_loss = lp->tot.epoch_steps ? lp->tot.epoch_loss_sum / (double)lp->tot.epoch_steps : NAN;
        char when[160];
        int stopped = lp->early_stopped; /* by a validation inside the epoch, which need not run again */
        if (complete)
            snprintf(when, sizeof when, "epoch %lld/%lld done: train loss %.4f", (long long)ep + 1, (long long)s->max_epochs,
                     epoch_loss);
        else if (stopped)
            snprintf(when, sizeof when, "epoch %lld/%lld stopped at step %lld by trainer.early_stopping (batch %lld of %lld): "
                     "train loss so far %.4f", (long long)ep + 1, (long long)s->max_epochs, (long long)step,
                     (long long)consumed, (long long)lp->n_batches, epoch_loss);
        else
            snprintf(when, sizeof when, "epoch %lld/%lld stopped at step %lld by trainer.max_steps (batch %lld of %lld): "
                     "train loss so far %.4f", (long long)ep + 1, (long long)s->max_epochs, (long long)step,
                     (long long)consumed, (long long)lp->n_batches, epoch_loss);
        int last = ep + 1 >= s->max_epochs || step >= lp->total;
        lp->state.epoch = complete ? ep + 1 : ep; /* a checkpoint the validation makes due resumes after it */
        lp->state.batch_in_epoch = complete ? 0 : consumed;
        /* A step validates once: one that val_every_n_steps or val_check_interval validated is not again. */
        if (!stopped && j->val_L && validated != step && (end_due || limits_val_at_epoch_end(j, &lp->lim, ep, last)))
            TR_CHECK(validate(lp, ep, when, &vloss, &vacc));
        else job_say(j, "%s", when);
        run_value v[] = {RUN_INT("epoch", ep + 1), RUN_INT("step", step), RUN_REAL("train_loss", epoch_loss, "%.9g"),
                         RUN_BOOL("partial", 1)};
        job_record(j, &(run_record){.kind = RUN_RECORD_EPOCH, .v = v, .n = complete ? 3 : 4});
        TR_CHECK(job_io_status(j));
        if (lp->last_saved != step && ((s->ck_epochs > 0 && (ep + 1) % s->ck_epochs == 0) || last || lp->want_save ||
                                       lp->early_stopped))
            TR_CHECK(save_checkpoint(lp));
    }
    double dt = tr_now() - t0;
    if (lp->prof) write_profile(lp);
    snprintf(res->run_dir, sizeof res->run_dir, "%s", j->run_dir);
    res->steps = step;
    res->epochs = ep;
    res->train_loss = epoch_loss;
    res->val_loss = vloss;
    res->val_accuracy = vacc;
    res->samples_per_sec = dt > 0 ? samples * j->info.data_world / dt : 0;
    char acc[128] = "";
    if (isfinite(vacc)) snprintf(acc, sizeof acc, "; final validation accuracy: %.2f%%", 100 * vacc);
    if (lp->tot.skipped)
        snprintf(acc + strlen(acc), sizeof acc - strlen(acc), "; %lld steps left out (non-finite)", (long long)lp->tot.skipped);
    job_say(j, "done: %lld steps in %.1f s (%.0f samples/s)%s", (long long)step, dt, res->samples_per_sec, acc);
    return TR_OK;
}

/* The strategy's memory after training: a line and a metrics record (rank 0). */
static void report_memory(job *j) {
    tr_strategy_memory m;
    if (!j->sops->memory || j->sops->memory(j->strat, &m) != TR_OK) return;
    const double M = 1048576.0;
    job_say(j, "memory on the primary device: parameters %.2f MiB, gradients %.2f MiB, optimizer state %.2f MiB, "
               "activations (peak) %.2f MiB, other %.2f MiB; this process in all %.2f MiB",
            m.params / M, m.grads / M, m.optimizer / M, m.activations / M, m.other / M, m.all_devices / M);
    run_value v[] = {RUN_INT("params", m.params), RUN_INT("grads", m.grads), RUN_INT("optimizer", m.optimizer),
                     RUN_INT("activations", m.activations), RUN_INT("other", m.other), RUN_INT("all_devices", m.all_devices)};
    job_record(j, &(run_record){.kind = RUN_RECORD_MEMORY, .group = "memory", .v = v, .n = 6});
}

/* Resuming with another max_steps or max_epochs changes the run's length; a schedule over the
 * run's length (cosine) then follows the new one, which moves the learning rate: said, with
 * both horizons and rates. */
static void say_horizon(loop *lp, int64_t saved_total) {
    job *j = lp->j;
    if (saved_total <= 0 || saved_total == lp->total) return;
    tr_sched_config was = sched_over(j, saved_total), now = sched_over(j, lp->total);
    int64_t step = lp->state.step;
    double lr_was = tr_sched_lr(&was, j->s.optim.lr, step), lr_now = tr_sched_lr(&now, j->s.optim.lr, step);
    if (lr_was == lr_now) return;
    job_say(j, "warning: the run's length changes from %lld to %lld steps (trainer.max_steps or max_epochs), and the "
               "learning-rate schedule follows it: step %lld runs at lr %.6g instead of %.6g (to train the new length "
               "from the start instead, give another run.name or set checkpoint.resume: never)",
            (long long)saved_total, (long long)lp->total, (long long)step + 1, lr_now, lr_was);
}

/* Resuming: a line and metrics.jsonl's {"resumed_from_step": N}: the records of steps after N
 * that the interrupted run wrote are superseded by the ones that follow (docs/config.md,
 * "metrics.jsonl"). found: whether the checkpoint had the loop's figures (loop_totals.h). */
static tr_status note_resume(loop *lp, const char *ckpt, int found) {
    job *j = lp->j;
    job_say(j, "resuming from %s (epoch %lld, step %lld)", ckpt, (long long)lp->state.epoch + 1, (long long)lp->state.step);
    if (!found && lp->state.batch_in_epoch > 0)
        job_say(j, "warning: %s has no epoch totals (an older trainer's checkpoint): epoch %lld's train loss covers "
                   "its steps after step %lld only", ckpt, (long long)lp->state.epoch + 1, (long long)lp->state.step);
    say_horizon(lp, lp->tot.total_steps);
    run_value v[] = {RUN_INT("resumed_from_step", lp->state.step)};
    job_record(j, &(run_record){.kind = RUN_RECORD_RESUMED, .v = v, .n = 1});
    return job_io_status(j);
}

/* The top k and early stopping's count from the checkpoint resumed; notes[i] says when a changed
 * monitor starts one afresh. */
static tr_status restore_watch(loop *lp, const char *ckpt, char notes[2][1400]) {
    json_t *o;
    TR_CHECK(ckpt_read_loop(ckpt, &o));
    tr_status st = select_restore(&lp->sel, o, ckpt, notes[0], sizeof notes[0]);
    if (st == TR_OK) st = early_stop_restore(&lp->es, o, ckpt, notes[1], sizeof notes[1]);
    json_decref(o);
    return st;
}

static tr_status train(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                       const char *const *plugin_dirs, run_lock *lock, loop *lp, tr_run_result *res) {
    TR_CHECK(job_plan(j, config_path, overrides, n_overrides, plugin_dirs));
    TR_CHECK(job_open_model(j));
    *lp = (loop){.j = j, .last_saved = -1};
    job_settings *s = &j->s;
    /* The run's length, from the data alone (the same on every rank). */
    tr_sampler all = {.n = j->dops->size(j->train_ds), .global_batch = s->batch, .drop_last = s->drop_last};
    tr_sampler val = {.n = j->val_ds ? j->dops->size(j->val_ds) : 0, .global_batch = s->batch};
    TR_CHECK(limits_resolve(j, tr_sampler_batches(&all), val.n > 0 ? tr_sampler_batches(&val) : 0, &lp->lim));
    lp->n_batches = lp->lim.train; /* trainer.limit_train_batches: the epoch's length, the schedule's too */
    /* With accumulation an optimizer step takes `accum` batches; per_epoch counts steps. */
    lp->per_epoch = (lp->n_batches + s->accum - 1) / s->accum;
    if (lp->per_epoch == 0)
        return tr_error_set(TR_ERR_INVALID, "data: no complete batch (drop_last with fewer samples than data.batch_size)");
    /* Training stops at max_epochs or max_steps, whichever comes first. */
    lp->total = lp->per_epoch * s->max_epochs;
    if (s->max_steps > 0 && s->max_steps < lp->total) {
        lp->total = s->max_steps;
        s->max_epochs = (s->max_steps + lp->per_epoch - 1) / lp->per_epoch;
    }
    /* A resumed run's model is made for its checkpoint (a model built from files rebuilds
     * itself from the checkpoint's copies, never from the original: hf_encoder's pretrained
     * folder), so every rank looks before the strategy makes the replicas; rank 0's choice
     * below must agree. */
    char probed[1200] = "";
    int fast = s->lim.fast_dev_run != 0; /* no run folder: nothing resumed, nothing written */
    int will_resume = !fast && probe_resume(j, lp->total, probed, sizeof probed);
    if (will_resume) TR_CHECK(tr_model_factory_set_restore(j->models, probed));
    TR_CHECK(job_open_strategy(j));
    TR_CHECK(monitor_check_run(j)); /* before the run folder is made */
    lp->nan_at = fault_nan_step(j);
    TR_CHECK(tr_fault_setup(j->info.rank, &lp->fault, &lp->fault_step));
    if (lp->fault == TR_FAULT_CHECKPOINT && !j->sops->shards && j->info.rank != 0)
        TR_WARN("TRAINER_FAULT_KILL_POINT=checkpoint: rank %d writes no checkpoint under %s (rank 0 does); nothing "
                "will be injected", j->info.rank, j->strat_p->desc->name);
    lp->per_sample_tokens = j->spec.task == TR_TASK_LM ? (double)j->spec.y_numel : 1;

    char ckpt[1200] = "", digest[17];
    job_config_digest(j->root, digest);
    int resuming = 0, totals_found = 0;
    if (!fast) TR_CHECK(choose_run_dir(j, lp->total, lock, ckpt, sizeof ckpt, &resuming));
    if (resuming != will_resume || (resuming && strcmp(ckpt, probed) != 0))
        return tr_error_set(TR_ERR_INVALID, "%s changed while the run started (its newest checkpoint was %s, now %s: "
                                            "another trainer writing it?); run the command again",
                            j->run_dir, will_resume ? probed : "none", resuming ? ckpt : "none");
    lp->state = (tr_train_state){.seed = (uint64_t)s->seed};
    select_init(&lp->sel, &s->ck_monitor, s->save_top_k, s->save_last);
    early_stop_init(&lp->es, &s->es_monitor, s->es_patience, s->es_min_delta);
    char notes[2][1400] = {"", ""}, init_line[1400];
    if (resuming) {
        tr_train_state found;
        TR_CHECK(tr_checkpoint_read_state(ckpt, &found));
        TR_CHECK(check_resume_config(j, ckpt, &found, digest));
        TR_CHECK(job_load_checkpoint(j, ckpt, 1, &lp->state));
        TR_CHECK(loop_totals_read(ckpt, &lp->tot, &totals_found));
        TR_CHECK(restore_watch(lp, ckpt, notes));
        lp->last_saved = lp->state.step; /* that step is saved already */
    }
    TR_CHECK(job_init_from(j, resuming, ckpt, init_line, sizeof init_line)); /* before the run folder is made */
    snprintf(lp->state.config_hash, sizeof lp->state.config_hash, "%s", digest);
    snprintf(lp->state.model, sizeof lp->state.model, "%s", j->model_p->desc->name);
    snprintf(lp->ck_dir, sizeof lp->ck_dir, "%s/checkpoints", j->run_dir);
    tr_status st = j->info.rank == 0 && !fast ? open_run_dir(j, resuming, lp->state.step, lp->ck_dir) : TR_OK;
    TR_CHECK(agree(j, st, j->run_dir, "rank 0 cannot write the run folder"));
    if (resuming) TR_CHECK(note_resume(lp, ckpt, totals_found));
    /* A resume points best and last again (a run killed between a save and its pointers). */
    int points = lp->sel.m.metric != MONITOR_OFF || s->save_last;
    st = resuming && points && j->info.rank == 0 ? select_after_save(&lp->sel, lp->ck_dir, (int)s->keep_last, lp->state.step)
                                                 : TR_OK;
    TR_CHECK(agree(j, st, lp->ck_dir, "rank 0 cannot point best or last"));
    tr_params *P;
    tr_optim *opt;
    TR_CHECK(j->sops->state(j->strat, &P, &opt));
    if (fast) job_say(j, "trainer %s: run %s (trainer.fast_dev_run: no run folder)", tr_version(), s->name);
    else job_say(j, "trainer %s: run %s -> %s", tr_version(), s->name, j->run_dir);
    if (j->strategy_auto || j->gpu_fallback) job_say(j, "strategy %s chosen: %s", j->strat_p->desc->name, j->why);
    job_say(j, "strategy %s; model %s (%zu parameters); data %s (%lld train, %lld validation samples); "
               "global batch %lld, %lld steps/epoch, %lld epochs",
            j->info.description, j->model_p->desc->name, tr_params_trainable(P), j->data_p->desc->name,
            (long long)j->train_sampler.n,
            (long long)(j->val_ds ? ((const tr_dataset_ops *)j->data_p->desc->ops)->size(j->val_ds) : 0),
            (long long)s->batch, (long long)lp->per_epoch, (long long)s->max_epochs);
    char limits[640];
    limits_describe(j, &lp->lim, limits, sizeof limits);
    if (limits[0]) job_say(j, "%s", limits);
    for (int i = 0; i < 2; i++)
        if (notes[i][0]) job_say(j, "note: %s", notes[i]);
    if (init_line[0]) job_say(j, "%s", init_line);
    if (s->precision == TR_PRECISION_BF16_MIXED)
        job_say(j, "precision bf16-mixed: the GEMMs multiply bf16 roundings of their operands, accumulating in fp32; "
                   "weights, gradients, activations and optimizer state stay fp32");
    /* A profile the calling program attached to this thread (an embedding application's) is
     * set aside while the run's own records, and attached again after. */
    tr_profile *outer = s->profile ? tr_profile_current() : NULL;
    if (s->profile) TR_CHECK(tr_profile_create(&lp->prof));
    st = train_loop(lp, res);
    tr_profile_destroy(lp->prof);
    if (outer) tr_profile_attach(outer);
    TR_CHECK(st);
    report_memory(j);
    return job_io_status(j);
}

/* Closes log.txt and the loggers' files; a failure (some file systems report write errors
 * only at close) is the run's error. */
static tr_status close_run_files(job *j) {
    FILE *f = j->log;
    j->log = NULL;
    tr_status st = run_loggers_close(&j->loggers);
    if (f && fclose(f) != 0 && st == TR_OK) {
        char why[256];
        st = tr_error_set(TR_ERR_IO, "%s/log.txt: close failed: %s", j->run_dir, tr_io_reason(errno, why, sizeof why));
    }
    return st;
}

tr_status tr_run_train(const char *config_path, const char *const *overrides, int n_overrides,
                       const char *const *plugin_dirs, tr_run_result *out) {
    job j;
    memset(&j, 0, sizeof j);
    memset(out, 0, sizeof *out);
    run_lock lock = RUN_LOCK_NONE;
    loop lp;
    memset(&lp, 0, sizeof lp);
    tr_status st = train(&j, config_path, overrides, n_overrides, plugin_dirs, &lock, &lp, out);
    select_free(&lp.sel);
    job_curves(&j); /* whatever metrics.jsonl holds: finished, stopped early, by Ctrl-C or failed */
    if (st != TR_OK && j.log) fprintf(j.log, "error: %s\n", tr_error_msg()); /* best effort */
    if (st == TR_OK) st = close_run_files(&j);
    int made_nothing = st != TR_OK && j.run_dir[0] && !j.log; /* refused before open_run_dir */
    job_close(&j);
    run_lock_release(&lock);
    if (made_nothing && rmdir(j.run_dir) == 0) { /* the folders the lock made, when empty */
        char *slash = strrchr(j.run_dir, '/');
        if (slash) *slash = '\0';
        rmdir(j.run_dir);
    }
    run_interrupt_reset(); /* a stop asked for this run is not the next one's */
    return st;
}
