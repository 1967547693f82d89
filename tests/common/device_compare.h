/* Comparing a device plugin's kernel table with the core's CPU kernels (tr_cpu_kernels): the
 * same random inputs on the host and on the device, each device output downloaded and
 * compared with its normalised error printed and bounded (check_tensor).
 *
 *   int main(int argc, char **argv) {
 *       dc_open(argc, argv);             // the device: argv[1]'s plugin, else cuda_emu
 *       float *x = dc_rand(n, -1, 1);
 *       void *gx = dc_dev(x, n * 4);     // a device copy
 *       dc_cpu->relu_forward(y, x, n), dc_gpu->relu_forward(gy, gx, n);
 *       dc_compare("relu", gy, y, n, 1e-6);
 *       dc_free_all();
 *       return dc_close();               // checks every device byte came back
 *   }
 *
 * Skips (77) when the plugin is missing, sees no GPU, or cannot run kernels. */
#ifndef TRAINER_TEST_DEVICE_COMPARE_H
#define TRAINER_TEST_DEVICE_COMPARE_H

#include <stddef.h>

#include "trainer/accel.h"
#include "trainer/kernels.h"

extern tr_accel *dc_accel;
/* Set before dc_open: a device that cannot be opened fails the test instead of skipping it
 * (the emulator, which must always open). */
extern int dc_no_skip;
extern const tr_kernels *dc_gpu, *dc_cpu; /* the device's table, the reference */

/* Opens device 0 of the plugin argv[1] (no argument: the CUDA emulator test plugin, one GPU)
 * and binds it to this thread; skips when it cannot. */
void dc_open(int argc, char **argv);
/* Syncs, checks that no device memory is left allocated, closes; test_finish()'s status. */
int dc_close(void);

/* n values in [lo, hi] (hi itself only by rounding), fresh ones every call (malloc'd). */
float *dc_rand(size_t n, float lo, float hi);
/* A device copy of `bytes` of host h (remembered for dc_free); dc_zeros: of zeros. */
void *dc_dev(const void *h, size_t bytes);
void *dc_zeros(size_t bytes);
void dc_free(void *d);
/* Frees every device copy still live (the end of a test). */
void dc_free_all(void);

/* Downloads device d (n floats, or doubles for _f64) and compares it with the host reference
 * (tol: the normalised error allowed; 0: equal). */
void dc_compare(const char *name, void *d, const float *ref, size_t n, double tol);
void dc_compare_f64(const char *name, void *d, const double *ref, size_t n, double tol);
/* The normalised error of device d against ref (tensor_error: NaN when a value is not
 * finite), checked by nothing: for a test that asserts a result is NOT close to something. */
double dc_error(void *d, const float *ref, size_t n);

#endif
