/* safetensors files: the checkpoint format for weights and optimizer state
 * (docs/design.md "Checkpoints").
 *
 *   tr_st_entry e[2] = {
 *       {.name = "fc.weight", .dtype = TR_F32, .ndim = 2, .shape = {10, 784}, .data = w},
 *       {.name = "fc.bias", .dtype = TR_F32, .ndim = 1, .shape = {10}, .data = b}};
 *   TR_CHECK(tr_safetensors_write("ckpt/model.safetensors", e, 2, NULL));
 *   tr_safetensors *f;
 *   TR_CHECK(tr_safetensors_open(&f, "ckpt/model.safetensors"));
 *   const tr_st_entry *w2 = tr_safetensors_find(f, "fc.weight");   // data points into f
 *   tr_safetensors_close(f);
 *
 * Layout (the format's specification): u64 little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"key": "value"}}, then the raw little-endian data. Writes go to a
 * temporary name in the same directory, are fsync'ed, then renamed over the target (and the
 * directory fsync'ed), so a crash leaves the old file or the new one, never half of one.
 * Reading checks everything against the file size before trusting it: a truncated or
 * corrupted file is refused with a message naming the file and the problem. The file is
 * mapped, not read: the bytes of a tensor come into memory when they are read, and
 * tr_safetensors_copy reads a piece without mapping it, so a reader of some tensors' pieces (a
 * sharded rank) holds only those (the file must not be truncated while open; replacing it by
 * rename, as the writer does, is safe). The format has
 * no padding between tensors, so a tensor's data in a file from another writer may be
 * unaligned: copy it out with memcpy. (This writer orders data by element size, largest
 * first, so its own files are aligned.) */
#ifndef TRAINER_SAFETENSORS_H
#define TRAINER_SAFETENSORS_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"
#include "trainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_st_entry {
    const char *name;
    tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    const void *data;  /* borrowed */
} tr_st_entry;

/* Writes entries (names unique) and optional string metadata (n_meta key/value pairs). */
TR_API tr_status tr_safetensors_write(const char *path, const tr_st_entry *entries, int n,
                               const char *const *meta_kv, int n_meta);

typedef struct tr_safetensors tr_safetensors;

TR_API tr_status tr_safetensors_open(tr_safetensors **out, const char *path);
TR_API void tr_safetensors_close(tr_safetensors *f);
TR_API int tr_safetensors_count(const tr_safetensors *f);
TR_API const tr_st_entry *tr_safetensors_at(const tr_safetensors *f, int i);
TR_API const tr_st_entry *tr_safetensors_find(const tr_safetensors *f, const char *name);
/* A metadata value, or NULL. */
TR_API const char *tr_safetensors_meta(const tr_safetensors *f, const char *key);
/* ABI 0.15 (a tr_status since 0.19). memcpy(dst, src, bytes) where src lies in f's tensor
 * data (an entry's data plus an offset), read from the file (pread) rather than through the
 * mapping: a reader copying its pieces (a sharded rank) brings no page of the file into its
 * memory. A read that fails or comes up short (the file shortened while open, an I/O error)
 * is TR_ERR_IO naming the file, the bytes read and the offset. */
TR_API tr_status tr_safetensors_copy(const tr_safetensors *f, void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
