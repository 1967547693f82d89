/* The training loop's running figures in a checkpoint's state.json (loop_totals.h). Sums are
 * written with 17 significant digits, which read back to the same double: a resumed epoch's
 * train loss is the uninterrupted run's, bit for bit. */
#include "run/loop_totals.h"

#include <math.h>
#include <string.h>

#include "run/checkpoint_impl.h"

json_t *loop_totals_json(const loop_totals *t) {
    return json_pack("{s:I, s:f, s:I, s:f, s:I, s:I, s:I}", "total_steps", (json_int_t)t->total_steps,
                     "epoch_loss_sum", t->epoch_loss_sum, "epoch_steps", (json_int_t)t->epoch_steps,
                     "window_loss_sum", t->window_loss_sum, "window_steps", (json_int_t)t->window_steps, "skipped",
                     (json_int_t)t->skipped, "skipped_in_a_row", (json_int_t)t->skipped_in_a_row);
}

static tr_status get_count(const char *path, json_t *o, const char *key, int64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s/" STATE_FILE ": loop.%s must be a non-negative integer",
                            path, key);
    *out = json_integer_value(v);
    return TR_OK;
}

static tr_status get_sum(const char *path, json_t *o, const char *key, double *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s/" STATE_FILE ": loop.%s must be a finite number", path,
                            key);
    *out = json_number_value(v);
    return TR_OK;
}

tr_status loop_totals_read(const char *path, loop_totals *t, int *found) {
    memset(t, 0, sizeof *t);
    json_t *o;
    TR_CHECK(ckpt_read_loop(path, &o));
    *found = o != NULL;
    if (!o) return TR_OK;
    tr_status st = get_count(path, o, "total_steps", &t->total_steps);
    if (st == TR_OK) st = get_sum(path, o, "epoch_loss_sum", &t->epoch_loss_sum);
    if (st == TR_OK) st = get_count(path, o, "epoch_steps", &t->epoch_steps);
    if (st == TR_OK) st = get_sum(path, o, "window_loss_sum", &t->window_loss_sum);
    if (st == TR_OK) st = get_count(path, o, "window_steps", &t->window_steps);
    if (st == TR_OK) st = get_count(path, o, "skipped", &t->skipped);
    if (st == TR_OK) st = get_count(path, o, "skipped_in_a_row", &t->skipped_in_a_row);
    json_decref(o);
    return st;
}
