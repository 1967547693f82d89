/* Fuzz target `safetensors`: the reader (core/src/run/safetensors.c) on a whole file. An
 * accepted file must describe only tensors that lie inside it: every tensor's bytes (shape x
 * dtype, computed here without overflow) are read, so a tensor reaching past the file is an
 * ASan report. Lookups by name and metadata must agree with the list, and the writer must
 * write back what the reader accepted (up to 64 tensors, 1 MiB), read again to the same
 * tensors. A refusal must name the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "trainer/safetensors.h"

#define MAX_WRITE_BACK 64
#define MAX_WRITE_BYTES (1 << 20)

/* Bytes of a tensor, or fails when its shape and dtype overflow 64 bits. */
static size_t tensor_bytes(const tr_st_entry *e, const char *path) {
    size_t n = tr_dtype_size(e->dtype);
    if (!n || e->ndim < 0 || e->ndim > TR_MAX_DIMS) fuzz_fail("%s: '%s' has dtype %d, %d dims", path, e->name, (int)e->dtype, e->ndim);
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] < 0) fuzz_fail("%s: '%s' dim %d is %lld", path, e->name, d, (long long)e->shape[d]);
        if (__builtin_mul_overflow(n, (size_t)e->shape[d], &n))
            fuzz_fail("%s: accepted tensor '%s' whose size overflows (dim %d = %lld)", path, e->name, d, (long long)e->shape[d]);
    }
    return n;
}

static int same_entry(const tr_st_entry *a, const tr_st_entry *b, size_t bytes) {
    return a->dtype == b->dtype && a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0 &&
           (bytes == 0 || memcmp(a->data, b->data, bytes) == 0);
}

static void write_back(tr_safetensors *f, const char *path) {
    int n = tr_safetensors_count(f);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += tensor_bytes(tr_safetensors_at(f, i), path);
    if (n > MAX_WRITE_BACK || total > MAX_WRITE_BYTES) return;
    tr_st_entry e[MAX_WRITE_BACK];
    for (int i = 0; i < n; i++) e[i] = *tr_safetensors_at(f, i);
    char out[1024];
    snprintf(out, sizeof out, "%s/back.safetensors", fuzz_scratch_dir());
    tr_error_clear();
    if (tr_safetensors_write(out, e, n, NULL, 0) != TR_OK)
        fuzz_fail("%s: the writer refuses what the reader accepted: %s", path, tr_error_msg());
    tr_safetensors *g;
    if (tr_safetensors_open(&g, out) != TR_OK) fuzz_fail("%s: cannot read back its copy: %s", path, tr_error_msg());
    if (tr_safetensors_count(g) != n) fuzz_fail("%s: %d tensors, %d after writing back", path, n, tr_safetensors_count(g));
    for (int i = 0; i < n; i++) {
        const tr_st_entry *b = tr_safetensors_find(g, e[i].name);
        if (!b || !same_entry(&e[i], b, tensor_bytes(&e[i], path)))
            fuzz_fail("%s: tensor '%s' differs after writing back", path, e[i].name);
    }
    tr_safetensors_close(g);
    unlink(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    tr_safetensors *f;
    tr_error_clear();
    if (tr_safetensors_open(&f, path) != TR_OK) {
        const char *needles[] = {path, NULL};
        fuzz_expect_message("safetensors", needles);
        close(fd);
        return 0;
    }
    int n = tr_safetensors_count(f);
    volatile uint8_t sum = 0;
    for (int i = 0; i < n; i++) {
        const tr_st_entry *e = tr_safetensors_at(f, i);
        if (!e || !e->name) fuzz_fail("%s: tensor %d of %d missing", path, i, n);
        size_t bytes = tensor_bytes(e, path);
        if (bytes > size) fuzz_fail("%s: tensor '%s' of %zu bytes in a %zu-byte file", path, e->name, bytes, size);
        const uint8_t *p = e->data;
        for (size_t k = 0; k < bytes; k++) sum += p[k];
        if (tr_safetensors_find(f, e->name) != e) fuzz_fail("%s: find('%s') is not its entry", path, e->name);
    }
    (void)sum;
    if (tr_safetensors_at(f, n) || tr_safetensors_at(f, -1)) fuzz_fail("%s: an entry past the list", path);
    (void)tr_safetensors_meta(f, "format");
    (void)tr_safetensors_meta(f, "trainer_kind");
    write_back(f, path);
    tr_safetensors_close(f);
    close(fd);
    return 0;
}
