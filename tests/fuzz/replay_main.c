/* Replays fuzz inputs without libFuzzer: `fuzz_replay_<target> PATH...` passes each file once
 * to the target's LLVMFuzzerTestOneInput; a folder means its files in name order (dot files
 * skipped, no recursion) and a missing folder counts as empty. The ctest fuzz_<target> runs it
 * on the seed corpus and the regressions, so every input that once crashed a target runs in
 * the normal and the ASan builds. A bug aborts (fuzz_fail) or is a sanitizer report; an input
 * that cannot be read, or no input at all, exits 1. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Runs one file; each input gets a buffer of its exact size, as under libFuzzer. */
static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got = 1; buf && got > 0;) {
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
            if (!buf) break;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return -1;
    }
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int skip_dots(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Returns the number of inputs run, or -1. */
static int replay(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return 0; /* e.g. a target without regressions yet */
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) return replay_file(path) == 0 ? 1 : -1;
    struct dirent **list;
    int n = scandir(path, &list, skip_dots, by_name), count = 0;
    if (n < 0) {
        fprintf(stderr, "%s: cannot list: %s\n", path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char file[4096];
        snprintf(file, sizeof file, "%s/%s", path, list[i]->d_name);
        if (count >= 0 && stat(file, &sb) == 0 && S_ISREG(sb.st_mode)) count = replay_file(file) == 0 ? count + 1 : -1;
        free(list[i]);
    }
    free(list);
    return count;
}

int main(int argc, char **argv) {
    int total = 0;
    for (int i = 1; i < argc; i++) {
        int n = replay(argv[i]);
        if (n < 0) return 1;
        printf("%s: %d inputs\n", argv[i], n);
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "usage: %s FILE|FOLDER... (no inputs found)\n", argv[0]);
        return 1;
    }
    printf("replayed %d inputs, no failure\n", total);
    return 0;
}
