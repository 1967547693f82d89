/* The loop's validation: the pass, its line and metrics record, and the monitored values
 * offered to early stopping and the checkpoint selection. */
#include "run/loop_validate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trainer/profile.h"

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

tr_status loop_validate(loop *lp, int64_t epoch, const char *when, double *vloss, double *vacc) {
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

int loop_validates_at_epoch_end(const loop *lp, int64_t ep, int64_t step, int64_t validated, int end_due) {
    const job *j = lp->j;
    int last = ep + 1 >= j->s.max_epochs || step >= lp->total;
    return !lp->early_stopped && j->val_L && validated != step &&
           (end_due || limits_val_at_epoch_end(j, &lp->lim, ep, last));
}
