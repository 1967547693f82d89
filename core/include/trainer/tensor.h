/* Tensors: a dtype, a shape, a device and a pointer into memory someone else owns.
 *
 *   float buf[6] = {1, 2, 3, 4, 5, 6};
 *   tr_tensor t = tr_tensor_view(buf, TR_F32, 2, (int64_t[]){2, 3});
 *   int64_t n = tr_tensor_numel(&t);                // 6
 *
 * A tensor never owns its data: parameters are views into the flat parameter buffer of
 * tr_params, activations live in a graph's arena. Tensors are contiguous and row-major.
 * `grad`, when not NULL, has the same layout as `data` and gradients are added into it. */
#ifndef TRAINER_TENSOR_H
#define TRAINER_TENSOR_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TR_MAX_DIMS 6

typedef enum tr_dtype {
    TR_F32 = 0,
    TR_F64 = 1,
    TR_BF16 = 2,
    TR_F16 = 3,
    TR_I32 = 4,
    TR_I64 = 5,
    TR_U8 = 6,
    TR_DTYPE_COUNT
} tr_dtype;

typedef enum tr_device_kind { TR_DEVICE_CPU = 0, TR_DEVICE_GPU = 1 } tr_device_kind;

typedef struct tr_device {
    tr_device_kind kind;
    int index;
} tr_device;

typedef struct tr_tensor {
    void *data;                   /* borrowed */
    void *grad;                   /* borrowed; NULL when no gradient is kept */
    int64_t shape[TR_MAX_DIMS];
    int ndim;
    tr_dtype dtype;
    tr_device device;
    int requires_grad;            /* gradients flow into this tensor */
    int param;                    /* index in its tr_params, -1 if not a parameter */
    struct tr_tensor *view_of;    /* a reshape view shares data and grad with this tensor */
    int uses;                     /* graph bookkeeping: pending backward uses (parameters) */
} tr_tensor;

TR_API size_t tr_dtype_size(tr_dtype dtype);
TR_API const char *tr_dtype_name(tr_dtype dtype);
TR_API int tr_dtype_is_float(tr_dtype dtype);

/* A CPU tensor viewing `data` (borrowed) with the given shape; no gradient. */
TR_API tr_tensor tr_tensor_view(void *data, tr_dtype dtype, int ndim, const int64_t *shape);
TR_API int64_t tr_tensor_numel(const tr_tensor *t);
TR_API size_t tr_tensor_bytes(const tr_tensor *t);
/* Product of dims [from, to). */
TR_API int64_t tr_tensor_dims(const tr_tensor *t, int from, int to);
TR_API int tr_tensor_same_shape(const tr_tensor *a, const tr_tensor *b);
/* Writes "(2, 3, 4)" into buf; returns buf. */
TR_API char *tr_shape_str(const tr_tensor *t, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
