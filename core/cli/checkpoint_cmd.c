/* `trainer checkpoint consolidate PATH OUT.safetensors`: a checkpoint's weights, sharded or
 * full, as one safetensors file (parameters, then buffers, by name; PyTorch's safetensors
 * loads it). PATH is a checkpoint folder, RUN/best (what it points at), or a checkpoints/ or run
 * folder meaning its newest checkpoint (as for `trainer eval --checkpoint`); the line written
 * names the one used. */
#include <stdio.h>
#include <string.h>

#include "checkpoint_cmd.h"
#include "trainer/checkpoint.h"

static void usage(FILE *out) {
    fprintf(out, "usage: trainer checkpoint consolidate CHECKPOINT OUT.safetensors\n"
                 "  writes the weights of a checkpoint (sharded over any number of ranks, or full) as one file;\n"
                 "  CHECKPOINT is a checkpoint folder, a run's best (RUN/best), or a run folder or checkpoints/ folder\n"
                 "  (its newest checkpoint)\n");
}

int trainer_checkpoint_cmd(int argc, char **argv) {
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc != 3 || strcmp(argv[0], "consolidate") != 0) {
        if (argc >= 1 && strcmp(argv[0], "consolidate") != 0)
            fprintf(stderr, "trainer checkpoint: unknown subcommand '%s'\n", argv[0]);
        else
            fprintf(stderr, "trainer checkpoint consolidate: expected a checkpoint directory and an output file\n");
        usage(stderr);
        return 2;
    }
    /* A folder of weights without state.json is consolidated as it is (it says what it lacks). */
    char ck[1200];
    if (tr_checkpoint_find(argv[1], ck, sizeof ck) != TR_OK) snprintf(ck, sizeof ck, "%s", argv[1]);
    if (tr_checkpoint_consolidate(ck, argv[2]) != TR_OK) {
        fprintf(stderr, "trainer checkpoint consolidate: %s\n", tr_error_msg());
        return 1;
    }
    const char *base = strrchr(argv[1], '/');
    base = base ? base + 1 : argv[1];
    if (strcmp(ck, argv[1]) == 0) printf("wrote %s from %s\n", argv[2], ck);
    else if (strcmp(base, "best") == 0 || strcmp(base, "last") == 0)
        printf("wrote %s from %s (which %s points at)\n", argv[2], ck, argv[1]);
    else printf("wrote %s from %s (the newest checkpoint in %s)\n", argv[2], ck, argv[1]);
    return 0;
}
