/* GPU discovery through the CUDA driver API, opened with dlopen (plugins/common/cuda_api.h):
 * the plugin links no CUDA library, so it loads everywhere and says why it sees no GPU (no
 * driver, a driver that refuses to start, no device, every device hidden by
 * CUDA_VISIBLE_DEVICES). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "probe.h"

/* The driver, initialised; NULL with the reason in why. */
static const cu_api *driver_open(char *why, size_t size) {
    const cu_api *d = cu_api_load(why, size);
    if (!d) return NULL;
    cu_res r = d->init(0);
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
        return NULL;
    }
    return d;
}

int cuda_probe_count(char *why, size_t size) {
    const cu_api *d = driver_open(why, size);
    if (!d) return 0;
    int n = 0;
    cu_res r = d->device_count(&n);
    if (r != CU_SUCCESS || n <= 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (r != CU_SUCCESS) snprintf(why, size, "cuDeviceGetCount failed (error %d)", r);
        else if (vis && !*vis) snprintf(why, size, "no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device");
        else if (vis) snprintf(why, size, "the CUDA driver found no GPU among CUDA_VISIBLE_DEVICES='%s'", vis);
        else snprintf(why, size, "the CUDA driver found no GPU");
        n = 0;
    }
    return n;
}

tr_status cuda_probe_info(int index, tr_device_info *out) {
    memset(out, 0, sizeof *out);
    char why[256];
    const cu_api *d = driver_open(why, sizeof why);
    if (!d) return tr_error_set(TR_ERR_DEVICE, "cuda: %s", why);
    int dev, major = 0, minor = 0, sms = 0, version = 0;
    size_t bytes = 0;
    tr_status st = TR_OK;
    if (d->device_get(&dev, index) != CU_SUCCESS || d->device_name(out->name, (int)sizeof out->name, dev) != CU_SUCCESS ||
        d->device_memory(&bytes, dev) != CU_SUCCESS) {
        st = tr_error_set(TR_ERR_DEVICE, "cuda: GPU %d cannot be queried", index);
    } else {
        d->device_attribute(&major, CU_ATTR_CC_MAJOR, dev);
        d->device_attribute(&minor, CU_ATTR_CC_MINOR, dev);
        d->device_attribute(&sms, CU_ATTR_SMS, dev);
        d->driver_version(&version);
        out->memory = bytes;
        snprintf(out->detail, sizeof out->detail, "compute %d.%d, %d SMs, driver CUDA %d.%d", major, minor, sms,
                 version / 1000, version % 1000 / 10);
    }
    return st;
}
