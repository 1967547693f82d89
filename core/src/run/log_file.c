/* A logger's file (log_file.h). */
#include "run/log_file.h"

#include <errno.h>

#include "base/io_error.h"

static tr_status failed(const log_file *lf, const char *what) {
    char why[256];
    return tr_error_set(TR_ERR_IO, "%s: %s: %s", lf->path, what, tr_io_reason(errno ? errno : EIO, why, sizeof why));
}

tr_status log_file_open(log_file *lf, const char *dir, const char *name, const char *mode) {
    snprintf(lf->path, sizeof lf->path, "%s/%s", dir, name);
    errno = 0;
    lf->f = fopen(lf->path, mode);
    return lf->f ? TR_OK : failed(lf, "cannot write");
}

tr_status log_file_put(log_file *lf, const void *p, size_t n) {
    if (!lf->f) return tr_error_set(TR_ERR_IO, "%s: not open (after an earlier failure)", lf->path);
    errno = 0;
    int bad = fwrite(p, 1, n, lf->f) != n;
    bad = fflush(lf->f) != 0 || bad;
    if (!bad) return TR_OK;
    clearerr(lf->f);
    return failed(lf, "write failed");
}

tr_status log_file_close(log_file *lf) {
    if (!lf->f) return TR_OK;
    errno = 0;
    int bad = fclose(lf->f) != 0;
    lf->f = NULL;
    return bad ? failed(lf, "close failed") : TR_OK;
}
