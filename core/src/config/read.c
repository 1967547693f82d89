/* Typed reads of config values and unknown-key checks, each failure a message naming the
 * source position, the key path and what was expected. Limits: integers are decimal int64;
 * floats are finite decimals (no inf, nan or hex); suggestions use the optimal-string-alignment
 * Damerau-Levenshtein distance on keys up to 256 bytes. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/node.h"

#define POS_CAP 320

typedef struct lookup {
    const tr_cfg_node *node;   /* the value, NULL when absent */
    const tr_cfg_node *parent; /* the mapping that would hold it, NULL when absent */
    char path[512];            /* full dotted path for messages */
} lookup;

static tr_status find_key(const tr_cfg_node *map, const char *key, lookup *lk) {
    if (!map || !key) return tr_error_set(TR_ERR_INVALID, "config read: NULL mapping or key");
    if (map->path[0])
        snprintf(lk->path, sizeof lk->path, "%s.%s", map->path, key);
    else
        snprintf(lk->path, sizeof lk->path, "%s", key);
    const char *dot = strrchr(key, '.');
    lk->parent = map;
    if (strchr(dot ? dot + 1 : key, '[')) {
        /* An item of a list ("optimizer.betas[1]"): its parent is the list's mapping. */
        char prefix[512];
        size_t n = dot ? (size_t)(dot - key) : 0;
        if (n >= sizeof prefix) return tr_error_set(TR_ERR_INVALID, "config read: key too long");
        memcpy(prefix, key, n);
        prefix[n] = '\0';
        lk->parent = n ? tr_cfg_find(map, prefix) : map;
        lk->node = tr_cfg_find(map, key);
    } else if (dot) {
        size_t n = (size_t)(dot - key);
        char prefix[512];
        if (n >= sizeof prefix) return tr_error_set(TR_ERR_INVALID, "config read: key too long");
        memcpy(prefix, key, n);
        prefix[n] = '\0';
        lk->parent = tr_cfg_find(map, prefix);
        key = dot + 1;
    }
    /* A section written as a scalar or list ("trainer: 5") is an error, not "absent". */
    if (lk->parent && lk->parent->kind != TR_CFG_MAP) {
        const tr_cfg_node *p = lk->parent;
        char pos[POS_CAP];
        tr_cfg_pos_(pos, sizeof pos, p->source, p->line, p->col);
        if (p->kind == TR_CFG_SCALAR)
            return tr_error_set(TR_ERR_INVALID, "%s: %s: expected a mapping, got '%s'", pos,
                                p->path[0] ? p->path : "(top level)", p->text);
        return tr_error_set(TR_ERR_INVALID, "%s: %s: expected a mapping, got a list", pos,
                            p->path[0] ? p->path : "(top level)");
    }
    if (!strchr(key, '[')) lk->node = tr_cfg_child(lk->parent, key);
    /* A plain empty value, ~ or null means "not given". */
    if (tr_cfg_null_(lk->node)) lk->node = NULL;
    return TR_OK;
}

int tr_cfg_null_(const tr_cfg_node *v) {
    return v && v->kind == TR_CFG_SCALAR && !v->quoted &&
           (!v->text[0] || strcmp(v->text, "~") == 0 || strcmp(v->text, "null") == 0 ||
            strcmp(v->text, "Null") == 0 || strcmp(v->text, "NULL") == 0);
}

static tr_status missing(const tr_cfg_node *map, const lookup *lk) {
    const tr_cfg_node *p = lk->parent;
    const char *src = map->source ? map->source : "config";
    if (p && p->kind == TR_CFG_MAP && p->path[0] && p->line > 0)
        return tr_error_set(TR_ERR_INVALID, "%s:%d:%d: %s: required key is missing", p->source,
                            p->line, p->col, lk->path);
    return tr_error_set(TR_ERR_INVALID, "%s: %s: required key is missing", src, lk->path);
}

static const char *kind_name(const tr_cfg_node *n) {
    return n->kind == TR_CFG_MAP ? "a mapping" : "a list";
}

static tr_status bad_value(const tr_cfg_node *n, const char *what) {
    char pos[POS_CAP];
    tr_cfg_pos_(pos, sizeof pos, n->source, n->line, n->col);
    if (n->kind != TR_CFG_SCALAR)
        return tr_error_set(TR_ERR_INVALID, "%s: %s: expected %s, got %s", pos, n->path, what,
                            kind_name(n));
    return tr_error_set(TR_ERR_INVALID, "%s: %s: expected %s, got '%s'", pos, n->path, what,
                        n->text);
}

static tr_status out_of_range(const tr_cfg_node *n, const char *lo, const char *hi) {
    char pos[POS_CAP];
    tr_cfg_pos_(pos, sizeof pos, n->source, n->line, n->col);
    return tr_error_set(TR_ERR_INVALID, "%s: %s: must be between %s and %s, got %s", pos,
                        n->path, lo, hi, n->text);
}

/* The value node of key; NULL when absent (the caller stores its default), an error when
 * absent and required. */
static tr_status value_node(const tr_cfg_node *map, const char *key, int required,
                            const tr_cfg_node **out) {
    lookup lk;
    TR_CHECK(find_key(map, key, &lk));
    *out = lk.node;
    if (!lk.node && required) return missing(map, &lk);
    return TR_OK;
}

tr_status tr_cfg_get_int(const tr_cfg_node *map, const char *key, int64_t def, int64_t min,
                         int64_t max, int64_t *out, int required) {
    const tr_cfg_node *n;
    TR_CHECK(value_node(map, key, required, &n));
    if (!n) {
        *out = def;
        return TR_OK;
    }
    if (n->kind != TR_CFG_SCALAR) return bad_value(n, "an integer");
    const char *t = n->text;
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (end == t || *end || isspace((unsigned char)t[0])) return bad_value(n, "an integer");
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%lld", (long long)min);
    snprintf(hi, sizeof hi, "%lld", (long long)max);
    if (errno == ERANGE || v < min || v > max) return out_of_range(n, lo, hi);
    *out = v;
    return TR_OK;
}

tr_status tr_cfg_get_float(const tr_cfg_node *map, const char *key, double def, double min,
                           double max, double *out, int required) {
    const tr_cfg_node *n;
    TR_CHECK(value_node(map, key, required, &n));
    if (!n) {
        *out = def;
        return TR_OK;
    }
    if (n->kind != TR_CFG_SCALAR) return bad_value(n, "a number");
    const char *t = n->text;
    /* strtod also reads inf, nan and hex floats; a config number is a plain decimal. */
    if (strpbrk(t, "nNxXiI") || isspace((unsigned char)t[0])) return bad_value(n, "a number");
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (end == t || *end) return bad_value(n, "a number");
    if (!isfinite(v)) return bad_value(n, "a finite number");
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%g", min);
    snprintf(hi, sizeof hi, "%g", max);
    if (v < min || v > max) return out_of_range(n, lo, hi);
    *out = v;
    return TR_OK;
}

tr_status tr_cfg_get_bool(const tr_cfg_node *map, const char *key, int def, int *out,
                          int required) {
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    const tr_cfg_node *n;
    TR_CHECK(value_node(map, key, required, &n));
    if (!n) {
        *out = def;
        return TR_OK;
    }
    if (n->kind == TR_CFG_SCALAR) {
        for (int i = 0; i < 3; i++) {
            if (strcasecmp(n->text, yes[i]) == 0) {
                *out = 1;
                return TR_OK;
            }
            if (strcasecmp(n->text, no[i]) == 0) {
                *out = 0;
                return TR_OK;
            }
        }
    }
    return bad_value(n, "true or false");
}

tr_status tr_cfg_get_string(const tr_cfg_node *map, const char *key, const char *def,
                            const char **out, int required) {
    const tr_cfg_node *n;
    TR_CHECK(value_node(map, key, required, &n));
    if (!n) {
        *out = def;
        return TR_OK;
    }
    if (n->kind != TR_CFG_SCALAR) return bad_value(n, "a string");
    *out = n->text;
    return TR_OK;
}

/* "a|b|c" -> "a, b or c" */
static void choice_list(const char *choices, char *buf, size_t cap) {
    size_t count = 1, at = 0;
    for (const char *c = choices; *c; c++) count += *c == '|';
    buf[0] = '\0';
    const char *p = choices;
    for (size_t i = 0; i < count; i++) {
        size_t len = strcspn(p, "|");
        const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
        int w = snprintf(buf + at, cap - at, "%s%.*s", sep, (int)len, p);
        if (w < 0 || (size_t)w >= cap - at) return;
        at += (size_t)w;
        p += len + (p[len] == '|');
    }
}

static int choice_index(const char *choices, const char *name) {
    int i = 0;
    size_t nl = strlen(name);
    for (const char *p = choices;; i++) {
        size_t len = strcspn(p, "|");
        if (len == nl && strncmp(p, name, len) == 0) return i;
        if (!p[len]) return -1;
        p += len + 1;
    }
}

tr_status tr_cfg_get_choice(const tr_cfg_node *map, const char *key, const char *choices,
                            const char *def, int *index, int required) {
    if (!choices) return tr_error_set(TR_ERR_INVALID, "config read: NULL choices");
    const tr_cfg_node *n;
    TR_CHECK(value_node(map, key, required, &n));
    if (!n) {
        *index = def ? choice_index(choices, def) : -1;
        if (def && *index < 0)
            return tr_error_set(TR_ERR_INTERNAL, "%s: default '%s' is not one of '%s'", key,
                                def, choices);
        return TR_OK;
    }
    int i = n->kind == TR_CFG_SCALAR ? choice_index(choices, n->text) : -1;
    if (i < 0) {
        char list[512];
        choice_list(choices, list, sizeof list);
        return bad_value(n, list);
    }
    *index = i;
    return TR_OK;
}

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions). */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 256 || lb > 256) return (size_t)-1;
    size_t w = lb + 1;
    size_t *d = malloc((la + 1) * w * sizeof *d);
    if (!d) return (size_t)-1;
    for (size_t i = 0; i <= la; i++) d[i * w] = i;
    for (size_t j = 0; j <= lb; j++) d[j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[(i - 1) * w + j] + 1;
            if (d[i * w + j - 1] + 1 < v) v = d[i * w + j - 1] + 1;
            if (d[(i - 1) * w + j - 1] + cost < v) v = d[(i - 1) * w + j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[(i - 2) * w + j - 2] + 1 < v)
                v = d[(i - 2) * w + j - 2] + 1;
            d[i * w + j] = v;
        }
    }
    size_t r = d[la * w + lb];
    free(d);
    return r;
}

tr_status tr_cfg_check_keys(const tr_cfg_node *map, const char *const allowed[], size_t n) {
    if (!map) return TR_OK;
    if (map->kind != TR_CFG_MAP) return bad_value(map, "a mapping");
    for (size_t k = 0; k < map->n; k++) {
        const tr_cfg_node *kid = map->kids[k];
        size_t best = (size_t)-1, bi = 0;
        int known = 0;
        for (size_t i = 0; i < n && !known; i++) {
            if (strcmp(kid->key, allowed[i]) == 0) {
                known = 1;
                break;
            }
            size_t d = edit_distance(kid->key, allowed[i]);
            if (d < best) {
                best = d;
                bi = i;
            }
        }
        if (known) continue;
        char pos[POS_CAP];
        tr_cfg_pos_(pos, sizeof pos, kid->source, kid->key_line, kid->key_col);
        size_t len = strlen(kid->key), limit = len / 3 > 1 ? len / 3 : 1;
        if (n && best <= limit)
            return tr_error_set(TR_ERR_INVALID, "%s: %s: unknown key (did you mean '%s'?)", pos,
                                kid->path, allowed[bi]);
        char list[1024];
        size_t at = 0;
        list[0] = '\0';
        for (size_t i = 0; i < n; i++) {
            int w = snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", allowed[i]);
            if (w < 0 || (size_t)w >= sizeof list - at) break;
            at += (size_t)w;
        }
        if (n == 0)
            return tr_error_set(TR_ERR_INVALID, "%s: %s: unknown key (this section takes no keys)",
                                pos, kid->path);
        return tr_error_set(TR_ERR_INVALID, "%s: %s: unknown key (allowed keys: %s)", pos,
                            kid->path, list);
    }
    return TR_OK;
}
