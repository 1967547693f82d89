/* The CUDA plugin's kernels under trainer.precision bf16-mixed (tr_set_precision before the
 * device is opened): the GEMM entries multiply bf16 roundings of their operands with fp32
 * accumulation, everything else stays fp32.
 *
 *   unit_cuda_bf16            over the CPU emulator of CUDA (test plugin cuda_emu)
 *   unit_cuda_bf16 PLUGIN     another device plugin, e.g. build/plugins/devices/
 *                             tr_device_cuda.so on a GPU (ctest: gpu_cuda_bf16)
 *
 * linear, matmul and conv2d, forward and backward, against the core's CPU kernels run on the
 * bf16 roundings of the same inputs: a product of two bf16 values is exact in fp32, so on the
 * emulator (which rounds every operand to bf16) only the order of the fp32 sums differs
 * (bounded by 1e-5), and each result is more than 1e-4 away from the plain fp32 one (the
 * rounding did happen: bf16 keeps 8 bits, about 2e-3 relative). cuBLAS's
 * CUBLAS_COMPUTE_32F_FAST_16BF allows bf16 but may keep a shape in TF32 or fp32, so on a GPU
 * the bound is bf16's own (1e-2) and the distance from fp32 is not asserted. The bias and its
 * gradient are not products: they are compared with the fp32 reference. Attention rounds
 * its probabilities and the scores' gradient between its products, so its outputs are within
 * 1e-2 of the reference on rounded inputs (and on the emulator more than 1e-4 from fp32's),
 * and its probabilities (fp32 softmax of one product) within the GEMM bound. GELU and softmax
 * are unchanged. Skips (77) as unit_cuda_kernels on another plugin; on the emulator a device
 * that does not open is a failure. */
#define _POSIX_C_SOURCE 200809L /* unsetenv */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "device_compare.h"
#include "trainer/half.h"
#include "trainer/runtime.h"

#define F sizeof(float)

static double gemm_tol; /* the CPU's sums against the device's, same rounded operands */
static int on_emulator;  /* every operand rounded for sure: the distance from fp32 is asserted */

/* A copy of x[0..n) rounded to bf16 and back. */
static float *rounded(const float *x, size_t n) {
    float *r = malloc((n ? n : 1) * F);
    for (size_t i = 0; i < n; i++) r[i] = tr_bf16_round(x[i]);
    return r;
}

/* d (n floats) is within gemm_tol of ref (the CPU on rounded inputs) and more than 1e-4 away
 * from plain (the CPU on the inputs as they are). */
static void compare_bf16(const char *name, void *d, const float *ref, const float *plain, size_t n) {
    dc_compare(name, d, ref, n, gemm_tol);
    double e = dc_error(d, plain, n);
    if (on_emulator) CHECK(e > 1e-4, "%s: within %.3g of the fp32 result: the operands were not rounded to bf16", name, e);
}

static void test_linear(void) {
    enum { B = 64, C = 256, OC = 96 };
    float *x = dc_rand(B * C, -1, 1), *w = dc_rand(OC * C, -1, 1), *bias = dc_rand(OC, -1, 1), *dy = dc_rand(B * OC, -1, 1);
    float *rx = rounded(x, B * C), *rw = rounded(w, OC * C), *rdy = rounded(dy, B * OC);
    float *y = malloc(B * OC * F), *y32 = malloc(B * OC * F);
    float *dx = malloc(B * C * F), *dw = malloc(OC * C * F);
    float *dx32 = malloc(B * C * F), *dw32 = malloc(OC * C * F), *db32 = calloc(OC, F); /* dbias adds */
    void *gx = dc_dev(x, B * C * F), *gw = dc_dev(w, OC * C * F), *gb = dc_dev(bias, OC * F), *gdy = dc_dev(dy, B * OC * F);
    void *gy = dc_zeros(B * OC * F), *gdx = dc_zeros(B * C * F), *gdw = dc_zeros(OC * C * F), *gdb = dc_zeros(OC * F);

    dc_cpu->linear_forward(y, rx, rw, bias, B, C, OC), dc_cpu->linear_forward(y32, x, w, bias, B, C, OC);
    dc_gpu->linear_forward(gy, gx, gw, gb, B, C, OC);
    compare_bf16("linear forward (64 x 256 -> 96)", gy, y, y32, B * OC);
    dc_cpu->linear_backward(dx, dw, NULL, rdy, rx, rw, B, C, OC, 0, 0);
    dc_cpu->linear_backward(dx32, dw32, db32, dy, x, w, B, C, OC, 0, 0);
    dc_gpu->linear_backward(gdx, gdw, gdb, gdy, gx, gw, B, C, OC, 0, 0);
    compare_bf16("linear backward dx", gdx, dx, dx32, B * C);
    compare_bf16("linear backward dw", gdw, dw, dw32, OC * C);
    dc_compare("linear backward db (a column sum: fp32)", gdb, db32, OC, 1e-5);
    dc_free_all();
    free(x), free(w), free(bias), free(dy), free(rx), free(rw), free(rdy), free(y), free(y32);
    free(dx), free(dw), free(dx32), free(dw32), free(db32);
}

static void test_matmul(void) {
    enum { B = 3, M = 33, K = 64, N = 17 };
    float *a = dc_rand(B * M * K, -1, 1), *b = dc_rand(B * K * N, -1, 1), *dy = dc_rand(B * M * N, -1, 1);
    float *ra = rounded(a, B * M * K), *rb = rounded(b, B * K * N), *rdy = rounded(dy, B * M * N);
    float *out = malloc(B * M * N * F), *out32 = malloc(B * M * N * F);
    float *da = calloc(B * M * K, F), *db = calloc(B * K * N, F), *da32 = calloc(B * M * K, F), *db32 = calloc(B * K * N, F);
    void *ga = dc_dev(a, B * M * K * F), *gb = dc_dev(b, B * K * N * F), *gdy = dc_dev(dy, B * M * N * F);
    void *gout = dc_zeros(B * M * N * F), *gda = dc_zeros(B * M * K * F), *gdb = dc_zeros(B * K * N * F);
    /* The backward adds into its gradients: zeros here. */
    dc_cpu->matmul_forward(out, ra, rb, B, M, K, N), dc_cpu->matmul_forward(out32, a, b, B, M, K, N);
    dc_gpu->matmul_forward(gout, ga, gb, B, M, K, N);
    compare_bf16("matmul (3 x 33x64 @ 64x17)", gout, out, out32, B * M * N);
    dc_cpu->matmul_backward(da, db, rdy, ra, rb, B, M, K, N), dc_cpu->matmul_backward(da32, db32, dy, a, b, B, M, K, N);
    dc_gpu->matmul_backward(gda, gdb, gdy, ga, gb, B, M, K, N);
    compare_bf16("matmul da", gda, da, da32, B * M * K);
    compare_bf16("matmul db", gdb, db, db32, B * K * N);
    dc_free_all();
    free(a), free(b), free(dy), free(ra), free(rb), free(rdy), free(out), free(out32), free(da), free(db), free(da32), free(db32);
}

static void test_conv(void) {
    tr_conv2d_dims d = {.N = 2, .C = 8, .H = 9, .W = 9, .OC = 6, .KH = 3, .KW = 3, .S = 1, .P = 1};
    d.OH = (d.H + 2 * d.P - d.KH) / d.S + 1, d.OW = (d.W + 2 * d.P - d.KW) / d.S + 1;
    size_t nx = (size_t)(d.N * d.C * d.H * d.W), nw = (size_t)(d.OC * d.C * d.KH * d.KW);
    size_t ny = (size_t)(d.N * d.OC * d.OH * d.OW), nb = (size_t)d.OC;
    float *x = dc_rand(nx, -1, 1), *w = dc_rand(nw, -1, 1), *b = dc_rand(nb, -1, 1), *dy = dc_rand(ny, -1, 1);
    float *rx = rounded(x, nx), *rw = rounded(w, nw), *rdy = rounded(dy, ny);
    float *y = malloc(ny * F), *y32 = malloc(ny * F), *dx = calloc(nx, F), *dw = calloc(nw, F), *db = calloc(nb, F);
    float *dx32 = calloc(nx, F), *dw32 = calloc(nw, F), *db32 = calloc(nb, F);
    void *rwork = malloc(dc_cpu->conv2d_work(&d) + 1), *gwork = dc_zeros(dc_gpu->conv2d_work(&d));
    void *gx = dc_dev(x, nx * F), *gw = dc_dev(w, nw * F), *gb = dc_dev(b, nb * F), *gdy = dc_dev(dy, ny * F);
    void *gy = dc_zeros(ny * F), *gdx = dc_zeros(nx * F), *gdw = dc_zeros(nw * F), *gdb = dc_zeros(nb * F);
    dc_cpu->conv2d_forward(y, rx, rw, b, rwork, &d), dc_cpu->conv2d_forward(y32, x, w, b, rwork, &d);
    dc_gpu->conv2d_forward(gy, gx, gw, gb, gwork, &d);
    compare_bf16("conv2d forward (2x8x9x9, 6 filters 3x3)", gy, y, y32, ny);
    /* The gradients add into zeros (acc 1 for the input's). */
    dc_cpu->conv2d_backward(dx, dw, db, rdy, rx, rw, rwork, &d, 1);
    dc_cpu->conv2d_backward(dx32, dw32, db32, dy, x, w, rwork, &d, 1);
    dc_gpu->conv2d_backward(gdx, gdw, gdb, gdy, gx, gw, gwork, &d, 1);
    compare_bf16("conv2d backward dx", gdx, dx, dx32, nx);
    compare_bf16("conv2d backward dw", gdw, dw, dw32, nw);
    dc_compare("conv2d backward db (a sum: fp32)", gdb, db32, nb, 1e-5);
    dc_free_all();
    free(x), free(w), free(b), free(dy), free(rx), free(rw), free(rdy), free(y), free(y32), free(dx), free(dw), free(db);
    free(dx32), free(dw32), free(db32), free(rwork);
}

static void test_attention(void) {
    enum { B = 2, T = 9, S = 9, C = 32, NH = 2 };
    size_t nq = B * T * C, nk = B * S * C, na = B * NH * T * S;
    float *q = dc_rand(nq, -2, 2), *k = dc_rand(nk, -2, 2), *v = dc_rand(nk, -1, 1), *dy = dc_rand(nq, -1, 1);
    float *rq = rounded(q, nq), *rk = rounded(k, nk), *rv = rounded(v, nk), *rdy = rounded(dy, nq);
    float *out = malloc(nq * F), *att = malloc(na * F), *dq = calloc(nq, F), *dk = calloc(nk, F), *dv = calloc(nk, F);
    size_t cw = dc_cpu->attention_work(B, T, S, C, NH), gw = dc_gpu->attention_work(B, T, S, C, NH);
    void *cwork = malloc(cw ? cw : 1), *gwork = gw ? dc_zeros(gw) : NULL;
    void *gq = dc_dev(q, nq * F), *gk = dc_dev(k, nk * F), *gv = dc_dev(v, nk * F), *gdy = dc_dev(dy, nq * F);
    void *gout = dc_zeros(nq * F), *gatt = dc_zeros(na * F), *gdq = dc_zeros(nq * F), *gdk = dc_zeros(nk * F);
    void *gdv = dc_zeros(nk * F);
    dc_cpu->attention_forward(out, att, rq, rk, rv, B, T, S, C, NH, 1);
    dc_gpu->attention_forward(gout, gatt, gq, gk, gv, B, T, S, C, NH, 1);
    dc_compare("attention probabilities (causal; softmax of a bf16 product)", gatt, att, na, gemm_tol);
    dc_compare("attention output (probabilities rounded too)", gout, out, nq, 1e-2);
    float *out32 = malloc(nq * F), *att32 = malloc(na * F);
    dc_cpu->attention_forward(out32, att32, q, k, v, B, T, S, C, NH, 1);
    double e = dc_error(gout, out32, nq);
    if (on_emulator) CHECK(e > 1e-4, "attention output within %.3g of fp32's: not rounded to bf16", e);
    free(out32), free(att32);
    dc_cpu->attention_backward(dq, dk, dv, cwork, rdy, att, rq, rk, rv, B, T, S, C, NH);
    dc_gpu->attention_backward(gdq, gdk, gdv, gwork, gdy, gatt, gq, gk, gv, B, T, S, C, NH);
    dc_compare("attention dq", gdq, dq, nq, 1e-2);
    dc_compare("attention dk", gdk, dk, nk, 1e-2);
    dc_compare("attention dv", gdv, dv, nk, 1e-2);
    dc_free_all();
    free(q), free(k), free(v), free(dy), free(rq), free(rk), free(rv), free(rdy), free(out), free(att);
    free(dq), free(dk), free(dv), free(cwork);
}

/* Not GEMMs: the same as in fp32. */
static void test_unchanged(void) {
    enum { R = 7, M = 300 };
    float *x = dc_rand(R * M, -4, 4), *y = malloc(R * M * F);
    void *gx = dc_dev(x, R * M * F), *gy = dc_zeros(R * M * F);
    dc_cpu->gelu_forward(y, x, R * M, 0), dc_gpu->gelu_forward(gy, gx, R * M, 0);
    dc_compare("gelu (fp32 under bf16-mixed)", gy, y, R * M, 1e-5);
    dc_cpu->softmax_forward(y, x, R, M), dc_gpu->softmax_forward(gy, gx, R, M);
    dc_compare("softmax (fp32 under bf16-mixed)", gy, y, R * M, 1e-5);
    dc_free_all();
    free(x), free(y);
}

int main(int argc, char **argv) {
    on_emulator = argc <= 1;
    if (on_emulator) {
        unsetenv("TRAINER_CUDA_EMU_CC"); /* the emulated devices have bf16 */
        dc_no_skip = 1;
    }
    tr_set_precision(TR_PRECISION_BF16_MIXED);
    dc_open(argc, argv);
    CHECK(tr_accel_precision(dc_accel) == TR_PRECISION_BF16_MIXED, "the device opened in %s",
          tr_precision_name(tr_accel_precision(dc_accel)));
    gemm_tol = on_emulator ? 1e-5 : 1e-2;
    test_linear();
    test_matmul();
    test_conv();
    test_attention();
    test_unchanged();
    return dc_close();
}
