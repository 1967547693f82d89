/* Configuration: a YAML document kept as a tree of positioned nodes, typed reads with
 * file:line:column messages, command-line overrides and the resolved-config writer.
 *
 *   tr_config *cfg;
 *   TR_CHECK(tr_config_load(&cfg, "cfg.yaml"));
 *   TR_CHECK(tr_config_override(cfg, "trainer.max_epochs=3"));     // from argv
 *   const tr_cfg_node *tr = tr_config_find(cfg, "trainer");        // NULL when absent
 *   static const char *const keys[] = {"max_epochs", "precision"};
 *   int64_t epochs;
 *   int precision;
 *   if (tr) TR_CHECK(tr_cfg_check_keys(tr, keys, 2));              // "did you mean"
 *   TR_CHECK(tr_cfg_get_int(tr_config_root(cfg), "trainer.max_epochs", 10, 1, 100000,
 *                           &epochs, 0));
 *   // "cfg.yaml:14:3: trainer.max_epochs: must be between 1 and 100000, got 0"
 *   TR_CHECK(tr_cfg_get_choice(tr_config_root(cfg), "trainer.precision", "fp32|bf16|fp16",
 *                              "fp32", &precision, 0));
 *   TR_CHECK(tr_config_save(cfg, "runs/x/0/config.yaml"));       // the resolved config
 *   tr_config_destroy(cfg);
 *
 * Limits: the top level is a mapping; keys are scalars; anchors, aliases, tags and
 * multi-document streams are refused. Scalars keep their text (YAML 1.1/1.2 typing is
 * decided by the typed reads, not by the parser). A plain empty scalar, `~` or `null` counts
 * as absent for the typed reads. Nodes and the strings they return are owned by the config
 * and stay valid until tr_config_destroy or until a set/override replaces them. */
#ifndef TRAINER_CONFIG_H
#define TRAINER_CONFIG_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_config tr_config;
typedef struct tr_cfg_node tr_cfg_node;

typedef enum tr_cfg_kind {
    TR_CFG_SCALAR = 1,
    TR_CFG_MAP = 2,
    TR_CFG_SEQ = 3
} tr_cfg_kind;

/* ---- loading ---- */

/* Reads and parses a YAML file; syntax errors are TR_ERR_PARSE "path:line:col: problem". */
TR_API tr_status tr_config_load(tr_config **out, const char *path);
/* Parses `len` bytes of text; source_name is used in every message ("cfg.yaml"). */
TR_API tr_status tr_config_parse(tr_config **out, const char *text, size_t len,
                          const char *source_name);
/* An empty config (root is an empty mapping). */
TR_API tr_status tr_config_create(tr_config **out);
TR_API void tr_config_destroy(tr_config *cfg);

TR_API const tr_cfg_node *tr_config_root(const tr_config *cfg);
/* Node at a dotted path ("model.params.hidden", "data.files[2]"); NULL when absent. */
TR_API const tr_cfg_node *tr_config_find(const tr_config *cfg, const char *path);

/* ---- nodes (all borrowed) ---- */

TR_API tr_cfg_kind tr_cfg_node_kind(const tr_cfg_node *node);
/* Child of a mapping by key; NULL when absent or when node is not a mapping (or NULL). */
TR_API const tr_cfg_node *tr_cfg_child(const tr_cfg_node *node, const char *key);
/* Like tr_cfg_child but `path` may be dotted and indexed, relative to node. */
TR_API const tr_cfg_node *tr_cfg_find(const tr_cfg_node *node, const char *path);
/* Scalar text; NULL for mappings and sequences. */
TR_API const char *tr_cfg_scalar(const tr_cfg_node *node);
/* Number of entries of a mapping or items of a sequence; 0 for a scalar. */
TR_API size_t tr_cfg_size(const tr_cfg_node *node);
/* i-th key of a mapping in document order (NULL for a sequence or i out of range). */
TR_API const char *tr_cfg_key(const tr_cfg_node *node, size_t i);
/* i-th value of a mapping or item of a sequence (NULL when i is out of range). */
TR_API const tr_cfg_node *tr_cfg_item(const tr_cfg_node *node, size_t i);
/* Where the node came from: source name ("cfg.yaml" or "command line"), 1-based line and
 * column, dotted key path ("" for the root). */
TR_API const char *tr_cfg_source(const tr_cfg_node *node);
TR_API int tr_cfg_line(const tr_cfg_node *node);
TR_API int tr_cfg_column(const tr_cfg_node *node);
TR_API const char *tr_cfg_path(const tr_cfg_node *node);

/* ---- typed reads ----
 * `key` is relative to `map` and may be dotted ("trainer.max_epochs"). When the key is
 * absent (or null) the default is stored, unless `required` is set: then
 * "cfg.yaml:3:1: model.name: required key is missing" (the parent mapping's position, or
 * only the source name when the parent is missing or is the root). A value that does not
 * read gives TR_ERR_INVALID "cfg.yaml:14:3: trainer.max_epochs: expected an integer, got
 * 'abc'"; a value out of range "...: must be between 1 and 100000, got 0". */
TR_API tr_status tr_cfg_get_int(const tr_cfg_node *map, const char *key, int64_t def, int64_t min,
                         int64_t max, int64_t *out, int required);
/* A finite decimal number: 3e-4, 1, .5, -2.5; not inf, nan or hex. */
TR_API tr_status tr_cfg_get_float(const tr_cfg_node *map, const char *key, double def, double min,
                           double max, double *out, int required);
/* true/false, yes/no, on/off (any case). */
TR_API tr_status tr_cfg_get_bool(const tr_cfg_node *map, const char *key, int def, int *out,
                          int required);
/* Any scalar; *out is borrowed from the config (or is def). */
TR_API tr_status tr_cfg_get_string(const tr_cfg_node *map, const char *key, const char *def,
                            const char **out, int required);
/* One of `choices` ("fp32|bf16|fp16"); *index is its position. def is a choice name, or NULL
 * to store -1 when absent. */
TR_API tr_status tr_cfg_get_choice(const tr_cfg_node *map, const char *key, const char *choices,
                            const char *def, int *index, int required);

/* Refuses keys of `map` not in allowed[0..n): TR_ERR_INVALID
 * "cfg.yaml:7:3: trainer.max_epoch: unknown key (did you mean 'max_epochs'?)", or the list of
 * allowed keys when none is close. A NULL map (absent section) passes. */
TR_API tr_status tr_cfg_check_keys(const tr_cfg_node *map, const char *const allowed[], size_t n);

/* ---- overrides ----
 * Sets the node at a dotted path (creating missing mappings) to `value` parsed as a YAML
 * flow scalar, flow sequence ("[1, 2]") or flow mapping; the new nodes' source is
 * "command line", line 1, column = position in "path=value". */
TR_API tr_status tr_config_set(tr_config *cfg, const char *path, const char *value);
/* "a.b.c=value" from the command line; a malformed argument ("a.b", "=3", "a..b=1", a path
 * through a scalar) is TR_ERR_INVALID naming the argument. */
TR_API tr_status tr_config_override(tr_config *cfg, const char *arg);

/* ---- output ----
 * The tree as block-style YAML, keys in document order, strings quoted where needed so that
 * parsing the output gives the same tree. */
TR_API tr_status tr_config_write(const tr_config *cfg, FILE *f);
TR_API tr_status tr_config_save(const tr_config *cfg, const char *path);

#ifdef __cplusplus
}
#endif
#endif
