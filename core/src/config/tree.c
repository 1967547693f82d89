/* The config tree (node.h): nodes, interned source names, dotted paths, and the lookups
 * and accessors of <trainer/config.h>. Lookups are linear in the number of keys of a mapping,
 * which config sizes make cheap. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/node.h"

void tr_cfg_pos_(char *buf, size_t cap, const char *source, int line, int col) {
    if (line > 0)
        snprintf(buf, cap, "%s:%d:%d", source, line, col);
    else
        snprintf(buf, cap, "%s", source);
}

char *tr_cfg_dup_n_(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *tr_cfg_dup_(const char *s) { return tr_cfg_dup_n_(s, strlen(s)); }

const char *tr_cfg_intern_(tr_config *cfg, const char *name) {
    for (struct source *s = cfg->sources; s; s = s->next)
        if (strcmp(s->name, name) == 0) return s->name;
    size_t n = strlen(name);
    struct source *s = malloc(sizeof *s + n + 1);
    if (!s) return NULL;
    memcpy(s->name, name, n + 1);
    s->next = cfg->sources;
    cfg->sources = s;
    return s->name;
}

tr_cfg_node *tr_cfg_node_new_(tr_cfg_kind kind, const char *source, int line, int col) {
    tr_cfg_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->source = source;
    n->line = line;
    n->col = col;
    return n;
}

void tr_cfg_node_free_(tr_cfg_node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) tr_cfg_node_free_(n->kids[i]);
    free(n->kids);
    free(n->text);
    free(n->key);
    free(n->path);
    free(n);
}

int tr_cfg_node_push_(tr_cfg_node *parent, tr_cfg_node *kid) {
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 4;
        tr_cfg_node **k = realloc(parent->kids, cap * sizeof *k);
        if (!k) return -1;
        parent->kids = k;
        parent->cap = cap;
    }
    parent->kids[parent->n++] = kid;
    return 0;
}

char *tr_cfg_join_key_(const char *parent, const char *key) {
    size_t a = strlen(parent), b = strlen(key);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    if (a) {
        memcpy(p, parent, a);
        p[a] = '.';
        memcpy(p + a + 1, key, b + 1);
    } else {
        memcpy(p, key, b + 1);
    }
    return p;
}

char *tr_cfg_join_index_(const char *parent, size_t i) {
    size_t n = strlen(parent) + 24;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s[%zu]", parent, i);
    return p;
}

int tr_cfg_set_paths_(tr_cfg_node *n, const char *path) {
    char *p = tr_cfg_dup_(path);
    if (!p) return -1;
    free(n->path);
    n->path = p;
    for (size_t i = 0; i < n->n; i++) {
        tr_cfg_node *k = n->kids[i];
        char *kp = n->kind == TR_CFG_MAP ? tr_cfg_join_key_(p, k->key) : tr_cfg_join_index_(p, i);
        if (!kp) return -1;
        int rc = tr_cfg_set_paths_(k, kp);
        free(kp);
        if (rc) return -1;
    }
    return 0;
}

const tr_cfg_node *tr_config_root(const tr_config *cfg) { return cfg ? cfg->root : NULL; }

tr_cfg_node *tr_cfg_child_n_(const tr_cfg_node *node, const char *key, size_t len) {
    if (!node || node->kind != TR_CFG_MAP) return NULL;
    for (size_t i = 0; i < node->n; i++) {
        const char *k = node->kids[i]->key;
        if (strncmp(k, key, len) == 0 && k[len] == '\0') return node->kids[i];
    }
    return NULL;
}

const tr_cfg_node *tr_cfg_child(const tr_cfg_node *node, const char *key) {
    return key ? tr_cfg_child_n_(node, key, strlen(key)) : NULL;
}

const tr_cfg_node *tr_cfg_find(const tr_cfg_node *node, const char *path) {
    const char *p = path;
    if (!p) return NULL;
    while (node && *p) {
        size_t len = strcspn(p, ".[");
        if (!len) return NULL;
        node = tr_cfg_child_n_(node, p, len);
        p += len;
        while (node && *p == '[') {
            char *end;
            errno = 0;
            unsigned long long i = strtoull(p + 1, &end, 10);
            if (end == p + 1 || *end != ']' || errno || node->kind != TR_CFG_SEQ || i >= node->n)
                return NULL;
            node = node->kids[i];
            p = end + 1;
        }
        if (*p == '.') {
            p++;
            if (!*p) return NULL;
        } else if (*p) {
            return NULL;
        }
    }
    return node;
}

const tr_cfg_node *tr_config_find(const tr_config *cfg, const char *path) {
    return cfg ? tr_cfg_find(cfg->root, path) : NULL;
}

tr_cfg_kind tr_cfg_node_kind(const tr_cfg_node *n) { return n ? n->kind : (tr_cfg_kind)0; }
const char *tr_cfg_scalar(const tr_cfg_node *n) {
    return n && n->kind == TR_CFG_SCALAR ? n->text : NULL;
}
size_t tr_cfg_size(const tr_cfg_node *n) { return n && n->kind != TR_CFG_SCALAR ? n->n : 0; }
const char *tr_cfg_key(const tr_cfg_node *n, size_t i) {
    return n && n->kind == TR_CFG_MAP && i < n->n ? n->kids[i]->key : NULL;
}
const tr_cfg_node *tr_cfg_item(const tr_cfg_node *n, size_t i) {
    return n && n->kind != TR_CFG_SCALAR && i < n->n ? n->kids[i] : NULL;
}
const char *tr_cfg_source(const tr_cfg_node *n) { return n && n->source ? n->source : ""; }
int tr_cfg_line(const tr_cfg_node *n) { return n ? n->line : 0; }
int tr_cfg_column(const tr_cfg_node *n) { return n ? n->col : 0; }
const char *tr_cfg_path(const tr_cfg_node *n) { return n && n->path ? n->path : ""; }
