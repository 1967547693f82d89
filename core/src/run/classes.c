/* A classification run's class list: from the dataset, into and out of checkpoints, and the
 * check that a checkpoint's model fits the data it scores (docs/config.md, "Classes"). */
#include "classes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_impl.h"
#include "trainer/memory.h"

void classes_free(run_classes *c) {
    for (int64_t i = 0; c->names && i < c->count; i++) free(c->names[i]);
    free(c->names);
    *c = (run_classes){0};
}

static tr_status set_names(run_classes *c, int64_t n) {
    c->count = n;
    c->names = calloc((size_t)(n > 0 ? n : 1), sizeof *c->names);
    return c->names ? TR_OK : tr_error_set(TR_ERR_NOMEM, "classes: out of memory for %lld names", (long long)n);
}

tr_status classes_of_data(run_classes *out, const tr_dataset_ops *ops, void *ds, int64_t n_classes) {
    *out = (run_classes){.count = n_classes};
    if (!ops->class_name || n_classes <= 0 || !ops->class_name(ds, 0)) return TR_OK;
    TR_CHECK(set_names(out, n_classes));
    for (int64_t i = 0; i < n_classes; i++) {
        const char *s = ops->class_name(ds, i);
        out->names[i] = strdup(s ? s : "");
        if (!out->names[i]) {
            classes_free(out);
            return tr_error_set(TR_ERR_NOMEM, "classes: out of memory");
        }
    }
    return TR_OK;
}

/* "a, b, c" (the first ones, then "..."), or "N integer labels". */
static const char *describe(const run_classes *c, char *buf, size_t cap) {
    if (!c->names) {
        snprintf(buf, cap, "%lld classes, integer labels 0..%lld", (long long)c->count, (long long)c->count - 1);
        return buf;
    }
    size_t len = (size_t)snprintf(buf, cap, "%lld classes [", (long long)c->count);
    for (int64_t i = 0; i < c->count && len + 8 < cap; i++) {
        if (len > cap - 40) {
            len += (size_t)snprintf(buf + len, cap - len, ", ...");
            break;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", c->names[i]);
    }
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

tr_status classes_reconcile(const run_classes *data, const run_classes *ckpt, const char *ckpt_path, int64_t *n_classes) {
    *n_classes = data->count;
    if (ckpt->count <= 0) return TR_OK; /* an older checkpoint: nothing recorded */
    /* Declared (named) classes must be the checkpoint's: the same list, or the same count when
     * the checkpoint's are integer labels. Inferred ones (integer labels found in the data) may
     * stop short of the checkpoint's: a file lacking the top class. */
    int same = data->names ? data->count == ckpt->count : data->count <= ckpt->count;
    for (int64_t i = 0; same && data->names && ckpt->names && i < data->count; i++)
        same = strcmp(data->names[i], ckpt->names[i]) == 0;
    if (!same) {
        char a[400], b[400];
        return tr_error_set(TR_ERR_INVALID,
                            "checkpoint refused: %s was trained on %s, the config's data has %s (give the data.params "
                            "classes the run was trained with)",
                            ckpt_path, describe(ckpt, a, sizeof a), describe(data, b, sizeof b));
    }
    *n_classes = ckpt->count;
    return TR_OK;
}

json_t *classes_to_json(const run_classes *c) {
    if (!c || c->count <= 0) return NULL;
    json_t *o = json_pack("{s:I}", "count", (json_int_t)c->count);
    if (o && c->names) {
        json_t *a = json_array();
        for (int64_t i = 0; a && i < c->count; i++)
            if (json_array_append_new(a, json_string(c->names[i])) != 0) {
                json_decref(a);
                a = NULL;
            }
        if (!a || json_object_set_new(o, "names", a) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

tr_status classes_from_json(run_classes *out, json_t *v, const char *path) {
    *out = (run_classes){0};
    if (!v) return TR_OK;
    json_t *n = json_object_get(v, "count"), *names = json_object_get(v, "names");
    if (!json_is_object(v) || !json_is_integer(n) || json_integer_value(n) <= 0 || json_integer_value(n) > (1 << 24) ||
        (names && (!json_is_array(names) || (int64_t)json_array_size(names) != json_integer_value(n))))
        return tr_error_set(TR_ERR_PARSE, "%s: 'classes' must be {\"count\": N >= 1, \"names\": [N strings]}", path);
    if (!names) {
        out->count = json_integer_value(n);
        return TR_OK;
    }
    TR_CHECK(set_names(out, json_integer_value(n)));
    for (int64_t i = 0; i < out->count; i++) {
        const char *s = json_string_value(json_array_get(names, (size_t)i));
        out->names[i] = s ? strdup(s) : NULL;
        if (!out->names[i]) {
            classes_free(out);
            return tr_error_set(s ? TR_ERR_NOMEM : TR_ERR_PARSE, "%s: 'classes' names[%lld] must be a string", path, (long long)i);
        }
    }
    return TR_OK;
}

tr_status classes_read_checkpoint(run_classes *out, const char *ckpt) {
    *out = (run_classes){0};
    if (ckpt_is_file(ckpt)) return TR_OK; /* a weights file records no classes */
    char path[PATH_CAP];
    TR_CHECK(ckpt_join(path, sizeof path, ckpt, STATE_FILE));
    json_error_t jerr;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) return tr_error_set(TR_ERR_PARSE, "checkpoint refused: %s:%d:%d: not valid JSON: %s", path, jerr.line, jerr.column, jerr.text);
    tr_status st = classes_from_json(out, json_object_get(o, "classes"), path);
    json_decref(o);
    if (st != TR_OK) tr_error_prefix("checkpoint refused: ");
    return st;
}
