/* The metrics.jsonl a RUN argument of `trainer plot` names, and its label (plot_run.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "run/plot_run.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/io_error.h"

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The highest all-digit subfolder of dir holding a metrics.jsonl: its number, or -1. */
static long newest_version(const char *dir, int *versions) {
    DIR *d = opendir(dir);
    long best = -1;
    *versions = 0;
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *c = e->d_name;
        while (*c >= '0' && *c <= '9') c++;
        if (c == e->d_name || *c || c - e->d_name > 9) continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s/metrics.jsonl", dir, e->d_name) >= (int)sizeof path) continue;
        ++*versions;
        long v = strtol(e->d_name, NULL, 10);
        if (v > best && is_file(path)) best = v;
    }
    closedir(d);
    return best;
}

/* "name/version": the last two names of the folder's real path. */
static void label_of(const char *folder, char *label, size_t cap) {
    char real[PATH_MAX];
    const char *p = realpath(folder, real) ? real : folder, *q = strrchr(p, '/');
    if (q) {
        while (q > p && q[-1] != '/') q--;
        if (q == p && *q == '/' && q[1]) q++;
    }
    snprintf(label, cap, "%s", q ? q : p);
}

tr_status plot_run_find(const char *run, char *metrics, size_t metrics_cap, char *label, size_t label_cap) {
    struct stat sb;
    char why[256], folder[PATH_MAX];
    if (stat(run, &sb) != 0) return tr_error_set(TR_ERR_NOT_FOUND, "%s: %s", run, tr_io_reason(errno, why, sizeof why));
    if (S_ISREG(sb.st_mode)) { /* a metrics.jsonl: its folder names the run */
        snprintf(metrics, metrics_cap, "%s", run);
        const char *slash = strrchr(run, '/');
        snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash - run) : 1, slash ? run : ".");
        if (!folder[0]) snprintf(folder, sizeof folder, "/");
        label_of(folder, label, label_cap);
        return TR_OK;
    }
    if (!S_ISDIR(sb.st_mode)) return tr_error_set(TR_ERR_INVALID, "%s: neither a run folder nor a metrics.jsonl", run);
    size_t n = strlen(run);
    while (n > 1 && run[n - 1] == '/') n--;
    snprintf(folder, sizeof folder, "%.*s/metrics.jsonl", (int)n, run);
    if (!is_file(folder)) {
        int versions;
        snprintf(folder, sizeof folder, "%.*s", (int)n, run);
        long v = newest_version(folder, &versions);
        if (v < 0) {
            snprintf(folder, sizeof folder, "%.*s/config.yaml", (int)n, run);
            if (is_file(folder))
                return tr_error_set(TR_ERR_NOT_FOUND, "%s: the run has no metrics.jsonl (its trainer.loggers leave out "
                                                      "jsonl?)", run);
            return tr_error_set(TR_ERR_NOT_FOUND, "%s: no metrics.jsonl in it%s (RUN is a run folder runs/<name>/<version>, "
                                                  "a runs/<name> folder or a metrics.jsonl file)",
                                run, versions ? " nor in its version folders" : "");
        }
        snprintf(folder, sizeof folder, "%.*s/%ld/metrics.jsonl", (int)n, run, v);
    }
    if (snprintf(metrics, metrics_cap, "%s", folder) >= (int)metrics_cap)
        return tr_error_set(TR_ERR_INVALID, "%s: path too long", run);
    *strrchr(folder, '/') = '\0';
    label_of(folder, label, label_cap);
    return TR_OK;
}
