/* The reason a file operation failed (see io_error.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/io_error.h"

const char *tr_io_reason(int err, char *buf, size_t cap) {
    const char *hint = "";
    switch (err) {
    case ENOSPC: hint = " (the file system is full: free space or set run.output_dir elsewhere)"; break;
#ifdef EDQUOT
    case EDQUOT: hint = " (the disk quota is used up)"; break;
#endif
    case EFBIG: hint = " (over the file size limit of this process, see ulimit -f)"; break;
    case EROFS: hint = " (set run.output_dir to a writable place)"; break;
    case EACCES: hint = " (no permission: set run.output_dir to a writable place)"; break;
    default: break;
    }
    snprintf(buf, cap, "%s%s", err ? strerror(err) : "unknown error", hint);
    return buf;
}
