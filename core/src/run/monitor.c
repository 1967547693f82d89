/* Monitored metrics (monitor.h): the config keys that name one (checkpoint.monitor, mode,
 * save_top_k, save_last; trainer.early_stopping), checked before anything trains, and the
 * comparison both the top k and early stopping use (Lightning's: a strict improvement, by more
 * than min_delta for early stopping). */
#include "run/monitor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/node.h"
#include "job.h"

static const char *const names[] = {"val_loss", "val_accuracy", "val_perplexity"};
#define METRICS "val_loss|val_accuracy|val_perplexity"

const char *monitor_name(int metric) { return metric >= 0 && metric < 3 ? names[metric] : "none"; }

const char *monitor_mode_name(int mode) { return mode == MONITOR_MAX ? "max" : "min"; }

double monitor_value(const monitor *m, double val_loss, double val_accuracy) {
    if (m->metric == MONITOR_VAL_ACCURACY) return val_accuracy;
    if (m->metric == MONITOR_VAL_PERPLEXITY) return exp(val_loss);
    return val_loss;
}

int monitor_better(const monitor *m, double a, double b, double delta) {
    if (!isfinite(a)) return 0;
    if (!isfinite(b)) return 1; /* none yet */
    return m->mode == MONITOR_MAX ? a > b + delta : a < b - delta;
}

void monitor_parse(monitor *m, const char *metric, const char *mode) {
    m->metric = MONITOR_OFF;
    for (int i = 0; metric && i < 3; i++)
        if (strcmp(metric, names[i]) == 0) m->metric = i;
    m->mode = mode && strcmp(mode, "max") == 0 ? MONITOR_MAX : MONITOR_MIN;
}

static int given(const job *j, const char *key) {
    const tr_cfg_node *n = tr_cfg_find(j->root, key);
    return n && !tr_cfg_null_(n);
}

/* "c.yaml:3:5: key" for key's node, or its nearest present parent's. */
static void where(const job *j, const char *key, char *out, size_t size) {
    char parent[128];
    snprintf(parent, sizeof parent, "%s", key);
    const tr_cfg_node *n = tr_cfg_find(j->root, parent);
    for (char *dot; !n && (dot = strrchr(parent, '.')) != NULL;) {
        *dot = '\0';
        n = tr_cfg_find(j->root, parent);
    }
    if (n) snprintf(out, size, "%s:%d:%d: %s", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n), key);
    else snprintf(out, size, "%s: %s", tr_cfg_source(j->root), key);
}

/* <prefix>.monitor and <prefix>.mode; mode's default is the metric's direction (max for
 * accuracy, min for loss and perplexity), written into the config. */
static tr_status read_monitor(job *j, const char *prefix, int required, monitor *m) {
    char mk[96], dk[96], pos[512];
    snprintf(mk, sizeof mk, "%s.monitor", prefix);
    snprintf(dk, sizeof dk, "%s.mode", prefix);
    m->metric = MONITOR_OFF;
    m->mode = MONITOR_MIN;
    if (!required && !given(j, mk)) {
        if (!given(j, dk)) return TR_OK;
        where(j, dk, pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: says which way %s is better, and %s is not set", pos, mk, mk);
    }
    TR_CHECK(tr_cfg_get_choice(j->root, mk, METRICS, NULL, &m->metric, 1));
    const char *def = m->metric == MONITOR_VAL_ACCURACY ? "max" : "min";
    TR_CHECK(tr_cfg_get_choice(j->root, dk, "min|max", def, &m->mode, 0));
    return job_set_default(j, dk, def);
}

static tr_status read_early_stopping(job *j, job_settings *s) {
    static const char *const keys[] = {"monitor", "mode", "patience", "min_delta"};
    const tr_cfg_node *es = tr_cfg_find(j->root, "trainer.early_stopping");
    if (!es || tr_cfg_null_(es)) return TR_OK;
    if (tr_cfg_node_kind(es) != TR_CFG_MAP)
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: trainer.early_stopping: expected a mapping such as {monitor: val_loss, "
                                            "patience: 3} (keys monitor, mode, patience, min_delta)",
                            tr_cfg_source(es), tr_cfg_line(es), tr_cfg_column(es));
    TR_CHECK(tr_cfg_check_keys(es, keys, sizeof keys / sizeof keys[0]));
    TR_CHECK(read_monitor(j, "trainer.early_stopping", 1, &s->es_monitor));
    TR_CHECK(tr_cfg_get_int(j->root, "trainer.early_stopping.patience", 3, 1, 1000000000, &s->es_patience, 0));
    TR_CHECK(job_set_default(j, "trainer.early_stopping.patience", "3"));
    TR_CHECK(tr_cfg_get_float(j->root, "trainer.early_stopping.min_delta", 0, 0, 1e30, &s->es_min_delta, 0));
    return job_set_default(j, "trainer.early_stopping.min_delta", "0");
}

tr_status monitor_read_settings(job *j) {
    job_settings *s = &j->s;
    char pos[512];
    s->ck_monitor.key = "checkpoint.monitor";
    s->es_monitor = (monitor){.metric = MONITOR_OFF, .key = "trainer.early_stopping.monitor"};
    TR_CHECK(read_monitor(j, "checkpoint", 0, &s->ck_monitor));
    s->save_top_k = 0;
    if (s->ck_monitor.metric != MONITOR_OFF) {
        TR_CHECK(tr_cfg_get_int(j->root, "checkpoint.save_top_k", 1, -1, 1000000, &s->save_top_k, 0));
        TR_CHECK(job_set_default(j, "checkpoint.save_top_k", "1"));
        if (s->save_top_k == 0) {
            where(j, "checkpoint.save_top_k", pos, sizeof pos);
            return tr_error_set(TR_ERR_INVALID, "%s: 0 would keep no checkpoint by checkpoint.monitor: give k >= 1, -1 for "
                                                "every validation's, or leave checkpoint.monitor out", pos);
        }
    } else if (given(j, "checkpoint.save_top_k")) {
        where(j, "checkpoint.save_top_k", pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: keeps the best checkpoints by checkpoint.monitor, which is not set (e.g. "
                                            "checkpoint.monitor: val_loss)", pos);
    }
    TR_CHECK(tr_cfg_get_bool(j->root, "checkpoint.save_last", 0, &s->save_last, 0));
    TR_CHECK(job_set_default(j, "checkpoint.save_last", "false"));
    TR_CHECK(read_early_stopping(j, s));
    const monitor *ms[2] = {&s->ck_monitor, &s->es_monitor};
    for (int i = 0; i < 2; i++) {
        if (ms[i]->metric == MONITOR_OFF || s->val_every_n_epochs > 0 || s->val_every_n_steps > 0) continue;
        where(j, ms[i]->key, pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: %s is measured by validation, which trainer.val_every_n_epochs 0 and "
                                            "val_every_n_steps 0 turn off", pos, monitor_name(ms[i]->metric));
    }
    return TR_OK;
}

tr_status monitor_check_run(const job *j) {
    const monitor *ms[2] = {&j->s.ck_monitor, &j->s.es_monitor};
    int task = j->spec.task;
    const char *logged = task == TR_TASK_LM       ? "val_loss, val_accuracy, val_perplexity"
                         : task == TR_TASK_REGRESS ? "val_loss"
                                                   : "val_loss, val_accuracy";
    for (int i = 0; i < 2; i++) {
        int m = ms[i]->metric;
        if (m == MONITOR_OFF) continue;
        char pos[512];
        where(j, ms[i]->key, pos, sizeof pos);
        if (!j->val_L)
            return tr_error_set(TR_ERR_INVALID, "%s: %s is measured on the validation split, and this run's data has none "
                                                "(data.val_fraction %g holds no sample out and no validation file is given)",
                                pos, monitor_name(m), j->s.val_fraction);
        if ((m == MONITOR_VAL_ACCURACY && task == TR_TASK_REGRESS) || (m == MONITOR_VAL_PERPLEXITY && task != TR_TASK_LM))
            return tr_error_set(TR_ERR_INVALID, "%s: this run does not log %s (a %s model's validation logs %s)", pos,
                                monitor_name(m), task == TR_TASK_REGRESS ? "regression" : "classification", logged);
    }
    return TR_OK;
}
