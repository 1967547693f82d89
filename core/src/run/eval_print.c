/* `trainer eval`'s table of classification scores (eval_report.h), laid out as
 * scikit-learn's classification_report, and the confusion matrix (rows: labels, columns:
 * predictions). Class names are shown up to NAME_SHOWN bytes (cut at a character boundary,
 * control characters as '?'); the eval record has them whole. */
#include <stdio.h>
#include <string.h>

#include "run/eval_report.h"

#define NAME_SHOWN 16

/* Class c's name as shown: its name when the classes have names, else its id. */
static void shown_name(const run_classes *cl, int64_t c, char out[NAME_SHOWN + 1]) {
    if (!cl->names || c >= cl->count) {
        char num[24];
        snprintf(num, sizeof num, "%lld", (long long)c);
        memcpy(out, num, NAME_SHOWN);
        out[NAME_SHOWN] = '\0';
        return;
    }
    const char *s = cl->names[c];
    size_t n = strlen(s);
    if (n > NAME_SHOWN) {
        n = NAME_SHOWN;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* not inside a UTF-8 sequence */
    }
    for (size_t i = 0; i < n; i++) out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7F ? '?' : s[i];
    out[n] = '\0';
}

static void print_matrix(job *j, const eval_report *r, int width) {
    const class_counts *cc = r->counts;
    int64_t C = cc->C;
    double most = 0;
    for (int64_t i = 0; i < C * C; i++) most = cc->v[3 * C + i] > most ? cc->v[3 * C + i] : most;
    char num[32], name[NAME_SHOWN + 1], line[(NAME_SHOWN + 32) * (EVAL_PRINT_MAX + 1)];
    int col = snprintf(num, sizeof num, "%.0f", most);
    for (int64_t c = 0; c < C; c++) {
        shown_name(r->classes, c, name);
        col = (int)strlen(name) > col ? (int)strlen(name) : col;
    }
    job_say(j, "confusion matrix (rows: label, columns: prediction):");
    size_t k = (size_t)snprintf(line, sizeof line, "%*s", width, "");
    for (int64_t c = 0; c < C; c++) {
        shown_name(r->classes, c, name);
        k += (size_t)snprintf(line + k, sizeof line - k, "  %*s", col, name);
    }
    job_say(j, "%s", line);
    for (int64_t a = 0; a < C; a++) {
        shown_name(r->classes, a, name);
        k = (size_t)snprintf(line, sizeof line, "%-*s", width, name);
        for (int64_t p = 0; p < C; p++) k += (size_t)snprintf(line + k, sizeof line - k, "  %*.0f", col, class_counts_cell(cc, a, p));
        job_say(j, "%s", line);
    }
}

void eval_report_print(job *j, const eval_report *r) {
    const class_scores *s = r->cls;
    if (!s || s->total <= 0) return;
    int64_t C = s->C;
    int per_class = C <= EVAL_PRINT_MAX, width = (int)strlen("weighted avg");
    char name[NAME_SHOWN + 1];
    for (int64_t c = 0; per_class && c < C; c++) {
        shown_name(r->classes, c, name);
        width = (int)strlen(name) > width ? (int)strlen(name) : width;
    }
    job_say(j, "%-*s  %9s  %9s  %9s  %9s", width, "", "precision", "recall", "f1", "support");
    for (int64_t c = 0; per_class && c < C; c++) {
        shown_name(r->classes, c, name);
        job_say(j, "%-*s  %9.4f  %9.4f  %9.4f  %9.0f", width, name, s->precision[c], s->recall[c], s->f1[c], s->support[c]);
    }
    job_say(j, "%-*s  %9.4f  %9.4f  %9.4f  %9.0f", width, "macro avg", s->precision_macro, s->recall_macro, s->f1_macro, s->total);
    job_say(j, "%-*s  %9.4f  %9.4f  %9.4f  %9.0f", width, "weighted avg", s->precision_weighted, s->recall_weighted,
            s->f1_weighted, s->total);
    if (s->present < C)
        job_say(j, "(macro averages over the %lld of %lld classes found among the labels or the predictions)",
                (long long)s->present, (long long)C);
    if (per_class && r->counts && r->counts->matrix) print_matrix(j, r, width);
    else if (!per_class)
        job_say(j, "(%lld classes: per-class scores%s are printed for up to %d classes%s%s)", (long long)C,
                r->counts && r->counts->matrix ? " and the confusion matrix" : "", EVAL_PRINT_MAX,
                r->record ? "; the eval record in " : "", r->record ? r->record : "");
}
