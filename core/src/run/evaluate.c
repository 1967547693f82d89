/* Evaluation passes: validation during training, `trainer eval` and `trainer predict`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "run/eval_report.h"
#include "run/predict_csv.h"
#include "run/run_api.h"
#include "trainer/log.h"
#include "trainer/runtime.h"

/* The argmax of a row of C logits: the first of equal maxima (numpy's argmax, predict's
 * prediction column). */
static int64_t argmax(const float *l, int64_t C) {
    int64_t best = 0;
    for (int64_t c = 1; c < C; c++)
        if (l[c] > l[best]) best = c;
    return best;
}

/* A labelled batch's scores into t: classification per sample, LMs per token, regression per
 * sample; targets below 0 are left out, as the losses leave them out. */
static tr_status score_batch(const job *j, const tr_host_batch *hb, const tr_model_out *mo, eval_totals *t) {
    const tr_data_spec *s = &j->spec;
    const float *l = mo->logits->data;
    if (s->task == TR_TASK_REGRESS) {
        regress_sums_add(&t->reg, hb->y, l, hb->size);
        t->count += hb->size;
        return TR_OK;
    }
    int64_t C = mo->logits->shape[mo->logits->ndim - 1], n = hb->size * (s->task == TR_TASK_LM ? s->y_numel : 1);
    const int32_t *y = hb->y;
    for (int64_t i = 0; i < n; i++) {
        if (y[i] < 0) continue;
        if (y[i] >= C) /* the loss refuses it first */
            return tr_error_set(TR_ERR_INTERNAL, "evaluation: target %d of sample %lld is not below the model's %lld outputs",
                                (int)y[i], (long long)(hb->first + i), (long long)C);
        int64_t best = argmax(l + i * C, C);
        t->hits += best == y[i];
        t->count++;
        if (t->cls.v) class_counts_add(&t->cls, y[i], best);
    }
    return TR_OK;
}

/* The pass's figures summed over the ranks (each a share of every batch). */
static tr_status reduce(job *j, eval_totals *t) {
    if (!j->sops->all_sum) return TR_OK;
    double v[4] = {t->loss_sum, (double)t->hits, (double)t->count, (double)t->samples};
    TR_CHECK(j->sops->all_sum(j->strat, v, 4));
    t->loss_sum = v[0];
    t->hits = (int64_t)v[1];
    t->count = (int64_t)v[2];
    t->samples = (int64_t)v[3];
    if (t->cls.v) TR_CHECK(j->sops->all_sum(j->strat, t->cls.v, (int)t->cls.n));
    if (t->reg.v) {
        int W = j->info.world > 0 ? j->info.world : 1;
        int64_t n = regress_sums_packed(&t->reg, W);
        double *buf = malloc((size_t)n * sizeof *buf);
        if (!buf) return tr_error_set(TR_ERR_NOMEM, "evaluation: out of memory");
        regress_sums_pack(&t->reg, j->info.rank, W, buf);
        tr_status st = j->sops->all_sum(j->strat, buf, (int)n);
        if (st == TR_OK) regress_sums_unpack(&t->reg, W, buf);
        free(buf);
        TR_CHECK(st);
    }
    return TR_OK;
}

tr_status job_evaluate(job *j, tr_loader *L, int64_t epoch, const eval_pass *how, eval_totals *t) {
    memset(t, 0, sizeof *t);
    const tr_data_spec *s = &j->spec;
    if (!how->unlabelled && s->task == TR_TASK_CLASSIFY) TR_CHECK(class_counts_init(&t->cls, s->n_classes, how->confusion));
    if (!how->unlabelled && s->task == TR_TASK_REGRESS) TR_CHECK(regress_sums_init(&t->reg, s->y_numel));
    TR_CHECK(tr_loader_start_epoch(L, epoch, 0));
    const tr_host_batch *hb;
    tr_status st = TR_OK;
    /* Every rank stops at the same batch: the batches are global, a share of each on each rank. */
    for (int64_t b = 0; (!how->max_batches || b < how->max_batches) && (st = tr_loader_next(L, &hb)) == TR_OK && hb; b++) {
        tr_model_out mo;
        TR_CHECK(j->sops->forward(j->strat, hb, !how->unlabelled, &mo));
        t->samples += hb->size;
        if (!how->unlabelled) {
            t->loss_sum += ((const float *)mo.loss->data)[0];
            TR_CHECK(score_batch(j, hb, &mo, t));
        }
        if (how->fn) TR_CHECK(how->fn(how->user, hb, &mo));
    }
    TR_CHECK(st);
    return reduce(j, t);
}

void eval_totals_free(eval_totals *t) {
    class_counts_free(&t->cls);
    regress_sums_free(&t->reg);
}

/* ---- trainer eval / predict ---- */

/* The figures of a pass into res, and the summary line's tail into extra. */
static void results(const job *j, const eval_totals *t, const class_scores *cs, const regress_scores *rs,
                    tr_eval_result *res, char *extra, size_t cap) {
    tr_task task = j->spec.task;
    res->samples = t->samples;
    res->loss = t->count ? t->loss_sum / (double)t->count : NAN;
    res->accuracy = task != TR_TASK_REGRESS && t->count ? (double)t->hits / (double)t->count : NAN;
    res->perplexity = task == TR_TASK_LM ? exp(res->loss) : NAN;
    res->precision_macro = res->recall_macro = res->f1_macro = NAN;
    res->precision_weighted = res->recall_weighted = res->f1_weighted = NAN;
    res->mae = res->rmse = res->r2 = NAN;
    if (cs) {
        res->precision_macro = cs->precision_macro;
        res->recall_macro = cs->recall_macro;
        res->f1_macro = cs->f1_macro;
        res->precision_weighted = cs->precision_weighted;
        res->recall_weighted = cs->recall_weighted;
        res->f1_weighted = cs->f1_weighted;
    }
    if (rs) {
        res->mae = rs->mae;
        res->rmse = rs->rmse;
        res->r2 = rs->r2;
    }
    extra[0] = '\0';
    if (!res->labelled) return;
    size_t k = (size_t)snprintf(extra, cap, ": loss %.4f", res->loss);
    if (task == TR_TASK_LM) k += (size_t)snprintf(extra + k, cap - k, "  perplexity %.3f", res->perplexity);
    if (task != TR_TASK_REGRESS) k += (size_t)snprintf(extra + k, cap - k, "  accuracy %.2f%%", 100 * res->accuracy);
    if (cs) snprintf(extra + k, cap - k, "  macro F1 %.4f", res->f1_macro);
    if (rs) snprintf(extra + k, cap - k, "  MAE %.4g  RMSE %.4g  R^2 %.4f", res->mae, res->rmse, res->r2);
}

/* trainer eval: the table, and the record in the checkpoint's run (rank 0). A record that
 * cannot be written (a run folder of someone else's, read-only; a full disk) is a warning: the
 * scores are printed all the same. */
static void report(job *j, const eval_report *r, tr_eval_result *res) {
    char path[1300];
    eval_report rr = *r;
    int recorded = j->info.rank == 0 && eval_report_record_path(r->checkpoint, path, sizeof path);
    rr.record = recorded ? path : NULL;
    eval_report_print(j, &rr);
    if (!recorded) return;
    if (eval_report_append(path, &rr) != TR_OK) TR_WARN("%s (the scores above are printed only)", tr_error_msg());
    else snprintf(res->record, sizeof res->record, "%s", path);
}

static tr_status eval_job(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                          const char *const *plugin_dirs, const char *checkpoint, const char *split,
                          const char *output, tr_eval_result *res) {
    memset(res, 0, sizeof *res);
    TR_CHECK(job_plan(j, config_path, overrides, n_overrides, plugin_dirs));
    /* The checkpoint's classes decide the model's outputs (classes.h): read before it is made. */
    TR_CHECK(job_resolve_checkpoint(j, checkpoint, res->checkpoint, sizeof res->checkpoint));
    snprintf(j->ckpt_path, sizeof j->ckpt_path, "%s", res->checkpoint);
    TR_CHECK(classes_read_checkpoint(&j->ckpt_classes, res->checkpoint));
    int val = !split || strcmp(split, "val") == 0;
    j->labels_optional = output && val; /* predict scores a validation file without labels too */
    TR_CHECK(job_open_planned(j));
    if (output && j->info.world > 1)
        return tr_error_set(TR_ERR_INVALID, "%s runs %d ranks, but predict writes its CSV from one "
                                            "process: run it without a launcher, or with trainer.strategy=dataparallel "
                                            "(replicas in one process)",
                            j->strat_p->desc->name, j->info.world);
    tr_loader *L;
    const char *used;
    if (val) {
        /* Never the train split in its place: a score must be of the data asked for. */
        if (!j->val_L)
            return tr_error_set(TR_ERR_INVALID, "%s: the data has no validation split (data.val_fraction %g holds no "
                                                "samples out and no validation file is given): pass --split train to "
                                                "score the training split, or give the file in data.val_params",
                                config_path, j->s.val_fraction);
        L = j->val_L;
        used = "validation";
    } else if (strcmp(split, "train") == 0) {
        /* In order, whole: the training loader shuffles and may drop the tail. */
        tr_sampler s = j->train_sampler;
        s.shuffle = 0;
        s.drop_last = 0;
        tr_loader_destroy(j->train_L);
        j->train_L = NULL;
        TR_CHECK(tr_loader_create(&j->train_L, j->dops, j->train_ds, &j->spec, &s, (int)j->s.prefetch, (int)j->s.workers));
        L = j->train_L;
        used = "train";
    } else {
        return tr_error_set(TR_ERR_INVALID, "--split: expected 'val' or 'train', got '%s'", split);
    }
    res->labelled = !(val && j->val_unlabelled);
    tr_train_state state;
    TR_CHECK(job_load_checkpoint(j, res->checkpoint, 0, &state));

    predict_csv p = {.path = output, .spec = &j->spec, .classes = &j->classes, .unlabelled = !res->labelled};
    if (output) TR_CHECK(predict_csv_open(&p));
    eval_pass how = {.confusion = !output, .unlabelled = !res->labelled, .fn = output ? predict_csv_rows : NULL, .user = &p};
    eval_totals t;
    double t0 = tr_now();
    tr_status st = job_evaluate(j, L, 0, &how, &t);
    double dt = tr_now() - t0;
    st = predict_csv_close(&p, st);
    class_scores cs = {0};
    regress_scores rs;
    if (st == TR_OK && t.reg.v) regress_scores_of(&t.reg, &rs);
    if (st == TR_OK && t.cls.v) st = class_scores_compute(&cs, &t.cls);
    if (st == TR_OK) {
        char extra[200], step[48] = "weights file"; /* a weights file has no state */
        results(j, &t, cs.precision ? &cs : NULL, t.reg.v ? &rs : NULL, res, extra, sizeof extra);
        if (state.model[0]) snprintf(step, sizeof step, "step %lld", (long long)state.step);
        job_say(j, "%s (%s) on the %s split, %lld samples%s%s", res->checkpoint, step, used, (long long)res->samples,
                res->labelled ? "" : " without labels (predictions only, nothing scored)", extra);
        eval_report r = {.checkpoint = res->checkpoint, .step = state.model[0] ? state.step : -1,
                         .split = val ? "val" : "train", .overrides = overrides, .n_overrides = n_overrides,
                         .spec = &j->spec, .classes = &j->classes, .samples = res->samples, .loss = res->loss,
                         .accuracy = res->accuracy, .perplexity = res->perplexity, .cls = cs.precision ? &cs : NULL,
                         .counts = t.cls.v ? &t.cls : NULL, .reg = t.reg.v ? &rs : NULL};
        if (!output) report(j, &r, res);
    }
    class_scores_free(&cs);
    eval_totals_free(&t);
    TR_CHECK(st);
    job_say(j, "inference: %lld samples in %.3f s (%.0f samples/s, %s)", (long long)res->samples, dt,
            dt > 0 ? (double)res->samples / dt : 0.0, j->info.description);
    if (output) job_say(j, "predictions written to %s", output);
    else if (res->record[0]) job_say(j, "eval record appended to %s", res->record);
    return TR_OK;
}

tr_status tr_run_eval(const char *config_path, const char *const *overrides, int n_overrides,
                      const char *const *plugin_dirs, const char *checkpoint, const char *split,
                      tr_eval_result *out) {
    return tr_run_predict(config_path, overrides, n_overrides, plugin_dirs, checkpoint, split, NULL, out);
}

tr_status tr_run_predict(const char *config_path, const char *const *overrides, int n_overrides,
                         const char *const *plugin_dirs, const char *checkpoint, const char *split,
                         const char *output, tr_eval_result *out) {
    job j;
    memset(&j, 0, sizeof j);
    tr_status st = eval_job(&j, config_path, overrides, n_overrides, plugin_dirs, checkpoint, split, output, out);
    job_close(&j);
    return st;
}
