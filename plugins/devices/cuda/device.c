/* An opened GPU: a caching allocator over CUDA's, uploads through page-locked staging,
 * downloads, the error a kernel call left for sync, and the device this thread runs on. */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/runtime.h"

static _Thread_local cuda_device *current;

cuda_device *cuda_current(void) { return current; }

void cuda_fail(cuda_device *d, tr_status st, const char *what) {
    if (!d || d->err != TR_OK) return;
    d->err = st;
    snprintf(d->err_msg, sizeof d->err_msg, "%s: %s", what, tr_error_msg());
}

/* Rounding of requests: 512 bytes, and whole MiB from 1 MiB up (so that arenas growing by
 * a little reuse one block). */
static size_t round_size(size_t bytes) {
    size_t q = bytes >= ((size_t)1 << 20) ? (size_t)1 << 20 : 512;
    return bytes == 0 ? q : (bytes + q - 1) / q * q;
}

/* Releases every free cached block to CUDA (after the stream is idle). */
static void release_free(cuda_device *d) {
    if (cu_sync(d->rt) != TR_OK) return;
    size_t k = 0;
    for (size_t i = 0; i < d->n_blocks; i++) {
        if (!d->blocks[i].used) {
            cu_mem_free(d->rt, d->blocks[i].p);
            d->reserved -= d->blocks[i].size;
        } else {
            d->blocks[k++] = d->blocks[i];
        }
    }
    d->n_blocks = k;
}

tr_status cuda_alloc(void *dev, size_t bytes, void **p) {
    cuda_device *d = dev;
    *p = NULL;
    size_t want = round_size(bytes);
    /* Best fit among free blocks, no more than twice the request (a small request does not
     * pin down a large block). */
    cuda_block *best = NULL;
    for (size_t i = 0; i < d->n_blocks; i++) {
        cuda_block *b = &d->blocks[i];
        if (!b->used && b->size >= want && b->size / 2 <= want && (!best || b->size < best->size)) best = b;
    }
    if (best) {
        best->used = 1;
        *p = best->p;
        return TR_OK;
    }
    if (d->n_blocks == d->cap_blocks) {
        size_t cap = d->cap_blocks ? 2 * d->cap_blocks : 64;
        cuda_block *nb = realloc(d->blocks, cap * sizeof *nb);
        if (!nb) return tr_error_set(TR_ERR_NOMEM, "%s: out of host memory", d->name);
        d->blocks = nb;
        d->cap_blocks = cap;
    }
    void *q = NULL;
    tr_status st = cu_mem_alloc(d->rt, want, &q);
    if (st == TR_ERR_NOMEM) {
        release_free(d); /* what the cache holds goes back, then once more */
        st = cu_mem_alloc(d->rt, want, &q);
        if (st == TR_ERR_NOMEM)
            return tr_error_set(TR_ERR_NOMEM, "out of device memory: %zu bytes requested with %zu in use (%s)", bytes,
                                d->reserved, tr_error_msg());
    }
    if (st != TR_OK) return st; /* not memory: a device error (its message names the call) */
    d->blocks[d->n_blocks++] = (cuda_block){.p = q, .size = want, .used = 1};
    d->reserved += want;
    *p = q;
    return TR_OK;
}

void cuda_free(void *dev, void *p) {
    cuda_device *d = dev;
    if (!p) return;
    for (size_t i = 0; i < d->n_blocks; i++)
        if (d->blocks[i].p == p) {
            d->blocks[i].used = 0;
            return;
        }
}

/* Which block holds [p, p + bytes), or NULL: copies refuse a device side outside memory of
 * this device (a host pointer passed as device memory). */
static const cuda_block *block_of(const cuda_device *d, const void *p, size_t bytes) {
    const char *c = p;
    for (size_t i = 0; i < d->n_blocks; i++) {
        const char *b = d->blocks[i].p;
        if (d->blocks[i].used && c >= b && bytes <= d->blocks[i].size && (size_t)(c - b) <= d->blocks[i].size - bytes)
            return &d->blocks[i];
    }
    return NULL;
}

/* Host src to device dst through the two staging buffers in turn (the caller's memory may be
 * reused on return, and a copy from page-locked memory overlaps the next chunk's memcpy): on
 * the compute stream, or with beside on the copy stream after `after` alone. */
static tr_status staged_upload(cuda_device *d, void *dst, const void *src, size_t bytes, int beside, void *after) {
    if (bytes && !block_of(d, dst, bytes))
        return tr_error_set(TR_ERR_INVALID, "the destination %p is not memory of this device", dst);
    for (size_t off = 0; off < bytes; off += CUDA_STAGE_BYTES) {
        size_t len = bytes - off < CUDA_STAGE_BYTES ? bytes - off : CUDA_STAGE_BYTES;
        int s = d->stage_next;
        d->stage_next ^= 1;
        TR_CHECK(cu_event_wait(d->rt, s));
        memcpy(d->stage[s], (const char *)src + off, len);
        if (beside) {
            TR_CHECK(cu_upload_beside(d->rt, (char *)dst + off, d->stage[s], len, after, s));
        } else {
            TR_CHECK(cu_upload_async(d->rt, (char *)dst + off, d->stage[s], len));
            TR_CHECK(cu_event_record(d->rt, s));
        }
    }
    return TR_OK;
}

tr_status cuda_upload(void *dev, void *dst, const void *src, size_t bytes) {
    return staged_upload(dev, dst, src, bytes, 0, NULL);
}

tr_status cuda_mark(void *dev, void **mark) { return cu_mark(((cuda_device *)dev)->rt, mark); }

void cuda_mark_free(void *dev, void *mark) { cu_mark_free(((cuda_device *)dev)->rt, mark); }

tr_status cuda_upload_after(void *dev, void *dst, const void *src, size_t bytes, void *after) {
    return staged_upload(dev, dst, src, bytes, 1, after);
}

tr_status cuda_download(void *dev, void *dst, const void *src, size_t bytes) {
    cuda_device *d = dev;
    if (bytes && !block_of(d, src, bytes))
        return tr_error_set(TR_ERR_INVALID, "the source %p is not memory of this device", src);
    return cu_download(d->rt, dst, src, bytes);
}

tr_status cuda_sync(void *dev) {
    cuda_device *d = dev;
    tr_status st = cu_sync(d->rt);
    if (d->err != TR_OK) {
        st = tr_error_set(d->err, "%s", d->err_msg);
        d->err = TR_OK;
    }
    return st;
}

void *cuda_stream(void *dev) { return cu_native_stream(((cuda_device *)dev)->rt); }

tr_status cuda_set_precision(void *dev, int precision) {
    cuda_device *d = dev;
    if (precision != TR_PRECISION_FP32 && precision != TR_PRECISION_BF16_MIXED)
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: no precision %d", d->name, precision);
    if (precision == TR_PRECISION_BF16_MIXED) TR_CHECK(cu_bf16_check(d->rt));
    d->bf16 = precision == TR_PRECISION_BF16_MIXED;
    return TR_OK;
}

tr_status cuda_bind(void *dev) {
    cuda_device *d = dev;
    TR_CHECK(cu_bind(d->rt));
    current = d;
    return TR_OK;
}

void cuda_close(void *dev) {
    cuda_device *d = dev;
    if (!d) return;
    if (d->rt) {
        cu_bind(d->rt);
        cu_sync(d->rt);
        for (size_t i = 0; i < d->n_blocks; i++) cu_mem_free(d->rt, d->blocks[i].p);
        for (int s = 0; s < 2; s++) cu_host_free(d->rt, d->stage[s]);
        cu_host_free(d->rt, d->scratch_host);
        cu_close(d->rt);
    }
    /* closing bound d's context on this thread: give it back to the device bound here */
    if (current == d) current = NULL;
    else if (current) cu_bind(current->rt);
    free(d->blocks);
    free(d);
}

tr_status cuda_open(int index, void **dev) {
    *dev = NULL;
    cuda_device *d = calloc(1, sizeof *d);
    if (!d) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", CUDA_PLUGIN_NAME);
    snprintf(d->name, sizeof d->name, "%s:%d", CUDA_PLUGIN_NAME, index);
    tr_status st = cu_open(index, d->name, &d->rt);
    for (int s = 0; s < 2 && st == TR_OK; s++) st = cu_host_alloc(d->rt, CUDA_STAGE_BYTES, &d->stage[s]);
    if (st == TR_OK) st = cu_host_alloc(d->rt, sizeof(double), (void **)&d->scratch_host);
    if (st == TR_OK) st = cuda_alloc(d, (CUDA_SUMSQ_PARTS + 1) * sizeof(double), (void **)&d->scratch);
    if (st != TR_OK) {
        cuda_close(d);
        return st;
    }
    current = d;
    *dev = d;
    return TR_OK;
}
