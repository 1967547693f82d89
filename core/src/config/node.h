/* The config tree's node, shared by the parser (config.c), the typed reads (read.c) and the
 * writer (emit.c). Private: never installed. */
#ifndef TRAINER_CONFIG_NODE_H
#define TRAINER_CONFIG_NODE_H

#include <stddef.h>

#include "trainer/config.h"

struct tr_cfg_node {
    tr_cfg_kind kind;
    int quoted;           /* scalar was written quoted or as a block literal: keep it a string */
    char *text;           /* scalar text (owned), NULL otherwise */
    char *key;            /* key in the parent mapping (owned), NULL for items and the root */
    char *path;           /* dotted key path (owned), "" for the root */
    const char *source;   /* owned by the config's source list */
    int line, col;        /* 1-based position of the value */
    int key_line, key_col;/* position of the key in the parent mapping (0 for items) */
    tr_cfg_node **kids;   /* mapping values or sequence items, document order */
    size_t n, cap;
};

/* Whether the typed reads take the node as absent: a plain (unquoted) empty scalar, ~ or
 * null/Null/NULL. The job's defaults (job.c) replace exactly these. */
int tr_cfg_null_(const tr_cfg_node *n);

/* "src:line:col" or "src" when the node has no position; writes at most cap bytes. */
void tr_cfg_pos_(char *buf, size_t cap, const char *source, int line, int col);

/* A source name (a file path, "command line"), interned once per config. */
struct source {
    struct source *next;
    char name[];
};

struct tr_config {
    tr_cfg_node *root;
    struct source *sources;
};

#define TR_CFG_CMDLINE "command line" /* the source of overrides */

/* The tree (tree.c): copies, interned source names, nodes, dotted paths. NULL or -1: out of
 * memory. */
char *tr_cfg_dup_n_(const char *s, size_t n);
char *tr_cfg_dup_(const char *s);
const char *tr_cfg_intern_(tr_config *cfg, const char *name);
tr_cfg_node *tr_cfg_node_new_(tr_cfg_kind kind, const char *source, int line, int col);
void tr_cfg_node_free_(tr_cfg_node *n);
int tr_cfg_node_push_(tr_cfg_node *parent, tr_cfg_node *kid);
/* "parent.key", "key" under the root; "parent[i]" for items. */
char *tr_cfg_join_key_(const char *parent, const char *key);
char *tr_cfg_join_index_(const char *parent, size_t i);
/* Gives a subtree the paths of its new place (overrides parse values before placing them). */
int tr_cfg_set_paths_(tr_cfg_node *n, const char *path);
/* The child of a mapping whose key is key[0..len). */
tr_cfg_node *tr_cfg_child_n_(const tr_cfg_node *node, const char *key, size_t len);

/* Parses a whole stream (config.c): a config document (value_mode 0) or an override value
 * whose positions are columns of its argument, starting at col_off. */
tr_status tr_cfg_build_(const char *text, size_t len, const char *source, int col_off, int value_mode,
                        tr_cfg_node **out);

#endif
