/* The top k of a monitored metric and the checkpoints folder's pointers (ckpt_select.h). As
 * ModelCheckpoint: a value enters when it is strictly better than the k-th (so among equal
 * values the earlier checkpoint stays), and the one it pushes out is left to keep_last. */
#include "run/ckpt_select.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run/checkpoint_impl.h"
#include "trainer/memory.h"

void select_name(char *out, size_t cap, int64_t step) { snprintf(out, cap, "step-%08lld", (long long)step); }

void select_init(ckpt_select *s, const monitor *m, int64_t k, int save_last) {
    *s = (ckpt_select){.m = *m, .k = k, .save_last = save_last};
}

void select_free(ckpt_select *s) {
    tr_free(s->top);
    s->top = NULL;
    s->n = s->cap = 0;
}

/* Whether a (a later step than b, or the same) ranks before b. */
static int ranks_before(const ckpt_select *s, const ckpt_ranked *a, const ckpt_ranked *b) {
    return monitor_better(&s->m, a->score, b->score, 0) || (a->score == b->score && a->step < b->step);
}

static int insert(ckpt_select *s, ckpt_ranked r) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 8;
        ckpt_ranked *v = tr_malloc((size_t)cap * sizeof *v);
        if (!v) return 0;
        if (s->n) memcpy(v, s->top, (size_t)s->n * sizeof *v);
        tr_free(s->top);
        s->top = v;
        s->cap = cap;
    }
    int64_t at = s->n;
    while (at > 0 && ranks_before(s, &r, &s->top[at - 1])) at--;
    memmove(s->top + at + 1, s->top + at, (size_t)(s->n - at) * sizeof r);
    s->top[at] = r;
    s->n++;
    return 1;
}

int select_offer(ckpt_select *s, int64_t step, double score) {
    if (s->m.metric == MONITOR_OFF) return 0;
    for (int64_t i = 0; i < s->n; i++) /* validated twice at one step (an epoch's end and every n steps) */
        if (s->top[i].step == step) return 1;
    if (!isfinite(score)) return 0;
    if (s->k > 0 && s->n >= s->k) {
        if (!monitor_better(&s->m, score, s->top[s->k - 1].score, 0)) return 0;
        s->n = s->k - 1; /* the k-th goes */
    }
    return insert(s, (ckpt_ranked){.step = step, .score = score}) ? 1 : -1;
}

int select_put(const ckpt_select *s, json_t *loop) {
    if (s->m.metric == MONITOR_OFF) return 0;
    json_t *top = json_array();
    for (int64_t i = 0; top && i < s->n; i++)
        if (json_array_append_new(top, json_pack("{s:I, s:f}", "step", (json_int_t)s->top[i].step, "score", s->top[i].score)) != 0) {
            json_decref(top);
            top = NULL;
        }
    json_t *o = top ? json_pack("{s:s, s:s, s:I, s:o}", "monitor", monitor_name(s->m.metric), "mode",
                                monitor_mode_name(s->m.mode), "save_top_k", (json_int_t)s->k, "top_k", top)
                    : NULL;
    return o ? json_object_set_new(loop, "selection", o) : -1;
}

tr_status select_restore(ckpt_select *s, json_t *loop, const char *path, char *note, size_t cap) {
    note[0] = '\0';
    json_t *o = loop ? json_object_get(loop, "selection") : NULL;
    if (!o || s->m.metric == MONITOR_OFF) return TR_OK;
    json_t *top = json_object_get(o, "top_k");
    const char *metric = json_string_value(json_object_get(o, "monitor")), *mode = json_string_value(json_object_get(o, "mode"));
    if (!json_is_object(o) || !metric || !mode || !json_is_array(top))
        return tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s/" STATE_FILE ": loop.selection must hold 'monitor', "
                                          "'mode' and a 'top_k' list", path);
    monitor was;
    monitor_parse(&was, metric, mode);
    if (was.metric != s->m.metric || was.mode != s->m.mode) {
        snprintf(note, cap, "checkpoint.monitor is now %s (%s), %s says %s (%s): the top k start afresh, and the "
                 "checkpoints of the old ones are kept by keep_last alone", monitor_name(s->m.metric),
                 monitor_mode_name(s->m.mode), path, metric, mode);
        return TR_OK;
    }
    for (size_t i = 0; i < json_array_size(top); i++) {
        json_t *e = json_array_get(top, i), *step = json_object_get(e, "step"), *score = json_object_get(e, "score");
        if (!json_is_integer(step) || json_integer_value(step) < 0 || !json_is_number(score) ||
            !isfinite(json_number_value(score)))
            return tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s/" STATE_FILE ": loop.selection.top_k[%zu] must be "
                                              "{\"step\": N, \"score\": a finite number}", path, i);
        /* Offered again: a smaller save_top_k keeps the best of them. */
        if (select_offer(s, json_integer_value(step), json_number_value(score)) < 0)
            return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    }
    return TR_OK;
}

tr_status select_after_save(const ckpt_select *s, const char *dir, int keep_last, int64_t newest) {
    int64_t n = s->m.metric == MONITOR_OFF ? 0 : s->n;
    char(*names)[32] = tr_malloc((size_t)(n ? n : 1) * sizeof *names);
    const char **keep = tr_malloc((size_t)(n ? n : 1) * sizeof *keep);
    tr_status st = names && keep ? TR_OK : TR_ERR_NOMEM;
    for (int64_t i = 0; i < n && st == TR_OK; i++) {
        select_name(names[i], sizeof names[i], s->top[i].step);
        keep[i] = names[i];
    }
    if (st == TR_OK) st = ckpt_prune(dir, keep_last, keep, (int)n);
    if (st == TR_OK && n > 0) st = ckpt_link(dir, "best", names[0]);
    if (st == TR_OK && s->save_last) {
        char last[32];
        select_name(last, sizeof last, newest);
        st = ckpt_link(dir, "last", last);
    }
    tr_free(names);
    tr_free(keep);
    return st;
}
