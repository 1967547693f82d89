/* What the training loop reports beyond its steps: the line and record that end each epoch,
 * the run's result and last line, and the strategy's memory. */
#include "run/loop_report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void loop_report_epoch_line(const loop *lp, int64_t ep, int64_t step, int64_t consumed, int complete,
                            double epoch_loss, char *out, size_t size) {
    const job_settings *s = &lp->j->s;
    if (complete)
        snprintf(out, size, "epoch %lld/%lld done: train loss %.4f", (long long)ep + 1, (long long)s->max_epochs,
                 epoch_loss);
    else if (lp->early_stopped)
        snprintf(out, size, "epoch %lld/%lld stopped at step %lld by trainer.early_stopping (batch %lld of %lld): "
                 "train loss so far %.4f", (long long)ep + 1, (long long)s->max_epochs, (long long)step,
                 (long long)consumed, (long long)lp->n_batches, epoch_loss);
    else
        snprintf(out, size, "epoch %lld/%lld stopped at step %lld by trainer.max_steps (batch %lld of %lld): "
                 "train loss so far %.4f", (long long)ep + 1, (long long)s->max_epochs, (long long)step,
                 (long long)consumed, (long long)lp->n_batches, epoch_loss);
}

tr_status loop_report_epoch(loop *lp, int64_t ep, int64_t step, double epoch_loss, int complete) {
    job *j = lp->j;
    run_value v[] = {RUN_INT("epoch", ep + 1), RUN_INT("step", step), RUN_REAL("train_loss", epoch_loss, "%.9g"),
                     RUN_BOOL("partial", 1)};
    job_record(j, &(run_record){.kind = RUN_RECORD_EPOCH, .v = v, .n = complete ? 3 : 4});
    return job_io_status(j);
}

void loop_report_done(loop *lp, int64_t step, int64_t epochs, double epoch_loss, double vloss, double vacc,
                      double seconds, double samples, tr_run_result *res) {
    job *j = lp->j;
    snprintf(res->run_dir, sizeof res->run_dir, "%s", j->run_dir);
    res->steps = step;
    res->epochs = epochs;
    res->train_loss = epoch_loss;
    res->val_loss = vloss;
    res->val_accuracy = vacc;
    res->samples_per_sec = seconds > 0 ? samples * j->info.data_world / seconds : 0;
    char acc[128] = "";
    if (isfinite(vacc)) snprintf(acc, sizeof acc, "; final validation accuracy: %.2f%%", 100 * vacc);
    if (lp->tot.skipped)
        snprintf(acc + strlen(acc), sizeof acc - strlen(acc), "; %lld steps left out (non-finite)", (long long)lp->tot.skipped);
    job_say(j, "done: %lld steps in %.1f s (%.0f samples/s)%s", (long long)step, seconds, res->samples_per_sec, acc);
}

uint64_t loop_report_peak_resident(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (uint64_t)kb * 1024;
}

void loop_report_memory(job *j) {
    tr_strategy_memory m;
    if (!j->sops->memory || j->sops->memory(j->strat, &m) != TR_OK) return;
    const double M = 1048576.0;
    job_say(j, "memory on the primary device: parameters %.2f MiB, gradients %.2f MiB, optimizer state %.2f MiB, "
               "activations (peak) %.2f MiB, other %.2f MiB; this process in all %.2f MiB; its peak resident set "
               "when set up %.2f MiB",
            m.params / M, m.grads / M, m.optimizer / M, m.activations / M, m.other / M, m.all_devices / M,
            j->startup_peak / M);
    run_value v[] = {RUN_INT("params", m.params), RUN_INT("grads", m.grads), RUN_INT("optimizer", m.optimizer),
                     RUN_INT("activations", m.activations), RUN_INT("other", m.other), RUN_INT("all_devices", m.all_devices),
                     RUN_INT("startup_peak", j->startup_peak)};
    job_record(j, &(run_record){.kind = RUN_RECORD_MEMORY, .group = "memory", .v = v, .n = 7});
}
