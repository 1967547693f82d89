/* Tensor metadata helpers. */
#include <stdio.h>
#include <string.h>

#include "trainer/tensor.h"

size_t tr_dtype_size(tr_dtype dtype) {
    switch (dtype) {
    case TR_F32: return 4;
    case TR_F64: return 8;
    case TR_BF16: return 2;
    case TR_F16: return 2;
    case TR_I32: return 4;
    case TR_I64: return 8;
    case TR_U8: return 1;
    default: return 0;
    }
}

const char *tr_dtype_name(tr_dtype dtype) {
    static const char *const names[] = {"f32", "f64", "bf16", "f16", "i32", "i64", "u8"};
    return (unsigned)dtype < TR_DTYPE_COUNT ? names[dtype] : "?";
}

int tr_dtype_is_float(tr_dtype dtype) { return dtype <= TR_F16; }

tr_tensor tr_tensor_view(void *data, tr_dtype dtype, int ndim, const int64_t *shape) {
    tr_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim;
    t.param = -1;
    for (int i = 0; i < ndim && i < TR_MAX_DIMS; i++) t.shape[i] = shape[i];
    return t;
}

int64_t tr_tensor_dims(const tr_tensor *t, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= t->shape[i];
    return n;
}

int64_t tr_tensor_numel(const tr_tensor *t) { return tr_tensor_dims(t, 0, t->ndim); }

size_t tr_tensor_bytes(const tr_tensor *t) {
    return (size_t)tr_tensor_numel(t) * tr_dtype_size(t->dtype);
}

int tr_tensor_same_shape(const tr_tensor *a, const tr_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

char *tr_shape_str(const tr_tensor *t, char *buf, size_t size) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "(");
    for (int i = 0; i < t->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (n < size) snprintf(buf + n, size - n, ")");
    return buf;
}
