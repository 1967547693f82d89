/* model.init_from: a fresh run starts from the weights of another: a checkpoint folder, a run
 * or checkpoints/ folder (its newest checkpoint; RUN/best its best), `best` or `last` of the
 * config's own run, or a weights file (.safetensors, as `trainer checkpoint consolidate`
 * writes). Parameters and buffers only: the optimizer state, the step count and the schedule
 * start afresh. Every name and shape must be the model's (a mismatch names the tensor and both
 * shapes), and a checkpoint's class names its data's. A resumed run ignores it: the run's own
 * checkpoint wins. */
#include <stdio.h>

#include "job.h"
#include "trainer/config.h"

/* The data's classes against the checkpoint's (named classes in another order would map each
 * output to another label); a weights file records none. */
static tr_status check_classes(const job *j, const char *path) {
    if (j->spec.task != TR_TASK_CLASSIFY || !j->classes.names) return TR_OK;
    run_classes ck;
    TR_CHECK(classes_read_checkpoint(&ck, path));
    int64_t n;
    tr_status st = ck.count > 0 && ck.names ? classes_reconcile(&j->classes, &ck, path, &n) : TR_OK;
    classes_free(&ck);
    return st;
}

tr_status job_init_from(job *j, int resuming, const char *resumed, char *line, size_t cap) {
    line[0] = '\0';
    const char *from = j->s.init_from;
    if (!from || !from[0]) return TR_OK;
    if (resuming) {
        snprintf(line, cap, "model.init_from %s ignored: the run resumes from its own checkpoint %s", from, resumed);
        return TR_OK;
    }
    char path[1200];
    tr_train_state s;
    tr_status st = job_resolve_checkpoint(j, from, path, sizeof path);
    if (st == TR_OK) st = check_classes(j, path);
    if (st == TR_OK) st = job_load_checkpoint(j, path, 0, &s);
    if (st != TR_OK) {
        const tr_cfg_node *n = tr_config_find(j->cfg, "model.init_from");
        tr_error_prefix("%s:%d:%d: model.init_from: ", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n));
        return st;
    }
    char step[48] = " (a weights file)";
    if (s.step > 0 || s.model[0]) snprintf(step, sizeof step, " (step %lld)", (long long)s.step);
    snprintf(line, cap, "model.init_from: starting from the weights of %s%s; the optimizer state, step count and "
             "schedule start afresh", path, step);
    return TR_OK;
}
