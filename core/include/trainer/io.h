/* File helpers for plugins and the core: paths relative to a config, whole-file reads and
 * writes.
 *
 *   char path[4096];
 *   tr_path_resolve(path, sizeof path, env->base_dir, tr_options_string(o, "path"));
 *   char *text;
 *   size_t len;
 *   TR_CHECK(tr_file_read(path, &text, &len));   // .gz files are decompressed
 *   ...
 *   tr_free(text);
 */
#ifndef TRAINER_IO_H
#define TRAINER_IO_H

#include "trainer/export.h"

#include <stddef.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `path` itself when absolute or when base_dir is NULL or empty, else base_dir/path. */
TR_API void tr_path_resolve(char *out, size_t size, const char *base_dir, const char *path);

/* mkdir -p: creates every missing component of dir; an existing non-directory on the way is
 * an error naming it. */
TR_API tr_status tr_mkdirs(const char *dir);

/* The whole file into *data (NUL-terminated; *len excludes the NUL; free with tr_free),
 * decompressed when it is gzip. A missing file, a read error and a truncated or corrupt
 * gzip stream are errors naming the file. */
TR_API tr_status tr_file_read(const char *path, char **data, size_t *len);

/* ABI 0.13. Writes len bytes as the file `path`, through a temporary file beside it renamed into place:
 * a failure (naming the file and why) leaves what was at `path` as it was. */
TR_API tr_status tr_file_write(const char *path, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
