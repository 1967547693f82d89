/* The run folder's lock (run_lock.h): flock(2) on <run_dir>/run.lock holding the holder's pid.
 * A file system without flock (some network mounts) runs unlocked, with a warning. The file
 * is removed at release while still locked; a process that opened it just before then finds
 * its inode no longer under that name and opens the new one, so two never both hold it. */
#include "run/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io_error.h"
#include "trainer/io.h"
#include "trainer/log.h"

/* The holder's refusal: the pid it wrote (0 while it has not yet written it). */
static tr_status refuse(const run_lock *l, const char *run_dir, int fd) {
    char text[32] = "", who[48] = "another trainer";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    long pid = n > 0 ? strtol(text, NULL, 10) : 0;
    if (pid > 0) snprintf(who, sizeof who, "another trainer (pid %ld)", pid);
    return tr_error_set(TR_ERR_INVALID,
                        "%s is in use by %s, which holds %s: wait for it to end or stop it, or give this run "
                        "another run.name (two trainers writing one run folder would mix their checkpoints and "
                        "metrics)",
                        run_dir, who, l->path);
}

tr_status run_lock_take(run_lock *l, const char *run_dir) {
    char why[256];
    l->fd = -1;
    TR_CHECK(tr_mkdirs(run_dir));
    snprintf(l->path, sizeof l->path, "%s/run.lock", run_dir);
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return tr_error_set(TR_ERR_IO, "%s: cannot create the run's lock: %s", l->path,
                                tr_io_reason(errno, why, sizeof why));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            tr_status st = TR_OK;
            if (e == EWOULDBLOCK) st = refuse(l, run_dir, fd);
            else if (e == ENOLCK || e == EOPNOTSUPP)
                TR_WARN("%s: this file system cannot lock files (%s): nothing stops a second trainer from writing "
                        "this run folder at the same time", l->path, tr_io_reason(e, why, sizeof why));
            else st = tr_error_set(TR_ERR_IO, "%s: cannot lock: %s", l->path, tr_io_reason(e, why, sizeof why));
            close(fd);
            return st;
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(l->path, &named) == 0 && held.st_ino == named.st_ino &&
            held.st_dev == named.st_dev) {
            char text[32];
            int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
                tr_status st = tr_error_set(TR_ERR_IO, "%s: cannot write the run's lock: %s", l->path,
                                            tr_io_reason(errno, why, sizeof why));
                close(fd);
                return st;
            }
            l->fd = fd;
            return TR_OK;
        }
        close(fd); /* its holder removed it as we locked it: open the new one */
    }
    return tr_error_set(TR_ERR_IO, "%s: cannot take the run's lock: the file kept being replaced", l->path);
}

void run_lock_release(run_lock *l) {
    if (l->fd < 0) return;
    unlink(l->path);
    close(l->fd);
    l->fd = -1;
}
