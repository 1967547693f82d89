/* dst += src over flat f32 buffers: a gradient slice summed into a shard's (tr_accel_add on
 * the host; a device runs its copy_rows entry). Each element is one float addition, as the
 * op kernels' copy_rows adds a row. */
#include "kernels/update.h"

void optim_add(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}
