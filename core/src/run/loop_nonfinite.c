/* A step whose loss or gradient norm was not finite: trainer.on_nan stop or skip. */
#include "run/loop_nonfinite.h"

#include <math.h>
#include <stdio.h>

#include "run/nonfinite.h"

tr_status loop_nonfinite_step(loop *lp, const nonfinite_seen *seen, int64_t step, double loss, double gnorm,
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
