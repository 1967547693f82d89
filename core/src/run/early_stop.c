/* Early stopping (early_stop.h): Lightning's rule, a strict improvement by more than min_delta
 * resets the count, anything else (a value that is not finite too) adds one; the run stops when
 * the count reaches patience. */
#include "run/early_stop.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run/checkpoint_impl.h"

void early_stop_init(early_stop *e, const monitor *m, int64_t patience, double min_delta) {
    *e = (early_stop){.m = *m, .patience = patience, .min_delta = min_delta, .best = NAN, .best_step = -1, .last_step = -1};
}

int early_stop_update(early_stop *e, int64_t step, double value) {
    if (e->m.metric == MONITOR_OFF || step == e->last_step) return e->stopped;
    e->last_step = step;
    if (monitor_better(&e->m, value, e->best, e->min_delta)) {
        e->best = value;
        e->best_step = step;
        e->wait = 0;
    } else if (++e->wait >= e->patience) {
        e->stopped = 1;
    }
    return e->stopped;
}

int early_stop_put(const early_stop *e, json_t *loop) {
    if (e->m.metric == MONITOR_OFF) return 0;
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:b}", "monitor", monitor_name(e->m.metric), "mode",
                          monitor_mode_name(e->m.mode), "best_step", (json_int_t)e->best_step, "wait", (json_int_t)e->wait,
                          "last_step", (json_int_t)e->last_step, "stopped", e->stopped);
    /* No best yet (no validation): JSON has no NaN, so the key is left out. */
    if (o && isfinite(e->best) && json_object_set_new(o, "best", json_real(e->best)) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o ? json_object_set_new(loop, "early_stopping", o) : -1;
}

tr_status early_stop_restore(early_stop *e, json_t *loop, const char *path, char *note, size_t cap) {
    note[0] = '\0';
    json_t *o = loop ? json_object_get(loop, "early_stopping") : NULL;
    if (!o || e->m.metric == MONITOR_OFF) return TR_OK;
    const char *metric = json_string_value(json_object_get(o, "monitor")), *mode = json_string_value(json_object_get(o, "mode"));
    json_t *best = json_object_get(o, "best"), *bs = json_object_get(o, "best_step"), *wait = json_object_get(o, "wait"),
           *last = json_object_get(o, "last_step"), *stopped = json_object_get(o, "stopped");
    if (!metric || !mode || (best && (!json_is_number(best) || !isfinite(json_number_value(best)))) ||
        !json_is_integer(bs) || !json_is_integer(wait) || json_integer_value(wait) < 0 || !json_is_integer(last) ||
        !json_is_boolean(stopped))
        return tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s/" STATE_FILE ": loop.early_stopping must hold 'monitor', "
                                          "'mode', 'best_step', 'wait', 'last_step', 'stopped' and a finite 'best'", path);
    monitor was;
    monitor_parse(&was, metric, mode);
    if (was.metric != e->m.metric || was.mode != e->m.mode) {
        snprintf(note, cap, "trainer.early_stopping.monitor is now %s (%s), %s says %s (%s): its patience counts afresh",
                 monitor_name(e->m.metric), monitor_mode_name(e->m.mode), path, metric, mode);
        return TR_OK;
    }
    e->best = best ? json_number_value(best) : NAN;
    e->best_step = json_integer_value(bs);
    e->wait = json_integer_value(wait);
    e->last_step = json_integer_value(last);
    e->stopped = json_is_true(stopped);
    return TR_OK;
}

int early_stop_ended(const char *ckpt) {
    json_t *loop = NULL;
    if (ckpt_read_loop(ckpt, &loop) != TR_OK || !loop) {
        tr_error_clear();
        return 0;
    }
    int ended = json_is_true(json_object_get(json_object_get(loop, "early_stopping"), "stopped"));
    json_decref(loop);
    return ended;
}
