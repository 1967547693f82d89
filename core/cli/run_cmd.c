/* `trainer run CONFIG [key.path=value ...]`: train from a YAML config. */
#include <stdio.h>
#include <string.h>

#include "plugins_cmd.h"
#include "run_cmd.h"
#include "trainer/run.h"

int trainer_run_cmd(int argc, char **argv) {
    if (argc < 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: trainer run CONFIG.yaml [section.key=value ...]\n");
        return 2;
    }
    tr_run_result r;
    if (tr_run_train(argv[0], (const char *const *)argv + 1, argc - 1, trainer_default_plugin_dirs(),
                     &r) != TR_OK) {
        fprintf(stderr, "trainer run: %s\n", tr_error_msg());
        return 1;
    }
    return 0;
}
