/* Lightning's limits (run_limits.h): how many batches an epoch trains and a validation goes over,
 * when validation runs within an epoch, and fast_dev_run. The rules are Lightning 2.x's
 * (_parse_num_batches, _should_check_val_fx); docs/config.md says where they differ. */
#include "run/run_limits.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/node.h"
#include "job.h"

static const tr_cfg_node *given(const job *j, const char *key) {
    const tr_cfg_node *n = tr_cfg_find(j->root, key);
    return n && !tr_cfg_null_(n) ? n : NULL;
}

/* "c.yaml:3:5: key" where key is set, else "c.yaml: key". */
static void where(const job *j, const char *key, char *out, size_t size) {
    const tr_cfg_node *n = given(j, key);
    if (n) snprintf(out, size, "%s:%d:%d: %s", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n), key);
    else snprintf(out, size, "%s: %s", tr_cfg_source(j->root), key);
}

/* An integer as YAML writes one: digits, an optional sign. */
static int integer_text(const char *t) {
    if (*t == '+' || *t == '-') t++;
    if (!*t) return 0;
    for (; *t; t++)
        if (*t < '0' || *t > '9') return 0;
    return 1;
}

/* A plain decimal real (no hex, inf or nan). */
static int real_text(const char *t, double *v) {
    if (!*t || strspn(t, "0123456789.eE+-") != strlen(t)) return 0;
    char *end;
    *v = strtod(t, &end);
    return *end == '\0' && isfinite(*v);
}

/* key: a count of batches (an integer >= 0) or a fraction in [0, 1]; absent: 1.0, all. */
static tr_status read_limit(job *j, const char *key, batch_limit *out) {
    *out = (batch_limit){.fraction = 1.0};
    const tr_cfg_node *n = given(j, key);
    if (!n) return job_set_default(j, key, "1.0");
    char pos[512];
    where(j, key, pos, sizeof pos);
    const char *t = tr_cfg_scalar(n);
    double v;
    if (t && integer_text(t)) {
        long long c = strtoll(t, NULL, 10);
        if (c < 0 || (c == LLONG_MAX && strcmp(t, "9223372036854775807") != 0))
            return tr_error_set(TR_ERR_INVALID, "%s: a count of batches is 0 or more, got '%s'", pos, t);
        out->is_count = 1;
        out->count = c;
        return TR_OK;
    }
    if (!t || !real_text(t, &v))
        return tr_error_set(TR_ERR_INVALID, "%s: expected a count of batches (an integer, 0 or more) or a fraction of "
                                            "the epoch's batches (a real in [0.0, 1.0]), got '%s'", pos, t ? t : "(not a scalar)");
    if (v < 0 || v > 1)
        return tr_error_set(TR_ERR_INVALID, "%s: a fraction of the epoch's batches is in [0.0, 1.0], got '%s'%s", pos, t,
                            v > 1 && v == floor(v) ? " (a count of batches is written as an integer: 2, not 2.0)" : "");
    out->fraction = v;
    return TR_OK;
}

static int limit_is_zero(const batch_limit *l) { return l->is_count ? l->count == 0 : l->fraction == 0; }

/* trainer.fast_dev_run: false, true (1) or a count of batches. */
static tr_status read_fast_dev_run(job *j, int64_t *out) {
    const char *key = "trainer.fast_dev_run";
    const tr_cfg_node *n = given(j, key);
    *out = 0;
    if (!n) return job_set_default(j, key, "false");
    const char *t = tr_cfg_scalar(n);
    if (t && integer_text(t)) {
        char pos[512];
        where(j, key, pos, sizeof pos);
        long long c = strtoll(t, NULL, 10);
        if (c < 0 || c > 1000000000)
            return tr_error_set(TR_ERR_INVALID, "%s: a count of batches is 0 (off) to 1000000000, got '%s'", pos, t);
        *out = c;
        return TR_OK;
    }
    int on;
    if (tr_cfg_get_bool(j->root, key, 0, &on, 0) != TR_OK) {
        char pos[512];
        where(j, key, pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: expected true, false or a count of batches (an integer), got '%s'", pos,
                            t ? t : "(not a scalar)");
    }
    *out = on;
    return TR_OK;
}

tr_status limits_read(job *j) {
    job_settings *s = &j->s;
    run_limits *l = &s->lim;
    char pos[512];
    TR_CHECK(read_limit(j, "trainer.limit_train_batches", &l->train));
    TR_CHECK(read_limit(j, "trainer.limit_val_batches", &l->val));
    TR_CHECK(read_limit(j, "trainer.val_check_interval", &l->val_check));
    TR_CHECK(read_fast_dev_run(j, &l->fast_dev_run));
    l->val_check_set = l->val_check.is_count || l->val_check.fraction != 1.0;
    if (l->fast_dev_run) { /* Lightning's: N batches of each in one epoch, validated at its end */
        int64_t n = l->fast_dev_run;
        l->train = l->val = (batch_limit){.is_count = 1, .count = n};
        l->val_check = (batch_limit){.fraction = 1.0};
        l->val_check_set = 0;
        s->max_epochs = 1;
        s->max_steps = n;
        s->val_every_n_steps = 0;
        s->val_every_n_epochs = 1;
        return TR_OK;
    }
    if (limit_is_zero(&l->train)) {
        where(j, "trainer.limit_train_batches", pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: 0 would train nothing; give a count of batches or a fraction of the "
                                            "epoch's, or use `trainer eval` to score a model without training", pos);
    }
    if (limit_is_zero(&l->val_check)) {
        where(j, "trainer.val_check_interval", pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: 0 is no interval; give a count of training batches or a fraction of the "
                                            "epoch (trainer.limit_val_batches: 0 turns validation off)", pos);
    }
    if (l->val_check_set && s->val_every_n_steps > 0) {
        where(j, "trainer.val_check_interval", pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: trainer.val_every_n_steps %lld also says when to validate; set one of them "
                                            "(val_check_interval counts the batches of each epoch, as Lightning's; "
                                            "val_every_n_steps counts optimizer steps over the whole run)",
                            pos, (long long)s->val_every_n_steps);
    }
    if (l->val_check_set && s->val_every_n_epochs == 0) {
        where(j, "trainer.val_check_interval", pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: validates within epochs, which trainer.val_every_n_epochs 0 turns off; to "
                                            "validate every N optimizer steps across epochs use trainer.val_every_n_steps, to "
                                            "turn validation off trainer.limit_val_batches: 0", pos);
    }
    return TR_OK;
}

tr_status limits_finish(job *j) {
    job_settings *s = &j->s;
    if (s->lim.fast_dev_run) { /* Lightning: no loggers, no checkpoint or early-stopping callbacks */
        s->loggers = 0;
        s->ck_monitor.metric = MONITOR_OFF;
        s->es_monitor.metric = MONITOR_OFF;
        s->save_top_k = 0;
        s->save_last = 0;
        s->ck_epochs = s->ck_steps = 0;
        return TR_OK;
    }
    if (!limit_is_zero(&s->lim.val)) return TR_OK;
    const monitor *ms[2] = {&s->ck_monitor, &s->es_monitor};
    for (int i = 0; i < 2; i++) {
        if (ms[i]->metric == MONITOR_OFF) continue;
        char pos[512];
        where(j, ms[i]->key, pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: %s is measured by validation, which trainer.limit_val_batches 0 turns off",
                            pos, monitor_name(ms[i]->metric));
    }
    return TR_OK;
}

/* Lightning's _parse_num_batches: a count caps the epoch's batches, a fraction takes
 * int(fraction * batches); a fraction that leaves none of some is refused. */
static tr_status resolve(const job *j, const char *key, const char *what, const batch_limit *l, int64_t all, int64_t *out) {
    if (l->is_count) {
        *out = l->count < all ? l->count : all;
        return TR_OK;
    }
    *out = (int64_t)(l->fraction * (double)all);
    if (*out > 0 || l->fraction == 0 || all == 0) return TR_OK;
    char pos[512];
    where(j, key, pos, sizeof pos);
    return tr_error_set(TR_ERR_INVALID, "%s: %g of the %s's %lld batches is less than one batch; give at least %.6g "
                                        "(1/%lld), or a count of batches", pos, l->fraction, what, (long long)all,
                        1.0 / (double)all, (long long)all);
}

tr_status limits_resolve(const job *j, int64_t train_all, int64_t val_all, limit_counts *out) {
    const run_limits *l = &j->s.lim;
    *out = (limit_counts){.train_all = train_all, .val_all = val_all};
    TR_CHECK(resolve(j, "trainer.limit_train_batches", "training split", &l->train, train_all, &out->train));
    TR_CHECK(resolve(j, "trainer.limit_val_batches", "validation split", &l->val, val_all, &out->val));
    if (!l->val_check_set || out->val == 0) return TR_OK;
    if (!l->val_check.is_count) { /* Lightning: int(batches * interval), at least 1 */
        int64_t b = (int64_t)((double)out->train * l->val_check.fraction);
        out->val_check = b > 1 ? b : 1;
        return TR_OK;
    }
    if (l->val_check.count > out->train) {
        char pos[512];
        where(j, "trainer.val_check_interval", pos, sizeof pos);
        return tr_error_set(TR_ERR_INVALID, "%s: %lld is more batches than an epoch trains (%lld); give at most %lld, a "
                                            "fraction of the epoch, or trainer.val_every_n_steps to count optimizer steps "
                                            "across epochs (trainer.limit_val_batches: 0 turns validation off)",
                            pos, (long long)l->val_check.count, (long long)out->train, (long long)out->train);
    }
    out->val_check = l->val_check.count;
    return TR_OK;
}

int limits_val_due(const job *j, const limit_counts *c, int64_t ep, int64_t step, int64_t before, int64_t after) {
    const job_settings *s = &j->s;
    if (c->val == 0) return 0;
    if (s->val_every_n_steps > 0 && step % s->val_every_n_steps == 0) return 1;
    if (!c->val_check) return 0;
    /* Lightning's check_val_every_n_epoch holds for the validations within an epoch too; the
     * run's last epoch always validates (val_every_n_epochs' rule). */
    int64_t n = s->val_every_n_epochs;
    if (n > 0 && (ep + 1) % n != 0 && ep + 1 < s->max_epochs) return 0;
    /* Once for each step whose batches reach a multiple of the interval (with grad_accum, at
     * the end of the optimizer step that holds that batch). */
    return after / c->val_check > before / c->val_check;
}

int limits_val_at_epoch_end(const job *j, const limit_counts *c, int64_t ep, int last) {
    const job_settings *s = &j->s;
    if (c->val == 0 || s->lim.val_check_set) return 0;
    int64_t n = s->val_every_n_epochs;
    return n > 0 && ((ep + 1) % n == 0 || last);
}

/* "3 (trainer.limit_train_batches 0.3)" or "3 (trainer.limit_train_batches 3)". */
static void value_of(const job *j, const char *key, char *out, size_t size) {
    const tr_cfg_node *n = given(j, key);
    const char *t = n ? tr_cfg_scalar(n) : NULL;
    snprintf(out, size, "%s %s", key, t ? t : "?");
}

void limits_describe(const job *j, const limit_counts *c, char *out, size_t size) {
    const run_limits *l = &j->s.lim;
    out[0] = '\0';
    if (l->fast_dev_run) {
        snprintf(out, size, "fast_dev_run: %lld training batch%s and %lld validation batch%s in one epoch "
                            "(trainer.fast_dev_run %lld); checkpoints, loggers (metrics.jsonl, tensorboard, csv), "
                            "checkpoint selection and early stopping are off, and no run folder is made",
                 (long long)c->train, c->train == 1 ? "" : "es", (long long)c->val, c->val == 1 ? "" : "es",
                 (long long)l->fast_dev_run);
        return;
    }
    size_t k = 0;
    char v[160];
    if (c->train != c->train_all || l->train.is_count || l->train.fraction != 1.0) {
        value_of(j, "trainer.limit_train_batches", v, sizeof v);
        k += (size_t)snprintf(out + k, size - k, "%s%lld of %lld training batches an epoch (%s)", k ? "; " : "limits: ",
                              (long long)c->train, (long long)c->train_all, v);
    }
    if (k < size && c->val_all && (c->val != c->val_all || l->val.is_count || l->val.fraction != 1.0)) {
        value_of(j, "trainer.limit_val_batches", v, sizeof v);
        k += (size_t)snprintf(out + k, size - k, "%s%lld of %lld validation batches a validation%s (%s)", k ? "; " : "limits: ",
                              (long long)c->val, (long long)c->val_all, c->val ? "" : ": validation off", v);
    }
    if (k < size && c->val_check) {
        value_of(j, "trainer.val_check_interval", v, sizeof v);
        snprintf(out + k, size - k, "%svalidation every %lld training batches of an epoch (%s)", k ? "; " : "limits: ",
                 (long long)c->val_check, v);
    }
}
