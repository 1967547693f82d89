/* Which devices and which strategy a run uses: the rule behind trainer.accelerator,
 * trainer.devices and trainer.strategy: auto, as a pure function of the request and of what
 * was found.
 *
 *   tr_device_request rq = {.accelerator = TR_ACCEL_AUTO, .devices = TR_DEVICES_AUTO,
 *                           .strategy = "auto"};
 *   tr_device_choice c;
 *   TR_CHECK(tr_choose_devices(&rq, gpus_found, "no CUDA driver", cores, &c));
 *   // 0 GPUs: cpu, 1 device;  1 GPU: single-gpu;  8 GPUs: ddp with 8 processes
 *
 * The rule: accelerator auto is gpu when a GPU was found (and the strategy named is not cpu),
 * else cpu. devices auto is every GPU
 * (gpu) or 1 (cpu); -1 is every GPU or every core; N is N (at most the GPUs found); a list
 * names GPU ids (gpu only; repeated ids only for dataparallel, its one-GPU testing mode).
 * strategy auto is cpu for one CPU device, single-gpu for one GPU and ddp (one process per
 * device) for more. A named strategy is taken as named (its probe decides whether it can run
 * here), except where the request contradicts itself: cpu on a GPU, single-gpu on several
 * devices or without a GPU. An impossible request is an error saying what was found and what
 * would work; only auto chooses, and the choice says why. */
#ifndef TRAINER_DEVICES_H
#define TRAINER_DEVICES_H

#include "trainer/export.h"
#include "trainer/device_backend.h"
#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* <trainer/plugin.h>'s, a layer above: only pointers to them here. */
typedef struct tr_plugin tr_plugin;
typedef struct tr_registry tr_registry;

typedef enum tr_accelerator { TR_ACCEL_AUTO = 0, TR_ACCEL_CPU = 1, TR_ACCEL_GPU = 2 } tr_accelerator;

enum { TR_DEVICES_AUTO = 0, TR_DEVICES_ALL = -1, TR_MAX_DEVICE_IDS = 64 };

typedef struct tr_device_request {
    tr_accelerator accelerator;
    int devices;                 /* N >= 1, TR_DEVICES_AUTO or TR_DEVICES_ALL; ignored with ids */
    const int *ids;              /* trainer.devices as a list of GPU ids, or NULL */
    int n_ids;
    const char *strategy;        /* "auto" or a strategy plugin's name */
} tr_device_request;

typedef struct tr_device_choice {
    tr_accelerator accelerator;  /* TR_ACCEL_CPU or TR_ACCEL_GPU */
    int devices;                 /* ranks or replicas */
    int ids[TR_MAX_DEVICE_IDS];  /* GPU ids used (gpu), in order */
    int n_ids;
    char strategy[64];
    char why[512];               /* one line: the choice and its reason */
} tr_device_choice;

/* gpus: GPUs found; gpu_why: why none (or fewer) were found, for messages ("" if none
 * known); cores: CPU cores this process may use (devices -1 with cpu). */
TR_API tr_status tr_choose_devices(const tr_device_request *rq, int gpus, const char *gpu_why, int cores,
                            tr_device_choice *out);
TR_API const char *tr_accelerator_name(tr_accelerator a);

/* ---- the GPUs the device plugins see ----
 *
 *   tr_gpu_scan found;
 *   TR_CHECK(tr_gpu_scan_registry(reg, "auto", &found));
 *   TR_CHECK(tr_choose_devices(&rq, found.count, found.why, tr_cpu_count(), &c));
 */
typedef struct tr_gpu_scan {
    const tr_plugin *backend;    /* the device plugin a GPU run uses; NULL when none sees a GPU */
    int count;                   /* GPUs it sees */
    char why[512];               /* with count 0: why, backend by backend ("cuda: no CUDA driver
                                  * (...)"), or that no device plugin was found */
} tr_gpu_scan;

/* Asks the device plugins of reg how many GPUs they see. backend: "auto" (the first plugin,
 * in registry order, that sees one) or a device plugin's name (trainer.gpu_backend; an error
 * when no device plugin has it). Finding no GPU is not an error: count 0 and why. */
TR_API tr_status tr_gpu_scan_registry(const tr_registry *reg, const char *backend, tr_gpu_scan *out);
/* p's device ops table, checked (a known size, count and info present) and copied into a
 * full-size one. TR_ERR_PLUGIN names the file and what is wrong. */
TR_API tr_status tr_device_ops_of(const tr_plugin *p, tr_device_ops *out);

#ifdef __cplusplus
}
#endif
#endif
