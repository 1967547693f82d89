/* The dataset plugins csv and text (plugins/datasets/) on small temporary files: layouts,
 * labels, splits, refusals, and get() from two threads equal to serial. Every temporary file
 * is removed. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ds_check.h"

static void test_csv(void) {
    ds_write_text("t.csv", "a, b ,label\n1,2,0\n3,4,1\r\n\n5,6.5,2\n7,8,1\n");
    ds d;
    const char *k0[] = {"path=t.csv", "normalize=none"};
    tr_status st = ds_open(&d, "csv", k0, 2, TR_SPLIT_TRAIN, 1, ds_tmpdir, 0);
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
    st = ds_open(&d, "csv", k1, 1, TR_SPLIT_VAL, 1, ds_tmpdir, 0.25);
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
    st = ds_open(&d, "csv", k1, 1, TR_SPLIT_TRAIN, 1, ds_tmpdir, 0.25);
    if (st == TR_OK) {
        float x[2];
        int32_t y;
        CHECK(d.n == 3, "csv train size");
        d.ops->get(d.ctx, 0, x, &y);
        CHECK_NEAR(x[0], (1 - 3) / sqrt(8.0 / 3.0), 1e-5);
        ds_close(&d);
    }
    /* minmax, regression, no header with a label column number, a separate val file */
    ds_write_text("v.csv", "a,b,label\n4,5,0.25\n");
    const char *k2[] = {"path=t.csv", "normalize=minmax", "task=regress", "val_path=v.csv"};
    st = ds_open(&d, "csv", k2, 4, TR_SPLIT_VAL, 1, ds_tmpdir, 0.5);
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
        const tr_plugin *p = ds_plugin("csv");
        const char *kt[] = {"path=t.csv"}, *kv[] = {"path=v.csv", "task=classify"};
        tr_options *to = NULL, *ov = NULL;
        CHECK(tr_options_create(&to, p->desc->options, p->desc->n_options, kt, 1, "t") == TR_OK, "%s", tr_error_msg());
        CHECK(tr_options_create(&ov, p->desc->options, p->desc->n_options, kv, 2, "v") == TR_OK, "%s", tr_error_msg());
        ds_write_text("v.csv", "a,b,label\n4,5,1\n3,2,0\n");
        tr_dataset_env env = {.split = TR_SPLIT_VAL, .seed = 1, .base_dir = ds_tmpdir, .val_fraction = 0.25, .train_opts = to};
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
    ds_write_text("nh.csv", "9,1,2\n8,0,3\n");
    const char *k3[] = {"path=nh.csv", "header=false", "label=1", "normalize=none"};
    st = ds_open(&d, "csv", k3, 4, TR_SPLIT_TRAIN, 1, ds_tmpdir, 0);
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
    ds_write_text("bad.csv", "a,b,label\n1,2,0\n\n3,abc,1\n");
    const char *kb[] = {"path=bad.csv"};
    ds_expect_error("csv", kb, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE,
                 "bad.csv:4: column 'b': expected a number, got 'abc'", NULL);
    ds_write_text("rag.csv", "a,b,label\n1,2,0\n3,4\n");
    const char *kr[] = {"path=rag.csv"};
    ds_expect_error("csv", kr, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "rag.csv:3: 2 cells, expected 3",
                 NULL);
    ds_write_text("lab.csv", "a,label\n1,0\n2,1.5\n");
    const char *kl[] = {"path=lab.csv"};
    ds_expect_error("csv", kl, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "lab.csv:3: column 'label'",
                 "non-negative integer");
    const char *kn[] = {"path=t.csv", "label=y"};
    ds_expect_error("csv", kn, 2, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "no label column 'y'", "'b'");
    ds_write_text("empty.csv", "a,label\n");
    const char *ke[] = {"path=empty.csv"};
    ds_expect_error("csv", ke, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "empty.csv: no data rows", NULL);
    /* nothing held out and no validation file: no validation split, an empty one (not an error) */
    ds none;
    CHECK(ds_open(&none, "csv", k1, 1, TR_SPLIT_VAL, 1, ds_tmpdir, 0) == TR_OK, "csv val_fraction 0: %s", tr_error_msg());
    if (none.ctx) CHECK(none.ops->size(none.ctx) == 0, "csv val_fraction 0: %lld validation rows", (long long)none.ops->size(none.ctx));
    ds_close(&none);
    const char *r[] = {"t.csv", "v.csv", "nh.csv", "bad.csv", "rag.csv", "lab.csv", "empty.csv"};
    for (int i = 0; i < 7; i++) ds_remove_file(r[i]);
}

/* ---- text ---- */

static void test_text(void) {
    const char *s = "hello world, this is a byte level test file.\n";   /* 45 bytes */
    int64_t L = (int64_t)strlen(s), nval = (int64_t)floor(L * 0.25), ntr = L - nval;
    ds_write_text("t.txt", s);
    const char *k[] = {"path=t.txt", "seq_len=4"};
    ds d;
    tr_status st = ds_open(&d, "text", k, 2, TR_SPLIT_TRAIN, 1, ds_tmpdir, 0.25);
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
    st = ds_open(&d, "text", k, 2, TR_SPLIT_VAL, 1, ds_tmpdir, 0.25);
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
    st = ds_open(&d, "text", ks, 3, TR_SPLIT_TRAIN, 1, ds_tmpdir, 0);
    if (st == TR_OK) {
        int32_t x[8], y[8];
        CHECK(d.n == L - 8, "stride 1 size %lld", (long long)d.n);
        d.ops->get(d.ctx, 3, x, y);
        CHECK(x[0] == s[3] && y[7] == s[11], "stride 1 sample 3");
        ds_close(&d);
    }
    /* classify: sorted label ids, truncation, zero padding, CRLF, blank lines */
    ds_write_text("c.txt", "pos\tgood movie\nneg\tbad\n\nzzz\tmeh\r\nneg\tawful\n");
    const char *kc[] = {"path=c.txt", "mode=classify", "seq_len=6"};
    st = ds_open(&d, "text", kc, 3, TR_SPLIT_TRAIN, 1, ds_tmpdir, 0.25);
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
    st = ds_open(&d, "text", kc, 3, TR_SPLIT_VAL, 1, ds_tmpdir, 0.25);
    if (st == TR_OK) {
        int32_t x[6], y;
        d.ops->get(d.ctx, 0, x, &y);
        CHECK(d.n == 1 && y == 0 && x[0] == 'a' && x[4] == 'l' && x[5] == 0, "classify val line");
        ds_close(&d);
    }
    ds_write_text("notab.txt", "a\tfine\nno tab here\n");
    const char *kt[] = {"path=notab.txt", "mode=classify"};
    ds_expect_error("text", kt, 2, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "notab.txt:2: expected 'label<TAB>text'",
                 NULL);
    ds_write_text("empty.txt", "");
    const char *ke[] = {"path=empty.txt"};
    ds_expect_error("text", ke, 1, TR_SPLIT_TRAIN, 0, TR_ERR_PARSE, "empty.txt: empty file", NULL);
    const char *kl[] = {"path=t.txt", "seq_len=100"};
    ds_expect_error("text", kl, 2, TR_SPLIT_TRAIN, 0, TR_ERR_INVALID, "t.txt: the train split holds 45 bytes",
                 "seq_len+1 = 101");
    ds_remove_file("t.txt");
    ds_remove_file("c.txt");
    ds_remove_file("notab.txt");
    ds_remove_file("empty.txt");
}

/* ---- synthetic ---- */

int main(void) {
    if (ds_setup() != 0) return test_finish();
    test_csv();
    test_text();
    ds_teardown();
    return test_finish();
}
