/* Unit tests of the parameter registry and the graph: layout, init, gradient accumulation,
 * gradient-ready hooks and sticky errors. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"

typedef struct hook_log {
    int order[16];
    int n;
    tr_params *P;
    int grad_final_ok;
} hook_log;

static void on_ready(void *user, int p) {
    hook_log *h = user;
    if (h->n < 16) h->order[h->n++] = p;
}

static void test_params(void) {
    tr_params *P;
    int w1, b1, w2, b2, rm, dup;
    CHECK(tr_params_create(&P) == TR_OK, "create");
    tr_params_add(P, "fc1.weight", 2, (int64_t[]){5, 3}, TR_INIT_KAIMING_UNIFORM, 0, &w1);
    tr_params_add(P, "fc1.bias", 1, (int64_t[]){5}, TR_INIT_FAN_IN_UNIFORM, 3, &b1);
    tr_params_add(P, "fc2.weight", 2, (int64_t[]){2, 5}, TR_INIT_KAIMING_UNIFORM, 0, &w2);
    tr_params_add(P, "fc2.bias", 1, (int64_t[]){2}, TR_INIT_ZEROS, 0, &b2);
    tr_params_add_buffer(P, "bn.running_var", 1, (int64_t[]){4}, TR_INIT_ONES, 0, &rm);
    CHECK(tr_params_add(P, "fc1.bias", 1, (int64_t[]){5}, TR_INIT_ZEROS, 0, &dup) == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "fc1.bias") != NULL,
          "duplicate name refused: %s", tr_error_msg());
    CHECK(tr_params_add(P, "bad", 1, (int64_t[]){0}, TR_INIT_ZEROS, 0, &dup) == TR_ERR_INVALID,
          "zero dim refused");
    CHECK(tr_params_finalize(P, 42) == TR_OK, "finalize");
    CHECK(tr_params_count(P) == 4 && tr_params_buffer_count(P) == 1, "counts");
    CHECK(tr_params_trainable(P) == 15 + 5 + 10 + 2, "trainable %zu", tr_params_trainable(P));
    /* Offsets are 16-float aligned and in registration order, inside one buffer. */
    CHECK(tr_params_offset(P, w1) == 0 && tr_params_offset(P, b1) == 16 &&
              tr_params_offset(P, w2) == 32 && tr_params_offset(P, b2) == 48,
          "layout");
    CHECK(tr_params_numel(P) == 64, "numel %zu", tr_params_numel(P));
    tr_tensor *W1 = tr_params_get(P, w1);
    CHECK((float *)W1->data == tr_params_data(P) && (float *)W1->grad == tr_params_grad(P),
          "views into the flat buffers");
    CHECK(tr_params_find(P, "fc2.weight") == w2 && tr_params_find(P, "nope") == -1, "find");
    float bound = 1.0f / sqrtf(3.0f), maxabs = 0;
    for (int i = 0; i < 15; i++) maxabs = fmaxf(maxabs, fabsf(((float *)W1->data)[i]));
    CHECK(maxabs <= bound && maxabs > 0.3f * bound, "kaiming bound %g, max %g", bound, maxabs);
    CHECK(((float *)tr_params_buffer(P, rm)->data)[3] == 1.0f, "buffer init ones");
    /* Same seed, same values: init is a pure function of (seed, index). */
    tr_params *Q;
    tr_params_create(&Q);
    tr_params_add(Q, "fc1.weight", 2, (int64_t[]){5, 3}, TR_INIT_KAIMING_UNIFORM, 0, NULL);
    tr_params_finalize(Q, 42);
    CHECK(memcmp(tr_params_data(Q), tr_params_data(P), 15 * sizeof(float)) == 0, "deterministic init");
    tr_params_destroy(Q);

    /* Backward: gradients land in the flat buffer, hooks fire in backward order, each once,
     * and an unused parameter (fc2.bias here) is signalled at the end. */
    tr_graph *g;
    tr_graph_create(&g, 0);
    hook_log h = {.P = P};
    tr_graph_set_params(g, P);
    tr_graph_set_grad_hook(g, on_ready, &h);
    for (int step = 0; step < 2; step++) {
        tr_graph_reset(g);
        h.n = 0;
        tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){4, 3});
        for (int i = 0; i < 12; i++) ((float *)x->data)[i] = (float)i / 6 - 1;
        tr_tensor *y = tr_linear(g, tr_relu(g, tr_linear(g, x, W1, tr_params_get(P, b1))),
                                 tr_params_get(P, w2), NULL);
        CHECK(y && tr_graph_nodes(g) == 3, "three nodes");
        CHECK(tr_backward(g, y, NULL) == TR_OK, "backward: %s", tr_error_msg());
        CHECK(h.n == 4, "4 hooks, got %d", h.n);
        CHECK(h.order[0] == w2 && h.order[3] == b2, "fc2.weight first, unused fc2.bias last");
        CHECK((h.order[1] == w1 && h.order[2] == b1) || (h.order[1] == b1 && h.order[2] == w1),
              "fc1 params after");
    }
    /* Two backward passes without zero_grad accumulate: grad == 2x one pass. */
    float acc[64];
    memcpy(acc, tr_params_grad(P), sizeof acc);
    tr_params_zero_grad(P);
    tr_graph_reset(g);
    tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){4, 3});
    for (int i = 0; i < 12; i++) ((float *)x->data)[i] = (float)i / 6 - 1;
    tr_tensor *y = tr_linear(g, tr_relu(g, tr_linear(g, x, W1, tr_params_get(P, b1))),
                             tr_params_get(P, w2), NULL);
    tr_backward(g, y, NULL);
    float worst = 0, big = 0;
    for (int i = 0; i < 64; i++) {
        float one = tr_params_grad(P)[i];
        worst = fmaxf(worst, fabsf(acc[i] - 2 * one));
        big = fmaxf(big, fabsf(one));
    }
    CHECK(big > 0 && worst <= 1e-6f * big, "two passes accumulate to 2x one (err %g)", worst);

    /* Sticky errors: a bad op fails, later ops return NULL, backward reports the first. */
    tr_graph_reset(g);
    tr_tensor *bad = tr_graph_input(g, TR_F32, 2, (int64_t[]){4, 7});
    tr_tensor *z = tr_relu(g, tr_linear(g, bad, W1, NULL));
    CHECK(z == NULL && tr_graph_status(g) == TR_ERR_INVALID, "shape error is sticky");
    CHECK(strstr(tr_error_msg(), "linear") && strstr(tr_error_msg(), "(4, 7)"), "message: %s",
          tr_error_msg());
    CHECK(tr_backward(g, z, NULL) != TR_OK, "backward after error fails");
    /* Grad mode off records nothing. */
    tr_graph_reset(g);
    tr_graph_set_grad_enabled(g, 0);
    x = tr_graph_input(g, TR_F32, 2, (int64_t[]){4, 3});
    memset(x->data, 0, 12 * sizeof(float));
    y = tr_linear(g, x, W1, NULL);
    CHECK(y && tr_graph_nodes(g) == 0, "no tape in inference");
    CHECK(tr_backward(g, y, NULL) == TR_ERR_INVALID, "backward without tape refused");

    /* Non-finite diagnostics (trainer.on_nan): an infinite bias in fc1 makes the first op's
     * output the first non-finite activation; the flags name fc1.bias's values and, after
     * backward, fc2.weight's gradient (it multiplies the infinite activation). */
    tr_graph_reset(g);
    tr_graph_set_grad_enabled(g, 1);
    tr_graph_set_grad_hook(g, NULL, NULL);
    tr_params_zero_grad(P);
    ((float *)tr_params_get(P, b1)->data)[0] = INFINITY;
    x = tr_graph_input(g, TR_F32, 2, (int64_t[]){4, 3});
    for (int i = 0; i < 12; i++) ((float *)x->data)[i] = (float)i / 6 - 1;
    y = tr_linear(g, tr_relu(g, tr_linear(g, x, W1, tr_params_get(P, b1))), tr_params_get(P, w2), NULL);
    char what[256] = "";
    CHECK(y && tr_graph_first_nonfinite(g, what, sizeof what) &&
              strcmp(what, "the output of op 1 of 3 (linear), shape (4, 5), reading fc1.weight") == 0,
          "first non-finite: '%s'", what);
    tr_tensor *sum = tr_sum(g, y);
    CHECK(sum && tr_backward(g, sum, NULL) == TR_OK, "backward: %s", tr_error_msg());
    double flags[8] = {0};
    tr_params_find_nonfinite(P, flags);
    CHECK(flags[w1] == 0 && flags[b1] == 1 && flags[w2] == 0 && flags[b2] == 0, "value flags %g %g %g %g", flags[0], flags[1],
          flags[2], flags[3]);
    CHECK(flags[4 + w1] == 0 && flags[4 + b1] == 0 && flags[4 + w2] == 1, "gradient flags %g %g %g %g", flags[4], flags[5],
          flags[6], flags[7]);
    double part[4] = {0}; /* a shard: fc1.bias .. the first half of fc2.weight's range of the gradient buffer */
    size_t lo = tr_params_offset(P, b1), hi = tr_params_offset(P, w2) + 5;
    tr_params_mark_nonfinite(P, tr_params_grad(P) + lo, lo, hi, part);
    CHECK(part[w1] == 0 && part[b1] == 0 && part[w2] == 1 && part[b2] == 0, "shard flags %g %g %g", part[w1], part[b1],
          part[w2]);
    tr_graph_reset(g);
    x = tr_graph_input(g, TR_F32, 2, (int64_t[]){4, 3});
    memset(x->data, 0, 12 * sizeof(float));
    CHECK(tr_relu(g, x) && !tr_graph_first_nonfinite(g, what, sizeof what), "a finite forward has none");
    tr_graph_destroy(g);
    tr_params_destroy(P);
}

/* tr_graph_write_param_grads: a backward into a gradient buffer full of stale values gives
 * exactly what zero_grad + backward gives. Covered: a parameter used twice (the first use
 * writes, the second adds), one used through a reshape view, one used by a node whose output
 * gets no gradient and one never used (both zero-filled before their hook); a reset clears
 * the request, and the next micro-batch adds again. */
static tr_tensor *write_step(tr_graph *g, tr_params *P, const int *id) {
    tr_graph_reset(g);
    tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){4, 3});
    for (int i = 0; i < 12; i++) ((float *)x->data)[i] = (float)i / 5 - 1.1f;
    tr_tensor *h = tr_relu(g, tr_linear(g, x, tr_params_get(P, id[0]), tr_params_get(P, id[1])));
    tr_tensor *w2 = tr_params_get(P, id[2]);
    tr_tensor *w3 = tr_reshape(g, tr_params_get(P, id[3]), 2, (int64_t[]){2, 5});
    (void)tr_linear(g, x, tr_params_get(P, id[4]), NULL); /* on the tape, not in the loss */
    tr_tensor *y = tr_add(g, tr_add(g, tr_linear(g, h, w2, NULL), tr_linear(g, h, w2, NULL)), tr_linear(g, h, w3, NULL));
    return tr_sum(g, tr_mul(g, y, y));
}

typedef struct fresh_log {
    tr_params *P;
    int n, zero_at_hook[8];
} fresh_log;

static void on_ready_fresh(void *user, int p) {
    fresh_log *f = user;
    const tr_tensor *t = tr_params_get(f->P, p);
    int zero = 1;
    for (int64_t i = 0; i < tr_tensor_numel(t); i++) zero &= ((const float *)t->grad)[i] == 0.0f;
    if (p < 8) f->zero_at_hook[p] = zero;
    f->n++;
}

/* The six parameters write_step uses (ids in id[]), registered in a new registry. */
static void add_write_params(tr_params **P, int id[6]) {
    tr_params_create(P);
    tr_params_add(*P, "fc1.weight", 2, (int64_t[]){5, 3}, TR_INIT_KAIMING_UNIFORM, 0, &id[0]);
    tr_params_add(*P, "fc1.bias", 1, (int64_t[]){5}, TR_INIT_FAN_IN_UNIFORM, 3, &id[1]);
    tr_params_add(*P, "twice.weight", 2, (int64_t[]){2, 5}, TR_INIT_KAIMING_UNIFORM, 0, &id[2]);
    tr_params_add(*P, "flat.weight", 1, (int64_t[]){10}, TR_INIT_FAN_IN_UNIFORM, 5, &id[3]);
    tr_params_add(*P, "dead.weight", 2, (int64_t[]){2, 3}, TR_INIT_KAIMING_UNIFORM, 0, &id[4]);
    tr_params_add(*P, "unused.weight", 1, (int64_t[]){7}, TR_INIT_FAN_IN_UNIFORM, 7, &id[5]);
}

static void test_write_param_grads(void) {
    tr_params *P;
    int id[6];
    add_write_params(&P, id);
    CHECK(tr_params_finalize(P, 3) == TR_OK, "finalize");
    size_t n = tr_params_numel(P);
    float ref[128], *gr = tr_params_grad(P);
    CHECK(n <= 128, "numel %zu", n);
    tr_graph *g;
    tr_graph_create(&g, 0);
    CHECK(tr_graph_write_param_grads(g) == TR_ERR_INVALID && strstr(tr_error_msg(), "tr_graph_set_params"),
          "refused without parameters: %s", tr_error_msg());
    tr_graph_set_params(g, P);
    fresh_log f = {.P = P};
    tr_graph_set_grad_hook(g, on_ready_fresh, &f);

    tr_params_zero_grad(P);
    CHECK(tr_backward(g, write_step(g, P, id), NULL) == TR_OK, "reference backward: %s", tr_error_msg());
    memcpy(ref, gr, n * sizeof(float));
    for (int p = 0; p < 6; p++) /* stale: last step's gradient (the alignment gaps stay zero) */
        for (int64_t i = 0; i < tr_tensor_numel(tr_params_get(P, p)); i++) gr[tr_params_offset(P, p) + (size_t)i] = 7.5f;
    tr_tensor *loss = write_step(g, P, id);
    f.n = 0;
    CHECK(tr_graph_write_param_grads(g) == TR_OK, "write_param_grads: %s", tr_error_msg());
    CHECK(tr_backward(g, loss, NULL) == TR_OK, "backward: %s", tr_error_msg());
    float big = 0;
    int same = 1;
    for (int p = 0; p < 6; p++) {
        const tr_tensor *t = tr_params_get(P, p);
        for (int64_t i = 0; i < tr_tensor_numel(t); i++) {
            size_t k = tr_params_offset(P, p) + (size_t)i;
            same &= gr[k] == ref[k];
            big = fmaxf(big, fabsf(ref[k]));
        }
    }
    CHECK(same && big > 0, "written gradients equal zero_grad + backward");
    CHECK(f.n == 6 && f.zero_at_hook[id[4]] && f.zero_at_hook[id[5]],
          "every hook ran (%d), dead and unused parameters zeroed before theirs", f.n);
    CHECK(!f.zero_at_hook[id[2]] && !f.zero_at_hook[id[3]], "used parameters hold a gradient at their hook");
    /* The next micro-batch adds: 2x. A request dropped by a reset adds too: 3x. */
    CHECK(tr_backward(g, write_step(g, P, id), NULL) == TR_OK, "second micro-batch");
    tr_graph_reset(g);
    tr_graph_write_param_grads(g);
    CHECK(tr_backward(g, write_step(g, P, id), NULL) == TR_OK, "after a dropped request");
    float worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(gr[i] - 3 * ref[i]));
    CHECK(worst <= 1e-5f * big, "micro-batches accumulate after a written first (err %g)", worst);
    tr_graph_destroy(g);
    tr_params_destroy(P);
}

/* The gradient buffer moved to memory the caller owns (ddp's communicator memory): the
 * gradients come along, the tensors point there, backward writes there, P frees none of it. */
static void test_set_grad_buffer(void) {
    tr_params *P;
    int id[6];
    add_write_params(&P, id);
    float *own = tr_malloc(4096);
    CHECK(tr_params_set_grad_buffer(P, own) == TR_ERR_INVALID, "refused before finalize");
    CHECK(tr_params_finalize(P, 3) == TR_OK, "finalize");
    size_t n = tr_params_numel(P);
    CHECK(n * sizeof(float) <= 4096 - 64, "numel %zu", n);
    float *old = tr_params_grad(P);
    for (size_t i = 0; i < n; i++) old[i] = (float)i * 0.5f;
    CHECK(tr_params_set_grad_buffer(P, own + 1) == TR_ERR_INVALID && strstr(tr_error_msg(), "aligned"),
          "an unaligned buffer refused: %s", tr_error_msg());
    CHECK(tr_params_grad(P) == old, "a refusal changes nothing");
    CHECK(tr_params_set_grad_buffer(P, own) == TR_OK, "set: %s", tr_error_msg());
    int moved = tr_params_grad(P) == own;
    for (size_t i = 0; i < n; i++) moved &= own[i] == (float)i * 0.5f;
    for (int p = 0; p < 6; p++) moved &= tr_params_get(P, p)->grad == own + tr_params_offset(P, p);
    CHECK(moved, "the gradients copied and every tensor's gradient in the new buffer");
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, P);
    tr_params_zero_grad(P);
    CHECK(tr_backward(g, write_step(g, P, id), NULL) == TR_OK, "backward: %s", tr_error_msg());
    float big = 0;
    for (size_t i = 0; i < n; i++) big = fmaxf(big, fabsf(own[i]));
    CHECK(big > 0, "backward wrote into the new buffer");
    tr_graph_destroy(g);
    tr_params_destroy(P); /* must not free `own` (ASan would see a double free below) */
    tr_free(own);
}

/* The parameter buffer moved likewise (ddp's sharded update gathers parameters in place in
 * communicator memory): values copied, tensors pointing there, forward reading them there. */
static void test_set_data_buffer(void) {
    tr_params *P;
    int id[6];
    add_write_params(&P, id);
    float *own = tr_malloc(4096);
    CHECK(tr_params_set_data_buffer(P, own) == TR_ERR_INVALID, "refused before finalize");
    CHECK(tr_params_finalize(P, 3) == TR_OK, "finalize");
    size_t n = tr_params_numel(P);
    float *old = tr_params_data(P), *copy = tr_malloc(4096);
    memcpy(copy, old, n * sizeof(float));
    CHECK(tr_params_set_data_buffer(P, own + 1) == TR_ERR_INVALID && strstr(tr_error_msg(), "parameter buffer must be"),
          "an unaligned buffer refused: %s", tr_error_msg());
    CHECK(tr_params_set_data_buffer(P, own) == TR_OK && tr_params_data(P) == own, "set: %s", tr_error_msg());
    int moved = memcmp(own, copy, n * sizeof(float)) == 0;
    for (int p = 0; p < 6; p++) moved &= tr_params_get(P, p)->data == own + tr_params_offset(P, p);
    CHECK(moved, "the values copied and every tensor's data in the new buffer");
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, P);
    tr_params_zero_grad(P);
    tr_tensor *loss = write_step(g, P, id);
    float before = ((const float *)loss->data)[0];
    tr_graph_reset(g);
    for (size_t i = 0; i < n; i++) own[i] *= 2;
    loss = write_step(g, P, id);
    float after = ((const float *)loss->data)[0];
    CHECK(after != before, "forward reads the new buffer (loss %g, then %g)", before, after);
    tr_graph_destroy(g);
    tr_params_destroy(P); /* must not free `own` */
    tr_free(own);
    tr_free(copy);
}

/* tr_params_set_fill: the callback's values replace the init rule; its error stops finalize. */
static tr_status fill_index(void *ctx, int index, float *data, size_t numel) {
    int *calls = ctx;
    (*calls)++;
    for (size_t i = 0; i < numel; i++) data[i] = (float)(100 * index + (int)i);
    return TR_OK;
}

static tr_status fill_fail(void *ctx, int index, float *data, size_t numel) {
    (void)ctx, (void)data, (void)numel;
    return tr_error_set(TR_ERR_INVALID, "fill of %d refused", index);
}

static void test_params_fill(void) {
    tr_params *P;
    int a, b, calls = 0;
    CHECK(tr_params_create(&P) == TR_OK, "create");
    tr_params_add(P, "a", 1, (int64_t[]){3}, TR_INIT_ONES, 0, &a);
    tr_params_add(P, "b", 2, (int64_t[]){2, 2}, TR_INIT_ONES, 0, &b);
    CHECK(tr_params_set_fill(P, b, fill_index, &calls) == TR_OK, "set_fill");
    CHECK(tr_params_set_fill(P, 7, fill_index, &calls) == TR_ERR_INVALID, "set_fill of no parameter");
    CHECK(tr_params_finalize(P, 1) == TR_OK, "finalize with a fill");
    const float *A = tr_params_get(P, a)->data, *B = tr_params_get(P, b)->data;
    CHECK(calls == 1 && A[0] == 1 && A[2] == 1 && B[0] == 100 && B[3] == 103, "filled: calls %d, b %g..%g", calls,
          B[0], B[3]);
    CHECK(tr_params_set_fill(P, a, fill_index, &calls) == TR_ERR_INVALID, "set_fill after finalize refused");
    tr_params_destroy(P);
    CHECK(tr_params_create(&P) == TR_OK, "create");
    tr_params_add(P, "a", 1, (int64_t[]){3}, TR_INIT_ONES, 0, &a);
    tr_params_set_fill(P, a, fill_fail, NULL);
    CHECK(tr_params_finalize(P, 1) == TR_ERR_INVALID && strstr(tr_error_msg(), "fill of 0 refused"),
          "a failing fill stops finalize: %s", tr_error_msg());
    tr_params_destroy(P);
}

int main(void) {
    test_params();
    test_params_fill();
    test_write_param_grads();
    test_set_grad_buffer();
    test_set_data_buffer();
    return test_finish();
}
