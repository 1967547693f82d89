/* runtime.h over the CUDA driver API and cuBLAS, both opened with dlopen when the first device
 * is opened: the plugin links neither, so it loads (and lists GPUs, probe.c) everywhere.
 * Kernels come from the fatbin of kernels.cu embedded in the plugin (fatbin.S), loaded into
 * each device's primary context (the one the CUDA runtime inside cuBLAS uses too). */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "runtime.h"
#include "trainer/plugin.h"

extern const unsigned char cuda_fatbin[]; /* fatbin.S */

#ifndef TR_CUDA_BUILD_VERSION
#define TR_CUDA_BUILD_VERSION "?"
#endif

typedef void *blas_handle; /* cublasHandle_t */

/* The driver and cuBLAS entries used, resolved once. */
static struct {
    int ready;
    char why[256];
    const cu_api *cu; /* the driver (plugins/common/cuda_api.h) */
    int (*blas_create)(blas_handle *);
    int (*blas_destroy)(blas_handle);
    int (*blas_set_stream)(blas_handle, cu_stream);
    int (*blas_sgemm_strided)(blas_handle, int, int, int, int, int, const float *, const float *, int, long long,
                              const float *, int, long long, const float *, float *, int, long long, int);
    int (*blas_gemm_strided_ex)(blas_handle, int, int, int, int, int, const void *, const void *, int, int, long long,
                                const void *, int, int, long long, const void *, void *, int, int, long long, int,
                                int, int);
} api;

/* cuBLAS's enumerators (cublas_api.h, library_types.h). */
enum { BLAS_R_32F = 0, BLAS_COMPUTE_32F_FAST_16BF = 75, BLAS_GEMM_DEFAULT = -1 };

static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void) {
    if (!(api.cu = cu_api_load(api.why, sizeof api.why))) return;
    const char *blas_names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *blas = NULL;
    for (size_t i = 0; i < 3 && !blas; i++) blas = dlopen(blas_names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!blas) {
        snprintf(api.why, sizeof api.why, "cuBLAS not found (libcublas.so.13 or .12: %s)", dlerror());
        return;
    }
    const tr_lib_symbol bs[] = {
        {(void **)&api.blas_create, "cublasCreate_v2"},
        {(void **)&api.blas_destroy, "cublasDestroy_v2"},
        {(void **)&api.blas_set_stream, "cublasSetStream_v2"},
        {(void **)&api.blas_sgemm_strided, "cublasSgemmStridedBatched"},
        {(void **)&api.blas_gemm_strided_ex, "cublasGemmStridedBatchedEx"},
    };
    const char *missing = tr_lib_resolve(blas, bs, sizeof bs / sizeof bs[0]);
    if (missing) {
        snprintf(api.why, sizeof api.why, "libcublas lacks %s (too old a version)", missing);
        return;
    }
    if (api.cu->init(0) != 0) {
        snprintf(api.why, sizeof api.why, "the CUDA driver did not start (cuInit)");
        return;
    }
    api.ready = 1;
}

struct cu_rt {
    char name[32];
    cu_dev dev;
    cu_ctx ctx;
    cu_stream stream;
    cu_stream copy;          /* cu_upload_beside's copies */
    cu_event copied;         /* the last of them: the compute stream waits for it */
    cu_module module;
    cu_function fn[CUDA_N_KERNELS];
    cu_event ev[2];
    int ev_pending[2];
    blas_handle blas;
};

static const char *const kernel_names[CUDA_N_KERNELS] = {
#define CUDA_KERNEL_NAME(name, barrier) #name,
    CUDA_KERNELS(CUDA_KERNEL_NAME)
#undef CUDA_KERNEL_NAME
};

/* A failed driver call as an error naming the device and the call. */
static tr_status fail(const cu_rt *r, const char *call, cu_res e) {
    const char *s = NULL;
    if (api.cu->error_string(e, &s) != 0 || !s) s = "unknown error";
    return tr_error_set(e == 2 ? TR_ERR_NOMEM : TR_ERR_DEVICE, "%s: %s: %s (CUDA error %d)", r->name, call, s, e);
}

#define CU(r, call, expr)                               \
    do {                                                \
        cu_res e_ = (expr);                             \
        if (e_ != 0) return fail((r), (call), e_);      \
    } while (0)

tr_status cu_open(int index, const char *name, cu_rt **out) {
    *out = NULL;
    pthread_once(&api_once, api_load);
    if (!api.ready) return tr_error_set(TR_ERR_DEVICE, "%s: %s", name, api.why);
    cu_rt *r = calloc(1, sizeof *r);
    if (!r) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", name);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->dev = -1;
    tr_status st = TR_OK;
    cu_res e;
    const char *call = NULL;
    if ((e = api.cu->device_get(&r->dev, index)) != 0) call = "cuDeviceGet";
    else if ((e = api.cu->primary_retain(&r->ctx, r->dev)) != 0) call = "cuDevicePrimaryCtxRetain";
    else if ((e = api.cu->ctx_set_current(r->ctx)) != 0) call = "cuCtxSetCurrent";
    else if ((e = api.cu->stream_create(&r->stream, CU_STREAM_NON_BLOCKING)) != 0) call = "cuStreamCreate";
    else if ((e = api.cu->stream_create(&r->copy, CU_STREAM_NON_BLOCKING)) != 0) call = "cuStreamCreate (copies)";
    else if ((e = api.cu->event_create(&r->copied, CU_EVENT_DISABLE_TIMING)) != 0) call = "cuEventCreate";
    else if ((e = api.cu->module_load_data(&r->module, cuda_fatbin)) != 0)
        call = "cuModuleLoadData (the plugin's kernels: built for compute capability 7.5 to 9.0 and later through "
               "PTX, with CUDA " TR_CUDA_BUILD_VERSION ", which needs a driver at least as new)";
    else if ((e = api.cu->event_create(&r->ev[0], CU_EVENT_DISABLE_TIMING)) != 0) call = "cuEventCreate";
    else if ((e = api.cu->event_create(&r->ev[1], CU_EVENT_DISABLE_TIMING)) != 0) call = "cuEventCreate";
    for (int k = 0; !call && k < CUDA_N_KERNELS; k++)
        if ((e = api.cu->module_get_function(&r->fn[k], r->module, kernel_names[k])) != 0) call = kernel_names[k];
    if (call) st = fail(r, call, e);
    if (st == TR_OK) {
        int b = api.blas_create(&r->blas);
        if (b == 0) b = api.blas_set_stream(r->blas, r->stream);
        if (b != 0) st = tr_error_set(TR_ERR_DEVICE, "%s: cuBLAS did not start (cublasCreate: status %d)", name, b);
    }
    if (st != TR_OK) {
        cu_close(r);
        return st;
    }
    *out = r;
    return TR_OK;
}

void cu_close(cu_rt *r) {
    if (!r) return;
    if (r->ctx) api.cu->ctx_set_current(r->ctx);
    if (r->copy) api.cu->stream_sync(r->copy);
    if (r->stream) api.cu->stream_sync(r->stream);
    if (r->blas) api.blas_destroy(r->blas);
    if (r->copied) api.cu->event_destroy(r->copied);
    if (r->copy) api.cu->stream_destroy(r->copy);
    for (int s = 0; s < 2; s++)
        if (r->ev[s]) api.cu->event_destroy(r->ev[s]);
    if (r->module) api.cu->module_unload(r->module);
    if (r->stream) api.cu->stream_destroy(r->stream);
    if (r->ctx) api.cu->primary_release(r->dev);
    free(r);
}

tr_status cu_bind(cu_rt *r) {
    CU(r, "cuCtxSetCurrent", api.cu->ctx_set_current(r->ctx));
    return TR_OK;
}

tr_status cu_mem_alloc(cu_rt *r, size_t bytes, void **p) {
    cu_ptr d = 0;
    CU(r, "cuMemAlloc", api.cu->mem_alloc(&d, bytes));
    *p = (void *)(uintptr_t)d;
    return TR_OK;
}

void cu_mem_free(cu_rt *r, void *p) {
    (void)r;
    if (p) api.cu->mem_free((cu_ptr)(uintptr_t)p);
}

tr_status cu_host_alloc(cu_rt *r, size_t bytes, void **p) {
    CU(r, "cuMemAllocHost", api.cu->host_alloc(p, bytes));
    return TR_OK;
}

void cu_host_free(cu_rt *r, void *p) {
    (void)r;
    if (p) api.cu->host_free(p);
}

tr_status cu_upload_async(cu_rt *r, void *dst, const void *src, size_t bytes) {
    CU(r, "cuMemcpyHtoDAsync", api.cu->htod_async((cu_ptr)(uintptr_t)dst, src, bytes, r->stream));
    return TR_OK;
}

tr_status cu_copy_async(cu_rt *r, void *dst, const void *src, size_t bytes) {
    CU(r, "cuMemcpyDtoDAsync", api.cu->dtod_async((cu_ptr)(uintptr_t)dst, (cu_ptr)(uintptr_t)src, bytes, r->stream));
    return TR_OK;
}

tr_status cu_zero_async(cu_rt *r, void *p, size_t bytes) {
    CU(r, "cuMemsetD8Async", api.cu->memset_async((cu_ptr)(uintptr_t)p, 0, bytes, r->stream));
    return TR_OK;
}

tr_status cu_download(cu_rt *r, void *dst, const void *src, size_t bytes) {
    CU(r, "cuStreamSynchronize", api.cu->stream_sync(r->stream));
    if (bytes) CU(r, "cuMemcpyDtoH", api.cu->dtoh(dst, (cu_ptr)(uintptr_t)src, bytes));
    return TR_OK;
}

tr_status cu_event_record(cu_rt *r, int slot) {
    CU(r, "cuEventRecord", api.cu->event_record(r->ev[slot], r->stream));
    r->ev_pending[slot] = 1;
    return TR_OK;
}

tr_status cu_event_wait(cu_rt *r, int slot) {
    if (!r->ev_pending[slot]) return TR_OK;
    CU(r, "cuEventSynchronize", api.cu->event_sync(r->ev[slot]));
    r->ev_pending[slot] = 0;
    return TR_OK;
}

tr_status cu_mark(cu_rt *r, void **m) {
    cu_event e = *m;
    if (!e) CU(r, "cuEventCreate", api.cu->event_create(&e, CU_EVENT_DISABLE_TIMING));
    *m = e;
    CU(r, "cuEventRecord", api.cu->event_record(e, r->stream));
    return TR_OK;
}

void cu_mark_free(cu_rt *r, void *m) {
    (void)r;
    if (m) api.cu->event_destroy((cu_event)m);
}

tr_status cu_upload_beside(cu_rt *r, void *dst, const void *src, size_t bytes, void *after, int slot) {
    if (after) CU(r, "cuStreamWaitEvent (copies)", api.cu->stream_wait_event(r->copy, (cu_event)after, 0));
    CU(r, "cuMemcpyHtoDAsync (copies)", api.cu->htod_async((cu_ptr)(uintptr_t)dst, src, bytes, r->copy));
    CU(r, "cuEventRecord", api.cu->event_record(r->ev[slot], r->copy));
    r->ev_pending[slot] = 1;
    CU(r, "cuEventRecord", api.cu->event_record(r->copied, r->copy));
    CU(r, "cuStreamWaitEvent", api.cu->stream_wait_event(r->stream, r->copied, 0));
    return TR_OK;
}

tr_status cu_sync(cu_rt *r) {
    CU(r, "cuStreamSynchronize (copies)", api.cu->stream_sync(r->copy)); /* a copy whose ordering failed too */
    CU(r, "cuStreamSynchronize", api.cu->stream_sync(r->stream));
    return TR_OK;
}

void *cu_native_stream(cu_rt *r) { return r->stream; }

tr_status cu_launch(cu_rt *r, cuda_kernel k, unsigned grid, void **args) {
    CU(r, kernel_names[k], api.cu->launch(r->fn[k], grid, 1, 1, CUDA_BLOCK, 1, 1, 0, r->stream, args, NULL));
    return TR_OK;
}

tr_status cu_sgemm_batched(cu_rt *r, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                           long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc,
                           long long sC, int batch, int bf16) {
    int s = bf16 ? api.blas_gemm_strided_ex(r->blas, ta, tb, m, n, k, &alpha, A, BLAS_R_32F, lda, sA, B, BLAS_R_32F, ldb,
                                            sB, &beta, C, BLAS_R_32F, ldc, sC, batch, BLAS_COMPUTE_32F_FAST_16BF,
                                            BLAS_GEMM_DEFAULT)
                 : api.blas_sgemm_strided(r->blas, ta, tb, m, n, k, &alpha, A, lda, sA, B, ldb, sB, &beta, C, ldc, sC,
                                          batch);
    if (s != 0)
        return tr_error_set(TR_ERR_DEVICE, "%s: %s (%d x %d x %d, batch %d) failed: status %d", r->name,
                            bf16 ? "cublasGemmStridedBatchedEx (bf16 compute)" : "cublasSgemmStridedBatched", m, n, k,
                            batch, s);
    return TR_OK;
}

tr_status cu_bf16_check(cu_rt *r) {
    int major = 0;
    CU(r, "cuDeviceGetAttribute", api.cu->device_attribute(&major, CU_ATTR_CC_MAJOR, r->dev));
    if (major < 8)
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: bf16 GEMMs need compute capability 8.0 or later (bf16 tensor "
                            "cores), this GPU has %d.x", r->name, major);
    return TR_OK;
}
