/* The dataset plugins idx and synthetic (plugins/datasets/): idx on the real MNIST test set,
 * synthetic for determinism, balance and learnability, and get() from two threads equal to
 * serial. csv and text: dataset_text_plugins.c. Loads the built .so files by path; skips
 * (77) when one is not built. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ds_check.h"

/* The MNIST test set ships in shared/ beside the checkout (the CI layout too). */
#define MNIST_DIR TRAINER_SOURCE_DIR "/../shared/data/mnist"

/* ---- idx ---- */

static void test_idx(void) {
    if (access(MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("idx: %s missing, idx tests skipped\n", MNIST_DIR);
        return;
    }
    const char *kv[] = {"images=t10k-images-idx3-ubyte.gz", "labels=t10k-labels-idx1-ubyte.gz"};
    ds d;
    tr_status st = ds_open(&d, "idx", kv, 2, TR_SPLIT_TRAIN, 1, MNIST_DIR, 0);
    CHECK(st == TR_OK, "idx open: %s", tr_error_msg());
    if (st != TR_OK) return;
    CHECK(d.n == 10000, "idx size %lld", (long long)d.n);
    CHECK(d.spec.task == TR_TASK_CLASSIFY && d.spec.x_dtype == TR_F32 && d.spec.x_ndim == 3 &&
              d.spec.x_shape[0] == 1 && d.spec.x_shape[1] == 28 && d.spec.x_shape[2] == 28 &&
              d.spec.x_numel == 784 && d.spec.y_dtype == TR_I32 && d.spec.y_ndim == 0 &&
              d.spec.y_numel == 1 && d.spec.n_classes == 10,
          "idx spec");
    float x[784], x2[784];
    int32_t y = -1, y2 = -1;
    CHECK(d.ops->get(d.ctx, 0, x, &y) == TR_OK && y == 7, "first t10k label 7, got %d", y);
    /* image 0, row 7, column 6 is 84; column 0 is background 0 */
    CHECK_NEAR(x[7 * 28 + 6], (84.0 / 255.0 - 0.1307) / 0.3081, 1e-5);
    CHECK_NEAR(x[0], -0.1307 / 0.3081, 1e-6);
    CHECK(d.ops->get(d.ctx, 1, x, &y) == TR_OK && y == 2, "second t10k label 2, got %d", y);
    CHECK(d.ops->get(d.ctx, 10000, x, &y) != TR_OK, "index 10000 refused");
    int counts[10] = {0};
    for (int64_t i = 0; i < d.n; i++) {
        d.ops->get(d.ctx, i, x, &y);
        if (y >= 0 && y < 10) counts[y]++;
    }
    CHECK(counts[0] == 980 && counts[1] == 1135 && counts[9] == 1009,
          "t10k class counts %d %d %d, expected 980 1135 1009", counts[0], counts[1], counts[9]);
    ds_check_threads("idx", &d);

    /* first/count: sample 0 of the range is sample 8000 of the whole */
    ds r;
    const char *kr[] = {kv[0], kv[1], "first=8000", "count=2000", "flatten=true",
                        "normalize=false"};
    st = ds_open(&r, "idx", kr, 6, TR_SPLIT_VAL, 1, MNIST_DIR, 0);
    CHECK(st == TR_OK, "idx range: %s", tr_error_msg());
    if (st == TR_OK) {
        CHECK(r.n == 2000 && r.spec.x_ndim == 1 && r.spec.x_shape[0] == 784, "range spec");
        d.ops->get(d.ctx, 8000, x, &y);
        r.ops->get(r.ctx, 0, x2, &y2);
        CHECK(y == y2, "range label %d vs %d", y2, y);
        double err = 0;
        for (int i = 0; i < 784; i++)
            err = fmax(err, fabs(x2[i] - (x[i] * 0.3081 + 0.1307)));
        CHECK(err < 1e-5, "range pixels differ from the full set by %g", err);
        d.ops->get(d.ctx, 9999, x, &y);
        r.ops->get(r.ctx, 1999, x2, &y2);
        CHECK(y == y2, "last of range");
        ds_close(&r);
    }
    const char *kbad[] = {kv[0], kv[1], "first=9000", "count=2000"};
    st = ds_open(&r, "idx", kbad, 4, TR_SPLIT_TRAIN, 1, MNIST_DIR, 0);
    CHECK(st == TR_ERR_INVALID && strstr(tr_error_msg(), "first=9000 count=2000"),
          "range past the end refused: %s", tr_error_msg());
    ds_close(&r);

    /* plain (uncompressed) copies of the first 10 images, rebuilt from the unnormalised data */
    enum { N = 10 };
    const char *kraw[] = {kv[0], kv[1], "normalize=false"};
    st = ds_open(&r, "idx", kraw, 3, TR_SPLIT_TRAIN, 1, MNIST_DIR, 0);
    CHECK(st == TR_OK, "idx raw: %s", tr_error_msg());
    if (st == TR_OK) {
        static uint8_t img[16 + N * 784], lab[8 + N];
        const uint8_t ih[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, 28, 0, 0, 0, 28};
        const uint8_t lh[8] = {0, 0, 8, 1, 0, 0, 0, N};
        memcpy(img, ih, 16);
        memcpy(lab, lh, 8);
        for (int i = 0; i < N; i++) {
            r.ops->get(r.ctx, i, x, &y);
            for (int k = 0; k < 784; k++) img[16 + i * 784 + k] = (uint8_t)lrintf(x[k] * 255.0f);
            lab[8 + i] = (uint8_t)y;
        }
        ds_close(&r);
        ds_write_file("img", img, sizeof img);
        ds_write_file("lab", lab, sizeof lab);
        const char *kp[] = {"images=img", "labels=lab"};
        ds p;
        st = ds_open(&p, "idx", kp, 2, TR_SPLIT_TRAIN, 1, ds_tmpdir, 0);
        CHECK(st == TR_OK, "plain idx: %s", tr_error_msg());
        if (st == TR_OK) {
            CHECK(p.n == N, "plain size");
            double err = 0;
            for (int i = 0; i < N; i++) {
                d.ops->get(d.ctx, i, x, &y);
                p.ops->get(p.ctx, i, x2, &y2);
                CHECK(y == y2, "plain label %d", i);
                for (int k = 0; k < 784; k++) err = fmax(err, fabs(x[k] - x2[k]));
            }
            CHECK(err < 1e-5, "plain copy differs by %g", err);
            ds_close(&p);
        }
        /* truncated: header says 10 images, 9.5 are there */
        ds_write_file("img_trunc", img, 16 + 9 * 784 + 392);
        const char *kt[] = {"images=img_trunc", "labels=lab"};
        ds_expect_error("idx", kt, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE,
                     "img_trunc: truncated: header says 10 images of 28x28, file holds 9", NULL);
        /* labels file given as images: wrong magic */
        const char *km[] = {"images=lab", "labels=lab"};
        ds_expect_error("idx", km, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "/lab: not an IDX image file",
                     "0x00000801");
        /* 9 labels for 10 images */
        lab[7] = 9;
        ds_write_file("lab9", lab, 8 + 9);
        const char *kc[] = {"images=img", "labels=lab9"};
        ds_expect_error("idx", kc, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "lab9 holds 9 labels",
                     "holds 10 images");
        /* a label of 10 with the default 10 classes */
        lab[7] = N;
        lab[8 + 3] = 10;
        ds_write_file("lab10", lab, sizeof lab);
        const char *kl[] = {"images=img", "labels=lab10"};
        ds_expect_error("idx", kl, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "lab10: label 3 is 10",
                     "expected < 10");
        ds_remove_file("img");
        ds_remove_file("lab");
        ds_remove_file("img_trunc");
        ds_remove_file("lab9");
        ds_remove_file("lab10");
    }
    /* a truncated gzip stream */
    FILE *f = fopen(MNIST_DIR "/t10k-labels-idx1-ubyte.gz", "rb");
    if (f) {
        static uint8_t gz[4096];
        size_t n = fread(gz, 1, sizeof gz, f);
        fclose(f);
        ds_write_file("cut.gz", gz, n / 2);
        const char *kg[] = {"images=" MNIST_DIR "/t10k-images-idx3-ubyte.gz", "labels=cut.gz"};
        ds_expect_error("idx", kg, 2, TR_SPLIT_TRAIN, 0, TR_ERR_IO, "cut.gz: truncated or corrupt gzip", NULL);
        ds_remove_file("cut.gz");
    }
    const char *kn[] = {"images=nope.gz", "labels=nope.gz"};
    ds_expect_error("idx", kn, 2, TR_SPLIT_TRAIN, 0, TR_ERR_IO, "nope.gz: cannot open", NULL);
    ds_close(&d);
}

/* ---- csv ---- */

static void test_synthetic(void) {
    ds a, b, c, v;
    const char *k[] = {"samples=2048", "val_samples=1024"};
    CHECK(ds_open(&a, "synthetic", k, 2, TR_SPLIT_TRAIN, 42, NULL, 0) == TR_OK, "%s", tr_error_msg());
    CHECK(ds_open(&b, "synthetic", k, 2, TR_SPLIT_TRAIN, 42, NULL, 0) == TR_OK, "%s", tr_error_msg());
    CHECK(ds_open(&c, "synthetic", k, 2, TR_SPLIT_TRAIN, 43, NULL, 0) == TR_OK, "%s", tr_error_msg());
    CHECK(ds_open(&v, "synthetic", k, 2, TR_SPLIT_VAL, 42, NULL, 0) == TR_OK, "%s", tr_error_msg());
    if (!a.ctx || !b.ctx || !c.ctx || !v.ctx) return;
    CHECK(a.n == 2048 && v.n == 1024 && a.spec.x_ndim == 1 && a.spec.x_shape[0] == 32 &&
              a.spec.n_classes == 8 && a.spec.task == TR_TASK_CLASSIFY,
          "synthetic spec");
    enum { F = 32, C = 8 };
    static float xa[2048][F], xb[F], xc[F];
    int32_t ya[2048], yb, yc;
    int same = 1, diff = 0, counts[C] = {0};
    double centre[C][F] = {{0}};
    for (int i = 0; i < 2048; i++) {
        a.ops->get(a.ctx, i, xa[i], &ya[i]);
        b.ops->get(b.ctx, i, xb, &yb);
        c.ops->get(c.ctx, i, xc, &yc);
        same &= memcmp(xa[i], xb, sizeof xb) == 0 && ya[i] == yb;
        diff += memcmp(xa[i], xc, sizeof xc) != 0;
        counts[ya[i]]++;
        for (int f = 0; f < F; f++) centre[ya[i]][f] += xa[i][f] / 256.0;
    }
    CHECK(same, "same seed, same samples");
    CHECK(diff == 2048, "another seed, other samples (%d of 2048 differ)", diff);
    for (int cl = 0; cl < C; cl++) CHECK(counts[cl] == 256, "class %d has %d samples", cl, counts[cl]);
    /* validation: other samples of the same distribution; nearest train centroid wins */
    int correct = 0, equal0;
    float xv[F];
    int32_t yv;
    v.ops->get(v.ctx, 0, xv, &yv);
    equal0 = memcmp(xv, xa[0], sizeof xv) == 0;
    CHECK(!equal0, "validation samples differ from train samples");
    for (int i = 0; i < 1024; i++) {
        v.ops->get(v.ctx, i, xv, &yv);
        int best = -1;
        double bd = INFINITY;
        for (int cl = 0; cl < C; cl++) {
            double dd = 0;
            for (int f = 0; f < F; f++) dd += (xv[f] - centre[cl][f]) * (xv[f] - centre[cl][f]);
            if (dd < bd) bd = dd, best = cl;
        }
        correct += best == yv;
    }
    printf("synthetic: nearest-centroid validation accuracy %.1f%%\n", 100.0 * correct / 1024);
    CHECK(correct > 0.9 * 1024, "synthetic classes learnable: %d of 1024", correct);
    ds_check_threads("synthetic", &a);
    ds_close(&a);
    ds_close(&b);
    ds_close(&c);
    ds_close(&v);

    const char *ks[] = {"shape=[1, 28, 28]", "classes=10"};
    CHECK(ds_open(&a, "synthetic", ks, 2, TR_SPLIT_TRAIN, 1, NULL, 0) == TR_OK, "%s", tr_error_msg());
    if (a.ctx) {
        CHECK(a.spec.x_ndim == 3 && a.spec.x_shape[0] == 1 && a.spec.x_shape[2] == 28 &&
                  a.spec.x_numel == 784 && a.spec.n_classes == 10 && a.n == 8192,
              "synthetic image shape");
        ds_close(&a);
    }

    const char *k6[] = {"shape=[1, 1, 1, 1, 1, 1]"};
    ds_expect_error("synthetic", k6, 1, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "shape has 6 dims", "at most 5");
    const char *kbig[] = {"shape=[4096, 4096, 2]"};
    ds_expect_error("synthetic", kbig, 1, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "too large", NULL);

    /* lm: y = x shifted; deterministic; transitions concentrated on few successors */
    enum { T = 16, V = 32, NS = 1000 };
    const char *kl[] = {"task=lm", "seq_len=16", "vocab=32"};
    CHECK(ds_open(&a, "synthetic", kl, 3, TR_SPLIT_TRAIN, 7, NULL, 0) == TR_OK, "%s", tr_error_msg());
    CHECK(ds_open(&b, "synthetic", kl, 3, TR_SPLIT_TRAIN, 7, NULL, 0) == TR_OK, "%s", tr_error_msg());
    if (!a.ctx || !b.ctx) return;
    CHECK(a.spec.task == TR_TASK_LM && a.spec.x_dtype == TR_I32 && a.spec.x_numel == T &&
              a.spec.y_numel == T && a.spec.n_classes == V,
          "synthetic lm spec");
    static int bigram[V][V];
    int shifted = 1, inrange = 1, det = 1;
    for (int i = 0; i < NS; i++) {
        int32_t x[T], y[T], x2[T], y2[T];
        a.ops->get(a.ctx, i, x, y);
        b.ops->get(b.ctx, i, x2, y2);
        det &= memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0;
        for (int t = 0; t < T; t++) {
            inrange &= x[t] >= 0 && x[t] < V && y[t] >= 0 && y[t] < V;
            if (t + 1 < T) shifted &= y[t] == x[t + 1];
            if (x[t] >= 0 && x[t] < V && y[t] >= 0 && y[t] < V) bigram[x[t]][y[t]]++;
        }
    }
    CHECK(shifted && inrange && det, "lm: y shifted %d, in range %d, deterministic %d", shifted,
          inrange, det);
    long top = 0, all = 0;
    for (int u = 0; u < V; u++) {
        int m[3] = {0};
        for (int w = 0; w < V; w++) {
            int n = bigram[u][w];
            all += n;
            if (n > m[0]) m[2] = m[1], m[1] = m[0], m[0] = n;
            else if (n > m[1]) m[2] = m[1], m[1] = n;
            else if (n > m[2]) m[2] = n;
        }
        top += m[0] + m[1] + m[2];
    }
    printf("synthetic lm: %.1f%% of transitions go to a token's 3 likeliest successors\n",
           100.0 * top / all);
    CHECK(top > 0.85 * all, "lm transitions structured: %ld of %ld", top, all);
    ds_close(&a);
    ds_close(&b);
}

int main(void) {
    if (ds_setup() != 0) return test_finish();
    test_synthetic();
    test_idx();
    ds_teardown();
    return test_finish();
}
