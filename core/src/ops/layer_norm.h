/* Private: layer-norm's f32 row for the ops that apply it as part of another
 * (linear_fused.c), the very code tr_layer_norm runs on each row, so that they give its bits. */
#ifndef TRAINER_OPS_LAYER_NORM_H
#define TRAINER_OPS_LAYER_NORM_H

#include <stdint.h>

/* One row of C values on the calling thread: y (which may be x), its mean and rstd; gamma
 * and beta (C) or NULL. */
void ops_layer_norm_row_f32(float *y, float *mean, float *rstd, const float *x, const float *gamma, const float *beta,
                            double eps, int64_t C);

#endif
