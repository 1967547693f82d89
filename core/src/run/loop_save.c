/* The loop's checkpoint at the current step: written whole (one file set, or a shard per
 * rank), then pruned and pointed (ckpt_select.h). */
#include "run/loop_save.h"

#include <stdio.h>
#include <unistd.h>

#include "base/fault.h"
#include "run/checkpoint_impl.h"
#include "run/run_agree.h"
#include "trainer/profile.h"

/* A sharded strategy's checkpoint: every rank writes its shard (checkpoint.h). */
static tr_status save_sharded(loop *lp, const char *name, json_t *totals) {
    job *j = lp->j;
    double tag = j->info.rank == 0 ? (double)getpid() : 0;
    if (j->sops->all_sum) TR_CHECK(j->sops->all_sum(j->strat, &tag, 1));
    char tmp[1200], what[1300];
    snprintf(what, sizeof what, "checkpoint %s/%s not saved", lp->ck_dir, name);
    tr_status st = j->info.rank == 0 ? tr_checkpoint_begin(lp->ck_dir, name, (long)tag, tmp, sizeof tmp)
                                     : tr_checkpoint_tmp_path(lp->ck_dir, name, (long)tag, tmp, sizeof tmp);
    TR_CHECK(run_agree(j, st, what, "rank 0 failed"));
    tr_state_shards sh;
    st = j->sops->shards(j->strat, &sh);
    if (st == TR_OK)
        st = tr_checkpoint_write_shard(tmp, j->info.rank, j->info.world, sh.P, sh.opt, sh.pieces, sh.n_pieces);
    if (st != TR_OK) tr_error_prefix("%s: ", what);
    st = run_agree(j, st, what, "another rank failed to write its shard");
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
    return run_agree(j, st, what, "rank 0 failed");
}

tr_status loop_save(loop *lp) {
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

int loop_save_step_due(const loop *lp, int64_t step) {
    int64_t n = lp->j->s.ck_steps;
    return n > 0 && step % n == 0;
}
