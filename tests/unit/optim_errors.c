/* Optimizer API edges: config validation names the field, bad step arguments are refused
 * without touching anything, the step allocates nothing, state buffers are named as torch's,
 * and the schedule and clipping handle degenerate inputs. Values are checked against PyTorch
 * in tests/reference/optim.c. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "trainer/memory.h"
#include "trainer/optim.h"

/* Validates cfg, expects TR_ERR_INVALID and `field` in the message; create must fail too. */
static void expect_invalid(const tr_optim_config *cfg, const char *field) {
    tr_error_clear();
    tr_status s = tr_optim_config_validate(cfg);
    CHECK(s == TR_ERR_INVALID, "%s: validate gave %d", field, (int)s);
    CHECK(strstr(tr_error_msg(), field) != NULL, "message '%s' does not name %s", tr_error_msg(),
          field);
    static char sentinel;
    tr_optim *opt = (tr_optim *)&sentinel; /* not NULL, so create must clear it */
    s = tr_optim_create(&opt, cfg, 10);
    CHECK(s == TR_ERR_INVALID && opt == NULL, "%s: create gave %d", field, (int)s);
}

static void test_defaults(void) {
    tr_optim_config w = tr_optim_defaults(TR_OPTIM_ADAMW);
    CHECK(w.kind == TR_OPTIM_ADAMW && w.lr == 1e-3 && w.beta1 == 0.9 && w.beta2 == 0.999 &&
              w.eps == 1e-8 && w.weight_decay == 0.01,
          "AdamW defaults");
    tr_optim_config a = tr_optim_defaults(TR_OPTIM_ADAM);
    CHECK(a.kind == TR_OPTIM_ADAM && a.lr == 1e-3 && a.beta1 == 0.9 && a.beta2 == 0.999 &&
              a.eps == 1e-8 && a.weight_decay == 0.0,
          "Adam defaults");
    tr_optim_config s = tr_optim_defaults(TR_OPTIM_SGD);
    CHECK(s.kind == TR_OPTIM_SGD && s.lr > 0 && s.momentum == 0 && s.dampening == 0 &&
              s.nesterov == 0 && s.weight_decay == 0,
          "SGD defaults");
    CHECK(tr_optim_config_validate(&w) == TR_OK && tr_optim_config_validate(&a) == TR_OK &&
              tr_optim_config_validate(&s) == TR_OK,
          "defaults validate: %s", tr_error_msg());
}

static void test_validation(void) {
    tr_optim_config c = tr_optim_defaults(TR_OPTIM_SGD);
    c.lr = -1;
    expect_invalid(&c, "optimizer.lr");
    CHECK(tr_optim_config_validate(&c) == TR_ERR_INVALID &&
              strcmp(tr_error_msg(), "optimizer.lr: must be > 0, got -1") == 0,
          "lr message: '%s'", tr_error_msg());
    c.lr = 0;
    expect_invalid(&c, "optimizer.lr");
    c.lr = NAN;
    expect_invalid(&c, "optimizer.lr");
    c.lr = INFINITY;
    expect_invalid(&c, "optimizer.lr");

    c = tr_optim_defaults(TR_OPTIM_SGD);
    c.weight_decay = -0.1;
    expect_invalid(&c, "optimizer.weight_decay");
    c.weight_decay = NAN;
    expect_invalid(&c, "optimizer.weight_decay");
    c = tr_optim_defaults(TR_OPTIM_SGD);
    c.momentum = -0.5;
    expect_invalid(&c, "optimizer.momentum");
    c = tr_optim_defaults(TR_OPTIM_SGD);
    c.dampening = 1.5;
    expect_invalid(&c, "optimizer.dampening");
    c.dampening = -0.1;
    expect_invalid(&c, "optimizer.dampening");
    c = tr_optim_defaults(TR_OPTIM_SGD);
    c.nesterov = 1; /* momentum 0 */
    expect_invalid(&c, "optimizer.nesterov");
    c.momentum = 0.9;
    c.dampening = 0.1;
    expect_invalid(&c, "optimizer.nesterov");
    c.dampening = 0;
    CHECK(tr_optim_config_validate(&c) == TR_OK, "nesterov with momentum: %s", tr_error_msg());
    c.nesterov = 2;
    expect_invalid(&c, "optimizer.nesterov");

    for (int k = TR_OPTIM_ADAM; k <= TR_OPTIM_ADAMW; k++) {
        c = tr_optim_defaults((tr_optim_kind)k);
        c.beta1 = 1.0;
        expect_invalid(&c, "optimizer.betas");
        CHECK(strstr(tr_error_msg(), "beta1") != NULL, "names beta1: %s", tr_error_msg());
        c = tr_optim_defaults((tr_optim_kind)k);
        c.beta2 = -0.1;
        expect_invalid(&c, "optimizer.betas");
        CHECK(strstr(tr_error_msg(), "beta2") != NULL, "names beta2: %s", tr_error_msg());
        c.beta2 = NAN;
        expect_invalid(&c, "optimizer.betas");
        c = tr_optim_defaults((tr_optim_kind)k);
        c.eps = -1e-8;
        expect_invalid(&c, "optimizer.eps");
        c = tr_optim_defaults((tr_optim_kind)k);
        c.weight_decay = -1;
        expect_invalid(&c, "optimizer.weight_decay");
        c = tr_optim_defaults((tr_optim_kind)k);
        c.lr = -1;
        expect_invalid(&c, "optimizer.lr");
    }

    c = tr_optim_defaults(TR_OPTIM_ADAM);
    c.kind = (tr_optim_kind)7;
    expect_invalid(&c, "optimizer");
    CHECK(strstr(tr_error_msg(), "7") != NULL, "kind message: %s", tr_error_msg());
    CHECK(tr_optim_config_validate(NULL) == TR_ERR_INVALID, "NULL config");
}

static void test_step_errors(void) {
    tr_optim_config c = tr_optim_defaults(TR_OPTIM_ADAMW);
    tr_optim *opt;
    float p[10], g[10], p_before[10];
    for (int i = 0; i < 10; i++) {
        p[i] = 0.1f * (float)i;
        g[i] = 1.0f - 0.2f * (float)i;
    }
    memcpy(p_before, p, sizeof p);
    CHECK(tr_optim_create(&opt, &c, 10) == TR_OK, "create: %s", tr_error_msg());

    tr_status s = tr_optim_step(opt, p, g, 9, 1e-3);
    CHECK(s == TR_ERR_INVALID, "wrong n gave %d", (int)s);
    CHECK(strstr(tr_error_msg(), "9") && strstr(tr_error_msg(), "10"), "wrong n message: %s",
          tr_error_msg());
    s = tr_optim_step(opt, p, g, 11, 1e-3);
    CHECK(s == TR_ERR_INVALID, "n too large gave %d", (int)s);
    s = tr_optim_step(opt, NULL, g, 10, 1e-3);
    CHECK(s == TR_ERR_INVALID && strstr(tr_error_msg(), "param"), "NULL param: %s",
          tr_error_msg());
    s = tr_optim_step(opt, p, NULL, 10, 1e-3);
    CHECK(s == TR_ERR_INVALID && strstr(tr_error_msg(), "grad"), "NULL grad: %s", tr_error_msg());
    s = tr_optim_step(opt, p, g, 10, -1e-3);
    CHECK(s == TR_ERR_INVALID && strstr(tr_error_msg(), "lr"), "negative lr: %s",
          tr_error_msg());
    s = tr_optim_step(opt, p, g, 10, NAN);
    CHECK(s == TR_ERR_INVALID, "NaN lr gave %d", (int)s);
    CHECK(tr_optim_step(NULL, p, g, 10, 1e-3) == TR_ERR_INVALID, "NULL optimizer");
    CHECK(memcmp(p, p_before, sizeof p) == 0, "refused steps changed the parameters");
    CHECK(tr_optim_steps(opt) == 0, "refused steps were counted: %lld",
          (long long)tr_optim_steps(opt));
    float zero[10] = {0};
    CHECK(memcmp(tr_optim_state(opt, 0), zero, sizeof zero) == 0 &&
              memcmp(tr_optim_state(opt, 1), zero, sizeof zero) == 0,
          "refused steps changed the state");

    CHECK(tr_optim_step(opt, p, g, 10, 1e-3) == TR_OK, "good step: %s", tr_error_msg());
    CHECK(tr_optim_steps(opt) == 1, "one step counted");
    CHECK(memcmp(p, p_before, sizeof p) != 0, "the good step changed nothing");
    CHECK(tr_optim_step(opt, p, g, 10, 0.0) == TR_OK, "lr 0 is allowed (end of a schedule)");
    tr_optim_set_steps(opt, 1000);
    CHECK(tr_optim_steps(opt) == 1000, "set_steps");
    tr_optim_destroy(opt);
    tr_optim_destroy(NULL);

    /* An empty slice (a rank whose shard is empty) is valid. */
    CHECK(tr_optim_create(&opt, &c, 0) == TR_OK, "n = 0: %s", tr_error_msg());
    CHECK(tr_optim_step(opt, NULL, NULL, 0, 1e-3) == TR_OK, "empty step: %s", tr_error_msg());
    tr_optim_destroy(opt);
}

static void test_states(void) {
    static const struct {
        tr_optim_kind kind;
        double momentum;
        int count;
        const char *names[2];
    } want[] = {
        {TR_OPTIM_SGD, 0.0, 0, {NULL, NULL}},
        {TR_OPTIM_SGD, 0.9, 1, {"momentum_buffer", NULL}},
        {TR_OPTIM_ADAM, 0.0, 2, {"exp_avg", "exp_avg_sq"}},
        {TR_OPTIM_ADAMW, 0.0, 2, {"exp_avg", "exp_avg_sq"}},
    };
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        tr_optim_config c = tr_optim_defaults(want[w].kind);
        c.momentum = want[w].momentum;
        tr_optim *opt;
        CHECK(tr_optim_create(&opt, &c, 33) == TR_OK, "create: %s", tr_error_msg());
        CHECK(tr_optim_state_count(opt) == want[w].count, "kind %d momentum %g: %d states",
              (int)want[w].kind, want[w].momentum, tr_optim_state_count(opt));
        for (int i = 0; i < want[w].count && i < tr_optim_state_count(opt); i++) {
            CHECK(strcmp(tr_optim_state_name(opt, i), want[w].names[i]) == 0, "state %d is %s",
                  i, tr_optim_state_name(opt, i));
            float *st = tr_optim_state(opt, i);
            int zero = st != NULL;
            for (int j = 0; zero && j < 33; j++) zero = st[j] == 0.0f;
            CHECK(zero, "state %s starts at zero", want[w].names[i]);
        }
        CHECK(tr_optim_state(opt, want[w].count) == NULL &&
                  tr_optim_state_name(opt, want[w].count) == NULL &&
                  tr_optim_state(opt, -1) == NULL,
              "out-of-range state index gives NULL");
        tr_optim_destroy(opt);
    }
}

/* tr_optim_step makes no heap allocation, first step included, threaded path included. */
static void test_no_alloc(void) {
    const size_t n = 100000;
    float *p = tr_calloc(n, sizeof *p), *g = tr_malloc(n * sizeof *g);
    for (size_t i = 0; i < n; i++) g[i] = (float)((int)(i % 17) - 8) * 0.01f;
    for (int k = TR_OPTIM_SGD; k <= TR_OPTIM_ADAMW; k++) {
        tr_optim_config c = tr_optim_defaults((tr_optim_kind)k);
        c.momentum = k == TR_OPTIM_SGD ? 0.9 : 0.0;
        c.nesterov = k == TR_OPTIM_SGD;
        c.weight_decay = 0.01;
        tr_optim *opt;
        CHECK(tr_optim_create(&opt, &c, n) == TR_OK, "create: %s", tr_error_msg());
        uint64_t before = tr_alloc_count();
        for (int s = 0; s < 3; s++) CHECK(tr_optim_step(opt, p, g, n, 1e-2) == TR_OK, "step");
        double sumsq = tr_grad_sumsq(g, n);
        tr_clip_grad_norm(g, n, 1e9, sumsq);
        CHECK(tr_alloc_count() == before, "kind %d: step allocated %llu times", k,
              (unsigned long long)(tr_alloc_count() - before));
        tr_optim_destroy(opt);
    }
    tr_free(p);
    tr_free(g);
}

static void test_sched_edges(void) {
    tr_sched_config s = {.kind = TR_SCHED_STEP, .step_size = 0, .gamma = 0.1};
    CHECK_NEAR(tr_sched_lr(&s, 0.5, 100), 0.5, 0);  /* step_size 0: no decay, no division */
    s = (tr_sched_config){.kind = TR_SCHED_STEP, .step_size = 10, .gamma = 0.1};
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 9), 1.0, 0);
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 10), 0.1, 1e-15);
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 35), 1e-3, 1e-15);
    s = (tr_sched_config){.kind = TR_SCHED_COSINE, .total_steps = 0, .min_lr = 0.01};
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 5), 0.01, 0);   /* total 0: already at the end */
    s = (tr_sched_config){.kind = TR_SCHED_COSINE, .total_steps = 100, .min_lr = 0.0};
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 50), 0.5, 1e-15);
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 100), 0.0, 1e-15);
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 1000), 0.0, 1e-15); /* stays at min_lr */
    s = (tr_sched_config){.kind = TR_SCHED_CONSTANT, .warmup_steps = 4};
    CHECK_NEAR(tr_sched_lr(&s, 1.0, -3), 0.25, 0);  /* a negative step is step 0 */
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 3), 1.0, 0);
    CHECK_NEAR(tr_sched_lr(&s, 1.0, 4000000000LL), 1.0, 0);
    CHECK_NEAR(tr_sched_lr(NULL, 0.3, 7), 0.3, 0);
}

static void test_clip_edges(void) {
    float g[4] = {3, 4, 0, 0}, orig[4];
    memcpy(orig, g, sizeof g);
    CHECK_NEAR(tr_grad_sumsq(g, 4), 25.0, 0);
    CHECK_NEAR(tr_grad_sumsq(g, 0), 0.0, 0);
    CHECK_NEAR(tr_clip_grad_norm(g, 4, 10.0, 25.0), 5.0, 0);
    CHECK(memcmp(g, orig, sizeof g) == 0, "below max_norm: unchanged");
    CHECK_NEAR(tr_clip_grad_norm(g, 4, 1.0, 25.0), 5.0, 0);
    CHECK_NEAR(g[0], 3.0 / (5.0 + 1e-6), 1e-7);
    CHECK_NEAR(g[1], 4.0 / (5.0 + 1e-6), 1e-7);
    memcpy(g, orig, sizeof g);
    double norm = tr_clip_grad_norm(g, 4, 1.0, INFINITY);
    CHECK(isinf(norm) && memcmp(g, orig, sizeof g) == 0, "infinite norm: returned, g unchanged");
    norm = tr_clip_grad_norm(g, 4, 1.0, NAN);
    CHECK(isnan(norm) && memcmp(g, orig, sizeof g) == 0, "NaN norm: returned, g unchanged");
}

int main(void) {
    test_defaults();
    test_validation();
    test_step_errors();
    test_states();
    test_no_alloc();
    test_sched_edges();
    test_clip_edges();
    return test_finish();
}
