/* Fuzz target `override`: command-line overrides (`trainer run CONFIG key.path=value ...`,
 * tr_config_override in core/src/config/config.c) applied to a fixed config with nested
 * sections, lists and quoted strings. Input: one override argument per line (at most 16; an
 * argument ends at a NUL, as argv does). After each override: a refused one must leave the
 * config exactly as it was and say "override '<arg>'"; an accepted one must be found at its
 * path with that path. The result must survive writing and reading back, and `trainer run`'s
 * settings are read from it (config_check.c). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define MAX_ARGS 16

static const char base[] =
    "run:\n"
    "  name: fuzz\n"
    "  seed: 7\n"
    "model:\n"
    "  name: mlp\n"
    "  params: {layers: [64, 32], dropout: 0.1}\n"
    "data:\n"
    "  name: csv\n"
    "  params:\n"
    "    path: \"data/train.csv\"\n"
    "    label: 'class: id'\n"
    "  batch_size: 32\n"
    "optimizer:\n"
    "  name: adamw\n"
    "  lr: 3e-4\n"
    "  betas: [0.9, 0.999]\n"
    "trainer:\n"
    "  max_epochs: 2\n"
    "  devices: [0, 1]\n"
    "strategy: {}\n"
    "plugins: []\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tr_config *cfg;
    if (tr_config_parse(&cfg, base, sizeof base - 1, "base.yaml") != TR_OK) fuzz_fail("base config: %s", tr_error_msg());
    char *text = fuzz_strdup(data, size); /* argv strings end at a NUL */
    int n = 0;
    for (char *save = NULL, *arg = strtok_r(text, "\n", &save); arg && n < MAX_ARGS; arg = strtok_r(NULL, "\n", &save), n++) {
        char *before = fuzz_config_text(cfg);
        tr_error_clear();
        if (tr_config_override(cfg, arg) != TR_OK) {
            const char *needles[] = {"override '", NULL};
            fuzz_expect_message(arg, needles);
            char *after = fuzz_config_text(cfg);
            if (strcmp(before, after) != 0) fuzz_fail("refused override '%s' changed the config:\n%s", arg, after);
            free(after);
        } else {
            char *path = strdup(arg);
            if (!path) fuzz_fail("out of memory");
            *strchr(path, '=') = '\0';
            const tr_cfg_node *node = tr_config_find(cfg, path);
            if (!node || strcmp(tr_cfg_path(node), path) != 0)
                fuzz_fail("override '%s' accepted but %s is %s", arg, path, node ? tr_cfg_path(node) : "absent");
            free(path);
        }
        free(before);
    }
    tr_config_destroy(fuzz_check_config_roundtrip(cfg, "overridden config"));
    static const char *const needles[] = {"base.yaml", "command line", NULL};
    fuzz_check_job_settings(cfg, needles);
    free(text);
    tr_config_destroy(cfg);
    return 0;
}
