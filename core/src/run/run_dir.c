/* The run folder runs/<name>/<version>/: chosen (a new version, or the one to resume), locked,
 * made and opened (config, log, loggers, checkpoints) before training, and closed. */
#include "run/run_dir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io_error.h"
#include "run/checkpoint_impl.h"
#include "run/early_stop.h"
#include "run/run_agree.h"
#include "trainer/io.h"
#include "trainer/memory.h"

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

int run_dir_probe(job *j, int64_t total, char *ckpt, size_t size) {
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

tr_status run_dir_choose(job *j, int64_t total, run_lock *lock, char *ckpt, size_t size, int *resuming) {
    int version = 0;
    *resuming = 0;
    tr_status st = j->info.rank == 0 ? pick_locked(j, total, lock, ckpt, size, &version, resuming) : TR_OK;
    char what[1100];
    snprintf(what, sizeof what, "%s/%s", j->s.outdir, j->s.name);
    TR_CHECK(run_agree(j, st, what, "rank 0 cannot choose or lock the run folder"));
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

tr_status run_dir_open(job *j, int resuming, int64_t step, const char *ck_dir) {
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

tr_status run_dir_close(job *j) {
    FILE *f = j->log;
    j->log = NULL;
    tr_status st = run_loggers_close(&j->loggers);
    if (f && fclose(f) != 0 && st == TR_OK) {
        char why[256];
        st = tr_error_set(TR_ERR_IO, "%s/log.txt: close failed: %s", j->run_dir, tr_io_reason(errno, why, sizeof why));
    }
    return st;
}
