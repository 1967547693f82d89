/* `trainer plugins [--describe NAME] [--check FILE.so]`: what plugins are found and their
 * options. Search order: the config's `plugins:` folders (for `run`), TRAINER_PLUGIN_PATH
 * (colon-separated), then the shipped plugins (the build tree's or the install prefix's). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins_cmd.h"
#include "trainer/devices.h"
#include "trainer/plugin.h"

#ifndef TRAINER_BUILD_BIN_DIR
#define TRAINER_BUILD_BIN_DIR ""
#endif
#ifndef TRAINER_BUILD_PLUGIN_DIR
#define TRAINER_BUILD_PLUGIN_DIR ""
#endif
#ifndef TRAINER_REL_PLUGIN_DIR
#define TRAINER_REL_PLUGIN_DIR "../lib/trainer/plugins"
#endif
#ifndef TRAINER_INSTALL_PLUGIN_DIR
#define TRAINER_INSTALL_PLUGIN_DIR ""
#endif

/* The shipped plugins: a `trainer` run from the build tree uses the build tree's, an installed
 * one those under its own prefix (<libdir>/trainer/plugins, found relative to the
 * executable's folder, so an installed tree can be moved). Without /proc: the configured
 * install prefix's. */
const char *const *trainer_default_plugin_dirs(void) {
    static char dir[PATH_MAX + 64]; /* realpath writes at most PATH_MAX */
    static const char *dirs[2] = {dir, NULL};
    if (dir[0]) return dirs;
    char self[PATH_MAX], build_bin[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self);
    if (n <= 0 || (size_t)n >= sizeof self) {
        snprintf(dir, sizeof dir, "%s", TRAINER_INSTALL_PLUGIN_DIR);
        return dirs;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    /* /proc/self/exe is resolved: resolve the build folder too (it may be reached by a link). */
    if (realpath(TRAINER_BUILD_BIN_DIR, build_bin) && strcmp(self, build_bin) == 0) {
        snprintf(dir, sizeof dir, "%s", TRAINER_BUILD_PLUGIN_DIR);
    } else {
        char rel[sizeof dir];
        snprintf(rel, sizeof rel, "%s/%s", self, TRAINER_REL_PLUGIN_DIR);
        if (!realpath(rel, dir)) snprintf(dir, sizeof dir, "%s", rel);
    }
    return dirs;
}

tr_status trainer_scan_plugins(tr_registry *reg) {
    return tr_registry_scan_search_path(reg, NULL, trainer_default_plugin_dirs());
}

/* A device plugin's table checked, and what it sees: 0 on success, 1 when the table is refused. */
static int describe_devices(const tr_plugin *p) {
    tr_device_ops ops;
    if (tr_device_ops_of(p, &ops) != TR_OK) {
        printf("  devices: refused: %s\n", tr_error_msg());
        return 1;
    }
    char why[256] = "";
    int n = ops.count(why, sizeof why);
    if (n <= 0) printf("  devices: none (%s)\n", why[0] ? why : "it did not say why");
    else printf("  devices: %d GPU%s (`trainer devices` lists them)\n", n, n == 1 ? "" : "s");
    return 0;
}

static int describe(const tr_plugin *p) {
    const tr_plugin_desc *d = p->desc;
    printf("%s %s %s\n  %s\n  file: %s (%s)\n  ABI %u.%u\n", tr_plugin_kind_name(d->kind), d->name,
           d->version ? d->version : "?", d->description ? d->description : "", p->path, p->origin,
           d->abi_major, d->abi_minor);
    if (d->n_options == 0) printf("  options: none\n");
    for (uint32_t i = 0; i < d->n_options; i++) {
        const tr_option_spec *o = &d->options[i];
        printf("  %-20s %-8s default %-10s %s", o->key, tr_option_type_name(o->type),
               o->default_value ? o->default_value : "(required)", o->doc ? o->doc : "");
        if (o->type == TR_OPTION_CHOICE) printf(" [%s]", o->choices);
        if (o->min != 0 || o->max != 0) {
            if (o->type == TR_OPTION_FLOAT) printf(" [%g..%g]", o->min, o->max);
            else if (o->type == TR_OPTION_INT || o->type == TR_OPTION_INT_LIST)
                printf(" [%.0f..%.0f]", o->min, o->max);
        }
        printf("\n");
    }
    return d->kind == TR_PLUGIN_DEVICE ? describe_devices(p) : 0;
}

int trainer_plugins_cmd(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[0], "--check") == 0) {
        tr_plugin *p;
        if (tr_plugin_open(argv[1], "command line", &p) != TR_OK) {
            fprintf(stderr, "trainer plugins: refused: %s\n", tr_error_msg());
            return 1;
        }
        int rc = describe(p);
        tr_plugin_close(p);
        return rc;
    }
    if (argc != 0 && !(argc == 2 && strcmp(argv[0], "--describe") == 0)) {
        fprintf(stderr, "usage: trainer plugins [--describe NAME | --check FILE.so]\n");
        return 2;
    }
    tr_registry *reg;
    if (tr_registry_create(&reg) != TR_OK || trainer_scan_plugins(reg) != TR_OK) {
        fprintf(stderr, "trainer plugins: %s\n", tr_error_msg());
        return 1;
    }
    int rc = 0;
    if (argc == 2) {
        int found = 0;
        for (int i = 0; i < tr_registry_count(reg); i++)
            if (strcmp(tr_registry_at(reg, i)->desc->name, argv[1]) == 0) {
                rc |= describe(tr_registry_at(reg, i));
                found = 1;
            }
        if (!found) rc = 1;
        if (!found) fprintf(stderr, "trainer plugins: no plugin named '%s' (run 'trainer plugins')\n", argv[1]);
    } else {
        printf("%-9s %-18s %-9s %s\n", "KIND", "NAME", "VERSION", "FILE");
        for (int i = 0; i < tr_registry_count(reg); i++) {
            const tr_plugin *p = tr_registry_at(reg, i);
            printf("%-9s %-18s %-9s %s\n", tr_plugin_kind_name(p->desc->kind), p->desc->name,
                   p->desc->version ? p->desc->version : "?", p->path);
        }
        if (tr_registry_count(reg) == 0) printf("(no plugins found)\n");
    }
    tr_registry_destroy(reg);
    return rc;
}
