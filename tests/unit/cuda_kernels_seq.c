/* The CUDA plugin's entries for the transformers' ops against the core's CPU kernels
 * (tr_cpu_kernels), entry by entry (see device_compare.h): slice and concat's row copies,
 * permute, batched matmul, embedding, layer-norm, attention (causal or not, T != S; and on one fused projection), the
 * padding entries (embedding of ids -1; attention with a key padding mask, left or right, a sample with no key),
 * dropout on the attention probabilities (the device's mask the host's, byte for byte), the reductions, mse and cosine similarity, forward and backward. Copies, permutes and the
 * embedding's gradient (rows added in token order, repeated ids included) must be equal;
 * the rest within rounding (the normalised error printed and bounded).
 *
 *   unit_cuda_kernels_seq           over the CPU emulator of CUDA (test plugin cuda_emu)
 *   unit_cuda_kernels_seq PLUGIN    another device plugin, e.g. build/plugins/devices/
 *                                   tr_device_cuda.so on a GPU (ctest: gpu_cuda_kernels_seq)
 *
 * Skips (77) when the plugin is missing, sees no GPU, or cannot run kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "device_compare.h"
#include "trainer/trainer.h"

#define F sizeof(float)

/* A device copy of a fresh random array, its host twin in *h. */
static void *rand_dev(float **h, size_t n, float lo, float hi) {
    *h = dc_rand(n, lo, hi);
    return dc_dev(*h, n * F);
}

/* Row copies with gaps on both sides: set, then added. */
static void test_copy_rows(void) {
    enum { RW = 7, W = 13, SLD = 17, DLD = 20 };
    float *src, *dst;
    void *gs = rand_dev(&src, RW * SLD, -1, 1), *gd = rand_dev(&dst, RW * DLD, -1, 1);
    for (int acc = 0; acc < 2; acc++) {
        dc_cpu->copy_rows(dst + 2, DLD, src + 3, SLD, RW, W, acc);
        dc_gpu->copy_rows((float *)gd + 2, DLD, (float *)gs + 3, SLD, RW, W, acc);
        dc_compare(acc ? "copy_rows (acc)" : "copy_rows", gd, dst, RW * DLD, 0);
    }
    dc_free_all();
    free(src), free(dst);
}

/* (3, 4, 5) permuted (2, 0, 1) and back (the backward adds). */
static void test_permute(void) {
    enum { N = 60 };
    const int64_t shape[3] = {3, 4, 5}, perm[3] = {2, 0, 1}, stride[3] = {20, 5, 1};
    tr_permute_dims p = {.ndim = 3};
    for (int d = 0; d < 3; d++) p.shape[d] = shape[perm[d]], p.stride[d] = stride[perm[d]];
    float *x, *y = calloc(N, F);
    void *gx = rand_dev(&x, N, -1, 1), *gy = dc_zeros(N * F);
    dc_cpu->permute(y, x, &p, 0), dc_gpu->permute(gy, gx, &p, 0);
    dc_compare("permute", gy, y, N, 0);
    dc_cpu->permute(y, x, &p, 1), dc_gpu->permute(gy, gx, &p, 1);
    dc_compare("permute backward (into the input)", gx, x, N, 0);
    dc_free_all();
    free(x), free(y);
}

static void test_matmul(void) {
    enum { B = 3, M = 5, K = 7, N = 4 };
    float *a, *b, *dy, *da, *db, *out = calloc(B * M * N, F);
    void *ga = rand_dev(&a, B * M * K, -1, 1), *gb = rand_dev(&b, B * K * N, -1, 1);
    void *gdy = rand_dev(&dy, B * M * N, -1, 1), *gda = rand_dev(&da, B * M * K, -1, 1);
    void *gdb = rand_dev(&db, B * K * N, -1, 1), *gout = dc_zeros(B * M * N * F);
    dc_cpu->matmul_forward(out, a, b, B, M, K, N), dc_gpu->matmul_forward(gout, ga, gb, B, M, K, N);
    dc_compare("matmul (3 x 5x7 @ 7x4)", gout, out, B * M * N, 1e-6);
    dc_cpu->matmul_backward(da, db, dy, a, b, B, M, K, N), dc_gpu->matmul_backward(gda, gdb, gdy, ga, gb, B, M, K, N);
    dc_compare("matmul da", gda, da, B * M * K, 1e-6);
    dc_compare("matmul db", gdb, db, B * K * N, 1e-6);
    dc_cpu->matmul_backward(da, NULL, dy, a, b, B, M, K, N), dc_gpu->matmul_backward(gda, NULL, gdy, ga, gb, B, M, K, N);
    dc_compare("matmul da alone", gda, da, B * M * K, 1e-6);
    /* K = 0: zeros */
    dc_cpu->matmul_forward(out, a, b, B, M, 0, N), dc_gpu->matmul_forward(gout, ga, gb, B, M, 0, N);
    dc_compare("matmul with K = 0", gout, out, B * M * N, 0);
    dc_free_all();
    free(a), free(b), free(dy), free(da), free(db), free(out);
}

/* 300 tokens (more than a block) over 11 ids, so most repeat many times. */
static void test_embedding(void) {
    enum { V = 11, NT = 300, C = 37 };
    int32_t ids[NT];
    for (int i = 0; i < NT; i++) ids[i] = (int32_t)((i * 7 + i / 13) % V);
    ids[NT - 1] = V - 1;
    float *table, *dy, *dt, *out = calloc(NT * C, F);
    void *gtable = rand_dev(&table, V * C, -1, 1), *gdy = rand_dev(&dy, NT * C, -1, 1);
    void *gdt = rand_dev(&dt, V * C, -1, 1), *gids = dc_dev(ids, sizeof ids), *gout = dc_zeros(NT * C * F);
    dc_cpu->embedding_forward(out, ids, table, NT, C), dc_gpu->embedding_forward(gout, gids, gtable, NT, C);
    dc_compare("embedding", gout, out, NT * C, 0);
    dc_cpu->embedding_backward(dt, dy, ids, NT, C), dc_gpu->embedding_backward(gdt, gdy, gids, NT, C);
    dc_compare("embedding backward (token order)", gdt, dt, V * C, 0);
    dc_free_all();
    free(table), free(dy), free(dt), free(out);
}

/* Padding: ids -1 scattered among 300 tokens (more than a block), the first and the last
 * included: zero rows forward, nothing backward; equal to the CPU's. */
static void test_embedding_padding(void) {
    enum { V = 9, NT = 300, C = 21 };
    int32_t ids[NT];
    for (int i = 0; i < NT; i++) ids[i] = i % 5 == 2 ? -1 : (int32_t)((i * 5 + i / 11) % V);
    ids[0] = ids[NT - 1] = -1;
    float *table, *dy, *dt, *out; /* rand_dev allocates each host copy */
    void *gtable = rand_dev(&table, V * C, -1, 1), *gdy = rand_dev(&dy, NT * C, -1, 1);
    void *gdt = rand_dev(&dt, V * C, -1, 1), *gids = dc_dev(ids, sizeof ids), *gout = rand_dev(&out, NT * C, 5, 6);
    CHECK(TR_KERNELS_KNOW_PADDING(dc_gpu), "the device's kernel table does not know padding (size %zu)", dc_gpu->size);
    dc_cpu->embedding_forward(out, ids, table, NT, C), dc_gpu->embedding_forward(gout, gids, gtable, NT, C);
    dc_compare("embedding with padding", gout, out, NT * C, 0);
    CHECK(out[0] == 0 && out[C - 1] == 0 && out[(NT - 1) * C] == 0, "a padding row is not zero");
    dc_cpu->embedding_backward(dt, dy, ids, NT, C), dc_gpu->embedding_backward(gdt, gdy, gids, NT, C);
    dc_compare("embedding backward with padding", gdt, dt, V * C, 0);
    dc_free_all();
    free(table), free(dy), free(dt), free(out);
}

/* The key padding mask (B, S) of lengths len[b], right- or left-aligned. */
static void pad_mask(int32_t *m, int64_t B, int64_t S, const int64_t *len, int left) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) m[b * S + s] = left ? s >= S - len[b] : s < len[b];
}

/* Masked attention (separate q, k, v and the fused projection), causal or not, right and
 * left padding, a sample without keys (its rows all zero, never NaN); the backward entries
 * on the masked probabilities. */
static void test_attention_masked(void) {
    const int64_t shapes[][5] = {{3, 5, 7, 12, 3}, {3, 9, 9, 8, 2}, {3, 300, 300, 8, 1}}; /* B, T, S, C, NH */
    for (int s = 0; s < 3; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], S = shapes[s][2], C = shapes[s][3], NH = shapes[s][4];
        int64_t nq = B * T * C, nk = B * S * C, na = B * NH * T * S, len[3] = {S, S / 2, 0};
        int32_t *mask = malloc((size_t)(B * S) * sizeof *mask);
        float *q, *k, *v, *dy, *dq, *dk, *dv;
        void *gq = rand_dev(&q, nq, -2, 2), *gk = rand_dev(&k, nk, -2, 2), *gv = rand_dev(&v, nk, -1, 1);
        void *gdy = rand_dev(&dy, nq, -1, 1), *gdq = rand_dev(&dq, nq, -1, 1), *gdk = rand_dev(&dk, nk, -1, 1);
        void *gdv = rand_dev(&dv, nk, -1, 1);
        float *out = malloc(nq * F), *att = malloc(na * F);
        void *gout = dc_zeros(nq * F), *gatt = dc_zeros(na * F);
        size_t cw = dc_cpu->attention_work(B, T, S, C, NH), gw = dc_gpu->attention_work(B, T, S, C, NH);
        void *cwork = malloc(cw ? cw : 1), *gwork = gw ? dc_zeros(gw) : NULL;
        for (int mode = 0; mode < 4; mode++) {
            int causal = mode & 1, left = mode >> 1;
            pad_mask(mask, B, S, len, left);
            void *gmask = dc_dev(mask, (size_t)(B * S) * sizeof *mask);
            char name[128];
            snprintf(name, sizeof name, "attention_mask B%lld T%lld S%lld C%lld NH%lld%s%s", (long long)B,
                     (long long)T, (long long)S, (long long)C, (long long)NH, causal ? " causal" : "",
                     left ? " left" : " right");
            dc_cpu->attention_mask_forward(out, att, q, k, v, mask, B, T, S, C, NH, causal);
            dc_gpu->attention_mask_forward(gout, gatt, gq, gk, gv, gmask, B, T, S, C, NH, causal);
            dc_compare(name, gout, out, nq, 1e-6);
            dc_compare("attention_mask probabilities", gatt, att, na, 1e-6);
            int finite = 1, empty = 1;
            for (int64_t i = 0; i < nq; i++) finite &= isfinite(out[i]) != 0;
            for (int64_t i = 2 * T * C; i < nq; i++) empty &= out[i] == 0; /* sample 2 has no key */
            CHECK(finite && empty, "%s: the CPU's output is not finite, or not 0 for the sample without keys", name);
            dc_cpu->attention_backward(dq, dk, dv, cwork, dy, att, q, k, v, B, T, S, C, NH);
            dc_gpu->attention_backward(gdq, gdk, gdv, gwork, gdy, gatt, gq, gk, gv, B, T, S, C, NH);
            dc_compare("attention_mask dq", gdq, dq, nq, 1e-5);
            dc_compare("attention_mask dk", gdk, dk, nk, 1e-5);
            dc_compare("attention_mask dv", gdv, dv, nk, 1e-6);
            if (T == S) { /* the fused form: q, k and v the thirds of one (B, T, 3C) */
                int64_t nx = B * T * 3 * C;
                float *x, *dx, *xo = malloc(nq * F);
                void *gx = rand_dev(&x, nx, -2, 2), *gdx = rand_dev(&dx, nx, -1, 1);
                dc_cpu->attention_qkv_mask_forward(xo, att, x, mask, B, T, C, NH, causal);
                dc_gpu->attention_qkv_mask_forward(gout, gatt, gx, gmask, B, T, C, NH, causal);
                dc_compare("attention_qkv_mask", gout, xo, nq, 1e-6);
                dc_compare("attention_qkv_mask probabilities", gatt, att, na, 1e-6);
                dc_cpu->attention_qkv_backward(dx, cwork, dy, att, x, B, T, C, NH, 0);
                dc_gpu->attention_qkv_backward(gdx, gwork, gdy, gatt, gx, B, T, C, NH, 0);
                dc_compare("attention_qkv_mask dqkv", gdx, dx, nx, 1e-5);
                dc_free(gx), dc_free(gdx);
                free(x), free(dx), free(xo);
            }
            dc_free(gmask);
        }
        dc_free_all();
        free(q), free(k), free(v), free(dy), free(dq), free(dk), free(dv), free(out), free(att), free(cwork), free(mask);
    }
}

/* Dropout on the attention probabilities, p 0.3 from a stream index inside a Philox block:
 * separate q, k, v (cross-shaped, key padding and causal, or none) and the fused projection,
 * the keep mask equal byte for byte, the probabilities and products within rounding; the
 * backward with every gradient (added), dv alone, and the fused one written and added. */
static void test_attention_dropout(void) {
    const int64_t shapes[][5] = {{3, 5, 7, 12, 3}, {2, 9, 9, 8, 2}, {2, 130, 130, 8, 1}}; /* B, T, S, C, NH */
    tr_dropout_draw d = {.seed = 77, .stream = 5, .first = 3, .thr = (uint32_t)ceil(0.3 * 16777216.0),
                         .scale = 1 / 0.7};
    for (int s = 0; s < 3; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], S = shapes[s][2], C = shapes[s][3], NH = shapes[s][4];
        int64_t nq = B * T * C, nk = B * S * C, na = B * NH * T * S, len[3] = {S, S / 2, 0};
        int32_t *mask = malloc((size_t)(B * S) * sizeof *mask);
        pad_mask(mask, B, S, len, s == 2);
        float *q, *k, *v, *dy, *dq, *dk, *dv;
        void *gq = rand_dev(&q, nq, -2, 2), *gk = rand_dev(&k, nk, -2, 2), *gv = rand_dev(&v, nk, -1, 1);
        void *gdy = rand_dev(&dy, nq, -1, 1), *gdq = rand_dev(&dq, nq, -1, 1), *gdk = rand_dev(&dk, nk, -1, 1);
        void *gdv = rand_dev(&dv, nk, -1, 1), *gmask = dc_dev(mask, (size_t)(B * S) * sizeof *mask);
        float *out = malloc(nq * F), *att = malloc(na * F);
        uint8_t *keep = malloc(na), *gkeep_host = malloc(na);
        void *gout = dc_zeros(nq * F), *gatt = dc_zeros(na * F), *gkeep = dc_zeros(na);
        size_t cw = dc_cpu->attention_work(B, T, S, C, NH), gw = dc_gpu->attention_work(B, T, S, C, NH);
        void *cwork = malloc(cw ? cw : 1), *gwork = gw ? dc_zeros(gw) : NULL;
        int causal = s != 1;
        const int32_t *cm = s == 1 ? NULL : mask, *gm = s == 1 ? NULL : gmask;
        char name[128];
        snprintf(name, sizeof name, "attention_dropout B%lld T%lld S%lld C%lld NH%lld%s%s", (long long)B, (long long)T,
                 (long long)S, (long long)C, (long long)NH, causal ? " causal" : "", cm ? " masked" : "");
        dc_cpu->attention_dropout_forward(out, att, keep, cwork, q, k, v, cm, &d, C, B, T, S, C, NH, causal);
        dc_gpu->attention_dropout_forward(gout, gatt, gkeep, gwork, gq, gk, gv, gm, &d, C, B, T, S, C, NH, causal);
        dc_compare(name, gout, out, nq, 1e-6);
        dc_compare("attention_dropout probabilities", gatt, att, na, 1e-6);
        int kept = 0;
        for (int64_t i = 0; i < na; i++) kept += keep[i];
        CHECK(tr_accel_download(dc_accel, gkeep_host, gkeep, (size_t)na) == TR_OK && memcmp(gkeep_host, keep, na) == 0,
              "%s: the device's mask differs from the host's", name);
        CHECK(kept > na * 6 / 10 && kept < na * 8 / 10, "%s: kept %d of %lld at p 0.3", name, kept, (long long)na);
        dc_cpu->attention_dropout_backward(dq, dk, dv, cwork, dy, att, keep, d.scale, q, k, v, C, B, T, S, C, NH, 1);
        dc_gpu->attention_dropout_backward(gdq, gdk, gdv, gwork, gdy, gatt, gkeep, d.scale, gq, gk, gv, C, B, T, S, C,
                                           NH, 1);
        dc_compare("attention_dropout dq (added)", gdq, dq, nq, 1e-5);
        dc_compare("attention_dropout dk (added)", gdk, dk, nk, 1e-5);
        dc_compare("attention_dropout dv (added)", gdv, dv, nk, 1e-6);
        dc_cpu->attention_dropout_backward(NULL, NULL, dv, cwork, dy, att, keep, d.scale, q, k, v, C, B, T, S, C, NH, 0);
        dc_gpu->attention_dropout_backward(NULL, NULL, gdv, gwork, gdy, gatt, gkeep, d.scale, gq, gk, gv, C, B, T, S, C,
                                           NH, 0);
        dc_compare("attention_dropout dv alone (written)", gdv, dv, nk, 1e-6);
        if (T == S) { /* the fused form: q, k and v the thirds of one (B, T, 3C), rows 3C apart */
            int64_t nx = B * T * 3 * C;
            float *x, *dx, *xo = malloc(nq * F);
            void *gx = rand_dev(&x, nx, -2, 2), *gdx = rand_dev(&dx, nx, -1, 1);
            dc_cpu->attention_dropout_forward(xo, att, keep, cwork, x, x + C, x + 2 * C, cm, &d, 3 * C, B, T, T, C, NH,
                                              causal);
            float *g3 = gx;
            dc_gpu->attention_dropout_forward(gout, gatt, gkeep, gwork, g3, g3 + C, g3 + 2 * C, gm, &d, 3 * C, B, T, T,
                                              C, NH, causal);
            dc_compare("attention_qkv_dropout", gout, xo, nq, 1e-6);
            dc_compare("attention_qkv_dropout probabilities", gatt, att, na, 1e-6);
            for (int acc = 0; acc < 2; acc++) {
                float *d3 = gdx;
                dc_cpu->attention_dropout_backward(dx, dx + C, dx + 2 * C, cwork, dy, att, keep, d.scale, x, x + C,
                                                   x + 2 * C, 3 * C, B, T, T, C, NH, acc);
                dc_gpu->attention_dropout_backward(d3, d3 + C, d3 + 2 * C, gwork, gdy, gatt, gkeep, d.scale, g3,
                                                   g3 + C, g3 + 2 * C, 3 * C, B, T, T, C, NH, acc);
                dc_compare(acc ? "attention_qkv_dropout dqkv (added)" : "attention_qkv_dropout dqkv (written)", gdx,
                           dx, nx, 1e-5);
            }
            dc_free(gx), dc_free(gdx);
            free(x), free(dx), free(xo);
        }
        dc_free_all();
        free(q), free(k), free(v), free(dy), free(dq), free(dk), free(dv), free(out), free(att), free(cwork), free(mask);
        free(keep), free(gkeep_host);
    }
}

/* Rows shorter and longer than a block, with and without gamma and beta; inputs offset far
 * from 0, as activations are. */
static void test_layer_norm(void) {
    const int64_t rows[] = {37, 5}, cols[] = {300, 16};
    for (int s = 0; s < 2; s++) {
        int64_t RW = rows[s], C = cols[s], n = RW * C;
        float *x, *gamma, *beta, *dy, *dx, *dg, *db;
        void *gx = rand_dev(&x, n, 2, 5), *gga = rand_dev(&gamma, C, 0.5f, 1.5f), *gbe = rand_dev(&beta, C, -1, 1);
        void *gdy = rand_dev(&dy, n, -1, 1), *gdx = rand_dev(&dx, n, -1, 1);
        void *gdg = rand_dev(&dg, C, -1, 1), *gdb = rand_dev(&db, C, -1, 1);
        float *y = malloc(n * F), *mean = malloc(RW * F), *rstd = malloc(RW * F);
        void *gy = dc_zeros(n * F), *gm = dc_zeros(RW * F), *gr = dc_zeros(RW * F);
        size_t cw = dc_cpu->layer_norm_work(RW, C), gw = dc_gpu->layer_norm_work(RW, C);
        void *cwork = malloc(cw ? cw : 1), *gwork = gw ? dc_zeros(gw) : NULL;
        char name[96];
        for (int affine = 1; affine >= 0; affine--) {
            const float *cg = affine ? gamma : NULL, *cb = affine ? beta : NULL;
            const float *ggg = affine ? gga : NULL, *ggb = affine ? gbe : NULL;
            dc_cpu->layer_norm_forward(y, mean, rstd, x, cg, cb, 1e-5, RW, C);
            dc_gpu->layer_norm_forward(gy, gm, gr, gx, ggg, ggb, 1e-5, RW, C);
            snprintf(name, sizeof name, "layer_norm %lldx%lld%s", (long long)RW, (long long)C, affine ? "" : " (no affine)");
            dc_compare(name, gy, y, n, 2e-6);
            dc_compare("layer_norm mean", gm, mean, RW, 1e-7);
            dc_compare("layer_norm rstd", gr, rstd, RW, 1e-6);
            for (int acc = 0; acc < 2; acc++) {
                dc_cpu->layer_norm_backward(dx, dg, db, dy, x, mean, rstd, cg, cwork, RW, C, acc);
                dc_gpu->layer_norm_backward(gdx, gdg, gdb, gdy, gx, gm, gr, ggg, gwork, RW, C, acc);
                snprintf(name, sizeof name, "layer_norm backward dx (acc %d%s)", acc, affine ? "" : ", no affine");
                dc_compare(name, gdx, dx, n, 1e-5);
                dc_compare("layer_norm backward dgamma", gdg, dg, C, 1e-5);
                dc_compare("layer_norm backward dbeta", gdb, db, C, 1e-6);
            }
        }
        /* dx alone */
        dc_cpu->layer_norm_backward(dx, NULL, NULL, dy, x, mean, rstd, NULL, cwork, RW, C, 0);
        dc_gpu->layer_norm_backward(gdx, NULL, NULL, gdy, gx, gm, gr, NULL, gwork, RW, C, 0);
        dc_compare("layer_norm backward dx alone", gdx, dx, n, 1e-5);
        dc_free_all();
        free(x), free(gamma), free(beta), free(dy), free(dx), free(dg), free(db), free(y), free(mean), free(rstd);
        free(cwork);
    }
}

/* Self-shaped and cross-shaped (T != S) attention, causal or not. */
static void test_attention(void) {
    const int64_t shapes[][5] = {{2, 5, 7, 12, 3}, {2, 9, 9, 8, 2}, {1, 4, 3, 6, 1}}; /* B, T, S, C, NH */
    for (int s = 0; s < 3; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], S = shapes[s][2], C = shapes[s][3], NH = shapes[s][4];
        int64_t nq = B * T * C, nk = B * S * C, na = B * NH * T * S;
        float *q, *k, *v, *dy, *dq, *dk, *dv;
        void *gq = rand_dev(&q, nq, -2, 2), *gk = rand_dev(&k, nk, -2, 2), *gv = rand_dev(&v, nk, -1, 1);
        void *gdy = rand_dev(&dy, nq, -1, 1), *gdq = rand_dev(&dq, nq, -1, 1), *gdk = rand_dev(&dk, nk, -1, 1);
        void *gdv = rand_dev(&dv, nk, -1, 1);
        float *out = malloc(nq * F), *att = malloc(na * F);
        void *gout = dc_zeros(nq * F), *gatt = dc_zeros(na * F);
        size_t cw = dc_cpu->attention_work(B, T, S, C, NH), gw = dc_gpu->attention_work(B, T, S, C, NH);
        void *cwork = malloc(cw ? cw : 1), *gwork = gw ? dc_zeros(gw) : NULL;
        for (int causal = 0; causal < 2; causal++) {
            char name[96];
            snprintf(name, sizeof name, "attention B%lld T%lld S%lld C%lld NH%lld%s", (long long)B, (long long)T,
                     (long long)S, (long long)C, (long long)NH, causal ? " causal" : "");
            dc_cpu->attention_forward(out, att, q, k, v, B, T, S, C, NH, causal);
            dc_gpu->attention_forward(gout, gatt, gq, gk, gv, B, T, S, C, NH, causal);
            dc_compare(name, gout, out, nq, 1e-6);
            dc_compare("attention probabilities", gatt, att, na, 1e-6);
            dc_cpu->attention_backward(dq, dk, dv, cwork, dy, att, q, k, v, B, T, S, C, NH);
            dc_gpu->attention_backward(gdq, gdk, gdv, gwork, gdy, gatt, gq, gk, gv, B, T, S, C, NH);
            dc_compare("attention dq", gdq, dq, nq, 1e-5);
            dc_compare("attention dk", gdk, dk, nk, 1e-5);
            dc_compare("attention dv", gdv, dv, nk, 1e-6);
            dc_cpu->attention_backward(NULL, NULL, dv, cwork, dy, att, q, k, v, B, T, S, C, NH);
            dc_gpu->attention_backward(NULL, NULL, gdv, gwork, gdy, gatt, gq, gk, gv, B, T, S, C, NH);
            dc_compare("attention dv alone", gdv, dv, nk, 1e-6);
        }
        dc_free_all();
        free(q), free(k), free(v), free(dy), free(dq), free(dk), free(dv), free(out), free(att), free(cwork);
    }
}

/* Attention on one fused projection (B, T, 3C), causal or not; its gradient written (acc 0)
 * over random values, then added (acc 1). */
static void test_attention_qkv(void) {
    const int64_t shapes[][4] = {{2, 5, 12, 3}, {1, 9, 8, 2}}; /* B, T, C, NH */
    for (int s = 0; s < 2; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
        int64_t nx = B * T * 3 * C, ny = B * T * C, na = B * NH * T * T;
        float *x, *dy, *dx;
        void *gx = rand_dev(&x, nx, -2, 2), *gdy = rand_dev(&dy, ny, -1, 1), *gdx = rand_dev(&dx, nx, -1, 1);
        float *out = malloc(ny * F), *att = malloc(na * F);
        void *gout = dc_zeros(ny * F), *gatt = dc_zeros(na * F);
        size_t cw = dc_cpu->attention_work(B, T, T, C, NH), gw = dc_gpu->attention_work(B, T, T, C, NH);
        void *cwork = malloc(cw ? cw : 1), *gwork = gw ? dc_zeros(gw) : NULL;
        for (int causal = 0; causal < 2; causal++) {
            char name[96];
            snprintf(name, sizeof name, "attention_qkv B%lld T%lld C%lld NH%lld%s", (long long)B, (long long)T,
                     (long long)C, (long long)NH, causal ? " causal" : "");
            dc_cpu->attention_qkv_forward(out, att, x, B, T, C, NH, causal);
            dc_gpu->attention_qkv_forward(gout, gatt, gx, B, T, C, NH, causal);
            dc_compare(name, gout, out, ny, 1e-6);
            dc_compare("attention_qkv probabilities", gatt, att, na, 1e-6);
            for (int acc = 0; acc < 2; acc++) {
                dc_cpu->attention_qkv_backward(dx, cwork, dy, att, x, B, T, C, NH, acc);
                dc_gpu->attention_qkv_backward(gdx, gwork, gdy, gatt, gx, B, T, C, NH, acc);
                dc_compare(acc ? "attention_qkv dqkv (added)" : "attention_qkv dqkv (written)", gdx, dx, nx, 1e-5);
            }
        }
        dc_free_all();
        free(x), free(dy), free(dx), free(out), free(att), free(cwork);
    }
}

/* Sums over everything (longer than one block's share) and over a middle or the last dim; mse;
 * cosine similarity, and apart a row of zeros (its norm clamped: a gradient of 1/eps scale).
 * Each backward adds into a fresh random dx. */
static void test_reductions(void) {
    enum { N = 5003, O = 6, D = 9, I = 11, E = 40, NR = 7 };
    float *x, *t, *dx, *dout, out[1], sd[O * I], *dsd;
    void *gx = rand_dev(&x, N, -1, 2), *gt = rand_dev(&t, N, -1, 1), *gdx = rand_dev(&dx, N, -1, 1);
    float *dx0 = malloc(N * F);
    memcpy(dx0, dx, N * F);
#define FRESH_DX() (memcpy(dx, dx0, N * F), tr_accel_upload(dc_accel, gdx, dx0, N * F))
    void *gdout = rand_dev(&dout, 1, 0.5f, 2), *gout = dc_zeros(F), *gsd = dc_zeros(sizeof sd);
    dc_cpu->sum_all_forward(out, x, N, 1.0), dc_gpu->sum_all_forward(gout, gx, N, 1.0);
    dc_compare("sum", gout, out, 1, 1e-7);
    dc_cpu->sum_all_forward(out, x, N, (double)N), dc_gpu->sum_all_forward(gout, gx, N, (double)N);
    dc_compare("mean", gout, out, 1, 1e-7);
    dc_cpu->sum_all_backward(dx, dout, 1.0 / N, N), dc_gpu->sum_all_backward(gdx, gdout, 1.0 / N, N);
    dc_compare("mean backward", gdx, dx, N, 0);
    dc_cpu->mse_forward(out, x, t, N, 3.0), dc_gpu->mse_forward(gout, gx, gt, N, 3.0);
    dc_compare("mse", gout, out, 1, 1e-7);
    FRESH_DX();
    dc_cpu->mse_backward(dx, dout, x, t, 3.0, N), dc_gpu->mse_backward(gdx, gdout, gx, gt, 3.0, N);
    dc_compare("mse backward", gdx, dx, N, 1e-6); /* the CPU may fuse dx + k (p - t) into an fma */
    /* (O, D, I) over D, then (O * D, I) over its last dim (I) */
    dsd = dc_rand(O * I, -1, 1);
    void *gdsd = dc_dev(dsd, O * I * F);
    dc_cpu->sum_dim_forward(sd, x, 1.0 / D, O, D, I), dc_gpu->sum_dim_forward(gsd, gx, 1.0 / D, O, D, I);
    dc_compare("mean_dim (middle)", gsd, sd, O * I, 1e-7);
    FRESH_DX();
    dc_cpu->sum_dim_backward(dx, dsd, 1.0 / D, O, D, I), dc_gpu->sum_dim_backward(gdx, gdsd, 1.0 / D, O, D, I);
    dc_compare("mean_dim backward", gdx, dx, O * D * I, 1e-7);
    dc_cpu->sum_dim_forward(sd, x, 1.0, O, I, 1), dc_gpu->sum_dim_forward(gsd, gx, 1.0, O, I, 1);
    dc_compare("sum_dim (last)", gsd, sd, O, 1e-7);
    /* cosine: rows of x and t, then row 0 of a replaced by zeros, compared apart */
    float *a = malloc(NR * E * F), cs[NR], *dcs = dc_rand(NR, -1, 1), *da, *db;
    memcpy(a, x, NR * E * F);
    void *ga = dc_dev(a, NR * E * F), *gcs = dc_zeros(sizeof cs), *gdcs = dc_dev(dcs, NR * F);
    void *gda = rand_dev(&da, NR * E, -1, 1), *gdb = rand_dev(&db, NR * E, -1, 1);
    dc_cpu->cosine_forward(cs, a, t, NR, E, 1e-8), dc_gpu->cosine_forward(gcs, ga, gt, NR, E, 1e-8);
    dc_compare("cosine_similarity", gcs, cs, NR, 1e-7);
    dc_cpu->cosine_backward(da, db, dcs, a, t, NR, E, 1e-8), dc_gpu->cosine_backward(gda, gdb, gdcs, ga, gt, NR, E, 1e-8);
    dc_compare("cosine_similarity da", gda, da, NR * E, 1e-6);
    dc_compare("cosine_similarity db", gdb, db, NR * E, 1e-6);
    memset(a, 0, E * F);
    tr_accel_upload(dc_accel, ga, a, E * F);
    dc_cpu->cosine_forward(cs, a, t, 1, E, 1e-8), dc_gpu->cosine_forward(gcs, ga, gt, 1, E, 1e-8);
    dc_compare("cosine_similarity (a zero row)", gcs, cs, 1, 0);
    dc_cpu->cosine_backward(da, db, dcs, a, t, 1, E, 1e-8), dc_gpu->cosine_backward(gda, gdb, gdcs, ga, gt, 1, E, 1e-8);
    dc_compare("cosine_similarity da (zero row: |a| clamped)", gda, da, E, 1e-6);
    dc_compare("cosine_similarity db (zero row)", gdb, db, E, 1e-6);
#undef FRESH_DX
    dc_free_all();
    free(x), free(t), free(dx), free(dx0), free(dout), free(dsd), free(a), free(dcs), free(da), free(db);
}

/* The op on a device graph: embedding's ids are downloaded and checked (an id outside the
 * table is named with its position), and ids in host memory are refused; an in-range lookup
 * gives the table's rows. */
static void test_embedding_graph(void) {
    tr_graph *g = NULL;
    CHECK(tr_graph_create(&g, 0) == TR_OK && tr_graph_set_accel(g, dc_accel) == TR_OK, "device graph: %s", tr_error_msg());
    if (!g) return;
    float tab[5 * 3];
    for (int i = 0; i < 15; i++) tab[i] = (float)i;
    int32_t good[6] = {4, 0, 2, 2, 1, 3}, bad[6] = {4, 0, 2, 5, 1, 3};
    for (int k = 0; k < 3; k++) {
        tr_tensor *table = tr_graph_leaf(g, TR_F32, 2, (int64_t[]){5, 3});
        tr_tensor *ids = tr_graph_input(g, TR_I32, 2, (int64_t[]){2, 3});
        CHECK(table && ids, "tensors: %s", tr_error_msg());
        if (!table || !ids) break;
        tr_accel_upload(dc_accel, table->data, tab, sizeof tab);
        tr_accel_upload(dc_accel, ids->data, k == 1 ? bad : good, sizeof good);
        if (k == 0) {
            tr_tensor *y = tr_embedding(g, ids, table);
            float got[18], want[18];
            for (int i = 0; i < 6; i++)
                for (int c = 0; c < 3; c++) want[i * 3 + c] = tab[good[i] * 3 + c];
            CHECK(y && tr_accel_download(dc_accel, got, y->data, sizeof got) == TR_OK && memcmp(got, want, sizeof got) == 0,
                  "embedding on the device graph: %s", tr_error_msg());
            tr_graph_reset(g);
        } else if (k == 1) {
            CHECK_OP_ERROR(g, tr_embedding(g, ids, table), "embedding: id 5 at position (1, 0) of ids (2, 3)",
                           "outside [0, 5)");
        } else {
            tr_tensor host = tr_tensor_view(good, TR_I32, 2, (int64_t[]){2, 3});
            CHECK_OP_ERROR(g, tr_embedding(g, &host, table), "embedding: ids (2, 3) are in host memory", "table (5, 3) in device memory");
        }
    }
    tr_graph_destroy(g);
}

int main(int argc, char **argv) {
    dc_open(argc, argv);
    test_copy_rows();
    test_permute();
    test_matmul();
    test_embedding();
    test_layer_norm();
    test_attention();
    test_attention_qkv();
    test_embedding_padding();
    test_attention_masked();
    test_attention_dropout();
    test_reductions();
    test_embedding_graph();
    return dc_close();
}
