/* The CUDA driver API as the plugins use it (the cuda device plugin's discovery and runtime,
 * the nccl backend), opened with dlopen at run time: a plugin built with this links no CUDA
 * library, loads everywhere and says what is missing when it needs the driver. Compiled into
 * each plugin that uses it (plugins/common is no plugin of its own).
 *
 *   char why[256];
 *   const cu_api *cu = cu_api_load(why, sizeof why);
 *   if (!cu) return tr_error_set(TR_ERR_DEVICE, "%s", why);   // "no CUDA driver (...)"
 *   if (cu->init(0) != CU_SUCCESS) ...
 *
 * The types are cuda.h's with their C representations (CUresult is an enum, CUdevice an
 * int, the handles pointers). */
#ifndef TR_CUDA_API_H
#define TR_CUDA_API_H

#include <stddef.h>

typedef int cu_res;                /* CUresult */
typedef int cu_dev;                /* CUdevice */
typedef void *cu_ctx;              /* CUcontext */
typedef void *cu_stream;           /* CUstream */
typedef void *cu_event;            /* CUevent */
typedef void *cu_module;           /* CUmodule */
typedef void *cu_function;         /* CUfunction */
typedef unsigned long long cu_ptr; /* CUdeviceptr */

enum {
    CU_SUCCESS = 0,
    CU_NO_DEVICE = 100,
    CU_NOT_READY = 600,
    CU_STREAM_NON_BLOCKING = 1,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_PTR_MEMORY_TYPE = 2,
    CU_MEMTYPE_DEVICE = 2,
    CU_ATTR_SMS = 16,
    CU_ATTR_CC_MAJOR = 75,
    CU_ATTR_CC_MINOR = 76,
};

/* Every driver entry the plugins call. */
typedef struct cu_api {
    cu_res (*init)(unsigned);
    cu_res (*driver_version)(int *);
    cu_res (*error_name)(cu_res, const char **);
    cu_res (*error_string)(cu_res, const char **);
    cu_res (*device_count)(int *);
    cu_res (*device_get)(cu_dev *, int);
    cu_res (*device_name)(char *, int, cu_dev);
    cu_res (*device_memory)(size_t *, cu_dev);
    cu_res (*device_attribute)(int *, int, cu_dev);
    cu_res (*bus_id)(char *, int, cu_dev);
    cu_res (*primary_retain)(cu_ctx *, cu_dev);
    cu_res (*primary_release)(cu_dev);
    cu_res (*ctx_get_current)(cu_ctx *);
    cu_res (*ctx_get_device)(cu_dev *);
    cu_res (*ctx_set_current)(cu_ctx);
    cu_res (*ctx_sync)(void);
    cu_res (*stream_create)(cu_stream *, unsigned);
    cu_res (*stream_destroy)(cu_stream);
    cu_res (*stream_sync)(cu_stream);
    cu_res (*stream_query)(cu_stream);
    cu_res (*stream_wait_event)(cu_stream, cu_event, unsigned);
    cu_res (*event_create)(cu_event *, unsigned);
    cu_res (*event_destroy)(cu_event);
    cu_res (*event_record)(cu_event, cu_stream);
    cu_res (*event_sync)(cu_event);
    cu_res (*module_load_data)(cu_module *, const void *);
    cu_res (*module_unload)(cu_module);
    cu_res (*module_get_function)(cu_function *, cu_module, const char *);
    cu_res (*launch)(cu_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, cu_stream,
                     void **, void **);
    cu_res (*mem_alloc)(cu_ptr *, size_t);
    cu_res (*mem_free)(cu_ptr);
    cu_res (*host_alloc)(void **, size_t);
    cu_res (*host_free)(void *);
    cu_res (*htod_async)(cu_ptr, const void *, size_t, cu_stream);
    cu_res (*dtoh)(void *, cu_ptr, size_t);
    cu_res (*dtod_async)(cu_ptr, cu_ptr, size_t, cu_stream);
    cu_res (*memset_async)(cu_ptr, unsigned char, size_t, cu_stream);
    cu_res (*pointer_attr)(void *, int, cu_ptr);
} cu_api;

/* Opens libcuda.so.1 (once per process; it stays mapped: drivers do not support being
 * unloaded) and resolves every entry, without initialising the driver (cuInit is the
 * caller's, whose errors it words itself). NULL with the reason in why: "no CUDA driver
 * (...)" or "the CUDA driver libcuda.so.1 lacks X (too old a driver)". */
const cu_api *cu_api_load(char *why, size_t size);

#endif
