/* GPU discovery through the CUDA driver API, opened with dlopen: the plugin links no CUDA
 * library, so it loads everywhere and says why it sees no GPU (no driver, a driver that
 * refuses to start, no device, every device hidden by CUDA_VISIBLE_DEVICES). The driver
 * library stays mapped after the first use (RTLD_NODELETE): drivers do not support being
 * unloaded once initialised. */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "trainer/plugin.h"

/* The few driver API entries used, with their C types (cuda.h: CUresult is an enum, CUdevice
 * an int). */
typedef int cu_result;
enum { CU_SUCCESS = 0, CU_NO_DEVICE = 100, CU_ATTR_SMS = 16, CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 };

typedef struct cuda_driver {
    void *lib;
    cu_result (*init)(unsigned int flags);
    cu_result (*device_count)(int *count);
    cu_result (*device_get)(int *device, int ordinal);
    cu_result (*device_name)(char *name, int len, int device);
    cu_result (*device_memory)(size_t *bytes, int device);
    cu_result (*device_attribute)(int *value, int attribute, int device);
    cu_result (*error_name)(cu_result error, const char **name);
    cu_result (*driver_version)(int *version);
} cuda_driver;

/* Opens libcuda.so.1 and initialises it; 0 with the reason in why on failure. */
static int driver_open(cuda_driver *d, char *why, size_t size) {
    memset(d, 0, sizeof *d);
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!d->lib) {
        const char *e = dlerror();
        snprintf(why, size, "no CUDA driver (%s)", e ? e : "libcuda.so.1 not found");
        return 0;
    }
    const tr_lib_symbol syms[] = {
        {(void **)&d->init, "cuInit"},
        {(void **)&d->device_count, "cuDeviceGetCount"},
        {(void **)&d->device_get, "cuDeviceGet"},
        {(void **)&d->device_name, "cuDeviceGetName"},
        {(void **)&d->device_memory, "cuDeviceTotalMem_v2"},
        {(void **)&d->device_attribute, "cuDeviceGetAttribute"},
        {(void **)&d->error_name, "cuGetErrorName"},
        {(void **)&d->driver_version, "cuDriverGetVersion"},
    };
    const char *missing = tr_lib_resolve(d->lib, syms, sizeof syms / sizeof syms[0]);
    if (missing) {
        snprintf(why, size, "the CUDA driver libcuda.so.1 lacks %s (too old a driver)", missing);
        dlclose(d->lib);
        return 0;
    }
    cu_result r = d->init(0);
    if (r != CU_SUCCESS) {
        const char *name = NULL;
        if (d->error_name(r, &name) != CU_SUCCESS || !name) name = "unknown error";
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (r == CU_NO_DEVICE && vis && !*vis)
            snprintf(why, size, "no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device");
        else if (r == CU_NO_DEVICE && vis)
            snprintf(why, size, "the CUDA driver found no GPU among CUDA_VISIBLE_DEVICES='%s' (cuInit: %s)", vis, name);
        else if (r == CU_NO_DEVICE)
            snprintf(why, size, "the CUDA driver found no GPU (cuInit: %s)", name);
        else
            snprintf(why, size, "the CUDA driver did not start (cuInit: %s, error %d)", name, r);
        dlclose(d->lib);
        return 0;
    }
    return 1;
}

int cuda_probe_count(char *why, size_t size) {
    cuda_driver d;
    if (!driver_open(&d, why, size)) return 0;
    int n = 0;
    cu_result r = d.device_count(&n);
    if (r != CU_SUCCESS || n <= 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (r != CU_SUCCESS) snprintf(why, size, "cuDeviceGetCount failed (error %d)", r);
        else if (vis && !*vis) snprintf(why, size, "no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device");
        else if (vis) snprintf(why, size, "the CUDA driver found no GPU among CUDA_VISIBLE_DEVICES='%s'", vis);
        else snprintf(why, size, "the CUDA driver found no GPU");
        n = 0;
    }
    dlclose(d.lib);
    return n;
}

tr_status cuda_probe_info(int index, tr_device_info *out) {
    memset(out, 0, sizeof *out);
    char why[256];
    cuda_driver d;
    if (!driver_open(&d, why, sizeof why)) return tr_error_set(TR_ERR_DEVICE, "cuda: %s", why);
    int dev, major = 0, minor = 0, sms = 0, version = 0;
    size_t bytes = 0;
    tr_status st = TR_OK;
    if (d.device_get(&dev, index) != CU_SUCCESS || d.device_name(out->name, (int)sizeof out->name, dev) != CU_SUCCESS ||
        d.device_memory(&bytes, dev) != CU_SUCCESS) {
        st = tr_error_set(TR_ERR_DEVICE, "cuda: GPU %d cannot be queried", index);
    } else {
        d.device_attribute(&major, CU_ATTR_CC_MAJOR, dev);
        d.device_attribute(&minor, CU_ATTR_CC_MINOR, dev);
        d.device_attribute(&sms, CU_ATTR_SMS, dev);
        d.driver_version(&version);
        out->memory = bytes;
        snprintf(out->detail, sizeof out->detail, "compute %d.%d, %d SMs, driver CUDA %d.%d", major, minor, sms,
                 version / 1000, version % 1000 / 10);
    }
    dlclose(d.lib);
    return st;
}
