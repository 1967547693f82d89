/* The CUDA plugin's kernel table (trainer/kernels.h): each entry launches kernels.cu's kernel
 * (or cuBLAS) on the device bound to the calling thread, with the arguments the core's CPU
 * kernel of that name takes. Entries return nothing: a failed launch is kept for the next
 * sync (cuda_fail), which reports it naming the entry. */
#include "ops_impl.h"

static void zero(void *p, size_t bytes) {
    cuda_device *d = cuda_current();
    if (!d || !bytes) return;
    tr_status st = cu_zero_async(d->rt, p, bytes);
    if (st != TR_OK) cuda_fail(d, st, "zero");
}

static void copy(void *dst, const void *src, size_t bytes) {
    cuda_device *d = cuda_current();
    if (!d || !bytes || dst == src) return;
    tr_status st = cu_copy_async(d->rt, dst, src, bytes);
    if (st != TR_OK) cuda_fail(d, st, "copy");
}

void *cuda_scratch(cuda_device *d, size_t bytes, const char *what) {
    void *p = NULL;
    tr_status st = cuda_alloc(d, bytes, &p);
    if (st != TR_OK) cuda_fail(d, st, what);
    return st == TR_OK ? p : NULL;
}

tr_kernels cuda_kernel_table;

/* Filled once, when the plugin is loaded, from each family's entries; read-only after. */
__attribute__((constructor)) static void fill_table(void) {
    tr_kernels *t = &cuda_kernel_table;
    t->size = sizeof *t;
    t->zero = zero;
    t->copy = copy;
    cuda_fill_gemm(t);
    cuda_fill_elementwise(t);
    cuda_fill_rows(t);
    cuda_fill_optim(t);
    cuda_fill_conv(t);
    cuda_fill_norm(t);
    cuda_fill_layout(t);
    cuda_fill_attention(t);
}
