/* Test device plugin `fake_gpu`: reports TRAINER_FAKE_GPUS GPUs (unset: none) so the
 * selection rule, `trainer devices`, `trainer plan` and training on a GPU (strategy
 * single-gpu) can be tested end to end on a machine without a GPU. Like the CUDA driver it
 * honours CUDA_VISIBLE_DEVICES: a comma-separated list of device indexes, read up to the
 * first that does not exist; an empty list hides them all. Each device has
 * TRAINER_FAKE_GPU_MIB MiB of memory (default 16384).
 *
 * Execution: device memory is the fake device's own mappings, counted against its size (an
 * allocation past it fails as a GPU's would); uploads and downloads check that their device
 * side lies inside one allocation (a host pointer passed as device memory is an error, not a
 * silent copy); the kernels are the core's CPU kernels (tr_cpu_kernels), so a run on a fake
 * GPU must give exactly the cpu strategy's numbers. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "trainer/device_backend.h"
#include "trainer/kernels.h"
#include "trainer/plugin.h"

enum { MAX_FAKE = 64 };

/* A non-negative integer from the whole of s, or -1. */
static long parse_count(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return *s && !*end && !errno && v >= 0 ? v : -1;
}

/* Devices installed (TRAINER_FAKE_GPUS), 0 with why when unset or bad. */
static int installed(char *why, size_t size) {
    const char *s = getenv("TRAINER_FAKE_GPUS");
    if (!s) {
        snprintf(why, size, "TRAINER_FAKE_GPUS is not set (the test plugin's GPU count)");
        return 0;
    }
    long n = parse_count(s);
    if (n < 0 || n > MAX_FAKE) {
        snprintf(why, size, "TRAINER_FAKE_GPUS='%s' is not a count from 0 to %d", s, MAX_FAKE);
        return 0;
    }
    if (n == 0) snprintf(why, size, "TRAINER_FAKE_GPUS=0");
    return (int)n;
}

/* Visible devices after CUDA_VISIBLE_DEVICES, as the driver reads it. */
static int visible(int n, char *why, size_t size) {
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis || n == 0) return n;
    int seen = 0;
    for (const char *p = vis; *p;) {
        size_t len = strcspn(p, ",");
        char tok[32];
        if (len == 0 || len >= sizeof tok) break;
        memcpy(tok, p, len);
        tok[len] = 0;
        long id = parse_count(tok);
        if (id < 0 || id >= n) break;
        seen++;
        p += len + (p[len] == ',');
    }
    if (seen == 0 && !*vis) snprintf(why, size, "no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device");
    else if (seen == 0) snprintf(why, size, "no GPU among CUDA_VISIBLE_DEVICES='%s' (%d installed)", vis, n);
    return seen;
}

static int count(char *why, size_t size) {
    return visible(installed(why, size), why, size);
}

static uint64_t memory_bytes(void) {
    const char *mib = getenv("TRAINER_FAKE_GPU_MIB");
    long m = mib ? parse_count(mib) : 16384;
    return (uint64_t)(m > 0 ? m : 16384) << 20;
}

static tr_status info(int index, tr_device_info *out) {
    char why[256];
    int n = count(why, sizeof why);
    memset(out, 0, sizeof *out);
    if (index < 0 || index >= n) return tr_error_set(TR_ERR_DEVICE, "fake_gpu: no device %d (%d visible)", index, n);
    snprintf(out->name, sizeof out->name, "Fake GPU %d", index);
    out->memory = memory_bytes();
    snprintf(out->detail, sizeof out->detail, "test plugin: kernels run on the CPU");
    return TR_OK;
}

/* ---- execution ---- */

typedef struct block {
    char *p;
    size_t bytes;
} block;

typedef struct fake_dev {
    int index;
    uint64_t capacity, used;
    block *blocks;
    size_t n_blocks, cap_blocks;
} fake_dev;

static tr_status dev_open(int index, void **out) {
    fake_dev *d = calloc(1, sizeof *d);
    if (!d) return tr_error_set(TR_ERR_NOMEM, "fake_gpu: out of host memory");
    d->index = index;
    d->capacity = memory_bytes();
    *out = d;
    return TR_OK;
}

static void dev_close(void *dev) {
    fake_dev *d = dev;
    for (size_t i = 0; i < d->n_blocks; i++) munmap(d->blocks[i].p, d->blocks[i].bytes);
    free(d->blocks);
    free(d);
}

static tr_status dev_alloc(void *dev, size_t bytes, void **p) {
    fake_dev *d = dev;
    *p = NULL;
    if (bytes > d->capacity - d->used)
        return tr_error_set(TR_ERR_NOMEM, "out of device memory: %zu bytes asked, %llu of %llu in use", bytes, (unsigned long long)d->used, (unsigned long long)d->capacity);
    if (d->n_blocks == d->cap_blocks) {
        size_t cap = d->cap_blocks ? 2 * d->cap_blocks : 64;
        block *b = realloc(d->blocks, cap * sizeof *b);
        if (!b) return tr_error_set(TR_ERR_NOMEM, "fake_gpu: out of host memory");
        d->blocks = b;
        d->cap_blocks = cap;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return tr_error_set(TR_ERR_NOMEM, "fake_gpu:%d: mapping %zu bytes failed", d->index, bytes);
    d->blocks[d->n_blocks++] = (block){m, bytes};
    d->used += bytes;
    *p = m;
    return TR_OK;
}

static void dev_free(void *dev, void *p) {
    fake_dev *d = dev;
    for (size_t i = 0; p && i < d->n_blocks; i++)
        if (d->blocks[i].p == p) {
            munmap(p, d->blocks[i].bytes);
            d->used -= d->blocks[i].bytes;
            d->blocks[i] = d->blocks[--d->n_blocks];
            return;
        }
}

/* Whether [p, p + bytes) lies inside one allocation of d. */
static int on_device(const fake_dev *d, const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < d->n_blocks; i++) {
        uintptr_t b = (uintptr_t)d->blocks[i].p;
        if (a >= b && a - b <= d->blocks[i].bytes && bytes <= d->blocks[i].bytes - (a - b)) return 1;
    }
    return 0;
}

static tr_status dev_upload(void *dev, void *dst, const void *src, size_t bytes) {
    fake_dev *d = dev;
    if (!on_device(d, dst, bytes))
        return tr_error_set(TR_ERR_INVALID, "fake_gpu:%d: upload of %zu bytes to %p, which is not device memory", d->index,
                            bytes, dst);
    memcpy(dst, src, bytes);
    return TR_OK;
}

static tr_status dev_download(void *dev, void *dst, const void *src, size_t bytes) {
    fake_dev *d = dev;
    if (!on_device(d, src, bytes))
        return tr_error_set(TR_ERR_INVALID, "fake_gpu:%d: download of %zu bytes from %p, which is not device memory",
                            d->index, bytes, src);
    memcpy(dst, src, bytes);
    return TR_OK;
}

static tr_status dev_sync(void *dev) {
    (void)dev;
    return TR_OK;
}

static tr_status dev_bind(void *dev) {
    (void)dev;
    return TR_OK;
}

static tr_device_ops ops = {.count = count, .info = info, .open = dev_open, .close = dev_close, .alloc = dev_alloc,
                            .free = dev_free, .upload = dev_upload, .download = dev_download, .sync = dev_sync,
                            .bind = dev_bind};

static tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_DEVICE,
    .name = "fake_gpu",
    .version = "0.1.0",
    .description = "test plugin: TRAINER_FAKE_GPUS fake GPUs (honours CUDA_VISIBLE_DEVICES)",
    .ops = &ops,
    .ops_size = sizeof ops,
};

/* The kernel table is the core's, which exists only at run time. With
 * TRAINER_FAKE_GPU_DISCOVERY_ONLY set the table ends at `info`, as a device plugin that can
 * list GPUs but not run on them. With TRAINER_FAKE_GPU_OLD_KERNELS set the kernel table
 * ends before copy_rows, as that of a plugin built before the transformers' entries were
 * appended: the core must refuse those ops on it, naming them; set to `qkv` it ends before
 * attention_qkv_forward, as a plugin built before the fused self-attention: the core must
 * compose it of slices and attention; set to `pad` it ends before attention_mask_forward, as a
 * plugin built for ABI 0.8, before padding: the core must refuse padding ids and masks on it,
 * and run unpadded batches as before; set to `drop` it ends before attention_dropout_forward,
 * as a plugin built for ABI 0.10: the core must refuse dropout on attention probabilities. */
static tr_kernels old_kernels;

__attribute__((constructor)) static void set_kernels(void) {
    ops.kernels = tr_cpu_kernels();
    if (getenv("TRAINER_FAKE_GPU_DISCOVERY_ONLY")) desc.ops_size = offsetof(tr_device_ops, open);
    if (getenv("TRAINER_FAKE_GPU_OLD_KERNELS")) {
        old_kernels = *tr_cpu_kernels();
        const char *old = getenv("TRAINER_FAKE_GPU_OLD_KERNELS");
        old_kernels.size = strcmp(old, "qkv") == 0    ? offsetof(tr_kernels, attention_qkv_forward)
                           : strcmp(old, "pad") == 0  ? offsetof(tr_kernels, attention_mask_forward)
                           : strcmp(old, "drop") == 0 ? offsetof(tr_kernels, attention_dropout_forward)
                                                      : offsetof(tr_kernels, copy_rows);
        ops.kernels = &old_kernels;
    }
}

TR_PLUGIN_DEFINE(desc)
