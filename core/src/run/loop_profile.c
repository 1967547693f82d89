/* trainer.profile in the training loop: which steps it records, and its table at the end. */
#include "run/loop_profile.h"

#include <stdio.h>

#include "trainer/log.h"

void loop_profile_step(loop *lp, int64_t step) {
    if (!lp->prof) return;
    if (!lp->prof_from) {
        tr_profile_attach(lp->prof);
        lp->prof_from = step;
    }
    if (step == lp->total) tr_profile_attach(NULL);
}

void loop_profile_write(loop *lp) {
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
