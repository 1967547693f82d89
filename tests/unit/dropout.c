/* Dropout: statistics of the mask, exact scaling of the kept values, the mask's definition
 * through the counter-based RNG (so that a sample's mask does not depend on how the global
 * batch is split over ranks, also at two rows per sample), fresh masks per call and per step,
 * backward = mask * scale,
 * eval mode and p == 0 as identity, and bad p. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "trainer/ops.h"
#include "trainer/rng.h"

static tr_graph *g;

static tr_tensor *filled(tr_dtype dt, int ndim, const int64_t *shape, int leaf) {
    tr_tensor *t = leaf ? tr_graph_leaf(g, dt, ndim, shape) : tr_graph_input(g, dt, ndim, shape);
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = 0.5 + (double)((i * 7919) % 1000) / 1000.0; /* nonzero, so 0 = dropped */
        if (dt == TR_F64)
            ((double *)t->data)[i] = v;
        else
            ((float *)t->data)[i] = (float)v;
    }
    return t;
}

/* Fraction dropped over a large tensor, kept values exactly x * (1/(1-p)) in f32 and f64. */
static void statistics(tr_dtype dt, double p) {
    tr_graph_reset(g);
    tr_graph_set_rng(g, 77, 3, 0);
    int64_t shape[2] = {1000, 1000};
    tr_tensor *x = filled(dt, 2, shape, 0);
    tr_tensor *y = tr_dropout(g, x, p);
    CHECK(y != NULL && y != x, "dropout p=%g returned %p", p, (void *)y);
    if (!y) return;
    int64_t n = tr_tensor_numel(x), dropped = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double xv, yv, want;
        if (dt == TR_F64) {
            xv = ((double *)x->data)[i];
            yv = ((double *)y->data)[i];
            want = xv * (1.0 / (1.0 - p));
        } else {
            xv = ((float *)x->data)[i];
            yv = ((float *)y->data)[i];
            want = (float)xv * (float)(1.0 / (1.0 - p));
        }
        if (yv == 0)
            dropped++;
        else if (yv != want)
            bad++;
    }
    double frac = (double)dropped / (double)n, sigma = sqrt(p * (1 - p) / (double)n);
    printf("dropout %s p=%.2f: dropped %.5f (5 sigma = %.5f)\n", tr_dtype_name(dt), p, frac,
           5 * sigma);
    CHECK(fabs(frac - p) < 5 * sigma, "dropped fraction %.5f, expected %.2f", frac, p);
    CHECK(bad == 0, "%lld kept values not scaled exactly", (long long)bad);
}

/* Element e of sample s is kept iff tr_rng_uniform(seed, stream, (base + s) * per + e) >= p. */
static void definition(void) {
    const double p = 0.5;
    tr_graph_reset(g);
    tr_graph_set_rng(g, 5, 9, 40);
    int64_t shape[3] = {3, 4, 5};
    tr_tensor *x = filled(TR_F32, 3, shape, 0);
    tr_tensor *y1 = tr_dropout(g, x, p); /* call 0 of the step */
    tr_tensor *y2 = tr_dropout(g, x, p); /* call 1 */
    int mismatch = 0, differ = 0;
    for (int64_t s = 0; s < 3; s++) {
        for (int64_t e = 0; e < 20; e++) {
            for (int call = 0; call < 2; call++) {
                uint64_t stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, 9, (uint64_t)call);
                int keep = tr_rng_uniform(5, stream, (uint64_t)((40 + s) * 20 + e)) >= p;
                const float *yv = (call ? y2 : y1)->data;
                if ((yv[s * 20 + e] != 0) != keep) mismatch++;
            }
            const float *a = y1->data, *b = y2->data;
            differ += (a[s * 20 + e] != 0) != (b[s * 20 + e] != 0);
        }
    }
    CHECK(mismatch == 0, "%d mask elements differ from the RNG definition", mismatch);
    CHECK(differ > 10, "two calls of one step share their mask (%d of 60 differ)", differ);
}

/* The same definition over two parallel chunks, from a stream index that starts inside a
 * Philox block (the head), through whole vector groups of blocks, to a partial last block. */
static void definition_large(void) {
    const double p = 0.25;
    tr_graph_reset(g);
    tr_graph_set_rng(g, 77, 4, 3); /* sample_base 3: the first index is 3 * 1001, odd */
    int64_t shape[2] = {7, 1001};  /* 7007 elements: chunks of 4096 and 2911 */
    tr_tensor *x = filled(TR_F32, 2, shape, 0);
    tr_tensor *y = tr_dropout(g, x, p);
    uint64_t stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, 4, 0);
    int mismatch = 0, dropped = 0;
    const float *yv = y->data;
    for (int64_t i = 0; i < 7007; i++) {
        int keep = tr_rng_uniform(77, stream, (uint64_t)(3 * 1001 + i)) >= p;
        mismatch += (yv[i] != 0) != keep;
        dropped += !keep;
    }
    CHECK(mismatch == 0, "%d of 7007 mask elements differ from the RNG definition", mismatch);
    CHECK(dropped > 1500 && dropped < 2000, "%d of 7007 dropped at p = 0.25", dropped);
}

/* out = tr_dropout(x, p) of x = src (f32, `shape`) under the graph's randomness as the caller
 * set it (after tr_graph_reset). */
static void drop_copy(float *out, const float *src, int ndim, const int64_t *shape, double p) {
    tr_tensor *x = tr_graph_input(g, TR_F32, ndim, shape);
    size_t n = (size_t)tr_tensor_numel(x);
    memcpy(x->data, src, n * sizeof(float));
    memcpy(out, tr_dropout(g, x, p)->data, n * sizeof(float));
}

/* The last 3 samples of a batch of 6 (sample_base 0) get the mask they get as a batch of 3
 * with sample_base 3: the split of a global batch over ranks does not change it. */
static void batch_split(void) {
    const double p = 0.3;
    int64_t full[4] = {6, 2, 3, 5}, half[4] = {3, 2, 3, 5};
    float xs[180], a[180], b[90], c[90];
    for (int i = 0; i < 180; i++) xs[i] = 0.5f + (float)(i % 17) / 16.0f;
    tr_graph_reset(g);
    tr_graph_set_rng(g, 11, 2, 0);
    drop_copy(a, xs, 4, full, p);
    /* rank 1 of 2: the last 3 samples, sample_base 3 */
    tr_graph_reset(g);
    tr_graph_set_rng(g, 11, 2, 3);
    drop_copy(b, xs + 90, 4, half, p);
    CHECK(memcmp(a + 90, b, sizeof b) == 0, "samples 3..5 differ between the splits");
    int zeros = 0;
    for (int i = 0; i < 90; i++) zeros += b[i] == 0;
    CHECK(zeros > 5 && zeros < 60, "split check is trivial: %d of 90 dropped", zeros);
    /* samples 0..2 have masks of their own */
    int same = 1;
    for (int i = 0; i < 90; i++) same &= (a[i] == 0) == (a[90 + i] == 0);
    CHECK(!same, "samples 0..2 and 3..5 share a mask");
    /* another step gives another mask */
    tr_graph_reset(g);
    tr_graph_set_rng(g, 11, 3, 3);
    drop_copy(c, xs + 90, 4, half, p);
    CHECK(memcmp(b, c, sizeof c) != 0, "step 3 repeats step 2's mask");
    /* and another seed too */
    tr_graph_reset(g);
    tr_graph_set_rng(g, 12, 2, 3);
    drop_copy(c, xs + 90, 4, half, p);
    CHECK(memcmp(b, c, sizeof c) != 0, "seed 12 repeats seed 11's mask");
}

/* Two rows per sample (a pair model's query and passage, tr_graph_set_rows_per_sample): the
 * last 2 samples' 4 rows of a batch of 3 samples (6 rows) get the masks they get as a batch of
 * 2 samples with sample_base 1, where counting rows as samples would repeat row 2's mask on row
 * 0; tr_graph_set_rng and tr_graph_reset go back to one row per sample. */
static void rows_per_sample(void) {
    const double p = 0.3;
    int64_t full[3] = {6, 3, 5}, part[3] = {4, 3, 5};
    float xs[90], a[90], b[60], c[60];
    for (int i = 0; i < 90; i++) xs[i] = 0.5f + (float)(i % 13) / 16.0f;
    tr_graph_reset(g);
    tr_graph_set_rng(g, 11, 2, 0);
    tr_graph_set_rows_per_sample(g, 2);
    drop_copy(a, xs, 3, full, p);
    tr_graph_reset(g);
    tr_graph_set_rng(g, 11, 2, 1);
    tr_graph_set_rows_per_sample(g, 2);
    drop_copy(b, xs + 30, 3, part, p);
    CHECK(memcmp(a + 30, b, sizeof b) == 0, "rows 2..5 differ between the splits at 2 rows per sample");
    int zeros = 0;
    for (int i = 0; i < 60; i++) zeros += b[i] == 0;
    CHECK(zeros > 5 && zeros < 45, "rows check is trivial: %d of 60 dropped", zeros);
    /* one row per sample again after tr_graph_set_rng, and after tr_graph_reset (which keeps
     * the rng): sample_base 1 is row 1 */
    for (int how = 0; how < 2; how++) {
        tr_graph_reset(g);
        if (how == 0) tr_graph_set_rows_per_sample(g, 2);
        tr_graph_set_rng(g, 11, 2, 1);
        if (how == 1) {
            tr_graph_set_rows_per_sample(g, 2);
            tr_graph_reset(g);
        }
        drop_copy(c, xs + 15, 3, part, p);
        CHECK(memcmp(a + 15, c, sizeof c) == 0, "%s did not go back to one row per sample",
              how ? "tr_graph_reset" : "tr_graph_set_rng");
    }
}

/* dx = dout * mask / (1-p), added to what the gradient already holds. */
static void backward(tr_dtype dt) {
    const double p = 0.25;
    tr_graph_reset(g);
    tr_graph_set_rng(g, 3, 1, 0);
    int64_t shape[2] = {64, 33};
    tr_tensor *x = filled(dt, 2, shape, 1);
    tr_tensor *y = tr_dropout(g, x, p);
    int64_t n = tr_tensor_numel(x);
    double dout[64 * 33], scale = 1.0 / (1.0 - p);
    float doutf[64 * 33];
    for (int64_t i = 0; i < n; i++) {
        dout[i] = -1 + 2 * (double)tr_rng_uniform(1, 2, (uint64_t)i);
        doutf[i] = (float)dout[i];
    }
    for (int64_t i = 0; i < n; i++) { /* pre-existing gradient: backward must add to it */
        if (dt == TR_F64)
            ((double *)x->grad)[i] = 1;
        else
            ((float *)x->grad)[i] = 1;
    }
    CHECK(tr_backward(g, y, dt == TR_F64 ? (void *)dout : (void *)doutf) == TR_OK,
          "backward: %s", tr_error_msg());
    int bad = 0, kept = 0;
    for (int64_t i = 0; i < n; i++) {
        double yv = dt == TR_F64 ? ((double *)y->data)[i] : ((float *)y->data)[i];
        double gv = dt == TR_F64 ? ((double *)x->grad)[i] : ((float *)x->grad)[i];
        double want;
        if (dt == TR_F64)
            want = 1 + (yv != 0 ? dout[i] * scale : 0);
        else
            want = (float)(1 + (yv != 0 ? doutf[i] * (float)scale : 0));
        kept += yv != 0;
        /* within rounding: the kernel may fuse the multiply-add (-ffp-contract=fast) */
        double tol = (dt == TR_F64 ? 1e-15 : 1e-6) * (fabs(want) > 1 ? fabs(want) : 1);
        if (fabs(gv - want) > tol) bad++;
    }
    CHECK(bad == 0, "%s: %d gradient elements are not 1 + dout * mask * scale",
          tr_dtype_name(dt), bad);
    CHECK(kept > n / 2 && kept < n, "%s: %d of %lld kept", tr_dtype_name(dt), kept, (long long)n);
}

static void identity_cases(void) {
    int64_t shape[2] = {4, 5};
    tr_graph_reset(g);
    tr_graph_set_training(g, 0);
    tr_tensor *x = filled(TR_F32, 2, shape, 1);
    size_t nodes = tr_graph_nodes(g);
    CHECK(tr_dropout(g, x, 0.5) == x, "eval mode: dropout is not the identity");
    CHECK(tr_graph_nodes(g) == nodes, "eval mode: dropout recorded a node");
    tr_graph_set_training(g, 1);
    CHECK(tr_dropout(g, x, 0.0) == x, "p == 0: dropout is not the identity");
    /* a training-mode dropout after the identities is still call 0 of the step */
    tr_graph_set_rng(g, 8, 0, 0);
    tr_tensor *y = tr_dropout(g, x, 0.5);
    uint64_t stream = tr_rng_stream(TR_RNG_STREAM_DROPOUT, 0, 0);
    int mismatch = 0;
    for (int e = 0; e < 20; e++)
        mismatch += (((float *)y->data)[e] != 0) != (tr_rng_uniform(8, stream, (uint64_t)e) >= 0.5);
    CHECK(mismatch == 0, "identity dropouts consumed RNG calls (%d mismatches)", mismatch);
}

static void bad_p(void) {
    int64_t shape[1] = {4};
    double ps[3] = {1.0, -0.1, NAN};
    for (int i = 0; i < 3; i++) {
        tr_graph_reset(g);
        tr_tensor *x = filled(TR_F32, 1, shape, 0);
        CHECK(tr_dropout(g, x, ps[i]) == NULL, "p=%g accepted", ps[i]);
        CHECK(tr_graph_status(g) == TR_ERR_INVALID, "p=%g: status %d", ps[i],
              (int)tr_graph_status(g));
        CHECK(strstr(tr_error_msg(), "dropout: p =") && strstr(tr_error_msg(), "[0, 1)"),
              "message '%s'", tr_error_msg());
    }
    tr_graph_reset(g);
    tr_tensor *xi = tr_graph_input(g, TR_I32, 1, shape);
    CHECK(tr_dropout(g, xi, 0.5) == NULL &&
              strstr(tr_error_msg(), "dropout: input 0 has dtype i32"),
          "i32 input: '%s'", tr_error_msg());
}

int main(void) {
    if (tr_graph_create(&g, 64 << 20) != TR_OK) return 1;
    statistics(TR_F32, 0.1);
    statistics(TR_F32, 0.5);
    statistics(TR_F64, 0.3);
    statistics(TR_F32, 0.9);
    definition();
    definition_large();
    batch_split();
    rows_per_sample();
    backward(TR_F32);
    backward(TR_F64);
    identity_cases();
    bad_p();
    tr_graph_destroy(g);
    return test_finish();
}
