/* A whole file written at once (tr_file_write, trainer/io.h): through `path.tmp-<pid>`, renamed
 * over `path`, so that readers see the old file or the new one, never half of one. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "base/io_error.h"
#include "trainer/io.h"

tr_status tr_file_write(const char *path, const void *data, size_t len) {
    char tmp[PATH_MAX], why[256];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return tr_error_set(TR_ERR_INVALID, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot write: %s", path, tr_io_reason(errno, why, sizeof why));
    int bad = fwrite(data, 1, len, f) != len;
    int err = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    tr_status st = TR_OK;
    if (bad) st = tr_error_set(TR_ERR_IO, "%s: write failed: %s", path, tr_io_reason(err, why, sizeof why));
    else if (rename(tmp, path) != 0)
        st = tr_error_set(TR_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, tr_io_reason(errno, why, sizeof why));
    if (st != TR_OK) unlink(tmp);
    return st;
}
