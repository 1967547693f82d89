/* `trainer eval CONFIG --checkpoint PATH [--split val|train] [key=value ...]` and
 * `trainer predict CONFIG --checkpoint PATH --output FILE.csv [--split ...] [key=value ...]`. */
#include <stdio.h>
#include <string.h>

#include "eval_cmd.h"
#include "cli_flag.h"
#include "plugins_cmd.h"
#include "run/run_api.h"

static int usage(int predict) {
    if (predict)
        fprintf(stderr, "usage: trainer predict CONFIG.yaml --checkpoint PATH --output FILE.csv "
                        "[--split val|train] [section.key=value ...]\n");
    else
        fprintf(stderr, "usage: trainer eval CONFIG.yaml --checkpoint PATH [--split val|train] "
                        "[section.key=value ...]\n");
    return 2;
}

int trainer_eval_cmd(int argc, char **argv, int predict) {
    const char *cmd = predict ? "predict" : "eval";
    if (argc < 1 || argv[0][0] == '-') return usage(predict);
    const char *checkpoint = NULL, *split = NULL, *output = NULL;
    const char *overrides[256];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_flag(argc, argv, &i, "--checkpoint", &checkpoint)) ||
            (r = cli_flag(argc, argv, &i, "--split", &split)) ||
            (predict && (r = cli_flag(argc, argv, &i, "--output", &output)))) {
            if (r < 0) {
                fprintf(stderr, "trainer %s: %s needs a value\n", cmd, argv[i]);
                return usage(predict);
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "trainer %s: unknown option '%s'\n", cmd, argv[i]);
            return usage(predict);
        } else if (n < 256) {
            overrides[n++] = argv[i];
        }
    }
    if (!checkpoint) {
        fprintf(stderr, "trainer %s: --checkpoint PATH is required\n", cmd);
        return usage(predict);
    }
    if (predict && !output) {
        fprintf(stderr, "trainer predict: --output FILE.csv is required\n");
        return usage(predict);
    }
    tr_eval_result r;
    tr_status st = tr_run_predict(argv[0], overrides, n, trainer_default_plugin_dirs(), checkpoint, split, output, &r);
    if (st != TR_OK) {
        fprintf(stderr, "trainer %s: %s\n", cmd, tr_error_msg());
        return 1;
    }
    return 0;
}
