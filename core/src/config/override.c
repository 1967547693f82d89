/* Command-line overrides of a config: `key.path[i]=value`, the value parsed as YAML and
 * placed into the tree, making the mappings and lists the path needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/node.h"

#define MAX_NEW_INDEX 1024 /* the largest index an override may pad a list it makes to */

/* Length of the well-formed UTF-8 character at s (no overlong forms or surrogates, at most
 * U+10FFFF; RFC 3629), 0 when ill-formed. s is NUL-terminated. */
static size_t utf8_char(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return n;
}

/* One step of an override's key path: a mapping key, or a list index (`[i]`). */
typedef struct path_step {
    size_t at, len; /* the key's or the index's text in the argument */
    int is_index;
    size_t index;
} path_step;

/* Splits "a.b[2].c" (the argument's first eq bytes) into steps; an error names the column. */
static tr_status split_path(const char *arg, size_t eq, path_step **out, size_t *n_out) {
    path_step *steps = calloc(eq + 1, sizeof *steps); /* at most one step per byte */
    size_t n = 0, s = 0;
    if (!steps) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    tr_status st = TR_OK;
    while (s <= eq && !st) {
        size_t len = strcspn(arg + s, ".=[]");
        if (len > eq - s) len = eq - s;
        if (len == 0) {
            st = arg[s] == '['
                     ? tr_error_set(TR_ERR_INVALID, "override '%s': a list index at column %zu follows no key (key[N]=value)",
                                    arg, s + 1)
                     : tr_error_set(TR_ERR_INVALID, "override '%s': empty key at column %zu (a..b or a trailing '.')", arg,
                                    s + 1);
            break;
        }
        for (size_t i = s; i < s + len && !st; i++) {
            unsigned char c = (unsigned char)arg[i];
            if (c <= ' ' || c == '#' || c == ':')
                st = tr_error_set(TR_ERR_INVALID, "override '%s': character '%c' at column %zu is not allowed in a key path",
                                  arg, c > ' ' ? c : '?', i + 1);
        }
        steps[n++] = (path_step){.at = s, .len = len};
        s += len;
        while (!st && s < eq && arg[s] == '[') {
            size_t d = s + 1;
            while (d < eq && arg[d] >= '0' && arg[d] <= '9') d++;
            unsigned long long v = d > s + 1 && d - s - 1 <= 9 ? strtoull(arg + s + 1, NULL, 10) : 0;
            int leading_zero = d - s - 1 > 1 && arg[s + 1] == '0'; /* [00] would be item [0] under another name */
            if (d == s + 1 || d - s - 1 > 9 || d >= eq || arg[d] != ']' || leading_zero) {
                st = tr_error_set(TR_ERR_INVALID, "override '%s': a list index at column %zu must be [N], N a whole "
                                                  "number from 0 written without leading zeros (e.g. "
                                                  "optimizer.betas[1]=0.99)", arg, s + 1);
                break;
            }
            steps[n++] = (path_step){.at = s + 1, .len = d - s - 1, .is_index = 1, .index = (size_t)v};
            s = d + 1;
        }
        if (st) break;
        if (s == eq) break;
        if (arg[s] != '.') {
            st = tr_error_set(TR_ERR_INVALID, "override '%s': character '%c' at column %zu is not allowed in a key path "
                                              "(a list item is key[N], a whole list key=[a, b])", arg, arg[s], s + 1);
            break;
        }
        s++;
        if (s == eq) {
            st = tr_error_set(TR_ERR_INVALID, "override '%s': empty key at column %zu (a..b or a trailing '.')", arg,
                              s + 1);
            break;
        }
    }
    if (st) {
        free(steps);
        return st;
    }
    *out = steps;
    *n_out = n;
    return TR_OK;
}

static const char *kind_word(const tr_cfg_node *n) {
    return n->kind == TR_CFG_SEQ ? "list" : n->kind == TR_CFG_MAP ? "mapping" : "scalar";
}

/* A node made by an override on its way (a mapping or a list), or an unset item (an empty
 * plain scalar, as `key:` alone) padding a list it made; NULL when out of memory. */
static tr_cfg_node *fresh_node(tr_cfg_kind kind, const char *src, int col, const char *path) {
    tr_cfg_node *n = tr_cfg_node_new_(kind, src, 1, col);
    if (n && !(n->path = tr_cfg_dup_(path))) {
        tr_cfg_node_free_(n);
        return NULL;
    }
    if (n && kind == TR_CFG_SCALAR && !(n->text = tr_cfg_dup_(""))) {
        tr_cfg_node_free_(n);
        return NULL;
    }
    return n;
}

/* An override's path goes through `node`, which is not a `want` (list or mapping). Takes val. */
static tr_status not_a(tr_cfg_node *val, const char *arg, const tr_cfg_node *node, const char *want) {
    char pos[300];
    tr_cfg_pos_(pos, sizeof pos, node->source, node->line, node->col);
    tr_cfg_node_free_(val);
    return tr_error_set(TR_ERR_INVALID, "override '%s': %s is a %s (%s), not a %s", arg, node->path, kind_word(node), pos,
                        want);
}

/* Walks the steps from the root, creating what is absent, and puts val at the end. Errors can
 * only come from nodes that existed before this override, all met before anything is created,
 * so a refused override changes nothing. Takes val. */
static tr_status place(tr_config *cfg, const char *arg, const char *src, const path_step *steps, size_t n_steps,
                       tr_cfg_node *val) {
    tr_cfg_node *node = cfg->root;
    int created = 0; /* node was made by this override: indices beyond its end pad it */
    for (size_t k = 0; k < n_steps; k++) {
        const path_step *sp = &steps[k];
        int last = k + 1 == n_steps;
        tr_cfg_node *kid = NULL;
        size_t slot = 0;
        if (sp->is_index) {
            if (node->kind != TR_CFG_SEQ) return not_a(val, arg, node, "list");
            if (sp->index > node->n && !created) {
                char pos[300];
                tr_cfg_pos_(pos, sizeof pos, node->source, node->line, node->col);
                tr_cfg_node_free_(val);
                return tr_error_set(TR_ERR_INVALID, "override '%s': index %zu is out of range: %s (%s) has %zu item%s "
                                                    "(indices 0 to %zu; [%zu] appends one)",
                                    arg, sp->index, node->path, pos, node->n, node->n == 1 ? "" : "s",
                                    node->n ? node->n - 1 : 0, node->n);
            }
            while (node->n < sp->index) { /* a list this override made: items before it unset */
                char *ip = tr_cfg_join_index_(node->path, node->n);
                tr_cfg_node *pad = ip ? fresh_node(TR_CFG_SCALAR, src, (int)sp->at + 1, ip) : NULL;
                free(ip);
                if (!pad || tr_cfg_node_push_(node, pad)) {
                    tr_cfg_node_free_(pad);
                    tr_cfg_node_free_(val);
                    return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
                }
            }
            slot = sp->index;
            kid = slot < node->n ? node->kids[slot] : NULL;
        } else {
            if (node->kind != TR_CFG_MAP) return not_a(val, arg, node, "mapping");
            kid = tr_cfg_child_n_(node, arg + sp->at, sp->len);
            for (slot = 0; kid && node->kids[slot] != kid; slot++) {}
            if (!kid) slot = node->n;
        }
        /* An unset value (`key:` alone, ~, null) on the way is absent, and made anew. */
        if (!last && kid && tr_cfg_null_(kid)) kid = NULL;
        /* From here on everything is made anew: a list made by an override is padded with
         * unset items up to its index, so the index is capped (a typo's [99999999] would
         * make a hundred million). Refused before anything is made. */
        for (size_t r = k + 1; !last && !kid && r < n_steps; r++)
            if (steps[r].is_index && steps[r].index > MAX_NEW_INDEX) {
                tr_cfg_node_free_(val);
                return tr_error_set(TR_ERR_INVALID, "override '%s': index %zu into a list the config does not have: at "
                                                    "most %d (set the whole list: key=[a, b, ...])",
                                    arg, steps[r].index, MAX_NEW_INDEX);
            }
        if (last || !kid) {
            char *key = sp->is_index ? NULL : tr_cfg_dup_n_(arg + sp->at, sp->len);
            char *path = sp->is_index ? tr_cfg_join_index_(node->path, slot) : key ? tr_cfg_join_key_(node->path, key) : NULL;
            tr_cfg_node *put = last ? val : fresh_node(steps[k + 1].is_index ? TR_CFG_SEQ : TR_CFG_MAP, src,
                                                       (int)sp->at + 1, path ? path : "");
            if (!path || !put || (last && tr_cfg_set_paths_(val, path)) || (!sp->is_index && !key)) {
                free(key);
                free(path);
                if (put != val) tr_cfg_node_free_(put);
                tr_cfg_node_free_(val);
                return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
            }
            free(path);
            put->key = key;
            put->key_line = key ? 1 : 0;
            put->key_col = key ? (int)sp->at + 1 : 0;
            if (slot < node->n) {
                tr_cfg_node_free_(node->kids[slot]);
                node->kids[slot] = put;
            } else if (tr_cfg_node_push_(node, put)) {
                tr_cfg_node_free_(put);
                if (put != val) tr_cfg_node_free_(val);
                return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
            }
            if (last) return TR_OK;
            kid = put;
            created = 1;
        } else {
            created = 0;
        }
        node = kid;
    }
    tr_cfg_node_free_(val);
    return tr_error_set(TR_ERR_INTERNAL, "override '%s': no key path", arg);
}

/* arg is "path=value" with '=' at arg[eq]. */
static tr_status override_at(tr_config *cfg, const char *arg, size_t eq) {
    const char *value = arg + eq + 1;
    const char *src = tr_cfg_intern_(cfg, TR_CFG_CMDLINE);
    if (!src) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    if (eq == 0)
        return tr_error_set(TR_ERR_INVALID, "override '%s': the key path before '=' is empty",
                            arg);
    /* The value goes through libyaml, which checks its encoding; the key path does not. */
    for (size_t i = 0, n; i < eq; i += n)
        if (!(n = utf8_char((const unsigned char *)arg + i)))
            return tr_error_set(TR_ERR_INVALID, "override '%s': the key path is not valid UTF-8 (byte %zu)", arg,
                                i + 1);
    /* Validate the whole path before touching the tree, so a bad override changes nothing. */
    path_step *steps = NULL;
    size_t n_steps = 0;
    TR_CHECK(split_path(arg, eq, &steps, &n_steps));
    tr_cfg_node *val;
    tr_status st = tr_cfg_build_(value, strlen(value), src, (int)eq + 1, 1, &val);
    if (st) {
        free(steps);
        tr_error_prefix("override '%s': ", arg);
        return TR_ERR_INVALID;
    }
    st = place(cfg, arg, src, steps, n_steps, val);
    free(steps);
    return st;
}

tr_status tr_config_override(tr_config *cfg, const char *arg) {
    if (!cfg || !arg) return tr_error_set(TR_ERR_INVALID, "config override: NULL argument");
    const char *eq = strchr(arg, '=');
    if (!eq)
        return tr_error_set(TR_ERR_INVALID,
                            "override '%s': expected key.path=value (e.g. trainer.max_epochs=3)",
                            arg);
    return override_at(cfg, arg, (size_t)(eq - arg));
}

tr_status tr_config_set(tr_config *cfg, const char *path, const char *value) {
    if (!cfg || !path || !value) return tr_error_set(TR_ERR_INVALID, "config set: NULL argument");
    size_t a = strlen(path), b = strlen(value);
    char *arg = malloc(a + b + 2);
    if (!arg) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    memcpy(arg, path, a);
    arg[a] = '=';
    memcpy(arg + a + 1, value, b + 1);
    tr_status st = strchr(path, '=')
                       ? tr_error_set(TR_ERR_INVALID, "config set: key path '%s' holds '='", path)
                       : override_at(cfg, arg, a);
    free(arg);
    return st;
}
