/* Device plugin `cuda`: NVIDIA GPUs through the CUDA driver. Discovery (probe.c) needs no
 * toolkit; built with one, the plugin also runs on the GPUs (device.c, ops.c, driver.c and
 * the kernels of kernels.cu). The tests build the same plugin over a CPU emulator of CUDA
 * under the name CUDA_PLUGIN_NAME (tests/plugins/cuda_emu). */
#include "probe.h"
#include "trainer/plugin.h"

#ifdef TR_CUDA_EXEC
#include "device.h"
#endif

#ifndef CUDA_PLUGIN_DESCRIPTION
#define CUDA_PLUGIN_DESCRIPTION "NVIDIA GPUs through the CUDA driver (libcuda.so.1 and cuBLAS, opened at run time; honours CUDA_VISIBLE_DEVICES)"
#endif

static const tr_device_ops ops = {
    .count = cuda_probe_count,
    .info = cuda_probe_info,
#ifdef TR_CUDA_EXEC
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .sync = cuda_sync,
    .bind = cuda_bind,
    .kernels = &cuda_kernel_table,
    .stream = cuda_stream,
    .set_precision = cuda_set_precision,
    .mark = cuda_mark,
    .mark_free = cuda_mark_free,
    .upload_after = cuda_upload_after,
#endif
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_DEVICE,
    .name = CUDA_PLUGIN_NAME,
    .version = "0.2.0",
    .description = CUDA_PLUGIN_DESCRIPTION,
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
