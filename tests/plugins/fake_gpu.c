/* Test device plugin `fake_gpu`: reports TRAINER_FAKE_GPUS GPUs (unset: none) so the
 * selection rule, `trainer devices` and `trainer plan` can be tested end to end on a machine
 * without a GPU. Like the CUDA driver it honours CUDA_VISIBLE_DEVICES: a comma-separated list
 * of device indexes, read up to the first that does not exist; an empty list hides them all.
 * Each device has TRAINER_FAKE_GPU_MIB MiB of memory (default 16384). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/device_backend.h"
#include "trainer/plugin.h"

enum { MAX_FAKE = 64 };

/* A non-negative integer from the whole of s, or -1. */
static long parse_count(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return *s && !*end && !errno && v >= 0 ? v : -1;
}

/* Devices installed (TRAINER_FAKE_GPUS), 0 with why when unset or bad. */
static int installed(char *why, size_t size) {
    const char *s = getenv("TRAINER_FAKE_GPUS");
    if (!s) {
        snprintf(why, size, "TRAINER_FAKE_GPUS is not set (the test plugin's GPU count)");
        return 0;
    }
    long n = parse_count(s);
    if (n < 0 || n > MAX_FAKE) {
        snprintf(why, size, "TRAINER_FAKE_GPUS='%s' is not a count from 0 to %d", s, MAX_FAKE);
        return 0;
    }
    if (n == 0) snprintf(why, size, "TRAINER_FAKE_GPUS=0");
    return (int)n;
}

/* Visible devices after CUDA_VISIBLE_DEVICES, as the driver reads it. */
static int visible(int n, char *why, size_t size) {
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis || n == 0) return n;
    int seen = 0;
    for (const char *p = vis; *p;) {
        size_t len = strcspn(p, ",");
        char tok[32];
        if (len == 0 || len >= sizeof tok) break;
        memcpy(tok, p, len);
        tok[len] = 0;
        long id = parse_count(tok);
        if (id < 0 || id >= n) break;
        seen++;
        p += len + (p[len] == ',');
    }
    if (seen == 0 && !*vis) snprintf(why, size, "no GPU visible: CUDA_VISIBLE_DEVICES='' hides every device");
    else if (seen == 0) snprintf(why, size, "no GPU among CUDA_VISIBLE_DEVICES='%s' (%d installed)", vis, n);
    return seen;
}

static int count(char *why, size_t size) {
    return visible(installed(why, size), why, size);
}

static tr_status info(int index, tr_device_info *out) {
    char why[256];
    int n = count(why, sizeof why);
    memset(out, 0, sizeof *out);
    if (index < 0 || index >= n) return tr_error_set(TR_ERR_DEVICE, "fake_gpu: no device %d (%d visible)", index, n);
    const char *mib = getenv("TRAINER_FAKE_GPU_MIB");
    long m = mib ? parse_count(mib) : 16384;
    snprintf(out->name, sizeof out->name, "Fake GPU %d", index);
    out->memory = (uint64_t)(m > 0 ? m : 16384) << 20;
    snprintf(out->detail, sizeof out->detail, "test plugin: kernels run on the CPU");
    return TR_OK;
}

static const tr_device_ops ops = {.count = count, .info = info};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_DEVICE,
    .name = "fake_gpu",
    .version = "0.1.0",
    .description = "test plugin: TRAINER_FAKE_GPUS fake GPUs (honours CUDA_VISIBLE_DEVICES)",
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
