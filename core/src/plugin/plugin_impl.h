/* Private: the descriptor checks the loader (loader.c) runs on every plugin it opens, shared
 * with options.c and reachable without dlopen (tests/fuzz/plugin_desc.c). Never installed. */
#ifndef TRAINER_PLUGIN_IMPL_H
#define TRAINER_PLUGIN_IMPL_H

#include <stdint.h>

#include "trainer/plugin.h"

/* Everything tr_plugin_open checks in a descriptor before the plugin is used: ABI version,
 * size, kind, name, ops table and option table. TR_ERR_PLUGIN with a one-line message that
 * starts with `path`. */
tr_status plugin_desc_check(const char *path, const tr_plugin_desc *d);

/* A plugin's option table: keys a config can set (1-127 bytes, no '=', '.', blank or control
 * character) and unique, known types, choices given, finite min <= max, and defaults that
 * read as their type within range (a bad default would be blamed on the user's config).
 * Messages name path, the plugin and the option. */
tr_status plugin_options_check(const char *path, const char *plugin, const tr_option_spec *specs, uint32_t n);

/* Copies p's ops table into `out` (out_size bytes, the table as this core knows it): an older
 * plugin's shorter table is zero-extended, so entries it does not know are NULL (ABI policy,
 * docs/abi.md); a newer, longer one is cut to out_size. A table shorter than min_size (the
 * entries of the kind's first version) is refused: "PATH: KIND NAME: its ops table has N
 * bytes, a KIND needs at least M (FIRST_ENTRIES)". */
tr_status plugin_copy_ops(const tr_plugin *p, void *out, size_t out_size, size_t min_size, const char *kind,
                          const char *first_entries);

struct tr_model_ops;
/* A model plugin's table, zero-extended (plugin_copy_ops): the entries of its first version
 * (create, destroy, forward) are required, the optional ones appended since are NULL for a
 * plugin built before them. */
tr_status plugin_model_ops(const tr_plugin *p, struct tr_model_ops *out);

#endif
