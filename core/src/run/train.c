/* `trainer run`: the training loop. The trainer owns epochs, validation, logging and
 * checkpoint cadence; the strategy plugin owns each step (docs/design.md "Step and loop").
 * The loop's parts are the run/loop_*.c files, over its state in run/loop.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/gemm_bf16.h"
#include "base/fault.h"
#include "run/curves.h"
#include "run/fault_nan.h"
#include "run/interrupt.h"
#include "run/loop.h"
#include "run/loop_interrupt.h"
#include "run/loop_log.h"
#include "run/loop_nonfinite.h"
#include "run/loop_profile.h"
#include "run/loop_report.h"
#include "run/loop_resume.h"
#include "run/loop_save.h"
#include "run/loop_validate.h"
#include "run/run_agree.h"
#include "run/run_api.h"
#include "run/run_dir.h"
#include "run/run_lock.h"
#include "trainer/log.h"
#include "trainer/profile.h"
#include "trainer/runtime.h"

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

tr_sched_config loop_sched(const job *j, int64_t total) {
    tr_sched_config sc = j->s.sched;
    sc.total_steps = total - sc.warmup_steps > 1 ? total - sc.warmup_steps : 1;
    return sc;
}

static tr_status train_loop(loop *lp, tr_run_result *res) {
    job *j = lp->j;
    job_settings *s = &j->s;
    tr_sched_config sc = loop_sched(j, lp->total);
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
        double step_loss = 0;
        log_window win = {.t = tr_now()};
        int64_t consumed = start_batch; /* batches of the epoch done */
        int64_t before = start_batch;   /* ... before this optimizer step */
        int64_t validated = -1;         /* the step validated last in this epoch */
        int end_due = 0;                /* the run's last step calls for a validation: at its end */
        int save_at_end = 0;            /* the epoch's last step is saved after the end's validation */
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
            fault_nan_apply(lp, step + 1, &mb);
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
            win.samples += (double)hb->global_size;
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
                TR_CHECK(loop_nonfinite_step(lp, &seen, step, step_loss, gnorm, agreed[1] > 0));
            } else {
                lp->tot.skipped_in_a_row = 0;
                lp->tot.window_loss_sum += step_loss;
                lp->tot.epoch_loss_sum += step_loss;
                lp->tot.window_steps++;
                lp->tot.epoch_steps++;
            }
            step_loss = 0;
            seen = (nonfinite_seen){0};
            TR_CHECK(loop_log_step(lp, ep, step, lr, gnorm, &win));
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
                TR_CHECK(loop_validate(lp, ep, when, &vloss, &vacc));
            }
            /* The run's last step is saved at its end, after its validation; so is an epoch's
             * last step whose end validates (Lightning's ModelCheckpoint saves there after the
             * validation), so that its one checkpoint holds that validation's decisions. */
            if ((lp->want_save || loop_save_step_due(lp, step)) && lp->last_saved != step && step < lp->total) {
                if (consumed >= lp->n_batches && loop_validates_at_epoch_end(lp, ep, step, validated, end_due)) {
                    save_at_end = 1;
                } else {
                    lp->state.epoch = ep;
                    lp->state.batch_in_epoch = consumed;
                    TR_CHECK(loop_save(lp));
                }
            }
            win.t += tr_now() - paused;
            if (step == lp->fault_step && lp->fault != TR_FAULT_NONE) {
                tr_fault_disarm(); /* a collective point whose step had no collective */
                if (lp->fault == TR_FAULT_STEP && !save_at_end) /* else after the epoch end's save */
                    tr_fault_kill("rank %d after step %lld", j->info.rank, (long long)step);
            }
            loop_profile_step(lp, step);
            if (lp->early_stopped) break; /* decided by this step's validation; the epoch's end saves */
            /* At the run's last step the run ends here anyway: it finishes (its epoch end,
             * validation and last checkpoint) rather than leave a checkpoint at its end that
             * a rerun takes for a finished run and so never completes. */
            if (agreed[2] > 0 && step < lp->total) return loop_interrupt_stop(lp, ep, hb, (int)agreed[2]);
        }
        TR_CHECK(st);
        tr_profile_enter("loop", "epoch end");
        /* trainer.max_steps can end the run part-way through an epoch: its checkpoint then
         * says where, and a run that extends it (a larger max_steps) goes on from there. */
        int complete = !hb || consumed >= lp->n_batches;
        epoch_loss = lp->tot.epoch_steps ? lp->tot.epoch_loss_sum / (double)lp->tot.epoch_steps : NAN;
        char when[160];
        loop_report_epoch_line(lp, ep, step, consumed, complete, epoch_loss, when, sizeof when);
        int last = ep + 1 >= s->max_epochs || step >= lp->total;
        lp->state.epoch = complete ? ep + 1 : ep; /* a checkpoint the validation makes due resumes after it */
        lp->state.batch_in_epoch = complete ? 0 : consumed;
        /* A step validates once: one that val_every_n_steps or val_check_interval validated is not again. */
        if (loop_validates_at_epoch_end(lp, ep, step, validated, end_due))
            TR_CHECK(loop_validate(lp, ep, when, &vloss, &vacc));
        else job_say(j, "%s", when);
        TR_CHECK(loop_report_epoch(lp, ep, step, epoch_loss, complete));
        if (lp->last_saved != step && ((s->ck_epochs > 0 && (ep + 1) % s->ck_epochs == 0) || last || lp->want_save ||
                                       lp->early_stopped || save_at_end))
            TR_CHECK(loop_save(lp));
        if (save_at_end && lp->fault == TR_FAULT_STEP && step == lp->fault_step) /* after step N and its checkpoint */
            tr_fault_kill("rank %d after step %lld", j->info.rank, (long long)step);
    }
    double dt = tr_now() - t0;
    if (lp->prof) loop_profile_write(lp);
    loop_report_done(lp, step, ep, epoch_loss, vloss, vacc, dt, samples, res);
    return TR_OK;
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
    int will_resume = !fast && run_dir_probe(j, lp->total, probed, sizeof probed);
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
    if (!fast) TR_CHECK(run_dir_choose(j, lp->total, lock, ckpt, sizeof ckpt, &resuming));
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
        TR_CHECK(loop_resume_check(j, ckpt, &found, digest));
        TR_CHECK(job_load_checkpoint(j, ckpt, 1, &lp->state));
        TR_CHECK(loop_totals_read(ckpt, &lp->tot, &totals_found));
        TR_CHECK(loop_resume_restore(lp, ckpt, notes));
        lp->last_saved = lp->state.step; /* that step is saved already */
    }
    TR_CHECK(job_init_from(j, resuming, ckpt, init_line, sizeof init_line)); /* before the run folder is made */
    snprintf(lp->state.config_hash, sizeof lp->state.config_hash, "%s", digest);
    snprintf(lp->state.model, sizeof lp->state.model, "%s", j->model_p->desc->name);
    snprintf(lp->ck_dir, sizeof lp->ck_dir, "%s/checkpoints", j->run_dir);
    tr_status st = j->info.rank == 0 && !fast ? run_dir_open(j, resuming, lp->state.step, lp->ck_dir) : TR_OK;
    TR_CHECK(run_agree(j, st, j->run_dir, "rank 0 cannot write the run folder"));
    if (resuming) TR_CHECK(loop_resume_note(lp, ckpt, totals_found));
    /* A resume points best and last again (a run killed between a save and its pointers). */
    int points = lp->sel.m.metric != MONITOR_OFF || s->save_last;
    st = resuming && points && j->info.rank == 0 ? select_after_save(&lp->sel, lp->ck_dir, (int)s->keep_last, lp->state.step)
                                                 : TR_OK;
    TR_CHECK(run_agree(j, st, lp->ck_dir, "rank 0 cannot point best or last"));
    tr_params *P;
    tr_optim *opt;
    TR_CHECK(j->sops->state(j->strat, &P, &opt));
    if (fast) job_say(j, "trainer %s: run %s (trainer.fast_dev_run: no run folder)", tr_version(), s->name);
    else job_say(j, "trainer %s: run %s -> %s", tr_version(), s->name, j->run_dir);
    if (j->strategy_auto || j->gpu_fallback) job_say(j, "strategy %s chosen: %s", j->strat_p->desc->name, j->why);
    j->startup_peak = loop_report_peak_resident(); /* the strategy made, weights loaded, no step run */
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
                   "weights, gradients, activations and optimizer state stay fp32%s%s",
                tr_cpu_bf16() ? "; the CPU's bf16 GEMM kernel: " : "", tr_cpu_bf16() ? tr_gemm_bf16_kernel() : "");
    /* A profile the calling program attached to this thread (an embedding application's) is
     * set aside while the run's own records, and attached again after. */
    tr_profile *outer = s->profile ? tr_profile_current() : NULL;
    if (s->profile) TR_CHECK(tr_profile_create(&lp->prof));
    st = train_loop(lp, res);
    tr_profile_destroy(lp->prof);
    if (outer) tr_profile_attach(outer);
    TR_CHECK(st);
    loop_report_memory(j);
    return job_io_status(j);
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
    if (st == TR_OK) st = run_dir_close(&j);
    int made_nothing = st != TR_OK && j.run_dir[0] && !j.log; /* refused before run_dir_open */
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