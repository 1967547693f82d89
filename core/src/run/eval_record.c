/* `trainer eval`'s record (eval_report.h): {"eval": {...}} appended to the metrics.jsonl of
 * the checkpoint's run, as a training run appends its records: reals with 9 significant
 * digits, null when not finite (docs/config.md, "metrics.jsonl"). It has no top-level step,
 * so the readers of a run's curves (trainer plot, the superseded-records rule) pass over it. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/io_error.h"
#include "run/eval_report.h"

int eval_report_record_path(const char *checkpoint, char *out, size_t size) {
    char a[PATH_MAX], b[PATH_MAX], probe[PATH_MAX + 16];
    if (!realpath(checkpoint, a)) return 0;
    snprintf(b, sizeof b, "%s", dirname(a)); /* RUN/checkpoints */
    if (strcmp(basename(b), "checkpoints") != 0) return 0;
    snprintf(a, sizeof a, "%s", b);
    snprintf(b, sizeof b, "%s", dirname(a)); /* RUN */
    snprintf(probe, sizeof probe, "%s/config.yaml", b);
    if (access(probe, F_OK) != 0) return 0;
    return (size_t)snprintf(out, size, "%s/metrics.jsonl", b) < size;
}

static json_t *real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* key with the split's prefix: "val_f1_macro". */
static int put(json_t *o, const eval_report *r, const char *key, double v) {
    char k[96];
    snprintf(k, sizeof k, "%s_%s", r->split, key);
    return json_object_set_new(o, k, real(v));
}

static json_t *reals(const double *v, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, real(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int put_classes(json_t *o, const eval_report *r) {
    const class_scores *s = r->cls;
    int64_t C = s->C;
    int bad = put(o, r, "accuracy", r->accuracy);
    bad |= put(o, r, "precision_macro", s->precision_macro) | put(o, r, "recall_macro", s->recall_macro) |
           put(o, r, "f1_macro", s->f1_macro);
    bad |= put(o, r, "precision_weighted", s->precision_weighted) | put(o, r, "recall_weighted", s->recall_weighted) |
           put(o, r, "f1_weighted", s->f1_weighted);
    if (r->classes && r->classes->names) {
        json_t *names = json_array();
        for (int64_t c = 0; names && c < C && c < r->classes->count; c++)
            bad |= json_array_append_new(names, json_string(r->classes->names[c]));
        bad |= !names || json_object_set_new(o, "classes", names);
    }
    json_t *pc = json_object();
    bad |= !pc || json_object_set_new(o, "per_class", pc);
    if (bad) return -1;
    bad |= json_object_set_new(pc, "precision", reals(s->precision, C)) | json_object_set_new(pc, "recall", reals(s->recall, C));
    json_t *sup = json_array();
    for (int64_t c = 0; sup && c < C; c++) bad |= json_array_append_new(sup, json_integer((json_int_t)s->support[c]));
    bad |= json_object_set_new(pc, "f1", reals(s->f1, C)) | json_object_set_new(pc, "support", sup);
    if (r->counts && r->counts->matrix) {
        json_t *m = json_array();
        for (int64_t a = 0; m && a < C; a++) {
            json_t *row = json_array();
            for (int64_t p = 0; row && p < C; p++)
                bad |= json_array_append_new(row, json_integer((json_int_t)class_counts_cell(r->counts, a, p)));
            bad |= !row || json_array_append_new(m, row);
        }
        bad |= !m || json_object_set_new(o, "confusion_matrix", m);
    }
    return bad ? -1 : 0;
}

static json_t *record_json(const eval_report *r) {
    char abs[PATH_MAX];
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = json_object_set_new(o, "checkpoint", json_string(realpath(r->checkpoint, abs) ? abs : r->checkpoint));
    bad |= json_object_set_new(o, "step", r->step >= 0 ? json_integer(r->step) : json_null());
    bad |= json_object_set_new(o, "split", json_string(r->split));
    if (r->n_overrides > 0) {
        json_t *ov = json_array();
        for (int i = 0; ov && i < r->n_overrides; i++) bad |= json_array_append_new(ov, json_string(r->overrides[i]));
        bad |= !ov || json_object_set_new(o, "overrides", ov);
    }
    bad |= json_object_set_new(o, "samples", json_integer(r->samples));
    bad |= put(o, r, "loss", r->loss);
    if (r->spec->task == TR_TASK_LM) bad |= put(o, r, "accuracy", r->accuracy) | put(o, r, "perplexity", r->perplexity);
    if (r->reg) bad |= put(o, r, "mae", r->reg->mae) | put(o, r, "rmse", r->reg->rmse) | put(o, r, "r2", r->reg->r2);
    if (!bad && r->cls) bad = put_classes(o, r);
    json_t *rec = bad ? NULL : json_pack("{s:o}", "eval", o);
    if (!rec) json_decref(o);
    return rec;
}

tr_status eval_report_append(const char *path, const eval_report *r) {
    json_t *rec = record_json(r);
    char *text = rec ? json_dumps(rec, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(rec);
    if (!text) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory for the eval record", path);
    size_t n = strlen(text);
    text[n++] = '\n'; /* over the terminating NUL: the line is written by length */
    char why[256];
    tr_status st = TR_OK;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) st = tr_error_set(TR_ERR_IO, "%s: cannot write the eval record: %s", path, tr_io_reason(errno, why, sizeof why));
    ssize_t w = st == TR_OK ? write(fd, text, n) : 0;
    if (st == TR_OK && (w < 0 || (size_t)w != n))
        st = tr_error_set(TR_ERR_IO, "%s: cannot write the eval record: %s", path,
                          w < 0 ? tr_io_reason(errno, why, sizeof why) : "a short write (the disk is full?)");
    if (fd >= 0 && close(fd) != 0 && st == TR_OK)
        st = tr_error_set(TR_ERR_IO, "%s: cannot write the eval record: %s", path, tr_io_reason(errno, why, sizeof why));
    free(text);
    return st;
}
