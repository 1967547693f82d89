/* The GPU device plugin interface (TR_PLUGIN_DEVICE): what a GPU backend (plugins/devices/cuda,
 * or a third party's) tells the core about the devices it can drive.
 *
 *   static int count(char *why, size_t size) {
 *       ... dlopen the driver, initialise it, count ...
 *       if (n == 0) snprintf(why, size, "no CUDA driver (libcuda.so.1: not found)");
 *       return n;
 *   }
 *   static tr_status info(int index, tr_device_info *out) { ... name, memory ... }
 *   static const tr_device_ops ops = {.count = count, .info = info};
 *   static const tr_plugin_desc desc = {TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_DEVICE,
 *       .name = "cuda", .version = "0.1.0", .description = "...", .ops = &ops,
 *       .ops_size = sizeof ops};
 *   TR_PLUGIN_DEFINE(desc)
 *
 * The core loads every device plugin it finds and asks each how many devices it sees, to
 * choose the strategy (trainer.accelerator / devices / strategy: auto, see devices.h) and for
 * `trainer devices`. So a device plugin must load on a machine without its driver or runtime:
 * it links none of them and opens them itself (dlopen) inside count(), which then returns 0
 * and says why — no driver, no library, no device, devices hidden by the backend's visibility
 * variable (CUDA_VISIBLE_DEVICES, honoured: indexes 0..count-1 are the visible ones). count()
 * never fails and never aborts; it may be called more than once.
 *
 * Execution (appended after discovery; a plugin whose table ends at `info` can be counted and
 * listed, not trained on, and the core says so): open a device, its memory, copies between
 * host and device, and the f32 kernel table (trainer/kernels.h) the ops run on it. The core
 * wraps these in trainer/accel.h; strategies use that, not this table.
 *
 *   static tr_status open(int index, void **dev) { ... context, compute stream ... }
 *   static tr_status alloc(void *dev, size_t bytes, void **p) { ... from a caching pool ... }
 *   ...
 *   static const tr_device_ops ops = {.count = count, .info = info, .open = open,
 *       .close = close, .alloc = alloc, .free = release, .upload = upload,
 *       .download = download, .sync = sync, .bind = bind, .kernels = &table};
 *
 * Ordering: kernels, uploads and zero-fills run in call order on the device's compute stream;
 * download waits for everything before it and returns with dst written. */
#ifndef TRAINER_DEVICE_BACKEND_H
#define TRAINER_DEVICE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One device as its backend describes it. */
typedef struct tr_device_info {
    char name[128];          /* "NVIDIA H200" */
    uint64_t memory;         /* bytes of device memory */
    char detail[128];        /* anything else worth a line: "compute 9.0, 132 SMs" */
} tr_device_info;

typedef struct tr_device_ops {
    /* Devices this backend can use now; 0 with the reason written into why (size bytes). */
    int (*count)(char *why, size_t size);
    /* Device `index` (0 <= index < count()); an error when it cannot be queried. */
    tr_status (*info)(int index, tr_device_info *out);
    /* ---- appended: execution ---- */
    /* Opens device `index` (as count() numbers them) for this process: *dev is the plugin's
     * handle for the calls below. A device may be opened more than once (several replicas
     * on one GPU, a testing mode); each open is its own handle. */
    tr_status (*open)(int index, void **dev);
    void (*close)(void *dev);
    /* Device memory, at least 256-byte aligned; an error (naming the device and the bytes)
     * when there is not enough. free(dev, NULL) does nothing; freeing memory that queued
     * work still uses is allowed (the memory is released after that work: stream-ordered). */
    tr_status (*alloc)(void *dev, size_t bytes, void **p);
    void (*free)(void *dev, void *p);
    /* Host src to device dst; src may be reused as soon as the call returns. */
    tr_status (*upload)(void *dev, void *dst, const void *src, size_t bytes);
    /* Device src to host dst, after all work queued before it; dst is written on return. */
    tr_status (*download)(void *dev, void *dst, const void *src, size_t bytes);
    /* Waits for the device's queued work; the first error a kernel raised since the last
     * sync (its message naming the kernel), or TR_OK. */
    tr_status (*sync)(void *dev);
    /* Makes dev the device this thread's kernel calls run on (several devices in one process:
     * dataparallel). */
    tr_status (*bind)(void *dev);
    /* The device's kernels. */
    const struct tr_kernels *kernels;
    /* ---- appended in ABI 0.6: may be NULL ---- */
    /* The native handle of dev's compute stream (a CUstream for CUDA), where its kernels and
     * copies are queued: a communication backend on the same device records an event there
     * and orders its own stream after it instead of waiting for the whole device. NULL:
     * none to give (the backend then waits for everything queued on the device). */
    void *(*stream)(void *dev);
    /* The arithmetic of dev's GEMM kernels from now on: precision is a tr_precision
     * (trainer/runtime.h); TR_PRECISION_BF16_MIXED lets linear, matmul, attention and conv2d
     * multiply their operands in bf16 (bf16 roundings, as bf16 tensor cores do; the device's
     * library may keep a shape in a more precise arithmetic), accumulating in fp32, and
     * leaves every other kernel in fp32. An error when the device cannot (it then keeps its
     * arithmetic). NULL: fp32 only (the core refuses bf16-mixed on such a device). */
    tr_status (*set_precision)(void *dev, int precision);
    /* ---- appended later in ABI 0.6: all three or none (NULL) ---- */
    /* A point of dev's compute stream: *mark (NULL: a new one) is recorded where the work
     * queued so far ends, and passes once that work has run. The plugin owns a mark until
     * mark_free (re-recording one already passed to upload_after is allowed: the copy keeps
     * the point it was given). */
    tr_status (*mark)(void *dev, void **mark);
    void (*mark_free)(void *dev, void *mark);
    /* upload on the device's copy engine, beside its compute stream: the copy waits for the
     * point `after` (a mark of dev) instead of for everything queued, so it runs while the
     * work queued after that point does; work queued on dev after this call sees dst
     * written. The caller promises that no work queued after `after` reads or writes dst
     * (the next batch into a buffer whose last reader was queued before the mark). src may
     * be reused on return. */
    tr_status (*upload_after)(void *dev, void *dst, const void *src, size_t bytes, void *after);
} tr_device_ops;

#ifdef __cplusplus
}
#endif
#endif
