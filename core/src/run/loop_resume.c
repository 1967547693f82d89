/* Resuming a run: its config checked against the checkpoint's, what it said restored, and
 * the resume said in the log and metrics.jsonl. */
#include "run/loop_resume.h"

#include <stdio.h>
#include <string.h>

#include "run/checkpoint_impl.h"

tr_status loop_resume_check(job *j, const char *ckpt, const tr_train_state *s, const char *digest) {
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

/* Resuming with another max_steps or max_epochs changes the run's length; a schedule over the
 * run's length (cosine) then follows the new one, which moves the learning rate: said, with
 * both horizons and rates. */
static void say_horizon(loop *lp, int64_t saved_total) {
    job *j = lp->j;
    if (saved_total <= 0 || saved_total == lp->total) return;
    tr_sched_config was = loop_sched(j, saved_total), now = loop_sched(j, lp->total);
    int64_t step = lp->state.step;
    double lr_was = tr_sched_lr(&was, j->s.optim.lr, step), lr_now = tr_sched_lr(&now, j->s.optim.lr, step);
    if (lr_was == lr_now) return;
    job_say(j, "warning: the run's length changes from %lld to %lld steps (trainer.max_steps or max_epochs), and the "
               "learning-rate schedule follows it: step %lld runs at lr %.6g instead of %.6g (to train the new length "
               "from the start instead, give another run.name or set checkpoint.resume: never)",
            (long long)saved_total, (long long)lp->total, (long long)step + 1, lr_now, lr_was);
}

tr_status loop_resume_note(loop *lp, const char *ckpt, int found) {
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

tr_status loop_resume_restore(loop *lp, const char *ckpt, char notes[2][1400]) {
    json_t *o;
    TR_CHECK(ckpt_read_loop(ckpt, &o));
    tr_status st = select_restore(&lp->sel, o, ckpt, notes[0], sizeof notes[0]);
    if (st == TR_OK) st = early_stop_restore(&lp->es, o, ckpt, notes[1], sizeof notes[1]);
    json_decref(o);
    return st;
}
