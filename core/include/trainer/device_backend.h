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
 * This is the table's first version (discovery). Running ops on the devices (memory, streams,
 * kernels) is appended to it; a plugin built against this version can be counted and listed,
 * not trained on, and the core says so. */
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
} tr_device_ops;

#ifdef __cplusplus
}
#endif
#endif
