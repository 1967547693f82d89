/* See device_compare.h. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "device_compare.h"

#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "trainer/trainer.h"

#define CUDA_EMU TRAINER_BINARY_DIR "/test_plugins/cuda_emu/cuda_emu.so"

tr_accel *dc_accel;
int dc_no_skip;
const tr_kernels *dc_gpu, *dc_cpu;
static tr_plugin *plugin;

/* Device copies of host arrays, remembered with their sizes for dc_free. */
static struct {
    void *d;
    size_t bytes;
} live[64];

void dc_open(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : CUDA_EMU;
    if (argc <= 1) setenv("TRAINER_CUDA_EMU_GPUS", "1", 1);
    char why[512];
    if (tr_plugin_open(path, "test", &plugin) != TR_OK) {
        snprintf(why, sizeof why, "cannot load %s: %s", path, tr_error_msg());
        test_skip(why);
    }
    if (tr_accel_probe(plugin) != TR_OK || tr_accel_open(plugin, 0, &dc_accel) != TR_OK) {
        snprintf(why, sizeof why, "%s cannot run kernels here: %s", path, tr_error_msg());
        tr_plugin_close(plugin);
        if (dc_no_skip) {
            CHECK(0, "%s", why);
            exit(test_finish());
        }
        test_skip(why);
    }
    printf("device %s\n", tr_accel_name(dc_accel));
    dc_gpu = tr_accel_kernels(dc_accel);
    dc_cpu = tr_cpu_kernels();
    CHECK(tr_accel_bind(dc_accel) == TR_OK, "bind: %s", tr_error_msg());
}

int dc_close(void) {
    CHECK(tr_accel_sync(dc_accel) == TR_OK, "final sync: %s", tr_error_msg());
    CHECK(tr_accel_allocated(dc_accel) == 0, "%zu bytes of device memory still allocated",
          tr_accel_allocated(dc_accel));
    tr_accel_close(dc_accel);
    tr_plugin_close(plugin);
    return test_finish();
}

float *dc_rand(size_t n, float lo, float hi) {
    static uint64_t salt;
    float *p = malloc((n ? n : 1) * sizeof *p);
    salt++;
    for (size_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * (float)(0.5 * (test_value(i, salt) + 1.0));
    return p;
}

void *dc_dev(const void *h, size_t bytes) {
    void *d = NULL;
    CHECK(tr_accel_alloc(dc_accel, bytes, &d) == TR_OK, "alloc %zu: %s", bytes, tr_error_msg());
    if (d) CHECK(tr_accel_upload(dc_accel, d, h, bytes) == TR_OK, "upload: %s", tr_error_msg());
    for (int i = 0; i < 64; i++)
        if (!live[i].d) {
            live[i].d = d, live[i].bytes = bytes;
            break;
        }
    return d;
}

void *dc_zeros(size_t bytes) {
    void *h = calloc(bytes ? bytes : 1, 1), *d = dc_dev(h, bytes ? bytes : 1);
    free(h);
    return d;
}

void dc_free(void *d) {
    for (int i = 0; i < 64; i++)
        if (live[i].d == d) {
            tr_accel_free(dc_accel, d, live[i].bytes);
            live[i].d = NULL;
            return;
        }
    CHECK(0, "dc_free of unknown %p", d);
}

void dc_free_all(void) {
    for (int i = 0; i < 64; i++)
        if (live[i].d) dc_free(live[i].d);
}

static void compare_as(const char *name, void *d, const void *ref, size_t n, size_t elem, double tol) {
    void *got = malloc((n ? n : 1) * elem);
    CHECK(tr_accel_sync(dc_accel) == TR_OK, "%s: sync: %s", name, tr_error_msg());
    CHECK(tr_accel_download(dc_accel, got, d, n * elem) == TR_OK, "%s: download: %s", name, tr_error_msg());
    if (elem == sizeof(double)) check_tensor_f64(name, got, ref, (int64_t)n, tol);
    else check_tensor(name, got, ref, (int64_t)n, tol);
    free(got);
}

void dc_compare(const char *name, void *d, const float *ref, size_t n, double tol) {
    compare_as(name, d, ref, n, sizeof(float), tol);
}

void dc_compare_f64(const char *name, void *d, const double *ref, size_t n, double tol) {
    compare_as(name, d, ref, n, sizeof(double), tol);
}

double dc_error(void *d, const float *ref, size_t n) {
    float *got = malloc((n ? n : 1) * sizeof *got);
    CHECK(tr_accel_download(dc_accel, got, d, n * sizeof *got) == TR_OK, "download: %s", tr_error_msg());
    double e = tensor_error(got, ref, (int64_t)n);
    free(got);
    return e;
}
