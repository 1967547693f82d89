/* Strided row copies: slice's and concat's kernels, forward (=) and backward (+=). */
#include <string.h>

#include "ops/copy_rows.h"
#include "ops/cpu_kernels.h"

#define TR_GENERIC "ops/copy_rows.inc"
#include "ops/generic.h"

void ops_kernels_copy_rows(tr_kernels *k) { k->copy_rows = copy_rows_f32; }
