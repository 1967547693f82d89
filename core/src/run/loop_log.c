/* The training loop's record of a step: the loss over the steps since the last record, the
 * learning rate, gradient norm and throughput, as a line and a metrics record. */
#include "run/loop_log.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trainer/runtime.h"

tr_status loop_log_step(loop *lp, int64_t ep, int64_t step, double lr, double gnorm, log_window *w) {
    job *j = lp->j;
    job_settings *s = &j->s;
    int log_now = step % s->log_every == 0 || step == lp->total;
    if (!log_now && !j->prog.bar) return TR_OK;
    loop_totals *t = &lp->tot;
    double wl = t->window_steps ? t->window_loss_sum / (double)t->window_steps : NAN;
    double dt = tr_now() - w->t, sps = dt > 0 ? w->samples / dt : 0;
    progress_update(&j->prog, ep, s->max_epochs, step, lp->total, wl, sps);
    if (!log_now) return TR_OK;
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
    /* The loss window restarts at log_every's multiples only: a record at the run's last step
     * ends this run, and one that extends it (a larger max_steps) continues the window the
     * checkpoint saved, as an uninterrupted run would. */
    if (step % s->log_every == 0) {
        t->window_loss_sum = 0;
        t->window_steps = 0;
    }
    w->samples = 0;
    w->t = tr_now();
    return TR_OK;
}
