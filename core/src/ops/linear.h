/* Private: the linear layer's pieces for the ops that fuse another op into it
 * (linear_fused.c): its f32 forward kernel and its backward from any output gradient. */
#ifndef TRAINER_OPS_LINEAR_H
#define TRAINER_OPS_LINEAR_H

#include <stdint.h>

#include "autograd/node.h"

/* out (B, OC) = inp (B, C) weight^T + bias (NULL: none): tr_linear's CPU kernel. */
void ops_linear_forward_f32(float *out, const float *inp, const float *weight, const float *bias, int64_t B, int64_t C,
                            int64_t OC);
/* The gradients of a linear node's inputs (in {x, w, b}, i {B, C, OC}) from dy (B, OC), its
 * output's gradient or what a fused op made of it: tr_linear's backward. */
void ops_linear_grads(tr_graph *g, tr_node *n, void *dy);

#endif
