/* `trainer checkpoint consolidate DIR OUT.safetensors`: a sharded checkpoint's weights as one
 * safetensors file (parameters, then buffers, by name; PyTorch's safetensors loads it). */
#include <stdio.h>
#include <string.h>

#include "checkpoint_cmd.h"
#include "trainer/checkpoint.h"

static void usage(FILE *out) {
    fprintf(out, "usage: trainer checkpoint consolidate CHECKPOINT_DIR OUT.safetensors\n"
                 "  writes the weights of a checkpoint (sharded over any number of ranks, or full) as one file\n");
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
    if (tr_checkpoint_consolidate(argv[1], argv[2]) != TR_OK) {
        fprintf(stderr, "trainer checkpoint consolidate: %s\n", tr_error_msg());
        return 1;
    }
    printf("wrote %s from %s\n", argv[2], argv[1]);
    return 0;
}
