/* `trainer predict`'s CSV rows (predict_csv.h). Probabilities are the softmax in double of
 * the logits, each term exp(l - max) / sum(exp(l - max)), so a row's sum to 1 and the largest
 * is the prediction's (the first of equal maxima). */
#include "run/predict_csv.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trainer/io.h"

static tr_status write_status(const predict_csv *p) {
    return ferror(p->f) ? tr_error_set(TR_ERR_IO, "%s: cannot write: %s", p->path, strerror(errno)) : TR_OK;
}

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

/* Class `id` after `prefix`: its name when the classes have names, else the id. */
static void write_class(const predict_csv *p, const char *prefix, int64_t id) {
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)id);
    int named = p->classes->names && id >= 0 && id < p->classes->count;
    write_field(p->f, prefix, named ? p->classes->names[id] : num);
}

/* Scored text pairs (the text dataset's mode pairs): x (2, T) token ids, one score. */
static int pair_spec(const tr_data_spec *s) {
    return s->task == TR_TASK_REGRESS && s->x_dtype == TR_I32 && s->x_ndim == 2 && s->x_shape[0] == 2 && s->y_numel == 1;
}

static void write_header(predict_csv *p) {
    const tr_data_spec *s = p->spec;
    int labels = !p->unlabelled;
    if (pair_spec(s)) {
        fprintf(p->f, labels ? "index,score,similarity\n" : "index,similarity\n");
    } else if (s->task == TR_TASK_CLASSIFY) {
        fprintf(p->f, labels ? "index,label,prediction,confidence" : "index,prediction,confidence");
        for (int64_t c = 0; c < s->n_classes; c++) {
            fputc(',', p->f);
            write_class(p, "prob_", c);
        }
        fputc('\n', p->f);
    } else if (s->task == TR_TASK_LM) {
        fprintf(p->f, labels ? "index,loss,accuracy,next_token\n" : "index,next_token\n");
    } else {
        fprintf(p->f, "index");
        for (int64_t k = 0; labels && k < s->y_numel; k++) fprintf(p->f, ",label_%lld", (long long)k);
        for (int64_t k = 0; k < s->y_numel; k++) fprintf(p->f, ",prediction_%lld", (long long)k);
        fprintf(p->f, "\n");
    }
}

tr_status predict_csv_open(predict_csv *p) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", p->path);
    TR_CHECK(tr_mkdirs(dirname(dir)));
    p->f = fopen(p->path, "w");
    if (!p->f) return tr_error_set(TR_ERR_IO, "%s: cannot write: %s", p->path, strerror(errno));
    write_header(p);
    return write_status(p);
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

static void classify_row(const predict_csv *p, const tr_host_batch *hb, const float *l, int64_t i) {
    int64_t C = p->spec->n_classes, best;
    double conf, nll = 0;
    row_stats(l, C, -1, &best, &conf, &nll);
    fprintf(p->f, "%lld,", (long long)(hb->first + i));
    if (!p->unlabelled) {
        write_class(p, "", ((const int32_t *)hb->y)[i]);
        fputc(',', p->f);
    }
    write_class(p, "", best);
    fprintf(p->f, ",%.7g", conf);
    for (int64_t c = 0; c < C; c++) fprintf(p->f, ",%.7g", exp((double)l[c] - (double)l[best]) * conf);
    fputc('\n', p->f);
}

/* A language model's sample: its mean loss and accuracy over the targets scored (targets
 * below 0, ignored by the loss, left out: nan when none is scored) and the prediction at its
 * last position. */
static void lm_row(const predict_csv *p, const tr_host_batch *hb, const float *out, int64_t i) {
    int64_t T = p->spec->y_numel, V = p->spec->n_classes, best = 0, hits = 0, scored = 0;
    double loss = 0, conf, nll = 0;
    const int32_t *y = p->unlabelled ? NULL : (const int32_t *)hb->y + i * T;
    for (int64_t k = 0; k < T; k++) {
        int64_t target = y ? y[k] : -1;
        row_stats(out + (i * T + k) * V, V, target, &best, &conf, &nll);
        if (target < 0) continue;
        loss += nll;
        hits += best == target;
        scored++;
    }
    long long index = (long long)(hb->first + i);
    if (p->unlabelled) fprintf(p->f, "%lld,%lld\n", index, (long long)best);
    else fprintf(p->f, "%lld,%.7g,%.7g,%lld\n", index, scored ? loss / (double)scored : NAN,
                 scored ? (double)hits / (double)scored : NAN, (long long)best);
}

tr_status predict_csv_rows(void *user, const tr_host_batch *hb, const tr_model_out *mo) {
    predict_csv *p = user;
    const tr_data_spec *s = p->spec;
    const float *out = mo->logits->data;
    for (int64_t i = 0; i < hb->size; i++) {
        if (s->task == TR_TASK_CLASSIFY) {
            classify_row(p, hb, out + i * s->n_classes, i);
        } else if (s->task == TR_TASK_LM) {
            lm_row(p, hb, out, i);
        } else {
            int64_t K = s->y_numel;
            fprintf(p->f, "%lld", (long long)(hb->first + i));
            for (int64_t k = 0; !p->unlabelled && k < K; k++) fprintf(p->f, ",%.7g", ((const float *)hb->y)[i * K + k]);
            for (int64_t k = 0; k < K; k++) fprintf(p->f, ",%.7g", out[i * K + k]);
            fprintf(p->f, "\n");
        }
    }
    return write_status(p);
}

tr_status predict_csv_close(predict_csv *p, tr_status st) {
    if (!p->f) return st;
    int bad = fclose(p->f) != 0;
    p->f = NULL;
    if (bad && st == TR_OK) st = tr_error_set(TR_ERR_IO, "%s: cannot write: %s", p->path, strerror(errno));
    return st;
}
