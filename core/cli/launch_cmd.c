/* `trainer launch [-n N] [--max-restarts K] [--] COMMAND [ARGS...]`: run N ranks of a command
 * on this host with the torchrun environment, supervised (see launch/launch_api.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch_cmd.h"
#include "launch/launch_api.h"

static int usage(void) {
    fprintf(stderr, "usage: trainer launch [-n N | --nproc N] [--max-restarts K] [--] COMMAND [ARGS...]\n");
    return 2;
}

static int number(const char *flag, const char *v, int min, int max, int *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || end == v || x < min || x > max) {
        fprintf(stderr, "trainer launch: %s: expected an integer from %d to %d, got '%s'\n", flag, min, max, v ? v : "");
        return 0;
    }
    *out = (int)x;
    return 1;
}

int trainer_launch_cmd(int argc, char **argv) {
    tr_launch_config lc = {.nproc = 1};
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-n") == 0 || strcmp(a, "--nproc") == 0) {
            if (!number(a, i + 1 < argc ? argv[++i] : NULL, 1, 4096, &lc.nproc)) return usage();
        } else if (strncmp(a, "--nproc=", 8) == 0) {
            if (!number("--nproc", a + 8, 1, 4096, &lc.nproc)) return usage();
        } else if (strcmp(a, "--max-restarts") == 0) {
            if (!number(a, i + 1 < argc ? argv[++i] : NULL, 0, 1000, &lc.max_restarts)) return usage();
        } else if (strncmp(a, "--max-restarts=", 15) == 0) {
            if (!number("--max-restarts", a + 15, 0, 1000, &lc.max_restarts)) return usage();
        } else if (a[0] == '-') {
            fprintf(stderr, "trainer launch: unknown option '%s'\n", a);
            return usage();
        } else {
            break;
        }
    }
    if (i >= argc) return usage();
    lc.argv = argv + i;
    tr_launch_result r;
    if (tr_launch(&lc, &r) != TR_OK) {
        fprintf(stderr, "trainer launch: %s\n", tr_error_msg());
        return 1;
    }
    if (r.exit_code) fprintf(stderr, "trainer launch: %s\n", r.message);
    return r.exit_code;
}
