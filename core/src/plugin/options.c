/* Plugin options: "key=value" strings checked against a plugin's specs, defaults filled in. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin/plugin_impl.h"
#include "trainer/memory.h"
#include "trainer/plugin.h"

#define MAX_LIST 32
#define MAX_KEY 127 /* tr_options_create reads keys of up to this many bytes */

typedef struct value {
    const tr_option_spec *spec;
    int64_t i;
    double f;
    char *s;
    int64_t list[MAX_LIST];
    int n_list;
} value;

struct tr_options {
    value *v;
    uint32_t n;
};

static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = a[i - 1] != b[j - 1];
            int m = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < m) m = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + c < m) m = d[i - 1][j - 1] + c;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < m)
                m = d[i - 2][j - 2] + 1;
            d[i][j] = m;
        }
    return d[la][lb];
}

static const char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

static tr_status parse_int(const char *where, const char *key, const char *text, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end)
        return tr_error_set(TR_ERR_INVALID, "%s.%s: expected an integer, got '%s'", where, key, text);
    *out = v;
    return TR_OK;
}

static tr_status check_range(const char *where, const tr_option_spec *sp, double v, const char *text) {
    if ((sp->min != 0 || sp->max != 0) && (v < sp->min || v > sp->max)) {
        if (sp->type == TR_OPTION_FLOAT)
            return tr_error_set(TR_ERR_INVALID, "%s.%s: must be between %g and %g, got %s", where,
                                sp->key, sp->min, sp->max, text);
        return tr_error_set(TR_ERR_INVALID, "%s.%s: must be between %.0f and %.0f, got %s", where,
                            sp->key, sp->min, sp->max, text);
    }
    return TR_OK;
}

static tr_status set_value(value *v, const char *where, const char *raw, int is_default);

/* v from its trimmed text; is_default: the text is the spec's default itself, whose unset list
 * items have no default to take (and whose parse must not parse itself again). */
static tr_status set_text(value *v, const char *where, const char *text, int is_default) {
    const tr_option_spec *sp = v->spec;
    switch (sp->type) {
    case TR_OPTION_INT:
        TR_CHECK(parse_int(where, sp->key, text, &v->i));
        return check_range(where, sp, (double)v->i, text);
    case TR_OPTION_FLOAT: {
        char *end;
        errno = 0;
        double f = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(f))
            return tr_error_set(TR_ERR_INVALID, "%s.%s: expected a number, got '%s'", where, sp->key, text);
        v->f = f;
        return check_range(where, sp, f, text);
    }
    case TR_OPTION_BOOL:
        if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on") || !strcmp(text, "1")) v->i = 1;
        else if (!strcasecmp(text, "false") || !strcasecmp(text, "no") || !strcasecmp(text, "off") || !strcmp(text, "0")) v->i = 0;
        else return tr_error_set(TR_ERR_INVALID, "%s.%s: expected true or false, got '%s'", where, sp->key, text);
        return TR_OK;
    case TR_OPTION_CHOICE: {
        size_t n = strlen(text);
        for (const char *c = sp->choices; c && *c;) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && strncmp(c, text, n) == 0) goto string;
            c = bar ? bar + 1 : c + len;
        }
        return tr_error_set(TR_ERR_INVALID, "%s.%s: expected one of %s, got '%s'", where, sp->key,
                            sp->choices, text);
    }
    case TR_OPTION_STRING:
    case TR_OPTION_PATH:
    string:
        tr_free(v->s);
        v->s = tr_malloc(strlen(text) + 1);
        if (!v->s) return TR_ERR_NOMEM;
        strcpy(v->s, text);
        return TR_OK;
    case TR_OPTION_INT_LIST: {
        /* "[1, 2, 3]" or "1,2,3". An empty item (an override's key[N] on a list the config
         * does not set leaves the items before N unset: docs/config.md) takes the default
         * list's item there, or is an error; never dropped, which would shift the items after
         * it and silently make another model ([~, 4] read as [4]). */
        char list[1024];
        snprintf(list, sizeof list, "%s", text);
        char *p = list;
        if (*p == '[') {
            p++;
            char *close = strrchr(p, ']');
            if (!close || close[1])
                return tr_error_set(TR_ERR_INVALID, "%s.%s: expected a list like [1, 2], got '%s'", where, sp->key, text);
            *close = '\0';
        }
        v->n_list = 0;
        char *tok = (char *)trim(p);
        if (!*tok) return TR_OK; /* [] */
        value dflt = {.spec = sp};
        int have_dflt = 0;
        for (;;) {
            char *comma = strchr(tok, ',');
            if (comma) *comma = '\0';
            if (v->n_list == MAX_LIST)
                return tr_error_set(TR_ERR_INVALID, "%s.%s: at most %d items", where, sp->key, MAX_LIST);
            char item[64];
            snprintf(item, sizeof item, "%s", tok);
            const char *t = trim(item);
            if (!*t) {
                /* (the default itself with an unset item has none to take) */
                if (!have_dflt && !is_default && sp->default_value &&
                    set_value(&dflt, where, sp->default_value, 1) == TR_OK)
                    have_dflt = 1;
                if (!have_dflt || v->n_list >= dflt.n_list)
                    return tr_error_set(TR_ERR_INVALID, "%s.%s: item %d of %s is unset and the default (%s) has no item %d: "
                                                        "give it a value",
                                        where, sp->key, v->n_list, text,
                                        sp->default_value ? sp->default_value : "none", v->n_list);
                v->list[v->n_list] = dflt.list[v->n_list];
            } else {
                TR_CHECK(parse_int(where, sp->key, t, &v->list[v->n_list]));
                TR_CHECK(check_range(where, sp, (double)v->list[v->n_list], t));
            }
            v->n_list++;
            if (!comma) break;
            tok = comma + 1;
        }
        return TR_OK;
    }
    }
    return tr_error_set(TR_ERR_INTERNAL, "%s.%s: unknown option type", where, sp->key);
}

/* v from raw, whole: a string option has no length limit (a list of class names can be long). */
static tr_status set_value(value *v, const char *where, const char *raw, int is_default) {
    size_t n = strlen(raw);
    char *buf = tr_malloc(n + 1);
    if (!buf) return tr_error_set(TR_ERR_NOMEM, "%s.%s: out of memory", where, v->spec->key);
    memcpy(buf, raw, n + 1);
    tr_status st = set_text(v, where, trim(buf), is_default);
    tr_free(buf);
    return st;
}

/* A key a config can set: "key=value" splits at the first '=', dots nest mappings. */
static int settable_key(const char *k) {
    size_t n = k ? strlen(k) : 0;
    if (n == 0 || n > MAX_KEY) return 0;
    for (; *k; k++)
        if ((unsigned char)*k <= ' ' || *k == 0x7f || *k == '=' || *k == '.') return 0;
    return 1;
}

tr_status plugin_options_check(const char *path, const char *plugin, const tr_option_spec *specs, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        const tr_option_spec *o = &specs[i];
        if (!settable_key(o->key))
            return tr_error_set(TR_ERR_PLUGIN,
                                "%s: plugin '%s': option %u: key '%.40s' is not one a config can set (1-%d "
                                "bytes, no '=', '.', blank or control character)",
                                path, plugin, i, o->key ? o->key : "(null)", MAX_KEY);
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(specs[k].key, o->key) == 0)
                return tr_error_set(TR_ERR_PLUGIN, "%s: plugin '%s': option '%s' is declared twice (%u and %u)",
                                    path, plugin, o->key, k, i);
        if ((unsigned)o->type > TR_OPTION_PATH)
            return tr_error_set(TR_ERR_PLUGIN, "%s: plugin '%s': option '%s' has unknown type %d", path, plugin,
                                o->key, (int)o->type);
        if (o->type == TR_OPTION_CHOICE && (!o->choices || !o->choices[0]))
            return tr_error_set(TR_ERR_PLUGIN, "%s: plugin '%s': choice option '%s' lists no choices", path, plugin,
                                o->key);
        if (!isfinite(o->min) || !isfinite(o->max) || o->min > o->max)
            return tr_error_set(TR_ERR_PLUGIN, "%s: plugin '%s': option '%s' has range [%g, %g]", path, plugin,
                                o->key, o->min, o->max);
        if (!o->default_value) continue;
        value v = {.spec = o};
        tr_status st = set_value(&v, "default", o->default_value, 1);
        tr_free(v.s);
        if (st != TR_OK) {
            tr_error_prefix("%s: plugin '%s': option '%s' has a bad default: ", path, plugin, o->key);
            return TR_ERR_PLUGIN;
        }
    }
    return TR_OK;
}

void tr_options_destroy(tr_options *o) {
    if (!o) return;
    for (uint32_t i = 0; i < o->n; i++) tr_free(o->v[i].s);
    tr_free(o->v);
    tr_free(o);
}

tr_status tr_options_create(tr_options **out, const tr_option_spec *specs, uint32_t n_specs,
                            const char *const *kv, int n_kv, const char *where) {
    *out = NULL;
    tr_options *o = tr_calloc(1, sizeof *o);
    if (!o) return TR_ERR_NOMEM;
    o->n = n_specs;
    o->v = tr_calloc(n_specs ? n_specs : 1, sizeof *o->v);
    if (!o->v) {
        tr_free(o);
        return TR_ERR_NOMEM;
    }
    tr_status st = TR_OK;
    int *given = tr_calloc(n_specs ? n_specs : 1, sizeof *given);
    if (!given) { st = TR_ERR_NOMEM; goto fail; }
    for (uint32_t i = 0; i < n_specs; i++) o->v[i].spec = &specs[i];
    for (int k = 0; k < n_kv && st == TR_OK; k++) {
        const char *eq = strchr(kv[k], '=');
        char key[MAX_KEY + 1];
        size_t kl = eq ? (size_t)(eq - kv[k]) : strlen(kv[k]);
        if (!eq || kl == 0 || kl >= sizeof key) {
            st = tr_error_set(TR_ERR_INVALID, "%s: '%s' is not key=value", where, kv[k]);
            break;
        }
        memcpy(key, kv[k], kl);
        key[kl] = '\0';
        int found = -1, best = -1, best_d = 99;
        for (uint32_t i = 0; i < n_specs; i++) {
            if (strcmp(specs[i].key, key) == 0) found = (int)i;
            int d = edit_distance(key, specs[i].key);
            if (d < best_d) { best_d = d; best = (int)i; }
        }
        if (found < 0) {
            int limit = (int)strlen(key) / 3 > 1 ? (int)strlen(key) / 3 : 1;
            if (best >= 0 && best_d <= limit)
                st = tr_error_set(TR_ERR_INVALID, "%s.%s: unknown option (did you mean '%s'?)",
                                  where, key, specs[best].key);
            else {
                char list[512] = "";
                size_t len = 0;
                for (uint32_t i = 0; i < n_specs && len + 40 < sizeof list; i++)
                    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", specs[i].key);
                st = tr_error_set(TR_ERR_INVALID, "%s.%s: unknown option (options: %s)", where, key,
                                  n_specs ? list : "none");
            }
            break;
        }
        if (given[found]) {
            st = tr_error_set(TR_ERR_INVALID, "%s.%s: given twice", where, key);
            break;
        }
        given[found] = 1;
        st = set_value(&o->v[found], where, eq + 1, 0);
    }
    for (uint32_t i = 0; i < n_specs && st == TR_OK; i++) {
        if (given[i]) continue;
        if (!specs[i].default_value)
            st = tr_error_set(TR_ERR_INVALID, "%s.%s: required option is missing (%s)", where,
                              specs[i].key, specs[i].doc ? specs[i].doc : "no description");
        else
            st = set_value(&o->v[i], where, specs[i].default_value, 1);
    }
    tr_free(given);
    if (st == TR_OK) {
        *out = o;
        return TR_OK;
    }
fail:
    tr_options_destroy(o);
    return st;
}

static const value *lookup(const tr_options *o, const char *key, tr_option_type t1, tr_option_type t2) {
    for (uint32_t i = 0; o && i < o->n; i++)
        if (strcmp(o->v[i].spec->key, key) == 0)
            return (o->v[i].spec->type == t1 || o->v[i].spec->type == t2) ? &o->v[i] : NULL;
    return NULL;
}

int64_t tr_options_int(const tr_options *o, const char *key) {
    const value *v = lookup(o, key, TR_OPTION_INT, TR_OPTION_INT);
    return v ? v->i : 0;
}
double tr_options_float(const tr_options *o, const char *key) {
    const value *v = lookup(o, key, TR_OPTION_FLOAT, TR_OPTION_FLOAT);
    return v ? v->f : 0.0;
}
int tr_options_bool(const tr_options *o, const char *key) {
    const value *v = lookup(o, key, TR_OPTION_BOOL, TR_OPTION_BOOL);
    return v ? (int)v->i : 0;
}
const char *tr_options_string(const tr_options *o, const char *key) {
    const value *v = lookup(o, key, TR_OPTION_STRING, TR_OPTION_CHOICE);
    if (!v) v = lookup(o, key, TR_OPTION_PATH, TR_OPTION_PATH);
    return v ? v->s : NULL;
}
int tr_options_int_list(const tr_options *o, const char *key, int64_t *out, int max) {
    const value *v = lookup(o, key, TR_OPTION_INT_LIST, TR_OPTION_INT_LIST);
    if (!v) return -1;
    for (int i = 0; i < v->n_list && i < max; i++) out[i] = v->list[i];
    return v->n_list;
}
