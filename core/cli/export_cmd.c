/* `trainer export CHECKPOINT OUTDIR [--format hf] [key=value ...]`: a run's checkpoint as a
 * Hugging Face model folder (tr_run_export, run/run_api.h). */
#include <stdio.h>
#include <string.h>

#include "export_cmd.h"
#include "cli_flag.h"
#include "help.h"
#include "plugins_cmd.h"
#include "run/run_api.h"

static int usage(FILE *out) {
    fprintf(out, "usage: trainer export CHECKPOINT OUTDIR [--format hf] [section.key=value ...]\n"
                 "  CHECKPOINT: a checkpoint folder, or a run folder (its newest checkpoint); the model is built\n"
                 "  from the run folder's config.yaml (the overrides apply to it) and its data\n"
                 "  OUTDIR: a new or empty folder; --format hf (the default): config.json, model.safetensors and\n"
                 "  the tokenizer files, which transformers' from_pretrained loads\n");
    return out == stdout ? 0 : 2;
}

int trainer_export_cmd(int argc, char **argv) {
    if (trainer_wants_help(argc, argv)) return usage(stdout);
    const char *paths[2] = {NULL, NULL}, *format = NULL;
    const char *overrides[256];
    int n = 0, np = 0;
    for (int i = 0; i < argc; i++) {
        int r = cli_flag(argc, argv, &i, "--format", &format);
        if (r < 0) {
            fprintf(stderr, "trainer export: %s needs a value\n", argv[i]);
            return usage(stderr);
        }
        if (r) continue;
        if (argv[i][0] == '-') {
            fprintf(stderr, "trainer export: unknown option '%s'\n", argv[i]);
            return usage(stderr);
        }
        if (np < 2) {
            paths[np++] = argv[i];
        } else if (!strchr(argv[i], '=')) {
            fprintf(stderr, "trainer export: unexpected argument '%s' (after CHECKPOINT and OUTDIR come only "
                            "section.key=value overrides)\n", argv[i]);
            return usage(stderr);
        } else if (n < 256) {
            overrides[n++] = argv[i];
        } else {
            fprintf(stderr, "trainer export: more than 256 overrides\n");
            return 2;
        }
    }
    if (np < 2) {
        fprintf(stderr, "trainer export: CHECKPOINT and OUTDIR are required\n");
        return usage(stderr);
    }
    tr_export_result r;
    if (tr_run_export(paths[0], paths[1], format, overrides, n, trainer_default_plugin_dirs(), &r) != TR_OK) {
        fprintf(stderr, "trainer export: %s\n", tr_error_msg());
        return 1;
    }
    return 0;
}
