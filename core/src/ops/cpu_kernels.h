/* Private: each op file's CPU f32 kernels into the table tr_cpu_kernels returns
 * (trainer/kernels.h), one function per op file. */
#ifndef TRAINER_OPS_CPU_KERNELS_H
#define TRAINER_OPS_CPU_KERNELS_H

#include "trainer/kernels.h"

void ops_kernels_linear(tr_kernels *k);
void ops_kernels_add(tr_kernels *k);
void ops_kernels_mul(tr_kernels *k);
void ops_kernels_bias_add(tr_kernels *k);
void ops_kernels_scale(tr_kernels *k);
void ops_kernels_relu(tr_kernels *k);
void ops_kernels_gelu(tr_kernels *k);
void ops_kernels_tanh(tr_kernels *k);
void ops_kernels_sigmoid(tr_kernels *k);
void ops_kernels_softmax(tr_kernels *k);
void ops_kernels_cross_entropy(tr_kernels *k);
void ops_kernels_dropout(tr_kernels *k);
void ops_kernels_conv2d(tr_kernels *k);
void ops_kernels_pool(tr_kernels *k);
void ops_kernels_batch_norm(tr_kernels *k);
void ops_kernels_copy_rows(tr_kernels *k);
void ops_kernels_permute(tr_kernels *k);
void ops_kernels_matmul(tr_kernels *k);
void ops_kernels_embedding(tr_kernels *k);
void ops_kernels_layer_norm(tr_kernels *k);
void ops_kernels_attention(tr_kernels *k);
void ops_kernels_reduce(tr_kernels *k);
void ops_kernels_mse(tr_kernels *k);
void ops_kernels_cosine(tr_kernels *k);

#endif
