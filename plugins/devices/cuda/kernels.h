/* Private to the CUDA plugin: the device kernels of kernels.cu, by name. ops.c launches them
 * by index (enum cuda_kernel), the runtime finds each by its name in the loaded module
 * (driver.c: cuModuleGetFunction; the CPU emulator of the tests: a table of calls).
 *
 * X(name, barrier): barrier is 1 for kernels whose threads meet at __syncthreads or
 * exchange values with warp shuffles (one block per row or a block reduction); the
 * emulator runs only those threads as fibers. Block size: CUDA_BLOCK threads for every
 * kernel (the block reductions assume it). */
#ifndef TR_CUDA_KERNELS_H
#define TR_CUDA_KERNELS_H

#include <stdint.h>

#include "trainer/kernels.h" /* tr_conv2d_dims, tr_pool2d_dims: kernels take them by value */

#define CUDA_BLOCK 256
/* Most blocks of the first pass of the sum of squares (partial sums, then one block adds
 * them). */
#define CUDA_SUMSQ_PARTS 256

#define CUDA_KERNELS(X)         \
    X(k_add_fwd, 0)             \
    X(k_accum, 0)               \
    X(k_colsum, 0)              \
    X(k_mul_fwd, 0)             \
    X(k_mul_bwd_da, 0)          \
    X(k_scale_inplace, 0)       \
    X(k_relu_fwd, 0)            \
    X(k_relu_bwd, 0)            \
    X(k_gelu_fwd, 0)            \
    X(k_gelu_bwd, 0)            \
    X(k_tanh_fwd, 0)            \
    X(k_tanh_bwd, 0)            \
    X(k_sigmoid_fwd, 0)         \
    X(k_sigmoid_bwd, 0)         \
    X(k_dropout_fwd, 0)         \
    X(k_dropout_bwd, 0)         \
    X(k_softmax_fwd, 1)         \
    X(k_softmax_bwd, 1)         \
    X(k_softmax_mask_fwd, 1)    \
    X(k_log_softmax_fwd, 1)     \
    X(k_log_softmax_bwd, 1)     \
    X(k_ce_fwd, 1)              \
    X(k_ce_bwd, 0)              \
    X(k_loss_total, 0)          \
    X(k_sgd, 0)                 \
    X(k_adam, 0)                \
    X(k_dsum_part, 1)           \
    X(k_sumsq_final, 1)         \
    X(k_im2col, 0)              \
    X(k_col2im, 0)              \
    X(k_conv_out, 0)            \
    X(k_conv_dy, 0)             \
    X(k_rowsum, 1)              \
    X(k_maxpool_fwd, 0)         \
    X(k_maxpool_bwd, 0)         \
    X(k_avgpool_fwd, 0)         \
    X(k_avgpool_bwd, 0)         \
    X(k_bn_planes, 1)           \
    X(k_bn_planes_short, 0)     \
    X(k_bn_plane_sums, 0)       \
    X(k_bn_plane_sqdevs, 0)     \
    X(k_bn_divide, 0)           \
    X(k_bn_finish, 0)           \
    X(k_bn_fwd, 0)              \
    X(k_bn_dsums, 1)            \
    X(k_bn_dx, 0)               \
    X(k_bn_param_grads, 0)      \
    X(k_copy_rows, 0)           \
    X(k_permute, 0)             \
    X(k_embed_fwd, 0)           \
    X(k_embed_bwd, 1)           \
    X(k_ln_fwd, 1)              \
    X(k_ln_dx, 1)               \
    X(k_ln_params, 1)           \
    X(k_sum_dim_fwd, 0)         \
    X(k_sum_dim_bwd, 0)         \
    X(k_sum_all_bwd, 0)         \
    X(k_mse_bwd, 0)             \
    X(k_cos_fwd, 1)             \
    X(k_cos_bwd, 1)

typedef enum cuda_kernel {
#define CUDA_KERNEL_ENUM(name, barrier) CUDA_##name,
    CUDA_KERNELS(CUDA_KERNEL_ENUM)
#undef CUDA_KERNEL_ENUM
    CUDA_N_KERNELS
} cuda_kernel;

#endif
