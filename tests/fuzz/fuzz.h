/* What the fuzz targets share (fuzz_util.c, dataset_check.c): splitting an input into parts,
 * reading typed values from bytes, memory files and a scratch folder, and failing loudly.
 *
 *   int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
 *       fuzz_part part[3];
 *       int n = fuzz_split(data, size, part, 3);       // "A\n--8<--\nB\n--8<--\nC"
 *       char path[64];
 *       int fd = fuzz_memfile(part[1].data, part[1].size, path, sizeof path);
 *       ... parse `path` ...
 *       if (bad) fuzz_fail("%s: accepted a %d-byte tensor", path, n);   // abort: input kept
 *       close(fd);
 *       return 0;
 *   }
 *
 * A target calls abort() (fuzz_fail) only for a bug of the code under test: a crash, a
 * broken invariant or a refusal without a message. Refusing bad input is the expected
 * outcome and returns normally. Scratch files live under $TMPDIR (tools/fuzz points it at a
 * folder in /dev/shm that it removes, also after a crash) and are removed at exit. */
#ifndef TRAINER_FUZZ_H
#define TRAINER_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"
#include "trainer/model.h"
#include "trainer/plugin.h"

/* libFuzzer's entry point, defined by each target. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- parts ---- */

/* The separator between the parts of a multi-file input (seed files use it verbatim). */
#define FUZZ_SEP "\n--8<--\n"

typedef struct fuzz_part {
    const uint8_t *data;
    size_t size;
} fuzz_part;

/* Splits at FUZZ_SEP into at most max parts (the last keeps any further separators);
 * returns how many parts there are (at least 1). */
int fuzz_split(const uint8_t *data, size_t size, fuzz_part *parts, int max);
/* A NUL-terminated copy of the bytes (cut at an embedded NUL); free() it. */
char *fuzz_strdup(const uint8_t *data, size_t size);

/* ---- typed values from bytes (zeros once the bytes run out) ---- */

typedef struct fuzz_reader {
    const uint8_t *p;
    size_t left;
} fuzz_reader;

uint8_t fuzz_u8(fuzz_reader *r);
uint32_t fuzz_u32(fuzz_reader *r);
/* A string of up to max bytes (its length from one byte), owned by the caller; NULL when
 * the length byte is 255, so that NULL pointers are tried too. */
char *fuzz_str(fuzz_reader *r, size_t max);
/* One of a few telling doubles (0, 1, -1, 2^31, 1e300, NaN, inf, ...) or 8 raw bytes. */
double fuzz_double(fuzz_reader *r);

/* ---- files ---- */

/* An anonymous memory file holding the bytes; path receives "/proc/self/fd/N". Returns the
 * descriptor (close it when done) or -1. */
int fuzz_memfile(const void *data, size_t size, char *path, size_t cap);
/* This process's scratch folder (made on first use under $TMPDIR or /tmp, removed at exit
 * and by fuzz_fail). */
const char *fuzz_scratch_dir(void);
/* Writes a whole file (0 on success). */
int fuzz_write_file(const char *path, const void *data, size_t size);
/* Removes a file or a folder tree. */
void fuzz_remove_tree(const char *path);

/* ---- verdicts ---- */

/* A bug: prints "fuzz: <message>" and aborts, so libFuzzer saves the input. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A refusal must explain itself: fails unless the thread's message is non-empty and holds
 * one of the NULL-terminated needles (the file, the key, ...). */
void fuzz_expect_message(const char *what, const char *const *needles);

/* ---- configs (config_check.c) ---- */

/* tr_config_write into a malloc'ed string. */
char *fuzz_config_text(const tr_config *cfg);
/* The writer's promise: its YAML parses back to the same tree (kinds, keys, texts and which
 * scalars count as null). Returns the parsed copy (destroy it); fails otherwise. */
tr_config *fuzz_check_config_roundtrip(const tr_config *cfg, const char *what);
/* `trainer run`'s reading of every setting (job_read_settings) on cfg, which it completes with
 * the defaults; a refusal must hold one of the needles. When accepted, the resolved config
 * written and read back must give the same settings and config digest (a resumed run reads
 * it so). */
void fuzz_check_job_settings(tr_config *cfg, const char *const *needles);

/* ---- datasets (dataset_check.c) ---- */

/* Runs a dataset plugin on "OPTIONS\n--8<--\nFILE1[\n--8<--\nFILE2...]" the way a job does:
 * OPTIONS are whitespace-separated key=value words for the plugin (as under data.params),
 * plus split=train|val and val_fraction=X for its environment; file i goes into a memory
 * file whose path is given as option file_keys[i] (NULL-terminated list; a missing part
 * leaves the key out). `fits` may skip options whose datasets would be too big to fuzz
 * (return 0). An accepted dataset is checked with fuzz_check_dataset; a refusal must name
 * one of the files or the plugin. */
void fuzz_dataset_run(const tr_plugin_desc *desc, const char *const *file_keys,
                      int (*fits)(const tr_options *o), const uint8_t *data, size_t size);
/* Every sample of a dataset against its spec: shapes, in-range ids and finite values; reads
 * out of range are refused. Fails (fuzz_fail) otherwise. */
void fuzz_check_dataset(const tr_dataset_ops *ops, void *ds, const char *name);

#endif
