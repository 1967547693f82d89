/* An opened GPU (or other accelerator) as strategies use it: the device plugin's handle, its
 * memory, copies and kernel table, with errors that name the device.
 *
 *   tr_accel *a;
 *   TR_CHECK(tr_accel_open(env->gpu_backend, env->gpu_ids[0], &a));
 *   float *d;
 *   TR_CHECK(tr_accel_alloc(a, n * sizeof(float), (void **)&d));
 *   TR_CHECK(tr_accel_upload(a, d, host, n * sizeof(float)));
 *   tr_accel_kernels(a)->relu_forward(d, d, n);
 *   TR_CHECK(tr_accel_download(a, host, d, n * sizeof(float)));
 *   tr_accel_free(a, d, n * sizeof(float));
 *   tr_accel_close(a);
 *
 * A graph given an accel (tr_graph_set_accel) keeps its activations in the device's memory
 * and runs every op through the device's kernels; a replica made with
 * tr_replica_create_on holds its parameters, gradients and buffers there too. */
#ifndef TRAINER_ACCEL_H
#define TRAINER_ACCEL_H

#include "trainer/export.h"

#include <stddef.h>

#include "trainer/device_backend.h"
#include "trainer/kernels.h"
#include "trainer/runtime.h"
#include "trainer/status.h"
#include "trainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_accel tr_accel;
typedef struct tr_plugin tr_plugin; /* <trainer/plugin.h>, a layer above */

/* Opens device `index` of the device plugin `backend`, computing in the process's precision
 * (tr_get_precision, trainer/runtime.h). An error names the plugin and says why: a plugin
 * without the execution entries (discovery only), one that cannot compute in that precision,
 * no such device, the plugin's own open error. */
TR_API tr_status tr_accel_open(const tr_plugin *backend, int index, tr_accel **out);
/* Whether backend can run kernels at all (has the execution entries), without opening
 * anything: TR_OK, or open's error. For a strategy's probe. */
TR_API tr_status tr_accel_probe(const tr_plugin *backend);
TR_API void tr_accel_close(tr_accel *a);
/* "fake_gpu:0" */
TR_API const char *tr_accel_name(const tr_accel *a);
/* The device plugin's kernel table, zero-extended to this SDK's: every entry can be read (NULL
 * where the plugin does not know it); `size` is the plugin's own. */
TR_API const tr_kernels *tr_accel_kernels(const tr_accel *a);
/* What a's GEMMs compute in (fixed at open); FP32 for NULL (the host). */
TR_API tr_precision tr_accel_precision(const tr_accel *a);
/* What tensors in its memory say: {TR_DEVICE_GPU, the GPU id}. */
TR_API tr_device tr_accel_device(const tr_accel *a);

/* The memory calls, sync and the gradient helpers below (all but bind, allocated and peak)
 * also take a NULL accel, meaning host memory (tr_malloc/tr_free, memcpy, memset, nothing to
 * wait for, tr_grad_sumsq, tr_clip_grad_norm): code that holds a replica calls them with
 * r->accel and runs on the CPU and on a device alike. */
TR_API tr_status tr_accel_alloc(tr_accel *a, size_t bytes, void **p);
/* bytes: what was asked of tr_accel_alloc (for the accounting). */
TR_API void tr_accel_free(tr_accel *a, void *p, size_t bytes);
TR_API tr_status tr_accel_upload(tr_accel *a, void *dst, const void *src, size_t bytes);
TR_API tr_status tr_accel_download(tr_accel *a, void *dst, const void *src, size_t bytes);
/* Zero-fills device memory (queued like a kernel). */
TR_API void tr_accel_zero(tr_accel *a, void *p, size_t bytes);
/* Device memory to device memory (queued like a kernel; the ranges must not overlap). */
TR_API void tr_accel_copy(tr_accel *a, void *dst, const void *src, size_t bytes);
/* dst[i] += src[i] for i < n, f32 device memory (queued like a kernel, through the table's
 * copy_rows: an error naming the device when it has none). */
TR_API tr_status tr_accel_add(tr_accel *a, float *dst, const float *src, size_t n);
/* TR_OK when tr_accel_add runs on a (always on the host), else the error it would give: for a
 * strategy to refuse at setup rather than mid-step. */
TR_API tr_status tr_accel_can_add(const tr_accel *a);
/* Uploads beside the compute stream (tr_device_ops.upload_after), for inputs of the next step
 * copied while the current one runs: tr_accel_can_upload_after says whether a's plugin has the
 * entries (else marks stay NULL and tr_accel_upload_after is tr_accel_upload). A mark is a
 * point of a's compute stream (tr_accel_mark records *mark, making it when NULL); the upload
 * waits for `after` only, so no work queued after that point may read or write dst. */
TR_API int tr_accel_can_upload_after(const tr_accel *a);
TR_API tr_status tr_accel_mark(tr_accel *a, void **mark);
TR_API void tr_accel_mark_free(tr_accel *a, void *mark);
TR_API tr_status tr_accel_upload_after(tr_accel *a, void *dst, const void *src, size_t bytes, void *after);
/* Waits for queued work; the first kernel error. */
TR_API tr_status tr_accel_sync(tr_accel *a);
/* Makes a the device this thread's kernels run on. */
TR_API tr_status tr_accel_bind(tr_accel *a);
/* The native compute stream (tr_device_ops.stream) of the device last bound on this thread
 * and not closed since, or NULL (none bound, or its plugin gives none): for a device
 * communication backend created on that thread (nccl) to order its collectives after the
 * kernels that make their buffers. */
TR_API void *tr_accel_bound_stream(void);
/* tr_grad_sumsq and tr_clip_grad_norm (trainer/optim.h) on device memory, by the device's
 * sumsq and scale_inplace kernels (the same rule; the sum waits for its value). */
TR_API double tr_accel_grad_sumsq(tr_accel *a, const float *g, size_t n);
/* The same sum into a's memory at out (device memory; host memory for NULL), queued without
 * waiting where the device's table has sumsq_to (else summed, waiting, and uploaded): a step
 * collects every parameter's sum and downloads them at once. */
TR_API tr_status tr_accel_grad_sumsq_to(tr_accel *a, double *out, const float *g, size_t n);
TR_API double tr_accel_clip_grad_norm(tr_accel *a, float *g, size_t n, double max_norm, double sumsq);
/* Bytes of device memory allocated through a now, and the most at once. */
TR_API size_t tr_accel_allocated(const tr_accel *a);
TR_API size_t tr_accel_peak(const tr_accel *a);

#ifdef __cplusplus
}
#endif
#endif
