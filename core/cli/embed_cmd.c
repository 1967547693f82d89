/* `trainer embed CONFIG --input FILE --output OUT.npy [--scores FILE.csv] [--checkpoint PATH]
 * [key=value ...]`: one embedding per line of FILE, or per text of its text<TAB>pair lines with
 * the pairs' scores (tr_run_embed, run/run_api.h). */
#include <stdio.h>
#include <string.h>

#include "embed_cmd.h"
#include "cli_flag.h"
#include "plugins_cmd.h"
#include "run/run_api.h"

static int usage(void) {
    fprintf(stderr, "usage: trainer embed CONFIG.yaml --input FILE --output OUT.npy [--scores FILE.csv] "
                    "[--checkpoint PATH] [section.key=value ...]\n"
                    "  one text per line of FILE; OUT.npy: float32 (N, E), the embeddings in input order\n"
                    "  text<TAB>pair lines: OUT.npy (N, 2, E) and each pair's cosine similarity in --scores\n"
                    "  (default OUT.csv)\n");
    return 2;
}

int trainer_embed_cmd(int argc, char **argv) {
    if (argc < 1 || argv[0][0] == '-') return usage();
    const char *checkpoint = NULL, *input = NULL, *output = NULL, *scores = NULL;
    const char *overrides[256];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_flag(argc, argv, &i, "--checkpoint", &checkpoint)) || (r = cli_flag(argc, argv, &i, "--input", &input)) ||
            (r = cli_flag(argc, argv, &i, "--output", &output)) || (r = cli_flag(argc, argv, &i, "--scores", &scores))) {
            if (r < 0) {
                fprintf(stderr, "trainer embed: %s needs a value\n", argv[i]);
                return usage();
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "trainer embed: unknown option '%s'\n", argv[i]);
            return usage();
        } else if (n < 256) {
            overrides[n++] = argv[i];
        } else {
            fprintf(stderr, "trainer embed: more than 256 overrides\n");
            return 2;
        }
    }
    if (!input || !output) {
        fprintf(stderr, "trainer embed: --input FILE and --output OUT.npy are required\n");
        return usage();
    }
    tr_embed_result r;
    if (tr_run_embed(argv[0], overrides, n, trainer_default_plugin_dirs(), checkpoint, input, output, scores, &r) != TR_OK) {
        fprintf(stderr, "trainer embed: %s\n", tr_error_msg());
        return 1;
    }
    return 0;
}
