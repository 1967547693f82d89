/* The csv and text datasets with a tokenizer (plugins/datasets/common/token_table.c): every
 * sample's ids equal `trainer tokenize`'s for the same text (the CLI is the path checked
 * against Hugging Face's tokenizers), padded with -1 to max_length; labels and class names;
 * CSV quoting, TSV, JSON Lines, pairs and bi-encoder pairs, truncation, the threaded encoding
 * of a large file, and the loader cutting each batch to its longest sample (padding longest).
 * usage: unit_token_datasets [TOKENIZER]  (default: tests/data/tokdata/tokenizer.json) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ds_check.h"
#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/plugin.h"

#define DATA TRAINER_SOURCE_DIR "/tests/data/tokdata/"
#define CLI TRAINER_BINARY_DIR "/bin/trainer"

static const char *tok_path = DATA "tokenizer.json";
static char tmpdir[] = "/tmp/trainer-tokds-XXXXXX";

/* A dataset of the tokenizer's test folder, seed 1 (tests/common/ds_check.c). */
static tr_status tok_open(ds *d, const char *plugin, const char *const *kv, int n_kv, tr_split split,
                          double val_fraction) {
    return ds_open(d, plugin, kv, n_kv, split, 1, DATA, val_fraction);
}

/* `trainer tokenize` on one line (flags: "--pair", "--max-length 5", ...): its ids into ids. */
static int cli_ids(const char *text, const char *flags, int32_t *ids, int max) {
    char in[512], cmd[2048];
    snprintf(in, sizeof in, "%s/in.txt", tmpdir);
    FILE *f = fopen(in, "w");
    fprintf(f, "%s\n", text);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s tokenize '%s' '%s' --no-padding %s", CLI, tok_path, in, flags);
    FILE *p = popen(cmd, "r");
    int n = 0;
    while (p && n < max && fscanf(p, "%d", &ids[n]) == 1) n++;
    CHECK(p && pclose(p) == 0, "%s failed", cmd);
    return n;
}

/* Sample i's sequence `seq` (of x (seqs, L)) equals the CLI's ids for text, then -1 to L. */
static void expect_ids(const ds *d, int64_t i, int seq, const char *text, const char *flags) {
    if (!d->ctx) return; /* its open failed: counted there */
    int64_t L = d->spec.x_shape[d->spec.x_ndim - 1];
    int32_t *x = malloc((size_t)d->spec.x_numel * sizeof *x), want[4096];
    char y[8];
    CHECK(d->ops->get(d->ctx, i, x, y) == TR_OK, "get %lld: %s", (long long)i, tr_error_msg());
    int n = cli_ids(text, flags, want, 4096);
    CHECK(n > 0 && n <= L, "'%s': %d ids from the CLI, max_length %lld", text, n, (long long)L);
    const int32_t *row = x + seq * L;
    for (int64_t t = 0; t < L; t++) {
        int32_t w = t < n ? want[t] : -1;
        if (row[t] != w) {
            CHECK(0, "sample %lld seq %d ('%s' %s): position %lld is %d, the CLI gives %d", (long long)i, seq, text, flags,
                  (long long)t, row[t], w);
            break;
        }
    }
    free(x);
}

static int32_t label_of(const ds *d, int64_t i) {
    if (!d->ctx) return -98;
    int32_t *x = malloc((size_t)d->spec.x_numel * sizeof *x), y = -99;
    CHECK(d->ops->get(d->ctx, i, x, &y) == TR_OK, "get %lld", (long long)i);
    free(x);
    return y;
}

static float score_of(const ds *d, int64_t i) {
    if (!d->ctx) return -98;
    int32_t *x = malloc((size_t)d->spec.x_numel * sizeof *x);
    float y = -99;
    CHECK(d->ops->get(d->ctx, i, x, &y) == TR_OK, "get %lld", (long long)i);
    free(x);
    return y;
}

static const char *tok_kv(void) {
    static char kv[600];
    snprintf(kv, sizeof kv, "tokenizer=%s", tok_path);
    return kv;
}

static void test_csv_quoting(void) {
    ds d;
    const char *kv[] = {"path=small.csv", tok_kv(), "max_length=16"};
    CHECK(tok_open(&d, "csv", kv, 3, TR_SPLIT_TRAIN, 0) == TR_OK, "small.csv: %s", tr_error_msg());
    CHECK(d.n == 5, "small.csv: %lld samples, want 5 (a blank line skipped)", (long long)d.n);
    CHECK(d.spec.task == TR_TASK_CLASSIFY && d.spec.x_dtype == TR_I32 && d.spec.x_ndim == 1 && d.spec.x_shape[0] == 16 &&
              d.spec.x_numel == 16 && d.spec.x_trim_pad == 1 && d.spec.n_classes == 2 && d.spec.vocab > 100,
          "small.csv spec: task %d x %d dims (%lld) trim %d classes %lld vocab %lld", d.spec.task, d.spec.x_ndim,
          (long long)d.spec.x_shape[0], d.spec.x_trim_pad, (long long)d.spec.n_classes, (long long)d.spec.vocab);
    expect_ids(&d, 0, 0, "The movie was great, really great!", "");
    expect_ids(&d, 1, 0, "They said \"boring\" but it was fun", "");
    /* a newline inside quotes is whitespace to the normalizer: the same ids as a space */
    expect_ids(&d, 2, 0, "The plot was slow. The ending was dull.", "");
    expect_ids(&d, 3, 0, "", ""); /* an empty text: the special tokens alone, as Hugging Face gives */
    expect_ids(&d, 4, 0, "I hated this film", "");
    /* classes: the sorted distinct names */
    CHECK(strcmp(d.ops->class_name(d.ctx, 0), "negative") == 0 && strcmp(d.ops->class_name(d.ctx, 1), "positive") == 0,
          "small.csv class names");
    int32_t want[] = {1, 1, 0, 0, 0};
    for (int i = 0; i < 5; i++) CHECK(label_of(&d, i) == want[i], "small.csv label %d is %d, want %d", i, label_of(&d, i), want[i]);
    ds_close(&d);

    /* declared classes fix the ids; padding max_length asks for no trimming */
    const char *kv2[] = {"path=small.csv", tok_kv(), "max_length=16", "classes=[positive, negative]", "padding=max_length"};
    CHECK(tok_open(&d, "csv", kv2, 5, TR_SPLIT_TRAIN, 0) == TR_OK, "small.csv classes: %s", tr_error_msg());
    CHECK(label_of(&d, 0) == 0 && label_of(&d, 4) == 1 && d.spec.x_trim_pad == 0, "declared classes: labels %d %d, trim %d",
          label_of(&d, 0), label_of(&d, 4), d.spec.x_trim_pad);
    ds_close(&d);

    /* truncation: max_length 5 cuts as the CLI's --max-length does */
    const char *kv3[] = {"path=small.csv", tok_kv(), "max_length=5"};
    CHECK(tok_open(&d, "csv", kv3, 3, TR_SPLIT_TRAIN, 0) == TR_OK, "max_length 5: %s", tr_error_msg());
    expect_ids(&d, 0, 0, "The movie was great, really great!", "--max-length 5");
    ds_close(&d);

    /* the validation split: the last val_fraction of the rows */
    CHECK(tok_open(&d, "csv", kv, 3, TR_SPLIT_VAL, 0.4) == TR_OK && d.n == 2, "val split: %lld samples (%s)", (long long)d.n,
          tr_error_msg());
    expect_ids(&d, 1, 0, "I hated this film", "");
    ds_close(&d);
}

static void test_tsv_jsonl(void) {
    ds d;
    const char *kv[] = {"path=small.tsv", tok_kv(), "max_length=12"};
    CHECK(tok_open(&d, "csv", kv, 3, TR_SPLIT_TRAIN, 0) == TR_OK, "small.tsv: %s", tr_error_msg());
    CHECK(d.n == 3 && d.spec.n_classes == 2 && d.ops->class_name(d.ctx, 0) == NULL, "small.tsv: %lld samples, %lld classes",
          (long long)d.n, (long long)d.spec.n_classes);
    expect_ids(&d, 0, 0, "The movie was great, really great!", "");
    expect_ids(&d, 1, 0, "The acting was awful", "");
    CHECK(label_of(&d, 0) == 1 && label_of(&d, 1) == 0 && label_of(&d, 2) == 1, "small.tsv integer labels");
    ds_close(&d);

    const char *kvj[] = {"path=small.jsonl", tok_kv(), "max_length=12", "mode=classify"};
    for (int p = 0; p < 2; p++) { /* the same file through both plugins */
        if (tok_open(&d, p ? "text" : "csv", kvj, p ? 4 : 3, TR_SPLIT_TRAIN, 0) != TR_OK) {
            CHECK(0, "small.jsonl: %s", tr_error_msg());
            continue;
        }
        CHECK(d.n == 3, "small.jsonl: %lld samples", (long long)d.n);
        expect_ids(&d, 0, 0, "The movie was great, really great!", "");
        expect_ids(&d, 2, 0, "I loved the caf\xc3\xa9 scene", "");
        CHECK(label_of(&d, 0) == 1 && label_of(&d, 1) == 0 && strcmp(d.ops->class_name(d.ctx, 1), "positive") == 0,
              "small.jsonl labels");
        ds_close(&d);
    }

    /* the text plugin's own lines: label<TAB>text, a TAB inside the text kept */
    const char *kvl[] = {"path=lines.txt", tok_kv(), "max_length=12", "mode=classify"};
    CHECK(tok_open(&d, "text", kvl, 4, TR_SPLIT_TRAIN, 0) == TR_OK, "lines.txt: %s", tr_error_msg());
    expect_ids(&d, 0, 0, "The movie was great!", "");
    expect_ids(&d, 1, 0, "The acting was awful\tand slow", "");
    CHECK(label_of(&d, 0) == 1 && label_of(&d, 1) == 0, "lines.txt labels");
    ds_close(&d);
}

static void test_pairs(void) {
    ds d;
    const char *kv[] = {"path=pairs.csv", tok_kv(), "max_length=16", "text_column=sentence1", "text_pair_column=sentence2"};
    CHECK(tok_open(&d, "csv", kv, 5, TR_SPLIT_TRAIN, 0) == TR_OK, "pairs.csv: %s", tr_error_msg());
    expect_ids(&d, 0, 0, "The movie was great\tI loved it, really", "--pair");
    expect_ids(&d, 2, 0, "The film was awful\tIt was bad, so bad", "--pair");
    ds_close(&d);
    /* pair truncation strategies as the CLI's */
    const char *kvt[] = {"path=pairs.csv", tok_kv(), "max_length=9", "text_column=sentence1", "text_pair_column=sentence2",
                         "truncation=only_second"};
    CHECK(tok_open(&d, "csv", kvt, 6, TR_SPLIT_TRAIN, 0) == TR_OK, "pairs.csv only_second: %s", tr_error_msg());
    expect_ids(&d, 0, 0, "The movie was great\tI loved it, really", "--pair --max-length 9 --truncation only_second");
    ds_close(&d);

    /* text mode pairs: two texts encoded apart, x (2, L), a float score */
    const char *kvp[] = {"path=pairs.jsonl", tok_kv(), "max_length=10", "mode=pairs"};
    CHECK(tok_open(&d, "text", kvp, 4, TR_SPLIT_TRAIN, 0) == TR_OK, "pairs.jsonl: %s", tr_error_msg());
    CHECK(d.spec.task == TR_TASK_REGRESS && d.spec.x_ndim == 2 && d.spec.x_shape[0] == 2 && d.spec.x_shape[1] == 10 &&
              d.spec.y_dtype == TR_F32, "pairs.jsonl spec");
    expect_ids(&d, 1, 0, "The plot was slow", "");
    expect_ids(&d, 1, 1, "The music was fun", "");
    CHECK(score_of(&d, 0) == 0.9f && score_of(&d, 2) == 0.8f, "pairs.jsonl scores %g %g", score_of(&d, 0), score_of(&d, 2));
    ds_close(&d);
}

/* A file large enough for several encoding threads: sample i is small.tsv's row i % 3. */
static void test_threads(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/big.tsv", tmpdir);
    FILE *f = fopen(path, "w");
    fprintf(f, "text\tlabel\n");
    const char *texts[] = {"The movie was great, really great!", "The acting was awful", "I loved the music"};
    for (int i = 0; i < 5000; i++) fprintf(f, "%s\t%d\n", texts[i % 3], i % 3 == 1 ? 0 : 1);
    fclose(f);
    ds d, s;
    char kvp[600];
    snprintf(kvp, sizeof kvp, "path=%s", path);
    const char *kv[] = {kvp, tok_kv(), "max_length=12"}, *ks[] = {"path=small.tsv", tok_kv(), "max_length=12"};
    CHECK(tok_open(&d, "csv", kv, 3, TR_SPLIT_TRAIN, 0) == TR_OK && tok_open(&s, "csv", ks, 3, TR_SPLIT_TRAIN, 0) == TR_OK,
          "big.tsv: %s", tr_error_msg());
    int32_t a[12], b[12], ya, yb;
    int bad = 0;
    for (int64_t i = 0; i < d.n && !bad; i++) {
        d.ops->get(d.ctx, i, a, &ya);
        s.ops->get(s.ctx, i % 3, b, &yb);
        bad = memcmp(a, b, sizeof a) != 0 || ya != yb;
        CHECK(!bad, "big.tsv sample %lld differs from small.tsv's %lld", (long long)i, (long long)(i % 3));
    }
    CHECK(d.n == 5000, "big.tsv: %lld samples", (long long)d.n);
    ds_close(&d);
    ds_close(&s);
}

/* padding longest: each batch cut to its longest sample, rows packed x_len apart. */
static void test_loader_trim(void) {
    for (int longest = 0; longest < 2; longest++) {
        ds d;
        const char *kv[] = {"path=small.csv", tok_kv(), "max_length=16", longest ? "padding=longest" : "padding=max_length"};
        CHECK(tok_open(&d, "csv", kv, 4, TR_SPLIT_TRAIN, 0) == TR_OK, "small.csv: %s", tr_error_msg());
        tr_sampler s = {.n = d.n, .global_batch = 2, .rank = 0, .world = 1, .shuffle = 0, .seed = 1};
        tr_loader *L = NULL;
        CHECK(tr_loader_create(&L, d.ops, d.ctx, &d.spec, &s, 2, 1) == TR_OK, "loader: %s", tr_error_msg());
        CHECK(tr_loader_start_epoch(L, 0, 0) == TR_OK, "epoch");
        const tr_host_batch *b;
        int64_t first = 0;
        while (tr_loader_next(L, &b) == TR_OK && b) {
            int32_t x[16], y, want_len = 1;
            for (int64_t i = 0; i < b->size; i++) {
                d.ops->get(d.ctx, first + i, x, &y);
                int len = 16;
                while (len > 1 && x[len - 1] == -1) len--;
                want_len = len > want_len ? len : want_len;
            }
            if (!longest) want_len = 16;
            CHECK(b->x_len == want_len, "batch %lld: x_len %lld, want %d", (long long)b->index, (long long)b->x_len, want_len);
            for (int64_t i = 0; i < b->size; i++) {
                d.ops->get(d.ctx, first + i, x, &y);
                CHECK(memcmp((int32_t *)b->x + i * b->x_len, x, (size_t)b->x_len * sizeof *x) == 0 && ((int32_t *)b->y)[i] == y,
                      "batch %lld sample %lld: packed row differs", (long long)b->index, (long long)i);
            }
            first += b->size;
        }
        CHECK(first == d.n, "loader gave %lld of %lld samples", (long long)first, (long long)d.n);
        tr_loader_destroy(L);
        ds_close(&d);
    }
}

int main(int argc, char **argv) {
    if (argc > 1) tok_path = argv[1];
    if (access(CLI, X_OK) != 0) {
        printf("SKIP: %s not built\n", CLI);
        return 77;
    }
    if (ds_setup() != 0) return test_finish();
    if (!mkdtemp(tmpdir)) return 1;
    test_csv_quoting();
    test_tsv_jsonl();
    test_pairs();
    test_threads();
    test_loader_trim();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    ds_teardown();
    return test_finish();
}
