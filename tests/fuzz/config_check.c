/* What a config must keep after parsing (shared by the config and override targets, fuzz.h):
 * the resolved-config writer's promise that its YAML parses back to the same tree, and
 * `trainer run`'s reading of every setting (job_read_settings), which a resumed run repeats on
 * the config.yaml it wrote, so both readings must agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/node.h"
#include "fuzz.h"
#include "run/job.h"

char *fuzz_config_text(const tr_config *cfg) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) fuzz_fail("open_memstream failed");
    if (tr_config_write(cfg, f) != TR_OK) fuzz_fail("tr_config_write: %s", tr_error_msg());
    fclose(f);
    return text;
}

/* Absent for the typed reads: a plain empty scalar, ~ or null. */
static int is_null(const tr_cfg_node *n) {
    static const char *const words[] = {"", "~", "null", "Null", "NULL"};
    if (n->kind != TR_CFG_SCALAR || n->quoted) return 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(n->text, words[i]) == 0) return 1;
    return 0;
}

static void same_tree(const tr_cfg_node *a, const tr_cfg_node *b, const char *what, const char *text) {
    if (a->kind != b->kind || a->n != b->n)
        fuzz_fail("%s: '%s' is kind %d with %zu entries, after writing and reading back kind %d with %zu:\n%s", what,
                  a->path, a->kind, a->n, b->kind, b->n, text);
    if (a->kind == TR_CFG_SCALAR) {
        if (strcmp(a->text, b->text) != 0 || is_null(a) != is_null(b))
            fuzz_fail("%s: '%s' is '%s'%s, after writing and reading back '%s'%s:\n%s", what, a->path, a->text,
                      is_null(a) ? " (null)" : "", b->text, is_null(b) ? " (null)" : "", text);
        return;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (a->kind == TR_CFG_MAP && strcmp(a->kids[i]->key, b->kids[i]->key) != 0)
            fuzz_fail("%s: key '%s' of '%s' reads back as '%s':\n%s", what, a->kids[i]->key, a->path, b->kids[i]->key,
                      text);
        same_tree(a->kids[i], b->kids[i], what, text);
    }
}

/* Writes cfg, parses the text back (it must parse) and compares; returns the copy. */
tr_config *fuzz_check_config_roundtrip(const tr_config *cfg, const char *what) {
    char *text = fuzz_config_text(cfg);
    tr_config *back;
    if (tr_config_parse(&back, text, strlen(text), "resolved.yaml") != TR_OK)
        fuzz_fail("%s: the written config does not parse: %s\n%s", what, tr_error_msg(), text);
    same_tree(tr_config_root(cfg), tr_config_root(back), what, text);
    free(text);
    return back;
}

static int same_limit(const batch_limit *a, const batch_limit *b) {
    return a->is_count == b->is_count && a->count == b->count && a->fraction == b->fraction;
}

static void same_settings(const job_settings *a, const job_settings *b) {
    int same = strcmp(a->name, b->name) == 0 && strcmp(a->outdir, b->outdir) == 0 && a->seed == b->seed &&
               a->batch == b->batch && a->prefetch == b->prefetch && a->workers == b->workers &&
               a->max_epochs == b->max_epochs && a->max_steps == b->max_steps && a->accum == b->accum &&
               a->log_every == b->log_every && a->threads == b->threads && a->val_fraction == b->val_fraction &&
               a->grad_clip == b->grad_clip && a->shuffle == b->shuffle && a->drop_last == b->drop_last &&
               a->progress == b->progress && a->val_every_n_steps == b->val_every_n_steps &&
               a->val_every_n_epochs == b->val_every_n_epochs &&
               same_limit(&a->lim.train, &b->lim.train) && same_limit(&a->lim.val, &b->lim.val) &&
               same_limit(&a->lim.val_check, &b->lim.val_check) && a->lim.fast_dev_run == b->lim.fast_dev_run &&
               a->sched.kind == b->sched.kind && a->sched.warmup_steps == b->sched.warmup_steps &&
               a->sched.step_size == b->sched.step_size && a->sched.gamma == b->sched.gamma &&
               a->sched.min_lr == b->sched.min_lr && a->optim.kind == b->optim.kind && a->optim.lr == b->optim.lr &&
               a->optim.weight_decay == b->optim.weight_decay && a->optim.momentum == b->optim.momentum &&
               a->optim.dampening == b->optim.dampening && a->optim.nesterov == b->optim.nesterov &&
               a->optim.beta1 == b->optim.beta1 && a->optim.beta2 == b->optim.beta2 && a->optim.eps == b->optim.eps &&
               a->max_restarts == b->max_restarts && a->accelerator == b->accelerator &&
               a->devices_asked == b->devices_asked && a->n_device_ids == b->n_device_ids &&
               memcmp(a->device_ids, b->device_ids, sizeof a->device_ids) == 0 && a->ck_epochs == b->ck_epochs &&
               a->ck_steps == b->ck_steps && a->keep_last == b->keep_last && a->resume == b->resume &&
               a->ck_monitor.metric == b->ck_monitor.metric && a->ck_monitor.mode == b->ck_monitor.mode &&
               a->save_top_k == b->save_top_k && a->save_last == b->save_last &&
               a->es_monitor.metric == b->es_monitor.metric && a->es_monitor.mode == b->es_monitor.mode &&
               a->es_patience == b->es_patience && a->es_min_delta == b->es_min_delta &&
               !a->init_from == !b->init_from && (!a->init_from || strcmp(a->init_from, b->init_from) == 0);
    if (!same) fuzz_fail("the settings read from the resolved config differ from the run's");
}

void fuzz_check_job_settings(tr_config *cfg, const char *const *needles) {
    job *j = calloc(1, sizeof *j);
    if (!j) fuzz_fail("out of memory");
    j->cfg = cfg;
    tr_error_clear();
    if (job_read_settings(j) != TR_OK) {
        fuzz_expect_message("settings", needles);
        free(j);
        return;
    }
    /* The run directory's config.yaml, read again on resume, must give the same run. */
    tr_config *back = fuzz_check_config_roundtrip(cfg, "resolved config");
    job *k = calloc(1, sizeof *k);
    if (!k) fuzz_fail("out of memory");
    k->cfg = back;
    if (job_read_settings(k) != TR_OK) fuzz_fail("the resolved config is refused: %s", tr_error_msg());
    same_settings(&j->s, &k->s);
    char da[17], db[17], diff[512];
    job_config_digest(j->root, da);
    job_config_digest(k->root, db);
    job_config_diff(j->root, k->root, diff, sizeof diff);
    if (strcmp(da, db) != 0 || diff[0]) fuzz_fail("resolved config digest %s != %s (%s)", da, db, diff);
    tr_config_destroy(back);
    free(k);
    free(j);
}
