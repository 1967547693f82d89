/* The sum of squares a small-batch linear backward notes for a weight gradient it writes
 * (ops/linear.c; autograd/node.h: op_note_grad_sumsq; autograd/fusion.h: tr_fusion_grad_sumsq_),
 * which the cpu strategy's gradient-ready hook takes instead of reading the gradient back. Checked from a
 * hook like the strategy's: whenever a value is noted it equals the sum of squares of the
 * gradient as the hook finds it (relative 1e-6), and it is noted exactly where it can be:
 * a weight written or added to by linear at a batch of 16 or less is; a bias, a batch of 17 or 32
 * (BLAS), a reshaped weight, linear(w, w), a sum that overflows float and a weight another op
 * adds to after linear are not (a NaN gradient never gives a finite noted value);
 * a value noted in one backward is gone in the next. The noted value does not depend on the
 * thread count. */
#include <math.h>
#include <string.h>

#include "autograd/node.h"
#include "check.h"
#include "trainer/trainer.h"

enum { MAXP = 4 };

typedef struct seen {
    tr_graph *g;
    tr_fusion *f; /* lent to g, as the cpu strategy's step lends its own */
    tr_params *P;
    int calls[MAXP], noted[MAXP];
    double value[MAXP], truth[MAXP];
} seen;

static void hook(void *user, int p) {
    seen *s = user;
    tr_tensor *t = tr_params_get(s->P, p);
    s->calls[p]++;
    s->truth[p] = tr_grad_sumsq(t->grad, (size_t)tr_tensor_numel(t));
    s->noted[p] = tr_fusion_grad_sumsq_(s->f, p, &s->value[p]);
}

/* Parameters w (OC, C) and b (OC), a graph with the hook. */
static void setup(seen *s, int64_t C, int64_t OC) {
    memset(s, 0, sizeof *s);
    int iw, ib;
    tr_params_create(&s->P);
    tr_params_add(s->P, "w", 2, (int64_t[]){OC, C}, TR_INIT_ZEROS, 0, &iw);
    tr_params_add(s->P, "b", 1, (int64_t[]){OC}, TR_INIT_ZEROS, 0, &ib);
    tr_params_finalize(s->P, 1);
    test_fill(tr_params_get(s->P, 0), 2), test_fill(tr_params_get(s->P, 1), 3);
    tr_graph_create(&s->g, 0);
    tr_graph_set_params(s->g, s->P);
    tr_graph_set_grad_hook(s->g, hook, s);
    CHECK(tr_fusion_create_(&s->f) == TR_OK, "fusion: %s", tr_error_msg());
    tr_graph_set_fusion_(s->g, s->f);
    CHECK(tr_fusion_note_grad_sumsq_(s->f, s->P, 1) == TR_OK, "notes on: %s", tr_error_msg());
}

static void teardown(seen *s) {
    tr_graph_destroy(s->g);
    tr_fusion_destroy_(s->f);
    tr_params_destroy(s->P);
}

static tr_tensor *input(seen *s, int64_t B, int64_t C, uint64_t salt) {
    tr_tensor *x = tr_graph_input(s->g, TR_F32, 2, (int64_t[]){B, C});
    test_fill(x, salt);
    return x;
}

/* sum(linear(x, w, b) * r) */
static tr_tensor *linear_loss(seen *s, tr_tensor *x, tr_tensor *w, uint64_t salt) {
    tr_graph *g = s->g;
    tr_tensor *y = tr_linear(g, x, w, tr_params_get(s->P, 1));
    tr_tensor *r = input(s, x->shape[0], tr_params_get(s->P, 0)->shape[0], salt);
    return tr_sum(g, tr_mul(g, y, r));
}

static void backward(seen *s, tr_tensor *loss, int first, const char *what) {
    memset(s->calls, 0, sizeof s->calls);
    memset(s->noted, 0, sizeof s->noted);
    if (first) CHECK(tr_graph_write_param_grads(s->g) == TR_OK, "%s: write_param_grads", what);
    CHECK(loss && tr_backward(s->g, loss, NULL) == TR_OK, "%s: backward: %s", what, tr_error_msg());
}

/* Parameter p's hook ran once and found the noted value `want` (1) or none (0); a noted
 * value is the gradient's sum of squares. */
static void expect(const seen *s, int p, int want, const char *what) {
    CHECK(s->calls[p] == 1, "%s: param %d's hook ran %d times", what, p, s->calls[p]);
    CHECK(s->noted[p] == want, "%s: param %d %s", what, p, want ? "not noted" : "noted, but should not be");
    if (s->noted[p]) {
        double rel = fabs(s->value[p] - s->truth[p]) / fmax(s->truth[p], 1e-30);
        CHECK(rel <= 1e-6, "%s: param %d noted %.9g, gradient holds %.9g (rel %.2g)", what, p, s->value[p],
              s->truth[p], rel);
    }
}

static void one_linear(int64_t B, int64_t C, int64_t OC, int want) {
    char what[96];
    snprintf(what, sizeof what, "linear B %lld C %lld OC %lld", (long long)B, (long long)C, (long long)OC);
    seen s;
    setup(&s, C, OC);
    backward(&s, linear_loss(&s, input(&s, B, C, 1), tr_params_get(s.P, 0), 4), 1, what);
    expect(&s, 0, want, what);
    expect(&s, 1, 0, what); /* the bias is added to (op_grad), never noted */
    teardown(&s);
}

/* Notes off (a graph whose norm nobody reads, or an earlier micro-batch): nothing noted, and
 * the gradient is the same as with them on. */
static void notes_off(void) {
    seen s;
    setup(&s, 37, 21);
    backward(&s, linear_loss(&s, input(&s, 8, 37, 1), tr_params_get(s.P, 0), 4), 1, "notes on");
    float on[37 * 21];
    memcpy(on, tr_params_get(s.P, 0)->grad, sizeof on);
    CHECK(tr_fusion_note_grad_sumsq_(s.f, s.P, 0) == TR_OK, "notes off");
    tr_graph_reset(s.g); /* the next step */
    backward(&s, linear_loss(&s, input(&s, 8, 37, 1), tr_params_get(s.P, 0), 4), 1, "notes off");
    expect(&s, 0, 0, "notes off");
    CHECK(memcmp(on, tr_params_get(s.P, 0)->grad, sizeof on) == 0, "notes off: the same gradient");
    teardown(&s);
}

/* w in two linears: the later backward adds to the gradient and notes the total. */
static void shared_weight(void) {
    seen s;
    setup(&s, 37, 21);
    tr_tensor *w = tr_params_get(s.P, 0);
    tr_tensor *loss = tr_add(s.g, linear_loss(&s, input(&s, 8, 37, 1), w, 4), linear_loss(&s, input(&s, 5, 37, 6), w, 7));
    backward(&s, loss, 1, "w in two linears");
    expect(&s, 0, 1, "w in two linears");
    teardown(&s);
}

/* w also read by mul: noted only when linear's backward runs after mul's, i.e. linear was
 * recorded first (the tape runs newest first); else mul adds to the gradient after linear
 * noted it. */
static void weight_and_mul(int mul_first) {
    const char *what = mul_first ? "mul(w) recorded before linear(w)" : "mul(w) recorded after linear(w)";
    seen s;
    setup(&s, 37, 21);
    tr_tensor *w = tr_params_get(s.P, 0), *c = input(&s, 21, 37, 9), *loss;
    if (mul_first) {
        tr_tensor *m = tr_sum(s.g, tr_mul(s.g, w, c));
        loss = tr_add(s.g, m, linear_loss(&s, input(&s, 8, 37, 1), w, 4));
    } else {
        tr_tensor *l = linear_loss(&s, input(&s, 8, 37, 1), w, 4);
        loss = tr_add(s.g, l, tr_sum(s.g, tr_mul(s.g, w, c)));
    }
    backward(&s, loss, 1, what);
    expect(&s, 0, !mul_first, what);
    teardown(&s);
}

/* linear on a reshape of w: a view, never noted. */
static void reshaped_weight(void) {
    seen s;
    setup(&s, 37, 21);
    tr_tensor *w = tr_reshape(s.g, tr_reshape(s.g, tr_params_get(s.P, 0), 1, (int64_t[]){21 * 37}), 2, (int64_t[]){21, 37});
    backward(&s, linear_loss(&s, input(&s, 8, 37, 1), w, 4), 1, "reshaped weight");
    expect(&s, 0, 0, "reshaped weight");
    teardown(&s);
}

/* linear(w, w) (a Gram matrix): x and w share one gradient buffer, so nothing is noted, and
 * the gradient is the sum of both (checked against the same graph in f64 by value: with
 * y = w w^T and loss = sum(y * r), dW = (r + r^T) w). */
static void weight_as_input(void) {
    seen s;
    setup(&s, 37, 9);
    tr_tensor *w = tr_params_get(s.P, 0), *r = input(&s, 9, 9, 4);
    tr_tensor *y = tr_linear(s.g, w, w, NULL);
    backward(&s, tr_sum(s.g, tr_mul(s.g, y, r)), 1, "linear(w, w)");
    expect(&s, 0, 0, "linear(w, w)");
    const float *W = w->data, *R = r->data, *G = w->grad;
    double worst = 0;
    for (int i = 0; i < 9; i++)
        for (int c = 0; c < 37; c++) {
            double want = 0;
            for (int j = 0; j < 9; j++) want += ((double)R[i * 9 + j] + R[j * 9 + i]) * W[j * 37 + c];
            worst = fmax(worst, fabs(G[i * 37 + c] - want));
        }
    CHECK(worst <= 1e-5, "linear(w, w): gradient off by %.3g", worst);
    teardown(&s);
}

/* A NaN in the input: the noted value is never finite (here nothing is noted and the hook's
 * own sum is NaN). Inputs of 1e20: every square overflows float but not double, so the value
 * is not noted and the hook's sum in double stays finite. */
static void nonfinite_and_huge(void) {
    for (int huge = 0; huge <= 1; huge++) {
        const char *what = huge ? "inputs of 1e20" : "a NaN input";
        seen s;
        setup(&s, 37, 21);
        tr_tensor *x = input(&s, 8, 37, 1);
        if (huge) for (int i = 0; i < 8 * 37; i++) ((float *)x->data)[i] = 1e20f;
        else ((float *)x->data)[40] = NAN;
        backward(&s, linear_loss(&s, x, tr_params_get(s.P, 0), 4), 1, what);
        CHECK(s.calls[0] == 1, "%s: hook ran %d times", what, s.calls[0]);
        CHECK(!s.noted[0] || !isfinite(s.value[0]), "%s: a finite value %.3g noted", what, s.value[0]);
        CHECK(huge ? isfinite(s.truth[0]) && !s.noted[0] : isnan(s.truth[0]), "%s: gradient's sum %.3g, noted %d",
              what, s.truth[0], s.noted[0]);
        teardown(&s);
    }
}

/* Micro-batches: the second backward adds (beta 1) and notes the accumulated gradient's sum;
 * in a third that does not use w (its hook runs at the end) and a fourth where only mul adds
 * to it, nothing is noted. */
static void accumulation(void) {
    seen s;
    setup(&s, 40, 33);
    tr_tensor *w = tr_params_get(s.P, 0);
    backward(&s, linear_loss(&s, input(&s, 8, 40, 1), w, 4), 1, "micro-batch 1");
    expect(&s, 0, 1, "micro-batch 1");
    tr_graph_reset(s.g);
    backward(&s, linear_loss(&s, input(&s, 3, 40, 11), w, 12), 0, "micro-batch 2 (adds)");
    expect(&s, 0, 1, "micro-batch 2 (adds)");
    tr_graph_reset(s.g);
    tr_tensor *r = tr_graph_input(s.g, TR_F32, 1, (int64_t[]){33});
    test_fill(r, 13);
    backward(&s, tr_sum(s.g, tr_mul(s.g, tr_params_get(s.P, 1), r)), 0, "a backward without w");
    expect(&s, 0, 0, "a backward without w");
    tr_graph_reset(s.g);
    backward(&s, tr_sum(s.g, tr_mul(s.g, w, input(&s, 33, 40, 13))), 0, "a backward without linear");
    expect(&s, 0, 0, "a backward without linear");
    teardown(&s);
}

/* A shape whose weight-gradient GEMM runs parallel: the same value bitwise on 1 and 2 threads. */
static void threads(void) {
    double v[2] = {0, 0};
    for (int t = 1; t <= 2; t++) {
        tr_set_num_threads(t);
        seen s;
        setup(&s, 300, 512);
        backward(&s, linear_loss(&s, input(&s, 8, 300, 1), tr_params_get(s.P, 0), 4), 1, "512 x 300");
        expect(&s, 0, 1, t == 1 ? "512 x 300, 1 thread" : "512 x 300, 2 threads");
        v[t - 1] = s.value[0];
        teardown(&s);
    }
    tr_set_num_threads(1);
    CHECK(v[0] == v[1], "512 x 300: 1 thread noted %.17g, 2 threads %.17g", v[0], v[1]);
}

int main(void) {
    static const int64_t batches[] = {1, 8, 16};
    static const int64_t widths[][2] = {{3, 1}, {37, 21}, {300, 128}};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++)
        for (size_t j = 0; j < sizeof widths / sizeof *widths; j++)
            one_linear(batches[i], widths[j][0], widths[j][1], 1);
    one_linear(17, 37, 21, 0); /* the hook sums the gradient itself in double */
    one_linear(32, 37, 21, 0);
    notes_off();
    shared_weight();
    weight_and_mul(1);
    weight_and_mul(0);
    reshaped_weight();
    weight_as_input();
    nonfinite_and_huge();
    accumulation();
    threads();
    return test_finish();
}
