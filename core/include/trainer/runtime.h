/* Process-wide runtime settings: version, CPU thread count, denormals, the devices' precision.
 *
 *   tr_set_num_threads(2);   // OpenMP kernels and OpenBLAS both use 2 threads
 *
 * Several ranks on one host each call tr_set_num_threads(cores / ranks) so that neither the
 * core's kernels nor BLAS oversubscribe the machine. */
#ifndef TRAINER_RUNTIME_H
#define TRAINER_RUNTIME_H

#include "trainer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TR_ABI_MAJOR 0
#define TR_ABI_MINOR 20

TR_API const char *tr_version(void);
/* Sets the threads used by the core's kernels and by BLAS; n <= 0 means TRAINER_NUM_THREADS,
 * else OMP_NUM_THREADS, else the cores this process may run on. */
TR_API void tr_set_num_threads(int n);
TR_API int tr_get_num_threads(void);
/* For a thread that owns a replica (strategy dataparallel): the core's kernels called from
 * this thread use n threads (OpenMP's setting is per thread), and BLAS uses n too (process
 * wide: set it from one thread before starting the others with the same n). Other threads
 * keep their OpenMP setting. */
TR_API void tr_set_thread_local_threads(int n);
/* Denormal (subnormal) floats, flushed to zero when on: results below FLT_MIN become 0 and
 * such inputs read as 0 (x86 MXCSR FTZ+DAZ, Arm FPCR FZ). Arithmetic on denormals takes a
 * microcode path 50-150x slower on x86; training produces them in decaying state (Adam's
 * first moment of a parameter whose gradient is 0 shrinks by beta1 per step) and never needs
 * them. Applies to the calling thread and the OpenMP pool (which BLAS uses); threads created
 * later inherit the calling thread's setting. Returns 1 where the CPU has the control, else 0.
 * The trainer turns it on for every run (trainer.flush_denormals, default true). */
TR_API int tr_set_flush_denormals(int on);
/* The arithmetic of devices opened from now on (tr_accel_open; trainer.precision). FP32: every
 * kernel in fp32. BF16_MIXED: the GEMMs (linear, matmul, attention's products, conv2d) multiply
 * their operands in bf16 (device_backend.h: set_precision) with fp32 accumulation and fp32
 * results; every other
 * kernel, the parameters (master weights), gradients and optimizer state stay fp32. The setting
 * is for devices, and a device whose plugin cannot honour it is refused when opened
 * (tr_accel_open, tr_accel_probe); a run on the CPU applies it to the CPU's GEMMs itself
 * where the CPU has AVX512-BF16 (docs/gpu.md, Precision). */
typedef enum tr_precision { TR_PRECISION_FP32 = 0, TR_PRECISION_BF16_MIXED = 1 } tr_precision;
TR_API void tr_set_precision(tr_precision p);
TR_API tr_precision tr_get_precision(void);
/* "fp32", "bf16-mixed" (the config's spelling). */
TR_API const char *tr_precision_name(tr_precision p);
/* Seconds on a monotonic clock (for rates and durations). */
TR_API double tr_now(void);
/* Cores this process may run on (its affinity mask). */
TR_API int tr_cpu_count(void);
/* 1 when process pid (> 0) has ended: it no longer exists, or it is an exited child not yet
 * reaped (a zombie still answers kill(pid, 0)); for backends watching their peers. A peer
 * may have finished its part and exited since the caller last looked: read what it published
 * again after a 1. (The tests' fault point TRAINER_FAULT_LATE_LIVENESS_MS delays the look.) */
TR_API int tr_process_gone(int pid);

#ifdef __cplusplus
}
#endif
#endif
