/* The core's CPU f32 kernels as a kernel table (trainer/kernels.h): what the fake test device
 * runs, and the reference every device's kernels are tested against. */
#include <pthread.h>
#include <string.h>

#include "kernels/update.h"
#include "ops/cpu_kernels.h"

static void zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static void sumsq_to(double *out, const float *g, size_t n) { *out = optim_sumsq(g, n); }

static tr_kernels table;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill(void) {
    table = (tr_kernels){.size = sizeof table, .zero = zero, .copy = copy, .optim_update = optim_update,
                         .sumsq = optim_sumsq, .scale_inplace = optim_scale, .sumsq_to = sumsq_to};
    ops_kernels_linear(&table);
    ops_kernels_add(&table);
    ops_kernels_mul(&table);
    ops_kernels_bias_add(&table);
    ops_kernels_scale(&table);
    ops_kernels_relu(&table);
    ops_kernels_gelu(&table);
    ops_kernels_tanh(&table);
    ops_kernels_sigmoid(&table);
    ops_kernels_softmax(&table);
    ops_kernels_cross_entropy(&table);
    ops_kernels_dropout(&table);
    ops_kernels_conv2d(&table);
    ops_kernels_pool(&table);
    ops_kernels_batch_norm(&table);
    ops_kernels_copy_rows(&table);
    ops_kernels_permute(&table);
    ops_kernels_matmul(&table);
    ops_kernels_embedding(&table);
    ops_kernels_layer_norm(&table);
    ops_kernels_attention(&table);
    ops_kernels_reduce(&table);
    ops_kernels_mse(&table);
    ops_kernels_cosine(&table);
}

const tr_kernels *tr_cpu_kernels(void) {
    pthread_once(&once, fill);
    return &table;
}
