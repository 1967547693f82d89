/* Evaluation passes: validation during training, `trainer eval` and `trainer predict`. */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "job.h"
#include "trainer/io.h"
#include "trainer/run.h"
#include "trainer/runtime.h"

/* Argmax hits of logits (N, C) against integer targets (N). */
static int64_t count_correct(const tr_tensor *logits, const tr_tensor *y) {
    int64_t C = logits->shape[logits->ndim - 1], N = tr_tensor_numel(logits) / C, hits = 0;
    const float *l = logits->data;
    const int32_t *t = y->data;
    for (int64_t i = 0; i < N; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (l[i * C + c] > l[i * C + best]) best = c;
        hits += best == t[i];
    }
    return hits;
}

tr_status job_evaluate(job *j, tr_loader *L, int64_t epoch, eval_totals *t, eval_batch_fn fn, void *user) {
    *t = (eval_totals){0};
    TR_CHECK(tr_loader_start_epoch(L, epoch, 0));
    int64_t per = j->spec.task == TR_TASK_LM ? j->spec.y_numel : 1;
    const tr_host_batch *hb;
    tr_status st;
    while ((st = tr_loader_next(L, &hb)) == TR_OK && hb) {
        tr_model_out mo;
        TR_CHECK(j->sops->forward(j->strat, hb, 1, &mo));
        t->loss_sum += ((const float *)mo.loss->data)[0];
        if (j->spec.task != TR_TASK_REGRESS) {
            /* The targets as a tensor over the host batch (count_correct reads data only). */
            tr_tensor y = {.data = hb->y, .dtype = TR_I32, .ndim = 1, .shape = {hb->size * per}};
            t->hits += count_correct(mo.logits, &y);
        }
        t->count += hb->size * per;
        if (fn) TR_CHECK(fn(user, hb, &mo));
    }
    TR_CHECK(st);
    if (j->sops->all_sum) {
        double v[3] = {t->loss_sum, (double)t->hits, (double)t->count};
        TR_CHECK(j->sops->all_sum(j->strat, v, 3));
        *t = (eval_totals){.loss_sum = v[0], .hits = (int64_t)v[1], .count = (int64_t)v[2]};
    }
    return TR_OK;
}

/* ---- trainer eval / predict ---- */

typedef struct predict_out {
    FILE *f;
    const char *path;
    const tr_data_spec *spec;
    const run_classes *classes;   /* named classes are written by name */
} predict_out;

/* One CSV field, prefix then text, quoted per RFC 4180 when it holds a comma, a quote or a
 * line break. */
static void write_field(FILE *f, const char *prefix, const char *text) {
    int quote = strpbrk(prefix, ",\"\r\n") || strpbrk(text, ",\"\r\n");
    if (quote) fputc('"', f);
    for (int part = 0; part < 2; part++)
        for (const char *c = part ? text : prefix; *c; c++) {
            if (*c == '"') fputc('"', f);
            fputc(*c, f);
        }
    if (quote) fputc('"', f);
}

/* Class `id` as predict writes it, after `prefix`: its name when the classes have names,
 * else the id. */
static void write_class(const predict_out *p, const char *prefix, int64_t id) {
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)id);
    int named = p->classes->names && id >= 0 && id < p->classes->count;
    write_field(p->f, prefix, named ? p->classes->names[id] : num);
}

/* Scored text pairs (the text dataset's mode pairs): x (2, T) token ids, one score. */
static int pair_spec(const tr_data_spec *s) {
    return s->task == TR_TASK_REGRESS && s->x_dtype == TR_I32 && s->x_ndim == 2 && s->x_shape[0] == 2 && s->y_numel == 1;
}

static tr_status write_header(predict_out *p) {
    const tr_data_spec *s = p->spec;
    if (pair_spec(s)) fprintf(p->f, "index,score,similarity\n");
    else if (s->task == TR_TASK_CLASSIFY) {
        fprintf(p->f, "index,label,prediction,confidence");
        for (int64_t c = 0; c < s->n_classes; c++) {
            fputc(',', p->f);
            write_class(p, "prob_", c);
        }
        fputc('\n', p->f);
    }
    else if (s->task == TR_TASK_LM) fprintf(p->f, "index,loss,accuracy,next_token\n");
    else {
        fprintf(p->f, "index");
        for (int64_t k = 0; k < s->y_numel; k++) fprintf(p->f, ",label_%lld", (long long)k);
        for (int64_t k = 0; k < s->y_numel; k++) fprintf(p->f, ",prediction_%lld", (long long)k);
        fprintf(p->f, "\n");
    }
    return ferror(p->f) ? tr_error_set(TR_ERR_IO, "%s: cannot write: %s", p->path, strerror(errno)) : TR_OK;
}

/* Softmax statistics of one row of logits: argmax and its probability; with target >= 0 also
 * the target's negative log-probability. */
static void row_stats(const float *l, int64_t C, int64_t target, int64_t *best, double *conf, double *nll) {
    int64_t b = 0;
    for (int64_t c = 1; c < C; c++)
        if (l[c] > l[b]) b = c;
    double z = 0;
    for (int64_t c = 0; c < C; c++) z += exp((double)l[c] - (double)l[b]);
    *best = b;
    *conf = 1.0 / z;
    if (target >= 0) *nll = log(z) - ((double)l[target] - (double)l[b]);
}

static tr_status write_rows(void *user, const tr_host_batch *hb, const tr_model_out *mo) {
    predict_out *p = user;
    const tr_data_spec *s = p->spec;
    const float *out = mo->logits->data;
    for (int64_t i = 0; i < hb->size; i++) {
        long long index = (long long)(hb->first + i);
        if (s->task == TR_TASK_CLASSIFY) {
            int64_t C = s->n_classes, best;
            double conf, nll = 0;
            int32_t label = ((const int32_t *)hb->y)[i];
            const float *l = out + i * C;
            row_stats(l, C, -1, &best, &conf, &nll);
            fprintf(p->f, "%lld,", index);
            write_class(p, "", label);
            fputc(',', p->f);
            write_class(p, "", best);
            fprintf(p->f, ",%.7g", conf);
            /* The softmax, each term as conf is: exp(l - max) / sum(exp(l - max)), in double. */
            for (int64_t c = 0; c < C; c++) fprintf(p->f, ",%.7g", exp((double)l[c] - (double)l[best]) * conf);
            fputc('\n', p->f);
        } else if (s->task == TR_TASK_LM) {
            int64_t T = s->y_numel, V = s->n_classes, best = 0, hits = 0;
            double loss = 0, conf, nll = 0;
            const int32_t *y = (const int32_t *)hb->y + i * T;
            for (int64_t k = 0; k < T; k++) {
                row_stats(out + (i * T + k) * V, V, y[k], &best, &conf, &nll);
                loss += nll;
                hits += best == y[k];
            }
            fprintf(p->f, "%lld,%.7g,%.7g,%lld\n", index, loss / (double)T, (double)hits / (double)T, (long long)best);
        } else {
            int64_t K = s->y_numel;
            fprintf(p->f, "%lld", index);
            for (int64_t k = 0; k < K; k++) fprintf(p->f, ",%.7g", ((const float *)hb->y)[i * K + k]);
            for (int64_t k = 0; k < K; k++) fprintf(p->f, ",%.7g", out[i * K + k]);
            fprintf(p->f, "\n");
        }
    }
    return ferror(p->f) ? tr_error_set(TR_ERR_IO, "%s: cannot write: %s", p->path, strerror(errno)) : TR_OK;
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
    TR_CHECK(job_open_planned(j));
    tr_loader *L;
    const char *used;
    if (!split || strcmp(split, "val") == 0) {
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
    tr_train_state state;
    TR_CHECK(job_load_checkpoint(j, res->checkpoint, 0, &state));

    predict_out p = {.path = output, .spec = &j->spec, .classes = &j->classes};
    if (output) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", output);
        TR_CHECK(tr_mkdirs(dirname(dir)));
        p.f = fopen(output, "w");
        if (!p.f) return tr_error_set(TR_ERR_IO, "%s: cannot write: %s", output, strerror(errno));
        tr_status st = write_header(&p);
        if (st != TR_OK) {
            fclose(p.f);
            return st;
        }
    }
    eval_totals t;
    double t0 = tr_now();
    tr_status st = job_evaluate(j, L, 0, &t, output ? write_rows : NULL, &p);
    double dt = tr_now() - t0;
    if (p.f && fclose(p.f) != 0 && st == TR_OK) st = tr_error_set(TR_ERR_IO, "%s: cannot write: %s", output, strerror(errno));
    TR_CHECK(st);
    res->samples = t.count / (j->spec.task == TR_TASK_LM ? j->spec.y_numel : 1);
    res->loss = t.count ? t.loss_sum / (double)t.count : NAN;
    res->accuracy = j->spec.task != TR_TASK_REGRESS && t.count ? (double)t.hits / (double)t.count : NAN;
    res->perplexity = j->spec.task == TR_TASK_LM ? exp(res->loss) : NAN;
    char extra[96] = "";
    if (j->spec.task == TR_TASK_LM) snprintf(extra, sizeof extra, "  perplexity %.3f", res->perplexity);
    if (j->spec.task != TR_TASK_REGRESS)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "  accuracy %.2f%%", 100 * res->accuracy);
    char step[48] = "weights file"; /* a weights file has no state */
    if (state.model[0]) snprintf(step, sizeof step, "step %lld", (long long)state.step);
    job_say(j, "%s (%s) on the %s split, %lld samples: loss %.4f%s", res->checkpoint, step, used, (long long)res->samples,
            res->loss, extra);
    job_say(j, "inference: %lld samples in %.3f s (%.0f samples/s, %s)", (long long)res->samples, dt,
            dt > 0 ? (double)res->samples / dt : 0.0, j->info.description);
    if (output) job_say(j, "predictions written to %s", output);
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
