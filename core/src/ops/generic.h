/* Private: instantiates a kernel template twice, for real = float (_f32) and double (_f64).
 *
 *   // relu.c
 *   #define TR_GENERIC "ops/relu.inc"
 *   #include "ops/generic.h"
 *   // now relu_forward_f32 and relu_forward_f64 exist, as written once in relu.inc with
 *   //   static void K(relu_forward)(real *out, const real *inp, int64_t N) { ... }
 *
 * Inside a template: `real` is the element type, K(name) the suffixed name, GEMM the
 * row-major BLAS gemm of that type (kernels/gemm.h; f32's in bf16 when tr_cpu_bf16(),
 * kernels/gemm_bf16.h), and EXP/LOG/SQRT/TANH/ERF/FABS/POW the libm functions of that type. */
#ifndef TR_GENERIC
#error "define TR_GENERIC to the template file before including ops/generic.h"
#endif

#include <math.h>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

#define real float
#define K(name) name##_f32
#define GEMM tr_gemm_op_f32               /* tr_gemm_f32, or bf16 (kernels/gemm_bf16.h) */
#define GEMM_LINEAR tr_gemm_op_linear_f32 /* small-batch kernels up to TR_GEMM_SMALL_MAX */
#define EXP expf
#define LOG logf
#define SQRT sqrtf
#define TANH tanhf
#define ERF erff
#define FABS fabsf
#define POW powf
#include TR_GENERIC
#undef real
#undef K
#undef GEMM
#undef GEMM_LINEAR
#undef EXP
#undef LOG
#undef SQRT
#undef TANH
#undef ERF
#undef FABS
#undef POW

#define real double
#define K(name) name##_f64
#define GEMM tr_gemm_f64
#define GEMM_LINEAR tr_gemm_f64
#define EXP exp
#define LOG log
#define SQRT sqrt
#define TANH tanh
#define ERF erf
#define FABS fabs
#define POW pow
#include TR_GENERIC
#undef real
#undef K
#undef GEMM
#undef GEMM_LINEAR
#undef EXP
#undef LOG
#undef SQRT
#undef TANH
#undef ERF
#undef FABS
#undef POW

#undef TR_GENERIC
