/* A run stopped by Ctrl-C or SIGTERM: saved at the step all ranks agreed on, then ended. */
#include "run/loop_interrupt.h"

#include <signal.h>

#include "run/interrupt.h"
#include "run/loop_save.h"

tr_status loop_interrupt_stop(loop *lp, int64_t ep, const tr_host_batch *hb, int signo) {
    lp->state.epoch = ep;
    lp->state.batch_in_epoch = hb->index + 1;
    if (lp->last_saved != lp->state.step) TR_CHECK(loop_save(lp));
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
