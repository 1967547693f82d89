/* The dataset plugins (plugins/datasets/): idx on the real MNIST test set, csv and text on
 * small temporary files, synthetic for determinism, balance and learnability, and get() from
 * two threads equal to serial. Loads the built .so files by path; skips (77) when one is not
 * built. Every temporary file is removed. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/model.h"
#include "trainer/plugin.h"

#define PLUGIN_DIR TRAINER_BINARY_DIR "/plugins/datasets"
/* The MNIST test set ships in shared/ beside the checkout (the CI layout too). */
#define MNIST_DIR TRAINER_SOURCE_DIR "/../shared/data/mnist"

static char tmpdir[256];

typedef struct ds {
    tr_plugin *p;
    const tr_dataset_ops *ops;
    void *ctx;
    tr_data_spec spec;
    int64_t n;
} ds;

static tr_plugin *plugins[4];
static const char *plugin_names[4] = {"synthetic", "idx", "csv", "text"};

static tr_plugin *plugin(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(plugin_names[i], name) == 0) return plugins[i];
    return NULL;
}

/* Creates a dataset from "key=value" options; on failure returns the status (ctx NULL). */
static tr_status ds_open(ds *d, const char *name, const char *const *kv, int n_kv,
                         tr_split split, uint64_t seed, const char *base, double val_fraction) {
    memset(d, 0, sizeof *d);
    d->p = plugin(name);
    d->ops = d->p->desc->ops;
    tr_options *o = NULL;
    tr_status st = tr_options_create(&o, d->p->desc->options, d->p->desc->n_options, kv, n_kv,
                                     name);
    if (st != TR_OK) return st;
    tr_dataset_env env = {.split = split, .seed = seed, .base_dir = base,
                          .val_fraction = val_fraction};
    st = d->ops->create(&d->ctx, o, &env);
    tr_options_destroy(o);
    if (st != TR_OK) {
        d->ctx = NULL;
        return st;
    }
    d->ops->spec(d->ctx, &d->spec);
    d->n = d->ops->size(d->ctx);
    return TR_OK;
}

static void ds_close(ds *d) {
    if (d->ctx) d->ops->destroy(d->ctx);
    d->ctx = NULL;
}

/* Expects create to fail with status want and a message holding every needle. */
static void expect_error(const char *name, const char *const *kv, int n_kv, tr_split split,
                         double val_fraction, tr_status want, const char *n1, const char *n2) {
    ds d;
    tr_status st = ds_open(&d, name, kv, n_kv, split, 1, tmpdir, val_fraction);
    CHECK(st == want, "%s %s: expected status %s, got %s (%s)", name, kv[0], tr_status_str(want),
          tr_status_str(st), tr_error_msg());
    if (st == TR_OK) {
        ds_close(&d);
        return;
    }
    CHECK(strstr(tr_error_msg(), n1) != NULL, "%s: message '%s' lacks '%s'", name,
          tr_error_msg(), n1);
    if (n2)
        CHECK(strstr(tr_error_msg(), n2) != NULL, "%s: message '%s' lacks '%s'", name,
              tr_error_msg(), n2);
}

static void write_file(const char *name, const void *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

static void write_text(const char *name, const char *s) { write_file(name, s, strlen(s)); }

static void remove_file(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    unlink(path);
}

/* ---- get() from two threads equals serial ---- */

typedef struct job {
    const ds *d;
    int parity;
    float *x;          /* (n, x_numel) f32 or i32 (same size) */
    int32_t *y;        /* (n, y_numel) */
    int bad;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    const ds *d = j->d;
    for (int64_t i = j->parity; i < d->n; i += 2)
        if (d->ops->get(d->ctx, i, j->x + i * d->spec.x_numel, j->y + i * d->spec.y_numel) != TR_OK)
            j->bad = 1;
    return NULL;
}

static void check_threads(const char *what, const ds *d) {
    int64_t nx = d->n * d->spec.x_numel, ny = d->n * d->spec.y_numel;
    float *xs = malloc((size_t)nx * 4), *xp = malloc((size_t)nx * 4);
    int32_t *ys = malloc((size_t)ny * 4), *yp = malloc((size_t)ny * 4);
    CHECK(xs && xp && ys && yp, "alloc");
    if (!xs || !xp || !ys || !yp) goto out;
    for (int64_t i = 0; i < d->n; i++)
        d->ops->get(d->ctx, i, xs + i * d->spec.x_numel, ys + i * d->spec.y_numel);
    job a = {.d = d, .parity = 0, .x = xp, .y = yp}, b = {.d = d, .parity = 1, .x = xp, .y = yp};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_job, &a);
    pthread_create(&tb, NULL, run_job, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(!a.bad && !b.bad, "%s: threaded get failed", what);
    CHECK(memcmp(xs, xp, (size_t)nx * 4) == 0 && memcmp(ys, yp, (size_t)ny * 4) == 0,
          "%s: two threads differ from serial", what);
out:
    free(xs);
    free(xp);
    free(ys);
    free(yp);
}

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
    check_threads("idx", &d);

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
        write_file("img", img, sizeof img);
        write_file("lab", lab, sizeof lab);
        const char *kp[] = {"images=img", "labels=lab"};
        ds p;
        st = ds_open(&p, "idx", kp, 2, TR_SPLIT_TRAIN, 1, tmpdir, 0);
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
        write_file("img_trunc", img, 16 + 9 * 784 + 392);
        const char *kt[] = {"images=img_trunc", "labels=lab"};
        expect_error("idx", kt, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE,
                     "img_trunc: truncated: header says 10 images of 28x28, file holds 9", NULL);
        /* labels file given as images: wrong magic */
        const char *km[] = {"images=lab", "labels=lab"};
        expect_error("idx", km, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "/lab: not an IDX image file",
                     "0x00000801");
        /* 9 labels for 10 images */
        lab[7] = 9;
        write_file("lab9", lab, 8 + 9);
        const char *kc[] = {"images=img", "labels=lab9"};
        expect_error("idx", kc, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "lab9 holds 9 labels",
                     "holds 10 images");
        /* a label of 10 with the default 10 classes */
        lab[7] = N;
        lab[8 + 3] = 10;
        write_file("lab10", lab, sizeof lab);
        const char *kl[] = {"images=img", "labels=lab10"};
        expect_error("idx", kl, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "lab10: label 3 is 10",
                     "expected < 10");
        remove_file("img");
        remove_file("lab");
        remove_file("img_trunc");
        remove_file("lab9");
        remove_file("lab10");
    }
    /* a truncated gzip stream */
    FILE *f = fopen(MNIST_DIR "/t10k-labels-idx1-ubyte.gz", "rb");
    if (f) {
        static uint8_t gz[4096];
        size_t n = fread(gz, 1, sizeof gz, f);
        fclose(f);
        write_file("cut.gz", gz, n / 2);
        const char *kg[] = {"images=" MNIST_DIR "/t10k-images-idx3-ubyte.gz", "labels=cut.gz"};
        expect_error("idx", kg, 2, TR_SPLIT_TRAIN, 0, TR_ERR_IO, "cut.gz: truncated or corrupt gzip", NULL);
        remove_file("cut.gz");
    }
    const char *kn[] = {"images=nope.gz", "labels=nope.gz"};
    expect_error("idx", kn, 2, TR_SPLIT_TRAIN, 0, TR_ERR_IO, "nope.gz: cannot open", NULL);
    ds_close(&d);
}

/* ---- csv ---- */

static void test_csv(void) {
    write_text("t.csv", "a, b ,label\n1,2,0\n3,4,1\r\n\n5,6.5,2\n7,8,1\n");
    ds d;
    const char *k0[] = {"path=t.csv", "normalize=none"};
    tr_status st = ds_open(&d, "csv", k0, 2, TR_SPLIT_TRAIN, 1, tmpdir, 0);
    CHECK(st == TR_OK, "csv: %s", tr_error_msg());
    if (st == TR_OK) {
        CHECK(d.n == 4 && d.spec.x_ndim == 1 && d.spec.x_shape[0] == 2 && d.spec.n_classes == 3 &&
                  d.spec.task == TR_TASK_CLASSIFY && d.spec.y_dtype == TR_I32,
              "csv spec: n %lld, classes %lld", (long long)d.n, (long long)d.spec.n_classes);
        const float want[4][2] = {{1, 2}, {3, 4}, {5, 6.5f}, {7, 8}};
        const int32_t wy[4] = {0, 1, 2, 1};
        for (int i = 0; i < 4; i++) {
            float x[2];
            int32_t y;
            d.ops->get(d.ctx, i, x, &y);
            CHECK(x[0] == want[i][0] && x[1] == want[i][1] && y == wy[i],
                  "csv row %d: %g %g %d", i, x[0], x[1], y);
        }
        ds_close(&d);
    }
    /* standard: statistics of the train rows (first 3 of 4 with val_fraction 0.25) */
    const char *k1[] = {"path=t.csv"};
    st = ds_open(&d, "csv", k1, 1, TR_SPLIT_VAL, 1, tmpdir, 0.25);
    CHECK(st == TR_OK, "csv val: %s", tr_error_msg());
    if (st == TR_OK) {
        float x[2];
        int32_t y;
        CHECK(d.n == 1, "csv val size %lld", (long long)d.n);
        d.ops->get(d.ctx, 0, x, &y);
        CHECK_NEAR(x[0], (7 - 3) / sqrt(8.0 / 3.0), 1e-5);
        double m = (2 + 4 + 6.5) / 3, v = ((2 - m) * (2 - m) + (4 - m) * (4 - m) + (6.5 - m) * (6.5 - m)) / 3;
        CHECK_NEAR(x[1], (8 - m) / sqrt(v), 1e-5);
        CHECK(y == 1, "csv val label");
        ds_close(&d);
    }
    st = ds_open(&d, "csv", k1, 1, TR_SPLIT_TRAIN, 1, tmpdir, 0.25);
    if (st == TR_OK) {
        float x[2];
        int32_t y;
        CHECK(d.n == 3, "csv train size");
        d.ops->get(d.ctx, 0, x, &y);
        CHECK_NEAR(x[0], (1 - 3) / sqrt(8.0 / 3.0), 1e-5);
        ds_close(&d);
    }
    /* minmax, regression, no header with a label column number, a separate val file */
    write_text("v.csv", "a,b,label\n4,5,0.25\n");
    const char *k2[] = {"path=t.csv", "normalize=minmax", "task=regress", "val_path=v.csv"};
    st = ds_open(&d, "csv", k2, 4, TR_SPLIT_VAL, 1, tmpdir, 0.5);
    CHECK(st == TR_OK, "csv minmax: %s", tr_error_msg());
    if (st == TR_OK) {
        float x[2], y;
        CHECK(d.n == 1 && d.spec.task == TR_TASK_REGRESS && d.spec.y_dtype == TR_F32, "regress spec");
        d.ops->get(d.ctx, 0, x, &y);
        CHECK_NEAR(x[0], (4 - 1) / 6.0, 1e-6);
        CHECK_NEAR(x[1], (5 - 2) / 6.0, 1e-6);
        CHECK_NEAR(y, 0.25, 1e-7);
        ds_close(&d);
    }
    /* a file given in data.val_params (env.train_opts: the train split's): the validation split
     * whole, standardised with the train split's statistics (t.csv's first 3 rows) */
    {
        const tr_plugin *p = plugin("csv");
        const char *kt[] = {"path=t.csv"}, *kv[] = {"path=v.csv", "task=classify"};
        tr_options *to = NULL, *ov = NULL;
        CHECK(tr_options_create(&to, p->desc->options, p->desc->n_options, kt, 1, "t") == TR_OK, "%s", tr_error_msg());
        CHECK(tr_options_create(&ov, p->desc->options, p->desc->n_options, kv, 2, "v") == TR_OK, "%s", tr_error_msg());
        write_text("v.csv", "a,b,label\n4,5,1\n3,2,0\n");
        tr_dataset_env env = {.split = TR_SPLIT_VAL, .seed = 1, .base_dir = tmpdir, .val_fraction = 0.25, .train_opts = to};
        void *ctx = NULL;
        const tr_dataset_ops *ops = p->desc->ops;
        st = ops->create(&ctx, ov, &env);
        CHECK(st == TR_OK, "csv val_params file: %s", tr_error_msg());
        if (st == TR_OK) {
            tr_data_spec sp;
            ops->spec(ctx, &sp);
            float x[2];
            int32_t y;
            CHECK(ops->size(ctx) == 2 && sp.n_classes == 3, "csv val_params file: %lld rows, %lld classes",
                  (long long)ops->size(ctx), (long long)sp.n_classes);
            ops->get(ctx, 0, x, &y);
            CHECK_NEAR(x[0], (4 - 3) / sqrt(8.0 / 3.0), 1e-5);
            CHECK(y == 1, "csv val_params file label %d", y);
            ops->destroy(ctx);
        }
        tr_options_destroy(to);
        tr_options_destroy(ov);
    }
    write_text("nh.csv", "9,1,2\n8,0,3\n");
    const char *k3[] = {"path=nh.csv", "header=false", "label=1", "normalize=none"};
    st = ds_open(&d, "csv", k3, 4, TR_SPLIT_TRAIN, 1, tmpdir, 0);
    CHECK(st == TR_OK, "csv no header: %s", tr_error_msg());
    if (st == TR_OK) {
        float x[2];
        int32_t y;
        d.ops->get(d.ctx, 1, x, &y);
        CHECK(d.n == 2 && x[0] == 8 && x[1] == 3 && y == 0 && d.spec.n_classes == 2,
              "no header row 1: %g %g %d", x[0], x[1], y);
        ds_close(&d);
    }
    /* errors with file:line and column */
    write_text("bad.csv", "a,b,label\n1,2,0\n\n3,abc,1\n");
    const char *kb[] = {"path=bad.csv"};
    expect_error("csv", kb, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE,
                 "bad.csv:4: column 'b': expected a number, got 'abc'", NULL);
    write_text("rag.csv", "a,b,label\n1,2,0\n3,4\n");
    const char *kr[] = {"path=rag.csv"};
    expect_error("csv", kr, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "rag.csv:3: 2 cells, expected 3",
                 NULL);
    write_text("lab.csv", "a,label\n1,0\n2,1.5\n");
    const char *kl[] = {"path=lab.csv"};
    expect_error("csv", kl, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "lab.csv:3: column 'label'",
                 "non-negative integer");
    const char *kn[] = {"path=t.csv", "label=y"};
    expect_error("csv", kn, 2, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "no label column 'y'", "'b'");
    write_text("empty.csv", "a,label\n");
    const char *ke[] = {"path=empty.csv"};
    expect_error("csv", ke, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "empty.csv: no data rows", NULL);
    /* nothing held out and no validation file: no validation split, an empty one (not an error) */
    ds none;
    CHECK(ds_open(&none, "csv", k1, 1, TR_SPLIT_VAL, 1, tmpdir, 0) == TR_OK, "csv val_fraction 0: %s", tr_error_msg());
    if (none.ctx) CHECK(none.ops->size(none.ctx) == 0, "csv val_fraction 0: %lld validation rows", (long long)none.ops->size(none.ctx));
    ds_close(&none);
    const char *r[] = {"t.csv", "v.csv", "nh.csv", "bad.csv", "rag.csv", "lab.csv", "empty.csv"};
    for (int i = 0; i < 7; i++) remove_file(r[i]);
}

/* ---- text ---- */

static void test_text(void) {
    const char *s = "hello world, this is a byte level test file.\n";   /* 45 bytes */
    int64_t L = (int64_t)strlen(s), nval = (int64_t)floor(L * 0.25), ntr = L - nval;
    write_text("t.txt", s);
    const char *k[] = {"path=t.txt", "seq_len=4"};
    ds d;
    tr_status st = ds_open(&d, "text", k, 2, TR_SPLIT_TRAIN, 1, tmpdir, 0.25);
    CHECK(st == TR_OK, "text: %s", tr_error_msg());
    if (st == TR_OK) {
        CHECK(d.n == (ntr - 5) / 4 + 1 && d.spec.task == TR_TASK_LM && d.spec.n_classes == 256 &&
                  d.spec.x_numel == 4 && d.spec.y_numel == 4 && d.spec.x_dtype == TR_I32,
              "text lm spec: n %lld", (long long)d.n);
        int ok = 1;
        for (int64_t i = 0; i < d.n; i++) {
            int32_t x[4], y[4];
            d.ops->get(d.ctx, i, x, y);
            for (int t = 0; t < 4; t++)
                ok &= x[t] == (uint8_t)s[i * 4 + t] && y[t] == (uint8_t)s[i * 4 + t + 1];
        }
        CHECK(ok, "text lm samples are the file's bytes, y shifted by one");
        ds_close(&d);
    }
    st = ds_open(&d, "text", k, 2, TR_SPLIT_VAL, 1, tmpdir, 0.25);
    CHECK(st == TR_OK, "text val: %s", tr_error_msg());
    if (st == TR_OK) {
        int32_t x[4], y[4];
        CHECK(d.n == (nval - 5) / 4 + 1, "text val size %lld", (long long)d.n);
        d.ops->get(d.ctx, d.n - 1, x, y);
        int64_t o = ntr + (d.n - 1) * 4;
        CHECK(x[0] == s[o] && x[3] == s[o + 3] && y[3] == s[o + 4], "text val is the tail");
        ds_close(&d);
    }
    const char *ks[] = {"path=t.txt", "seq_len=8", "stride=1"};
    st = ds_open(&d, "text", ks, 3, TR_SPLIT_TRAIN, 1, tmpdir, 0);
    if (st == TR_OK) {
        int32_t x[8], y[8];
        CHECK(d.n == L - 8, "stride 1 size %lld", (long long)d.n);
        d.ops->get(d.ctx, 3, x, y);
        CHECK(x[0] == s[3] && y[7] == s[11], "stride 1 sample 3");
        ds_close(&d);
    }
    /* classify: sorted label ids, truncation, zero padding, CRLF, blank lines */
    write_text("c.txt", "pos\tgood movie\nneg\tbad\n\nzzz\tmeh\r\nneg\tawful\n");
    const char *kc[] = {"path=c.txt", "mode=classify", "seq_len=6"};
    st = ds_open(&d, "text", kc, 3, TR_SPLIT_TRAIN, 1, tmpdir, 0.25);
    CHECK(st == TR_OK, "text classify: %s", tr_error_msg());
    if (st == TR_OK) {
        CHECK(d.n == 3 && d.spec.n_classes == 3 && d.spec.task == TR_TASK_CLASSIFY &&
                  d.spec.x_numel == 6 && d.spec.y_numel == 1,
              "text classify spec: n %lld classes %lld", (long long)d.n,
              (long long)d.spec.n_classes);
        const char *want[3] = {"good m", "bad", "meh"};
        const int32_t wy[3] = {1, 0, 2};
        for (int i = 0; i < 3; i++) {
            int32_t x[6], y;
            d.ops->get(d.ctx, i, x, &y);
            int ok = y == wy[i];
            for (int t = 0; t < 6; t++)
                ok &= x[t] == (t < (int)strlen(want[i]) ? want[i][t] : 0);
            CHECK(ok, "text classify line %d (label %d)", i, y);
        }
        ds_close(&d);
    }
    st = ds_open(&d, "text", kc, 3, TR_SPLIT_VAL, 1, tmpdir, 0.25);
    if (st == TR_OK) {
        int32_t x[6], y;
        d.ops->get(d.ctx, 0, x, &y);
        CHECK(d.n == 1 && y == 0 && x[0] == 'a' && x[4] == 'l' && x[5] == 0, "classify val line");
        ds_close(&d);
    }
    write_text("notab.txt", "a\tfine\nno tab here\n");
    const char *kt[] = {"path=notab.txt", "mode=classify"};
    expect_error("text", kt, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "notab.txt:2: expected 'label<TAB>text'",
                 NULL);
    write_text("empty.txt", "");
    const char *ke[] = {"path=empty.txt"};
    expect_error("text", ke, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "empty.txt: empty file", NULL);
    const char *kl[] = {"path=t.txt", "seq_len=100"};
    expect_error("text", kl, 2, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "t.txt: the train split holds 45 bytes",
                 "seq_len+1 = 101");
    remove_file("t.txt");
    remove_file("c.txt");
    remove_file("notab.txt");
    remove_file("empty.txt");
}

/* ---- synthetic ---- */

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
    check_threads("synthetic", &a);
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
    expect_error("synthetic", k6, 1, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "shape has 6 dims", "at most 5");
    const char *kbig[] = {"shape=[4096, 4096, 2]"};
    expect_error("synthetic", kbig, 1, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "too large", NULL);

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
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/tr_data_%s.so", PLUGIN_DIR, plugin_names[i]);
        if (access(path, R_OK) != 0) {
            for (int j = 0; j < i; j++) tr_plugin_close(plugins[j]);
            char why[600];
            snprintf(why, sizeof why, "%s not built", path);
            test_skip(why);
        }
        tr_status st = tr_plugin_open(path, "test", &plugins[i]);
        CHECK(st == TR_OK, "open %s: %s", path, tr_error_msg());
        if (st != TR_OK) return test_finish();
        CHECK(plugins[i]->desc->kind == TR_PLUGIN_DATASET &&
                  strcmp(plugins[i]->desc->name, plugin_names[i]) == 0,
              "%s descriptor", path);
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/trainer-dataset-test-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp");
        return test_finish();
    }
    test_synthetic();
    test_idx();
    test_csv();
    test_text();
    CHECK(rmdir(tmpdir) == 0, "temporary dir %s left non-empty", tmpdir);
    for (int i = 0; i < 4; i++) tr_plugin_close(plugins[i]);
    return test_finish();
}
