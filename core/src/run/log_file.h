/* Private: a file a logger writes in the run folder (logger.h): every write goes through to
 * the file at once, and each failure names the file and why (a full disk says so). */
#ifndef TRAINER_RUN_LOG_FILE_H
#define TRAINER_RUN_LOG_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "trainer/status.h"

typedef struct log_file {
    FILE *f;
    char path[1300];
} log_file;

/* Opens dir/name with fopen's mode ("w", "a", "wb"). */
tr_status log_file_open(log_file *lf, const char *dir, const char *name, const char *mode);
/* Writes n bytes and flushes them. */
tr_status log_file_put(log_file *lf, const void *p, size_t n);
/* Closes it (a no-op when it is not open); a failure (some file systems report write errors
 * only at close) names the file. */
tr_status log_file_close(log_file *lf);

#endif
