/* Optimizers, schedules and gradient clipping against PyTorch (tools/reference/cases/optim.py).
 *
 * Optimizers: the parameters after each of 5 steps (with a different lr each step) and the
 * final state buffers, at 1e-6 relative. Then, on the same data, properties torch cannot
 * show: an update split over two slices of one buffer (two optimizers) is bitwise the update
 * of the whole, and an optimizer rebuilt from a checkpoint of its state and step count
 * continues bitwise as the original. A buffer large enough for the threaded path is checked
 * the same way against slices small enough for the serial one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "refio.h"
#include "trainer/memory.h"
#include "trainer/optim.h"
#include "trainer/rng.h"

#define TOL 1e-6

static double worst_optim, worst_sched, worst_clip;

static double maxd(double a, double b) { return a > b ? a : b; }

static const double *f64(const ref_tensor *t) {
    if (t->dtype != TR_F64) {
        fprintf(stderr, "FAIL %s: expected f64\n", t->name);
        test_failures++;
    }
    return (const double *)t->data;
}

static tr_optim_config config_from(const ref_tensor *hp_t) {
    const double *hp = f64(hp_t);
    tr_optim_config c = tr_optim_defaults((tr_optim_kind)(int)hp[0]);
    c.lr = hp[1];
    c.weight_decay = hp[2];
    c.momentum = hp[3];
    c.dampening = hp[4];
    c.nesterov = (int)hp[5];
    c.beta1 = hp[6];
    c.beta2 = hp[7];
    c.eps = hp[8];
    return c;
}

/* Runs steps [k0, k1) of the case's gradient sequence on `opt` over param[lo, lo + n). */
static void run_steps(tr_optim *opt, float *param, const float *grads, const double *lr,
                      size_t n_total, size_t lo, size_t n, int k0, int k1) {
    for (int k = k0; k < k1; k++) {
        tr_status s = tr_optim_step(opt, param + lo, grads + (size_t)k * n_total + lo, n, lr[k]);
        CHECK(s == TR_OK, "step %d: %s", k, tr_error_msg());
    }
}

static int same_state(tr_optim *a, tr_optim *b, size_t a_off, size_t n) {
    if (tr_optim_state_count(a) != tr_optim_state_count(b)) return 0;
    for (int i = 0; i < tr_optim_state_count(a); i++)
        if (memcmp(tr_optim_state(a, i) + a_off, tr_optim_state(b, i), n * sizeof(float)) != 0)
            return 0;
    return 1;
}

static void optim_case(const char *name) {
    ref_file *rf = ref_open(name);
    tr_optim_config cfg = config_from(ref_need(rf, "hp"));
    const ref_tensor *lr_t = ref_need(rf, "lr");
    const double *lr = f64(lr_t);
    const ref_tensor *p0_t = ref_need(rf, "p0");
    const float *p0 = p0_t->data, *grads = ref_need(rf, "grads")->data;
    const float *want = ref_need(rf, "params")->data;
    const int steps = (int)lr_t->numel;
    const size_t n = (size_t)p0_t->numel;
    char label[160];

    /* Against torch, step by step. */
    tr_optim *opt;
    CHECK(tr_optim_create(&opt, &cfg, n) == TR_OK, "%s: create: %s", name, tr_error_msg());
    float *p = tr_malloc(n * sizeof *p);
    memcpy(p, p0, n * sizeof *p);
    for (int k = 0; k < steps; k++) {
        run_steps(opt, p, grads, lr, n, 0, n, k, k + 1);
        snprintf(label, sizeof label, "%s params step %d", name, k + 1);
        worst_optim =
            maxd(worst_optim, check_tensor(label, p, want + (size_t)k * n, (int64_t)n, TOL));
    }
    CHECK(tr_optim_steps(opt) == steps, "%s: %lld steps counted", name,
          (long long)tr_optim_steps(opt));
    int ref_states = 0;
    for (int i = 0; i < rf->n; i++) ref_states += strncmp(rf->t[i].name, "state.", 6) == 0;
    CHECK(tr_optim_state_count(opt) == ref_states, "%s: %d state buffers, torch has %d", name,
          tr_optim_state_count(opt), ref_states);
    for (int i = 0; i < tr_optim_state_count(opt); i++) {
        char key[64];
        snprintf(key, sizeof key, "state.%s", tr_optim_state_name(opt, i));
        snprintf(label, sizeof label, "%s %s", name, key);
        worst_optim = maxd(worst_optim,
                           check_tensor(label, tr_optim_state(opt, i), ref_need(rf, key)->data,
                                        (int64_t)n, TOL));
    }

    /* Two slices of one buffer, split at an unaligned offset, two optimizers: bitwise. */
    const size_t split = 100;
    tr_optim *a, *b;
    CHECK(tr_optim_create(&a, &cfg, split) == TR_OK &&
              tr_optim_create(&b, &cfg, n - split) == TR_OK,
          "%s: create slices", name);
    float *q = tr_malloc(n * sizeof *q);
    memcpy(q, p0, n * sizeof *q);
    for (int k = 0; k < steps; k++) {
        run_steps(a, q, grads, lr, n, 0, split, k, k + 1);
        run_steps(b, q, grads, lr, n, split, n - split, k, k + 1);
    }
    CHECK(memcmp(p, q, n * sizeof *p) == 0, "%s: two slices differ from the whole", name);
    CHECK(same_state(opt, a, 0, split) && same_state(opt, b, split, n - split),
          "%s: slice states differ from the whole", name);
    tr_optim_destroy(a);
    tr_optim_destroy(b);

    /* Checkpoint after 2 steps (state buffers + step count), resume in a new optimizer. */
    tr_optim *first, *resumed;
    CHECK(tr_optim_create(&first, &cfg, n) == TR_OK &&
              tr_optim_create(&resumed, &cfg, n) == TR_OK,
          "%s: create resume", name);
    memcpy(q, p0, n * sizeof *q);
    run_steps(first, q, grads, lr, n, 0, n, 0, 2);
    tr_optim_set_steps(resumed, tr_optim_steps(first));
    for (int i = 0; i < tr_optim_state_count(first); i++)
        memcpy(tr_optim_state(resumed, i), tr_optim_state(first, i), n * sizeof(float));
    tr_optim_destroy(first);
    run_steps(resumed, q, grads, lr, n, 0, n, 2, steps);
    CHECK(memcmp(p, q, n * sizeof *p) == 0 && same_state(opt, resumed, 0, n),
          "%s: resumed run differs from the uninterrupted one", name);
    tr_optim_destroy(resumed);

    tr_free(q);
    tr_free(p);
    tr_optim_destroy(opt);
    ref_close(rf);
}

/* A buffer over the threading threshold, updated whole (threads) and as slices on both sides
 * of the threshold; every element must come out bitwise the same. */
static void large_case(const char *name) {
    ref_file *rf = ref_open(name);
    tr_optim_config cfg = config_from(ref_need(rf, "hp"));
    ref_close(rf);
    const size_t n = 100003;
    const size_t cuts[] = {0, 70001, 100003};                /* threaded + serial slice */
    const size_t cuts4[] = {0, 25000, 50001, 75002, 100003}; /* all serial */
    float *p0 = tr_malloc(n * sizeof *p0), *g = tr_malloc(3 * n * sizeof *g);
    float *whole = tr_malloc(n * sizeof *whole), *part = tr_malloc(n * sizeof *part);
    tr_rng_fill_normal(p0, n, 42, TR_RNG_STREAM_USER, 0, 0.0f, 0.05f);
    tr_rng_fill_normal(g, 3 * n, 42, TR_RNG_STREAM_USER + 1, 0, 0.0f, 1.0f);
    const double lr[3] = {cfg.lr, 0.5 * cfg.lr, 2.0 * cfg.lr};

    tr_optim *opt;
    CHECK(tr_optim_create(&opt, &cfg, n) == TR_OK, "create large");
    memcpy(whole, p0, n * sizeof *whole);
    run_steps(opt, whole, g, lr, n, 0, n, 0, 3);
    double moved = 0;
    for (size_t i = 0; i < n; i++) moved = maxd(moved, fabs((double)whole[i] - p0[i]));
    CHECK(moved > 0, "%s large: parameters did not move", name);

    const size_t *sets[2] = {cuts, cuts4};
    const int counts[2] = {2, 4};
    for (int s = 0; s < 2; s++) {
        tr_optim *parts[4];
        memcpy(part, p0, n * sizeof *part);
        for (int j = 0; j < counts[s]; j++)
            CHECK(tr_optim_create(&parts[j], &cfg, sets[s][j + 1] - sets[s][j]) == TR_OK,
                  "create part");
        for (int k = 0; k < 3; k++)
            for (int j = 0; j < counts[s]; j++)
                run_steps(parts[j], part, g, lr, n, sets[s][j], sets[s][j + 1] - sets[s][j], k,
                          k + 1);
        int same = memcmp(whole, part, n * sizeof *part) == 0;
        for (int j = 0; j < counts[s]; j++) {
            same &= same_state(opt, parts[j], sets[s][j], sets[s][j + 1] - sets[s][j]);
            tr_optim_destroy(parts[j]);
        }
        CHECK(same, "%s large: %d slices differ from the whole (threaded) update", name,
              counts[s]);
    }
    printf("%-40s %zu elements: whole == 2 slices == 4 slices, bitwise\n", name, n);
    tr_optim_destroy(opt);
    tr_free(p0);
    tr_free(g);
    tr_free(whole);
    tr_free(part);
}

static void sched_case(const char *name) {
    ref_file *rf = ref_open(name);
    const double *c = f64(ref_need(rf, "cfg"));
    const ref_tensor *lrs_t = ref_need(rf, "lrs");
    tr_sched_config s = {.kind = (tr_sched_kind)(int)c[0],
                         .warmup_steps = (int64_t)c[1],
                         .step_size = (int64_t)c[2],
                         .gamma = c[3],
                         .total_steps = (int64_t)c[4],
                         .min_lr = c[5]};
    double ours[64];
    CHECK(lrs_t->numel <= 64, "too many steps");
    for (int64_t k = 0; k < lrs_t->numel && k < 64; k++) ours[k] = tr_sched_lr(&s, c[6], k);
    char label[96];
    snprintf(label, sizeof label, "%s lr", name);
    worst_sched = maxd(worst_sched, check_tensor_f64(label, ours, f64(lrs_t), lrs_t->numel, 1e-12));
    ref_close(rf);
}

static void clip_case(const char *name) {
    ref_file *rf = ref_open(name);
    const ref_tensor *g_t = ref_need(rf, "grads");
    const size_t n = (size_t)g_t->numel;
    const double max_norm = f64(ref_need(rf, "max_norm"))[0];
    const float torch_norm = ((const float *)ref_need(rf, "norm")->data)[0];
    const float *clipped = ref_need(rf, "clipped")->data;
    const ref_tensor *sizes_t = ref_need(rf, "sizes");
    const int64_t *sizes = sizes_t->data;
    float *g = tr_malloc(n * sizeof *g);
    memcpy(g, g_t->data, n * sizeof *g);

    /* The flat buffer's sum of squares equals the sum over its tensors (per-shard sums). */
    double sumsq = tr_grad_sumsq(g, n), by_tensor = 0;
    size_t off = 0;
    for (int64_t i = 0; i < sizes_t->numel; i++) {
        by_tensor += tr_grad_sumsq(g + off, (size_t)sizes[i]);
        off += (size_t)sizes[i];
    }
    CHECK(off == n, "sizes add up to %zu, not %zu", off, n);
    CHECK(fabs(sumsq - by_tensor) <= 1e-12 * sumsq, "%s: sumsq %.17g vs per-tensor %.17g", name,
          sumsq, by_tensor);

    double norm = tr_clip_grad_norm(g, n, max_norm, sumsq);
    double rel = fabs(norm - torch_norm) / torch_norm;
    printf("%-40s norm %.9g, torch %.9g, rel %.3e\n", name, norm, (double)torch_norm, rel);
    CHECK(rel <= TOL, "%s: norm %.9g vs torch %.9g", name, norm, (double)torch_norm);
    worst_clip = maxd(worst_clip, rel);
    char label[96];
    snprintf(label, sizeof label, "%s clipped grads", name);
    worst_clip = maxd(worst_clip, check_tensor(label, g, clipped, (int64_t)n, TOL));
    if (norm + 1e-6 <= max_norm)
        CHECK(memcmp(g, g_t->data, n * sizeof *g) == 0, "%s: below max_norm but changed", name);
    else
        CHECK(memcmp(g, g_t->data, n * sizeof *g) != 0, "%s: above max_norm but unchanged", name);
    tr_free(g);
    ref_close(rf);
}

/* The threaded sum of squares against a plain serial double sum. */
static void sumsq_large(void) {
    const size_t n = 1000003;
    float *g = tr_malloc(n * sizeof *g);
    tr_rng_fill_normal(g, n, 7, TR_RNG_STREAM_USER, 0, 0.0f, 1.0f);
    double serial = 0;
    for (size_t i = 0; i < n; i++) serial += (double)g[i] * g[i];
    double ours = tr_grad_sumsq(g, n);
    printf("%-40s %.17g vs serial %.17g\n", "sumsq 1000003", ours, serial);
    CHECK(fabs(ours - serial) <= 1e-12 * serial, "sumsq %.17g vs serial %.17g", ours, serial);
    CHECK(tr_grad_sumsq(g, n) == ours, "sumsq is not deterministic");
    tr_free(g);
}

int main(void) {
    static const char *optims[] = {"optim_sgd",           "optim_sgd_momentum",
                                   "optim_sgd_nesterov",  "optim_sgd_wd",
                                   "optim_sgd_dampening", "optim_adam",
                                   "optim_adam_wd",       "optim_adamw",
                                   "optim_adamw_default_wd"};
    static const char *scheds[] = {"sched_constant_warmup", "sched_step",
                                   "sched_step_warmup",     "sched_cosine",
                                   "sched_cosine_warmup",   "sched_cosine_end"};
    for (size_t i = 0; i < sizeof optims / sizeof *optims; i++) optim_case(optims[i]);
    for (size_t i = 0; i < sizeof optims / sizeof *optims; i++) large_case(optims[i]);
    for (size_t i = 0; i < sizeof scheds / sizeof *scheds; i++) sched_case(scheds[i]);
    clip_case("clip_active");
    clip_case("clip_inactive");
    sumsq_large();
    printf("worst relative error: optimizers %.3e, schedules %.3e, clipping %.3e\n", worst_optim,
           worst_sched, worst_clip);
    return test_finish();
}
