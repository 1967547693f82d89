/* Private to the CUDA plugin: what the driver says about the GPUs, asked through the driver
 * API opened at run time (no toolkit or driver needed to build or load the plugin). */
#ifndef TR_CUDA_PROBE_H
#define TR_CUDA_PROBE_H

#include <stddef.h>

#include "trainer/device_backend.h"

/* The plugin's name (the tests build it again as cuda_emu). */
#ifndef CUDA_PLUGIN_NAME
#define CUDA_PLUGIN_NAME "cuda"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* GPUs the driver shows this process (CUDA_VISIBLE_DEVICES applied by the driver); 0 with
 * the reason in why. */
int cuda_probe_count(char *why, size_t size);
/* Name, memory and compute capability of visible GPU `index`. */
tr_status cuda_probe_info(int index, tr_device_info *out);

#ifdef __cplusplus
}
#endif
#endif
