/* The set of plugins found: scanning folders, duplicate names, lookup by kind and name. */
#include <dirent.h>
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer/log.h"
#include "trainer/memory.h"
#include "trainer/plugin.h"

struct tr_registry {
    tr_plugin **p;
    int n, cap;
};

tr_status tr_registry_create(tr_registry **out) {
    *out = tr_calloc(1, sizeof **out);
    return *out ? TR_OK : TR_ERR_NOMEM;
}

void tr_registry_destroy(tr_registry *reg) {
    if (!reg) return;
    for (int i = 0; i < reg->n; i++) tr_plugin_close(reg->p[i]);
    tr_free(reg->p);
    tr_free(reg);
}

int tr_registry_count(const tr_registry *reg) { return reg->n; }
const tr_plugin *tr_registry_at(const tr_registry *reg, int i) {
    return i >= 0 && i < reg->n ? reg->p[i] : NULL;
}

tr_status tr_registry_add_file(tr_registry *reg, const char *path, const char *origin) {
    tr_plugin *p;
    TR_CHECK(tr_plugin_open(path, origin, &p));
    for (int i = 0; i < reg->n; i++) {
        if (strcmp(reg->p[i]->desc->name, p->desc->name) == 0) {
            tr_status st = tr_error_set(TR_ERR_PLUGIN,
                                        "%s: duplicate plugin name '%s' (already loaded from %s)",
                                        path, p->desc->name, reg->p[i]->path);
            tr_plugin_close(p);
            return st;
        }
    }
    if (reg->n == reg->cap) {
        int cap = reg->cap ? reg->cap * 2 : 16;
        tr_plugin **a = tr_calloc((size_t)cap, sizeof *a);
        if (!a) {
            tr_plugin_close(p);
            return TR_ERR_NOMEM;
        }
        if (reg->n) memcpy(a, reg->p, (size_t)reg->n * sizeof *a);
        tr_free(reg->p);
        reg->p = a;
        reg->cap = cap;
    }
    reg->p[reg->n++] = p;
    return TR_OK;
}

static int is_so(const char *name) {
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".so") == 0;
}

static tr_status scan(tr_registry *reg, const char *dir, const char *origin, int strict,
                      int depth) {
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, alphasort); /* sorted: the same order on every host */
    if (n < 0) return TR_OK;
    tr_status result = TR_OK;
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        struct stat st;
        tr_status s = TR_OK;
        if (result == TR_OK && name[0] != '.' && stat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode) && depth < 2) {
                s = scan(reg, path, origin, strict, depth + 1);
            } else if (S_ISREG(st.st_mode) && is_so(name)) {
                s = tr_registry_add_file(reg, path, origin);
                if (s != TR_OK && !strict) {
                    TR_WARN("plugin skipped: %s", tr_error_msg());
                    s = TR_OK;
                }
            }
        }
        if (s != TR_OK) result = s;
        free(ents[i]);
    }
    free(ents);
    return result;
}

tr_status tr_registry_scan(tr_registry *reg, const char *dir, const char *origin, int strict) {
    return scan(reg, dir, origin, strict, 0);
}

tr_status tr_registry_find(const tr_registry *reg, tr_plugin_kind kind, const char *name,
                           const tr_plugin **out) {
    *out = NULL;
    for (int i = 0; i < reg->n; i++) {
        const tr_plugin_desc *d = reg->p[i]->desc;
        if (strcmp(d->name, name) != 0) continue;
        if (d->kind != kind)
            return tr_error_set(TR_ERR_INVALID, "'%s' is a %s plugin (%s), not a %s plugin", name,
                                tr_plugin_kind_name(d->kind), reg->p[i]->path,
                                tr_plugin_kind_name(kind));
        *out = reg->p[i];
        return TR_OK;
    }
    char list[1024] = "";
    size_t len = 0;
    for (int i = 0; i < reg->n && len + 70 < sizeof list; i++)
        if (reg->p[i]->desc->kind == kind)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                                    reg->p[i]->desc->name);
    return tr_error_set(TR_ERR_NOT_FOUND, "no %s plugin named '%s' (available: %s)",
                        tr_plugin_kind_name(kind), name, len ? list : "none found");
}

tr_status tr_registry_scan_search_path(tr_registry *reg, const char *const *first,
                                       const char *const *defaults) {
    for (int i = 0; first && first[i]; i++)
        if (*first[i]) TR_CHECK(tr_registry_scan(reg, first[i], "config", 1));
    const char *env = getenv("TRAINER_PLUGIN_PATH");
    if (env && *env) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", env);
        char *save = NULL;
        for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
            TR_CHECK(tr_registry_scan(reg, d, "TRAINER_PLUGIN_PATH", 0));
    }
    for (int i = 0; defaults && defaults[i]; i++)
        if (*defaults[i]) TR_CHECK(tr_registry_scan(reg, defaults[i], "default", 0));
    return TR_OK;
}
