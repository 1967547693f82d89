/* The plugin loader: good plugins load and are found; every kind of bad plugin is refused
 * with its own one-line message and nothing crashes. Temporary files are removed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "trainer/plugin.h"

#define DIR TRAINER_TEST_PLUGIN_DIR

static void expect_refused(const char *path, const char *needle) {
    tr_plugin *p = NULL;
    tr_status st = tr_plugin_open(path, "test", &p);
    CHECK(st == TR_ERR_PLUGIN && p == NULL, "%s: expected refusal, got %s", path, tr_status_str(st));
    CHECK(strstr(tr_error_msg(), needle) != NULL, "%s: message '%s' lacks '%s'", path,
          tr_error_msg(), needle);
    CHECK(strchr(tr_error_msg(), '\n') == NULL, "one-line message");
    CHECK(strstr(tr_error_msg(), path) != NULL, "message names the file: %s", tr_error_msg());
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

int main(void) {
    tr_plugin *p;
    CHECK(tr_plugin_open(DIR "/good/fake_model.so", "test", &p) == TR_OK, "good plugin: %s",
          tr_error_msg());
    if (p) {
        CHECK(strcmp(p->desc->name, "fake_model") == 0 && p->desc->kind == TR_PLUGIN_MODEL &&
                  strcmp(p->desc->version, "1.2.3") == 0 && p->desc->n_options == 2,
              "descriptor read");
        typedef struct { int (*answer)(void); } fake_ops;
        CHECK(((const fake_ops *)p->desc->ops)->answer() == 42, "ops table callable");
        tr_plugin_close(p);
    }

    expect_refused(DIR "/bad/fake_bad_abi.so", "built for plugin ABI 99.");
    expect_refused(DIR "/bad/fake_new_minor.so", ".99, newer than this trainer's ABI");
    /* Built for the next minor and calling a function this libtrainer lacks: dlopen alone
     * fails on the symbol, the loader names both versions instead. */
    char newer[64];
    snprintf(newer, sizeof newer, "built for plugin ABI %d.%d, newer than this trainer's ABI %d.%d",
             TR_ABI_MAJOR, TR_ABI_MINOR + 1, TR_ABI_MAJOR, TR_ABI_MINOR);
    const char *newer_files[] = {DIR "/newer/fake_newer_device.so", DIR "/newer/fake_newer_comm.so",
                                 DIR "/newer/fake_newer_strategy.so"};
    for (int i = 0; i < 3; i++) {
        void *h = dlopen(newer_files[i], RTLD_NOW | RTLD_LOCAL);
        const char *e = h ? "" : dlerror();
        CHECK(!h && strstr(e, "tr_from_a_newer_abi"), "%s: dlopen should fail on the new symbol: %s",
              newer_files[i], e);
        if (h) dlclose(h);
        expect_refused(newer_files[i], newer);
        CHECK(!strstr(tr_error_msg(), "undefined symbol"), "versioned, not dlopen's: %s", tr_error_msg());
    }
    expect_refused(DIR "/bad/fake_no_entry.so", "no 'trainer_plugin_entry' symbol");
    expect_refused(DIR "/nope/missing.so", "cannot read plugin");

    char tmpl[] = "/tmp/trainer-plugin-test-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    CHECK(tmp != NULL, "mkdtemp");
    char text[512], ww[512], wwdir[512], wwfile[600];
    snprintf(text, sizeof text, "%s/text.so", tmp);
    FILE *f = fopen(text, "w");
    fputs("not a library\n", f);
    fclose(f);
    expect_refused(text, "not a shared object");
    snprintf(ww, sizeof ww, "%s/ww.so", tmp);
    copy_file(DIR "/good/fake_model.so", ww);
    chmod(ww, 0777);
    expect_refused(ww, "world-writable");
    snprintf(wwdir, sizeof wwdir, "%s/open", tmp);
    mkdir(wwdir, 0777);
    chmod(wwdir, 0777);
    snprintf(wwfile, sizeof wwfile, "%s/m.so", wwdir);
    copy_file(DIR "/good/fake_model.so", wwfile);
    chmod(wwfile, 0755);
    expect_refused(wwfile, "directory");

    /* Registry: scan, find, wrong kind, not found with the list, duplicate names. */
    tr_registry *reg;
    tr_registry_create(&reg);
    CHECK(tr_registry_scan(reg, DIR "/good", "build tree", 1) == TR_OK, "scan: %s", tr_error_msg());
    CHECK(tr_registry_count(reg) == 2, "two good plugins, got %d", tr_registry_count(reg));
    const tr_plugin *found;
    CHECK(tr_registry_find(reg, TR_PLUGIN_MODEL, "fake_model", &found) == TR_OK && found &&
              strcmp(found->origin, "build tree") == 0,
          "find model");
    CHECK(tr_registry_find(reg, TR_PLUGIN_MODEL, "fake_strategy", &found) == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "is a strategy plugin"),
          "wrong kind for the slot: %s", tr_error_msg());
    CHECK(tr_registry_find(reg, TR_PLUGIN_MODEL, "mlpp", &found) == TR_ERR_NOT_FOUND &&
              strstr(tr_error_msg(), "available: fake_model"),
          "not found lists models: %s", tr_error_msg());
    CHECK(tr_registry_add_file(reg, DIR "/dup/fake_dup.so", "test") == TR_ERR_PLUGIN &&
              strstr(tr_error_msg(), "duplicate plugin name 'fake_model'"),
          "duplicate refused: %s", tr_error_msg());
    CHECK(tr_registry_count(reg) == 2, "duplicate not added");
    CHECK(tr_registry_scan(reg, DIR "/bad", "test", 1) == TR_ERR_PLUGIN, "strict scan of bad fails");
    CHECK(tr_registry_scan(reg, DIR "/bad", "test", 0) == TR_OK && tr_registry_count(reg) == 2,
          "lenient scan skips bad ones");
    tr_registry_destroy(reg);

    unlink(text);
    unlink(ww);
    unlink(wwfile);
    rmdir(wwdir);
    CHECK(rmdir(tmp) == 0, "temp dir cleaned up");
    return test_finish();
}
