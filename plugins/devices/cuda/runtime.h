/* Private to the CUDA plugin: the few things it asks of CUDA, below device.c and ops.c.
 *
 * driver.c implements them over the CUDA driver API and cuBLAS, both opened with dlopen when
 * a device is opened (so the plugin still loads, and lists GPUs, where neither exists), with
 * the kernels of kernels.cu embedded as a fatbin. The tests implement them again over host
 * memory with an emulator that runs kernels.cu on the CPU (tests/plugins/cuda_emu), which is
 * how everything above this line is tested where no GPU is (it also replaces probe.c's
 * discovery).
 *
 * Ordering: one compute stream per opened device; launches, uploads, memsets, device copies
 * and GEMMs run on it in call order; cu_download waits for it. Beside it a copy stream runs
 * cu_upload_beside's copies, each after the mark it names, and the compute stream's later work
 * after them. Errors are set with tr_error_set naming the device ("cuda:0: ...") and
 * returned. */
#ifndef TR_CUDA_RUNTIME_H
#define TR_CUDA_RUNTIME_H

#include <stddef.h>

#include "kernels.h"
#include "trainer/device_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cu_rt cu_rt;

/* Opens visible GPU `index`: its context made current on this thread, a stream, the kernels,
 * a cuBLAS handle. name ("cuda:0") prefixes its errors. */
tr_status cu_open(int index, const char *name, cu_rt **out);
void cu_close(cu_rt *r);
/* Makes r's context current on the calling thread. */
tr_status cu_bind(cu_rt *r);

/* Device memory straight from CUDA (device.c caches it). */
tr_status cu_mem_alloc(cu_rt *r, size_t bytes, void **p);
void cu_mem_free(cu_rt *r, void *p);
/* Page-locked host memory (staging). */
tr_status cu_host_alloc(cu_rt *r, size_t bytes, void **p);
void cu_host_free(cu_rt *r, void *p);

/* Queued: host (page-locked) to device; device to device; zero-fill. */
tr_status cu_upload_async(cu_rt *r, void *dst, const void *src, size_t bytes);
tr_status cu_copy_async(cu_rt *r, void *dst, const void *src, size_t bytes);
tr_status cu_zero_async(cu_rt *r, void *p, size_t bytes);
/* Waits for the stream, then copies device src to host dst. */
tr_status cu_download(cu_rt *r, void *dst, const void *src, size_t bytes);
/* Events on the stream, one per staging slot (slot < 2): record now, wait on the host. */
tr_status cu_event_record(cu_rt *r, int slot);
tr_status cu_event_wait(cu_rt *r, int slot);
/* Marks (events) of points of the compute stream: *m (NULL: a new one) recorded where the
 * work queued so far ends. */
tr_status cu_mark(cu_rt *r, void **m);
void cu_mark_free(cu_rt *r, void *m);
/* Queued on the copy stream: after mark `after` (NULL: at once), host (page-locked) src to
 * device dst; then staging slot `slot`'s event (cu_event_wait waits for this copy); and the
 * compute stream's work queued after this call waits for the copy. */
tr_status cu_upload_beside(cu_rt *r, void *dst, const void *src, size_t bytes, void *after, int slot);
/* Waits for everything queued (the copy stream's copies with it). */
tr_status cu_sync(cu_rt *r);
/* The stream's native handle (a CUstream), for tr_device_ops.stream. */
void *cu_native_stream(cu_rt *r);

/* Queues kernel k on grid blocks of CUDA_BLOCK threads; args as cuLaunchKernel's: one
 * pointer per kernel parameter, to a value of exactly that parameter's type. */
tr_status cu_launch(cu_rt *r, cuda_kernel k, unsigned grid, void **args);

/* batch products C = alpha op(A) op(B) + beta C, column-major as cuBLAS documents them (ta,
 * tb: 1 transposes; with beta 0, C is not read), the i-th on A + i sA, B + i sB, C + i sC
 * (cublasSgemmStridedBatched; batch 1 is one product). bf16: the products multiply bf16
 * roundings of A's and B's elements, accumulating in fp32 (cublasGemmStridedBatchedEx with
 * CUBLAS_COMPUTE_32F_FAST_16BF: fp32 in memory, bf16 tensor cores); C stays fp32. */
tr_status cu_sgemm_batched(cu_rt *r, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                           long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc,
                           long long sC, int batch, int bf16);
/* TR_OK when cu_sgemm_batched can take bf16 on r's GPU (compute capability 8.0 or later: bf16
 * tensor cores), else an error saying why. */
tr_status cu_bf16_check(cu_rt *r);

#ifdef __cplusplus
}
#endif
#endif
