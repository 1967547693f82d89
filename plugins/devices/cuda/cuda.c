/* Device plugin `cuda`: NVIDIA GPUs through the CUDA driver. This version discovers them
 * (probe.c); running ops on them is appended to its table with the kernels. */
#include "probe.h"
#include "trainer/plugin.h"

static const tr_device_ops ops = {
    .count = cuda_probe_count,
    .info = cuda_probe_info,
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_DEVICE,
    .name = "cuda",
    .version = "0.1.0",
    .description = "NVIDIA GPUs through the CUDA driver (libcuda.so.1, opened at run time; honours CUDA_VISIBLE_DEVICES)",
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
