/* Path resolution and whole-file reads (plain or gzip) for datasets and configs. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "trainer/io.h"
#include "trainer/memory.h"

void tr_path_resolve(char *out, size_t size, const char *base_dir, const char *path) {
    if (path[0] == '/' || !base_dir || !base_dir[0])
        snprintf(out, size, "%s", path);
    else
        snprintf(out, size, "%s/%s", base_dir, path);
}

static tr_status fail(gzFile f, char *b, tr_status st) {
    free(b);
    gzclose(f);
    return st;
}

tr_status tr_file_read(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    errno = 0;
    gzFile f = gzopen(path, "rb"); /* reads plain files unchanged */
    if (!f)
        return tr_error_set(TR_ERR_IO, "%s: cannot open: %s", path,
                            errno ? strerror(errno) : "out of memory");
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) {
            gzclose(f);
            return tr_error_set(TR_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap);
        }
        if (n + 1 >= cap) { /* room for the NUL */
            char *nb = realloc(b, cap * 2);
            if (!nb) free(b);
            b = nb;
            cap *= 2;
            continue;
        }
        size_t want = cap - 1 - n > (1u << 30) ? (1u << 30) : cap - 1 - n;
        int got = gzread(f, b + n, (unsigned)want);
        if (got < 0) {
            int zerr;
            const char *m = gzerror(f, &zerr);
            return fail(f, b, tr_error_set(TR_ERR_IO, "%s: read failed: %s", path,
                                           zerr == Z_ERRNO ? strerror(errno) : m));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    int zerr;
    const char *m = gzerror(f, &zerr);
    if (zerr != Z_OK) /* a gzip stream that ends early: gzread just returns 0 */
        return fail(f, b, tr_error_set(TR_ERR_IO, "%s: truncated or corrupt gzip data: %s", path, m));
    gzclose(f);
    b[n] = '\0';
    *data = b;
    *len = n;
    return TR_OK;
}

tr_status tr_mkdirs(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return tr_error_set(TR_ERR_INVALID, "directory '%s': empty or too long", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return tr_error_set(TR_ERR_IO, "%s: cannot create the directory (at %s): %s", dir, buf,
                                strerror(errno));
        struct stat sb;
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return tr_error_set(TR_ERR_IO, "%s: cannot create the directory: %s is %s", dir, buf,
                                errno == ENOENT ? "missing" : "not a directory");
        buf[i] = c;
    }
    return TR_OK;
}
