/* The CUDA driver API opened at run time (see cuda_api.h). */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include "cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "trainer/plugin.h"

static cu_api api;
static char api_why[256]; /* "" once loaded */
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!lib) {
        const char *e = dlerror();
        snprintf(api_why, sizeof api_why, "no CUDA driver (%s)", e ? e : "libcuda.so.1 not found");
        return;
    }
    const tr_lib_symbol syms[] = {
        {(void **)&api.init, "cuInit"},
        {(void **)&api.driver_version, "cuDriverGetVersion"},
        {(void **)&api.error_name, "cuGetErrorName"},
        {(void **)&api.error_string, "cuGetErrorString"},
        {(void **)&api.device_count, "cuDeviceGetCount"},
        {(void **)&api.device_get, "cuDeviceGet"},
        {(void **)&api.device_name, "cuDeviceGetName"},
        {(void **)&api.device_memory, "cuDeviceTotalMem_v2"},
        {(void **)&api.device_attribute, "cuDeviceGetAttribute"},
        {(void **)&api.bus_id, "cuDeviceGetPCIBusId"},
        {(void **)&api.primary_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&api.primary_release, "cuDevicePrimaryCtxRelease_v2"},
        {(void **)&api.ctx_get_current, "cuCtxGetCurrent"},
        {(void **)&api.ctx_get_device, "cuCtxGetDevice"},
        {(void **)&api.ctx_set_current, "cuCtxSetCurrent"},
        {(void **)&api.ctx_sync, "cuCtxSynchronize"},
        {(void **)&api.stream_create, "cuStreamCreate"},
        {(void **)&api.stream_destroy, "cuStreamDestroy_v2"},
        {(void **)&api.stream_sync, "cuStreamSynchronize"},
        {(void **)&api.stream_query, "cuStreamQuery"},
        {(void **)&api.stream_wait_event, "cuStreamWaitEvent"},
        {(void **)&api.event_create, "cuEventCreate"},
        {(void **)&api.event_destroy, "cuEventDestroy_v2"},
        {(void **)&api.event_record, "cuEventRecord"},
        {(void **)&api.event_sync, "cuEventSynchronize"},
        {(void **)&api.module_load_data, "cuModuleLoadData"},
        {(void **)&api.module_unload, "cuModuleUnload"},
        {(void **)&api.module_get_function, "cuModuleGetFunction"},
        {(void **)&api.launch, "cuLaunchKernel"},
        {(void **)&api.mem_alloc, "cuMemAlloc_v2"},
        {(void **)&api.mem_free, "cuMemFree_v2"},
        {(void **)&api.host_alloc, "cuMemAllocHost_v2"},
        {(void **)&api.host_free, "cuMemFreeHost"},
        {(void **)&api.htod_async, "cuMemcpyHtoDAsync_v2"},
        {(void **)&api.dtoh, "cuMemcpyDtoH_v2"},
        {(void **)&api.dtod_async, "cuMemcpyDtoDAsync_v2"},
        {(void **)&api.memset_async, "cuMemsetD8Async"},
        {(void **)&api.pointer_attr, "cuPointerGetAttribute"},
    };
    const char *missing = tr_lib_resolve(lib, syms, sizeof syms / sizeof syms[0]);
    if (missing) snprintf(api_why, sizeof api_why, "the CUDA driver libcuda.so.1 lacks %s (too old a driver)", missing);
}

const cu_api *cu_api_load(char *why, size_t size) {
    pthread_once(&api_once, api_load);
    if (api_why[0]) {
        snprintf(why, size, "%s", api_why);
        return NULL;
    }
    return &api;
}
