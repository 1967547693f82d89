/* Private to the CUDA plugin: an opened GPU (the handle of tr_device_ops' execution entries)
 * and the device the calling thread's kernel calls run on. */
#ifndef TR_CUDA_DEVICE_H
#define TR_CUDA_DEVICE_H

#include <stddef.h>

#include "probe.h"
#include "runtime.h"
#include "trainer/device_backend.h"
#include "trainer/kernels.h"

/* Bytes of each of the two page-locked staging buffers uploads go through. */
#define CUDA_STAGE_BYTES ((size_t)4 << 20)

typedef struct cuda_block {
    void *p;
    size_t size;
    int used;
} cuda_block;

typedef struct cuda_device {
    cu_rt *rt;
    char name[32];           /* "cuda:0" */
    /* Caching allocator: every block ever taken from CUDA, free or in use; a freed block is
     * reused by a later request it fits (stream order makes that safe: one stream). */
    cuda_block *blocks;
    size_t n_blocks, cap_blocks;
    size_t reserved;         /* bytes held from CUDA */
    void *stage[2];          /* page-locked upload staging, alternating */
    int stage_next;
    double *scratch;         /* device: the sum of squares' partials and result */
    double *scratch_host;    /* page-locked: the result read back */
    int bf16;                /* GEMMs on bf16 operands (tr_device_ops.set_precision) */
    /* The first error a kernel call raised since the last sync (kernel entries return
     * nothing: tr_device_ops.sync reports it). */
    tr_status err;
    char err_msg[256];
} cuda_device;

/* tr_device_ops' execution entries. */
tr_status cuda_open(int index, void **dev);
void cuda_close(void *dev);
tr_status cuda_alloc(void *dev, size_t bytes, void **p);
void cuda_free(void *dev, void *p);
tr_status cuda_upload(void *dev, void *dst, const void *src, size_t bytes);
tr_status cuda_download(void *dev, void *dst, const void *src, size_t bytes);
tr_status cuda_sync(void *dev);
tr_status cuda_bind(void *dev);
void *cuda_stream(void *dev);
tr_status cuda_set_precision(void *dev, int precision);
tr_status cuda_mark(void *dev, void **mark);
void cuda_mark_free(void *dev, void *mark);
tr_status cuda_upload_after(void *dev, void *dst, const void *src, size_t bytes, void *after);

/* The device bound on this thread (the last open or bind here), or NULL. */
cuda_device *cuda_current(void);
/* Keeps the first error of a kernel call (st with tr_error's message) for the next sync. */
void cuda_fail(cuda_device *d, tr_status st, const char *what);

/* The kernel table (ops.c). */
extern tr_kernels cuda_kernel_table; /* filled at load (ops.c), read-only after */

#endif
