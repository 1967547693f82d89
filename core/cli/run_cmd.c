/* `trainer run CONFIG [key.path=value ...]`: train from a YAML config. */
#include <stdio.h>
#include <string.h>

#include "plugins_cmd.h"
#include "run_cmd.h"
#include "trainer/run.h"

#ifndef TRAINER_BUILD_PLUGIN_DIR
#define TRAINER_BUILD_PLUGIN_DIR ""
#endif
#ifndef TRAINER_INSTALL_PLUGIN_DIR
#define TRAINER_INSTALL_PLUGIN_DIR ""
#endif

int trainer_run_cmd(int argc, char **argv) {
    if (argc < 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: trainer run CONFIG.yaml [section.key=value ...]\n");
        return 2;
    }
    const char *dirs[] = {TRAINER_BUILD_PLUGIN_DIR, TRAINER_INSTALL_PLUGIN_DIR, NULL};
    tr_run_result r;
    if (tr_run_train(argv[0], (const char *const *)argv + 1, argc - 1, dirs, &r) != TR_OK) {
        fprintf(stderr, "trainer run: %s\n", tr_error_msg());
        return 1;
    }
    return 0;
}
