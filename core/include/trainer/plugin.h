/* The plugin ABI: what a plugin .so exports and how the core finds and checks it.
 *
 *   // my_model.c, built as a MODULE library against the installed SDK
 *   #include <trainer/plugin.h>
 *   static const tr_option_spec opts[] = {
 *       {.key = "hidden", .type = TR_OPTION_INT, .default_value = "128", .min = 1, .max = 1 << 20,
 *        .doc = "width of the hidden layers"},
 *   };
 *   static const tr_model_ops ops = {.create = ..., .forward = ...};
 *   static const tr_plugin_desc desc = {
 *       TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_MODEL, .name = "my_model", .version = "1.0.0",
 *       .description = "a model", .options = opts, .n_options = 1, .ops = &ops,
 *       .ops_size = sizeof ops};
 *   TR_PLUGIN_DEFINE(desc)
 *
 * One symbol is exported (trainer_plugin_entry) returning the descriptor. The descriptor
 * starts with the ABI version and its own size; the loader refuses another ABI major (naming
 * both numbers) and a descriptor smaller than the first published one. Ops tables grow only
 * at the end (append-only), a plugin states the size of the table it was built with, and a
 * NULL entry means "core default". Plugins keep no global mutable state. */
#ifndef TRAINER_PLUGIN_H
#define TRAINER_PLUGIN_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/runtime.h"
#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TR_PLUGIN_ENTRY_SYMBOL "trainer_plugin_entry"
#define TR_PLUGIN_EXPORT __attribute__((visibility("default")))

typedef enum tr_plugin_kind {
    TR_PLUGIN_MODEL = 1,
    TR_PLUGIN_DATASET = 2,
    TR_PLUGIN_STRATEGY = 3,
    TR_PLUGIN_COMM = 4,
    TR_PLUGIN_DEVICE = 5,
    TR_PLUGIN_COMM_HOOK = 6   /* ABI 0.17: tr_comm_hook_ops (trainer/grad_sync.h) */
} tr_plugin_kind;

typedef enum tr_option_type {
    TR_OPTION_INT = 0,
    TR_OPTION_FLOAT = 1,
    TR_OPTION_BOOL = 2,
    TR_OPTION_STRING = 3,
    TR_OPTION_CHOICE = 4,   /* one of `choices`, "a|b|c" */
    TR_OPTION_INT_LIST = 5,
    TR_OPTION_PATH = 6      /* a file or folder (ABI 0.8): read as a string; the core makes it absolute,
                             * relative to the config's folder, in the run's config.yaml */
} tr_option_type;

/* One option a plugin accepts under its config section. default_value NULL = required. */
typedef struct tr_option_spec {
    const char *key;
    tr_option_type type;
    const char *default_value;
    const char *doc;
    double min, max;        /* INT, FLOAT, INT_LIST items; min == max == 0: unbounded */
    const char *choices;    /* CHOICE */
} tr_option_spec;

typedef struct tr_plugin_desc {
    uint32_t abi_major;           /* TR_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor;
    uint32_t struct_size;         /* sizeof(tr_plugin_desc) the plugin was built with */
    tr_plugin_kind kind;
    const char *name;             /* [a-z0-9_-]{1,63}, unique among plugins found */
    const char *version;
    const char *description;
    const tr_option_spec *options;
    uint32_t n_options;
    const void *ops;              /* the kind's ops table */
    uint32_t ops_size;            /* sizeof that table as the plugin was built */
} tr_plugin_desc;

#define TR_PLUGIN_DESC_HEADER \
    .abi_major = TR_ABI_MAJOR, .abi_minor = TR_ABI_MINOR, .struct_size = sizeof(tr_plugin_desc)

typedef const tr_plugin_desc *(*tr_plugin_entry_fn)(void);

#define TR_PLUGIN_DEFINE(desc)                                                                \
    TR_PLUGIN_EXPORT const tr_plugin_desc *trainer_plugin_entry(void);                        \
    TR_PLUGIN_EXPORT const tr_plugin_desc *trainer_plugin_entry(void) { return &(desc); }

TR_API const char *tr_plugin_kind_name(tr_plugin_kind kind);

/* ---- resolved options ----
 * A plugin's options after validation against its specs: every declared key has a value
 * (given or default), types and ranges are checked, unknown keys are refused. Plugins read
 * them in create(); the table is owned by the core and valid during create() only. */
typedef struct tr_options tr_options;

/* Resolves "key=value" strings against specs. `where` prefixes messages (e.g.
 * "cfg.yaml: model.params"); an unknown key gets a did-you-mean suggestion. */
TR_API tr_status tr_options_create(tr_options **out, const tr_option_spec *specs, uint32_t n_specs,
                            const char *const *kv, int n_kv, const char *where);
TR_API void tr_options_destroy(tr_options *o);
/* Typed reads of declared keys (an undeclared key or a wrong type is a plugin bug: the
 * reads return 0 / NULL then). */
TR_API int64_t tr_options_int(const tr_options *o, const char *key);
TR_API double tr_options_float(const tr_options *o, const char *key);
TR_API int tr_options_bool(const tr_options *o, const char *key);
TR_API const char *tr_options_string(const tr_options *o, const char *key); /* also CHOICE */
/* Number of items (at most max written to out); -1 for an undeclared key. */
TR_API int tr_options_int_list(const tr_options *o, const char *key, int64_t *out, int max);
TR_API const char *tr_option_type_name(tr_option_type type);

/* ---- loading ---- */

typedef struct tr_plugin {
    const tr_plugin_desc *desc;   /* owned by the loaded .so */
    char path[1024];
    char origin[64];              /* where it was found: "config", "TRAINER_PLUGIN_PATH", ... */
    void *handle;                 /* dlopen handle */
} tr_plugin;

/* Opens one .so and validates its descriptor. On refusal returns TR_ERR_PLUGIN with a
 * one-line message naming the file and the reason, and leaves nothing loaded. */
TR_API tr_status tr_plugin_open(const char *path, const char *origin, tr_plugin **out);
TR_API void tr_plugin_close(tr_plugin *p);

/* For plugins that open a vendor library at run time (a GPU driver, cuBLAS, NCCL) so that they
 * load where it is missing: the entries they use, resolved in one call.
 *
 *   tr_lib_symbol syms[] = {{(void **)&api.init, "cuInit"}, ...};
 *   const char *missing = tr_lib_resolve(lib, syms, sizeof syms / sizeof syms[0]);
 *   if (missing) snprintf(why, size, "libcuda.so.1 lacks %s (too old a driver)", missing);
 */
typedef struct tr_lib_symbol {
    void **slot;                  /* where the address goes */
    const char *name;
} tr_lib_symbol;
/* dlsym for each entry in order: NULL when all were found, else the first missing name
 * (its slot and the later ones are left NULL). */
TR_API const char *tr_lib_resolve(void *lib, const tr_lib_symbol *syms, size_t n);

typedef struct tr_registry tr_registry;

TR_API tr_status tr_registry_create(tr_registry **out);
TR_API void tr_registry_destroy(tr_registry *reg);
/* Adds every plugin .so under dir (searched two folder levels deep). A refused file or a
 * duplicate name is an error when strict, a logged warning otherwise. A missing dir is
 * skipped. */
TR_API tr_status tr_registry_scan(tr_registry *reg, const char *dir, const char *origin, int strict);
/* The standard search, in order: `first` (a config's `plugins:` folders; a bad plugin there
 * is an error), the folders of TRAINER_PLUGIN_PATH (colon-separated), then `defaults` (the
 * build tree, the install prefix); bad plugins in the last two are skipped with a warning.
 * Both lists are NULL-terminated and may be NULL; empty entries are skipped. */
TR_API tr_status tr_registry_scan_search_path(tr_registry *reg, const char *const *first,
                                       const char *const *defaults);
/* Adds one file; a duplicate name is refused naming both files. */
TR_API tr_status tr_registry_add_file(tr_registry *reg, const char *path, const char *origin);
TR_API int tr_registry_count(const tr_registry *reg);
TR_API const tr_plugin *tr_registry_at(const tr_registry *reg, int i);
/* The plugin of that kind and name; TR_ERR_NOT_FOUND lists those of the kind that exist
 * (and names the kind it has when the name exists with another kind). */
TR_API tr_status tr_registry_find(const tr_registry *reg, tr_plugin_kind kind, const char *name,
                           const tr_plugin **out);

#ifdef __cplusplus
}
#endif
#endif
