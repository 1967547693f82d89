/* Opens one plugin .so and checks it before anything in it is used: file permissions, ELF
 * shared object, entry symbol, ABI major, descriptor size, kind, name and ops table. */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "plugin/plugin_impl.h"
#include "trainer/memory.h"
#include "trainer/model.h"
#include "trainer/plugin.h"

/* Size of the first published descriptor: anything smaller cannot be read safely. */
#define DESC_MIN_SIZE (offsetof(tr_plugin_desc, ops_size) + sizeof(uint32_t))

tr_status plugin_copy_ops(const tr_plugin *p, void *out, size_t out_size, size_t min_size, const char *kind,
                          const char *first_entries) {
    size_t size = p->desc->ops_size;
    memset(out, 0, out_size);
    if (size < min_size)
        return tr_error_set(TR_ERR_PLUGIN, "%s: %s %s: its ops table has %zu bytes, a %s needs at least %zu (%s)", p->path,
                            kind, p->desc->name, size, kind, min_size, first_entries);
    memcpy(out, p->desc->ops, size < out_size ? size : out_size);
    return TR_OK;
}

tr_status plugin_model_ops(const tr_plugin *p, tr_model_ops *out) {
    TR_CHECK(plugin_copy_ops(p, out, sizeof *out, offsetof(tr_model_ops, forward) + sizeof out->forward, "model",
                             "create, destroy, forward"));
    const char *missing = !out->create ? "create" : !out->destroy ? "destroy" : !out->forward ? "forward" : NULL;
    if (missing)
        return tr_error_set(TR_ERR_PLUGIN, "%s: model %s lacks the required operation '%s'", p->path, p->desc->name, missing);
    return TR_OK;
}

const char *tr_plugin_kind_name(tr_plugin_kind kind) {
    switch (kind) {
    case TR_PLUGIN_MODEL: return "model";
    case TR_PLUGIN_DATASET: return "dataset";
    case TR_PLUGIN_STRATEGY: return "strategy";
    case TR_PLUGIN_COMM: return "comm";
    case TR_PLUGIN_DEVICE: return "device";
    case TR_PLUGIN_COMM_HOOK: return "comm_hook";
    }
    return "unknown";
}

const char *tr_option_type_name(tr_option_type type) {
    static const char *const names[] = {"int", "float", "bool", "string", "choice", "int list", "path"};
    return (unsigned)type <= TR_OPTION_PATH ? names[type] : "unknown";
}

static int valid_name(const char *s) {
    if (!s || !*s || strlen(s) > 63) return 0;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* A file or its directory that anyone may write could be swapped for other code. */
static tr_status check_perms(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        return tr_error_set(TR_ERR_PLUGIN, "%s: cannot read plugin: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tr_error_set(TR_ERR_PLUGIN, "%s: not a regular file", path);
    if (st.st_mode & S_IWOTH)
        return tr_error_set(TR_ERR_PLUGIN,
                            "%s: refused: the file is world-writable (chmod o-w it)", path);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *d = dirname(dir);
    if (stat(d, &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return tr_error_set(TR_ERR_PLUGIN,
                            "%s: refused: its directory %s is world-writable (chmod o-w it)",
                            path, d);
    return TR_OK;
}

static tr_status check_elf(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return tr_error_set(TR_ERR_PLUGIN, "%s: cannot open: %s", path, strerror(errno));
    unsigned char magic[4] = {0};
    size_t n = fread(magic, 1, 4, f);
    fclose(f);
    if (n != 4 || memcmp(magic, "\177ELF", 4) != 0)
        return tr_error_set(TR_ERR_PLUGIN, "%s: not a shared object (no ELF header)", path);
    return TR_OK;
}

tr_status plugin_desc_check(const char *path, const tr_plugin_desc *d) {
    if (!d) return tr_error_set(TR_ERR_PLUGIN, "%s: the entry function returned no descriptor", path);
    if (d->abi_major != TR_ABI_MAJOR)
        return tr_error_set(TR_ERR_PLUGIN,
                            "%s: built for plugin ABI %u.%u, this trainer has ABI %d.%d (rebuild "
                            "the plugin against this SDK)",
                            path, d->abi_major, d->abi_minor, TR_ABI_MAJOR, TR_ABI_MINOR);
    if (d->abi_minor > TR_ABI_MINOR)
        return tr_error_set(TR_ERR_PLUGIN,
                            "%s: built for plugin ABI %u.%u, newer than this trainer's ABI %d.%d (it may "
                            "rely on functions or operations this trainer lacks: update trainer, or "
                            "rebuild the plugin against this SDK)",
                            path, d->abi_major, d->abi_minor, TR_ABI_MAJOR, TR_ABI_MINOR);
    if (d->struct_size < DESC_MIN_SIZE)
        return tr_error_set(TR_ERR_PLUGIN, "%s: descriptor of %u bytes is smaller than %zu",
                            path, d->struct_size, (size_t)DESC_MIN_SIZE);
    if (strcmp(tr_plugin_kind_name(d->kind), "unknown") == 0)
        return tr_error_set(TR_ERR_PLUGIN, "%s: unknown plugin kind %d", path, (int)d->kind);
    if (!valid_name(d->name))
        return tr_error_set(TR_ERR_PLUGIN,
                            "%s: invalid plugin name '%s' (1-63 of a-z, 0-9, '_', '-')", path,
                            d->name ? d->name : "(null)");
    if (!d->ops || d->ops_size == 0)
        return tr_error_set(TR_ERR_PLUGIN, "%s: plugin '%s' has no ops table", path, d->name);
    if (d->n_options && !d->options)
        return tr_error_set(TR_ERR_PLUGIN, "%s: plugin '%s' declares %u options but no table",
                            path, d->name, d->n_options);
    return plugin_options_check(path, d->name, d->options, d->n_options);
}

/* dlopen failed (error e): a plugin built for a newer ABI may need functions this libtrainer
 * lacks ("undefined symbol"), which RTLD_NOW resolves before its descriptor can be read. Loaded
 * again with lazy binding, its descriptor says which ABI it was built for: another major or a
 * newer minor is refused with both versions (docs/abi.md), anything else with dlopen's error.
 * Only the entry function runs; a plugin's constructor calling a missing function would end
 * the process, which no plugin of this SDK has. */
static tr_status refuse_unloadable(const char *path, const char *e) {
    char why[512];
    snprintf(why, sizeof why, "%s", e ? e : "unknown error");
    void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    tr_plugin_entry_fn entry = NULL;
    if (h) *(void **)&entry = dlsym(h, TR_PLUGIN_ENTRY_SYMBOL);
    const tr_plugin_desc *d = entry ? entry() : NULL;
    tr_status st = TR_OK;
    if (d && (d->abi_major != TR_ABI_MAJOR || d->abi_minor > TR_ABI_MINOR)) st = plugin_desc_check(path, d);
    if (h) dlclose(h);
    if (st != TR_OK) return st;
    return tr_error_set(TR_ERR_PLUGIN, "%s: cannot load: %s", path, why);
}

tr_status tr_plugin_open(const char *path, const char *origin, tr_plugin **out) {
    *out = NULL;
    TR_CHECK(check_perms(path));
    TR_CHECK(check_elf(path));
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return refuse_unloadable(path, dlerror());
    tr_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, TR_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        dlclose(h);
        return tr_error_set(TR_ERR_PLUGIN,
                            "%s: not a trainer plugin: no '%s' symbol (use TR_PLUGIN_DEFINE)",
                            path, TR_PLUGIN_ENTRY_SYMBOL);
    }
    const tr_plugin_desc *d = entry();
    tr_status st = plugin_desc_check(path, d);
    if (st != TR_OK) {
        dlclose(h);
        return st;
    }
    tr_plugin *p = tr_calloc(1, sizeof *p);
    if (!p) {
        dlclose(h);
        return TR_ERR_NOMEM;
    }
    p->desc = d;
    p->handle = h;
    snprintf(p->path, sizeof p->path, "%s", path);
    snprintf(p->origin, sizeof p->origin, "%s", origin ? origin : "");
    *out = p;
    return TR_OK;
}

void tr_plugin_close(tr_plugin *p) {
    if (!p) return;
    if (p->handle) dlclose(p->handle);
    tr_free(p);
}

const char *tr_lib_resolve(void *lib, const tr_lib_symbol *syms, size_t n) {
    for (size_t i = 0; i < n; i++) *syms[i].slot = NULL;
    for (size_t i = 0; i < n; i++)
        if (!(*syms[i].slot = dlsym(lib, syms[i].name))) return syms[i].name;
    return NULL;
}
