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

#endif
