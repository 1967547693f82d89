/* Optimizer objects: PyTorch's defaults, config validation, state buffers and the step entry
 * points, which run the SGD and Adam/AdamW kernels (kernels/sgd.c, kernels/adam.c).
 *
 * Limits: no amsgrad, maximize, foreach or per-group hyper-parameters; one optimizer updates
 * one contiguous slice with one set of hyper-parameters. Config fields that a kind does not
 * use (betas for SGD, momentum for Adam) are not validated. */
#include <math.h>
#include <string.h>

#include "kernels/gemm.h"
#include "optim/optim_impl.h"
#include "trainer/accel.h"
#include "trainer/memory.h"

tr_optim_config tr_optim_defaults(tr_optim_kind kind) {
    tr_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    switch (kind) {
    case TR_OPTIM_SGD:
        /* torch 1.13 has no default lr for SGD (it is required); 1e-3 is torch >= 2.2's. */
        c.lr = 1e-3;
        break;
    case TR_OPTIM_ADAM:
    case TR_OPTIM_ADAMW:
        c.lr = 1e-3;
        c.beta1 = 0.9;
        c.beta2 = 0.999;
        c.eps = 1e-8;
        c.weight_decay = kind == TR_OPTIM_ADAMW ? 1e-2 : 0.0;
        break;
    }
    return c;
}

/* !(x >= lo) also catches NaN. */
static tr_status need_ge(const char *field, double x, double lo) {
    if (!(x >= lo) || !isfinite(x))
        return tr_error_set(TR_ERR_INVALID, "optimizer.%s: must be >= %g, got %g", field, lo, x);
    return TR_OK;
}

static tr_status need_beta(const char *which, double b) {
    if (!(b >= 0.0 && b < 1.0))
        return tr_error_set(TR_ERR_INVALID, "optimizer.betas: %s must be in [0, 1), got %g",
                            which, b);
    return TR_OK;
}

tr_status tr_optim_config_validate(const tr_optim_config *c) {
    if (!c) return tr_error_set(TR_ERR_INVALID, "optimizer: config is NULL");
    if (c->kind != TR_OPTIM_SGD && c->kind != TR_OPTIM_ADAM && c->kind != TR_OPTIM_ADAMW)
        return tr_error_set(TR_ERR_INVALID,
                            "optimizer: unknown kind %d (expected SGD 0, Adam 1 or AdamW 2)",
                            (int)c->kind);
    if (!(c->lr > 0.0) || !isfinite(c->lr))
        return tr_error_set(TR_ERR_INVALID, "optimizer.lr: must be > 0, got %g", c->lr);
    TR_CHECK(need_ge("weight_decay", c->weight_decay, 0.0));
    if (c->kind == TR_OPTIM_SGD) {
        TR_CHECK(need_ge("momentum", c->momentum, 0.0));
        if (!(c->dampening >= 0.0 && c->dampening <= 1.0))
            return tr_error_set(TR_ERR_INVALID, "optimizer.dampening: must be in [0, 1], got %g",
                                c->dampening);
        if (c->nesterov != 0 && c->nesterov != 1)
            return tr_error_set(TR_ERR_INVALID, "optimizer.nesterov: must be 0 or 1, got %d",
                                c->nesterov);
        if (c->nesterov && (c->momentum <= 0.0 || c->dampening != 0.0))
            return tr_error_set(TR_ERR_INVALID,
                                "optimizer.nesterov: requires momentum > 0 and dampening 0, "
                                "got momentum %g, dampening %g",
                                c->momentum, c->dampening);
    } else {
        TR_CHECK(need_beta("beta1", c->beta1));
        TR_CHECK(need_beta("beta2", c->beta2));
        TR_CHECK(need_ge("eps", c->eps, 0.0));
    }
    return TR_OK;
}

tr_status tr_optim_create(tr_optim **out, const tr_optim_config *cfg, size_t n) {
    if (!out) return tr_error_set(TR_ERR_INVALID, "optimizer: out is NULL");
    *out = NULL;
    TR_CHECK(tr_optim_config_validate(cfg));
    tr_optim *o = tr_calloc(1, sizeof *o);
    if (!o) return TR_ERR_NOMEM;
    o->cfg = *cfg;
    o->n = n;
    if (cfg->kind == TR_OPTIM_SGD) {
        if (cfg->momentum != 0.0) o->names[o->nstate++] = "momentum_buffer";
    } else {
        o->names[o->nstate++] = "exp_avg";
        o->names[o->nstate++] = "exp_avg_sq";
    }
    for (int i = 0; i < o->nstate; i++) {
        o->state[i] = tr_calloc(n, sizeof(float));
        if (!o->state[i]) {
            tr_optim_destroy(o);
            return TR_ERR_NOMEM;
        }
    }
    *out = o;
    return TR_OK;
}

void tr_optim_destroy(tr_optim *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->nstate; i++) tr_accel_free(opt->accel, opt->dstate[i], opt->n * sizeof(float)); /* NULL: host */
    for (int i = 0; i < opt->nstate; i++) tr_free(opt->state[i]);
    tr_free(opt);
}

tr_status tr_optim_place(tr_optim *opt, tr_accel *a) {
    if (opt->accel) return tr_error_set(TR_ERR_INVALID, "optimizer: already on %s", tr_accel_name(opt->accel));
    for (int i = 0; i < opt->nstate; i++) {
        tr_status st = tr_accel_alloc(a, opt->n * sizeof(float), (void **)&opt->dstate[i]);
        if (st != TR_OK) { /* none kept: destroy frees dstate as host memory while accel is NULL */
            for (int k = 0; k <= i; k++) {
                if (k < i) tr_accel_free(a, opt->dstate[k], opt->n * sizeof(float));
                opt->dstate[k] = NULL;
            }
            return st;
        }
    }
    opt->accel = a;
    return tr_optim_upload(opt);
}

tr_status tr_optim_upload(tr_optim *opt) {
    for (int i = 0; i < opt->nstate && opt->accel; i++)
        TR_CHECK(tr_accel_upload(opt->accel, opt->dstate[i], opt->state[i], opt->n * sizeof(float)));
    return TR_OK;
}

tr_status tr_optim_download(tr_optim *opt) {
    for (int i = 0; i < opt->nstate && opt->accel; i++)
        TR_CHECK(tr_accel_download(opt->accel, opt->state[i], opt->dstate[i], opt->n * sizeof(float)));
    return TR_OK;
}

static void coef(const tr_optim *opt, double lr, optim_coef *k) { optim_coef_of(&opt->cfg, opt->steps, lr, k); }

/* Elements [lo, hi) on the host with the step's coefficients (param and grad at lo). */
static void apply(tr_optim *opt, const optim_coef *k, float *param, const float *grad, size_t lo, size_t hi) {
    float *st[OPTIM_MAX_STATE] = {0};
    for (int i = 0; i < opt->nstate; i++) st[i] = opt->state[i] + lo;
    optim_apply(&opt->cfg, k, param, grad, st, hi - lo);
}

/* Elements [lo, hi) (param and grad at lo) on the host, or by the device's kernel. */
static void update(tr_optim *opt, float *param, const float *grad, double lr, size_t lo, size_t hi) {
    if (opt->accel) {
        float *st[OPTIM_MAX_STATE] = {0};
        for (int i = 0; i < opt->nstate; i++) st[i] = opt->dstate[i] + lo;
        tr_accel_kernels(opt->accel)->optim_update(&opt->cfg, opt->steps, param, grad, st, hi - lo, lr);
        return;
    }
    optim_coef k;
    coef(opt, lr, &k);
    apply(opt, &k, param, grad, lo, hi);
}

tr_status tr_optim_step(tr_optim *opt, float *param, const float *grad, size_t n, double lr) {
    if (!opt) return tr_error_set(TR_ERR_INVALID, "optimizer step: optimizer is NULL");
    if (n != opt->n)
        return tr_error_set(TR_ERR_INVALID,
                            "optimizer step: slice has %zu elements, the optimizer was created "
                            "for %zu",
                            n, opt->n);
    if (n && (!param || !grad))
        return tr_error_set(TR_ERR_INVALID, "optimizer step: %s is NULL",
                            param ? "grad" : "param");
    if (!(lr >= 0.0) || !isfinite(lr))
        return tr_error_set(TR_ERR_INVALID, "optimizer step: lr must be >= 0 and finite, got %g",
                            lr);
    update(opt, param, grad, lr, 0, n);
    opt->steps++;
    return TR_OK;
}

tr_status tr_optim_step_at(tr_optim *opt, float *param, const float *grad, size_t lo, size_t hi, double lr) {
    if (!opt || (hi > lo && (!param || !grad))) return tr_error_set(TR_ERR_INVALID, "optimizer step: NULL argument");
    if (lo > hi || hi > opt->n)
        return tr_error_set(TR_ERR_INVALID, "optimizer step: [%zu, %zu) is not within the optimizer's %zu elements",
                            lo, hi, opt->n);
    if (!(lr >= 0.0) || !isfinite(lr))
        return tr_error_set(TR_ERR_INVALID, "optimizer step: lr must be >= 0 and finite, got %g", lr);
    update(opt, param, grad, lr, lo, hi);
    return TR_OK;
}

tr_status tr_optim_step_part(tr_optim *opt, float *param, const float *grad, size_t lo, size_t hi, double lr) {
    if (!opt || !param || !grad) return tr_error_set(TR_ERR_INVALID, "optimizer step part: NULL argument");
    return tr_optim_step_at(opt, param + lo, grad + lo, lo, hi, lr);
}

/* Tiles of at most OPTIM_TILE floats (16 KiB: the gradient tile stays in L1 while the
 * update streams the parameters and state past it): whole rows when a row fits, else pieces
 * of one row at multiples of OPTIM_TILE columns. */
#define OPTIM_TILE 4096

static tr_status check_tiles(const tr_optim *opt, size_t lo, size_t rows, size_t cols, double lr) {
    if (opt->accel) return tr_error_set(TR_ERR_INVALID, "optimizer step: tiled updates run on the host only");
    if (cols && rows > (opt->n - (lo < opt->n ? lo : opt->n)) / cols)
        return tr_error_set(TR_ERR_INVALID, "optimizer step: %zu x %zu at %zu is not within the optimizer's %zu elements",
                            rows, cols, lo, opt->n);
    if (!(lr >= 0.0) || !isfinite(lr))
        return tr_error_set(TR_ERR_INVALID, "optimizer step: lr must be >= 0 and finite, got %g", lr);
    return TR_OK;
}

tr_status tr_optim_step_tiles(tr_optim *opt, float *param, size_t lo, size_t rows, size_t cols, tr_grad_tile_fn tile,
                              const void *ctx, float scale, double lr) {
    if (!opt || !tile || (rows && cols && !param)) return tr_error_set(TR_ERR_INVALID, "optimizer step: NULL argument");
    TR_CHECK(check_tiles(opt, lo, rows, cols, lr));
    if (!rows || !cols) return TR_OK;
    size_t rb = cols <= OPTIM_TILE ? OPTIM_TILE / cols : 1, cb = cols <= OPTIM_TILE ? cols : OPTIM_TILE;
    size_t nc = (cols + cb - 1) / cb, nt = (rows + rb - 1) / rb * nc;
    optim_coef k;
    coef(opt, lr, &k);
#pragma omp parallel for schedule(static) if (rows * cols > OPTIM_PAR_MIN)
    for (size_t t = 0; t < nt; t++) {
        _Alignas(64) float g[OPTIM_TILE];
        size_t r0 = t / nc * rb, c0 = t % nc * cb;
        size_t r1 = r0 + rb < rows ? r0 + rb : rows, c1 = c0 + cb < cols ? c0 + cb : cols;
        size_t len = (r1 - r0) * (c1 - c0), at = r0 * cols + c0; /* contiguous: whole rows or one row's piece */
        tile(ctx, r0, r1, c0, c1, g);
        if (scale != 1.0f)
            for (size_t i = 0; i < len; i++) g[i] *= scale;
        apply(opt, &k, param + at, g, lo + at, lo + at + len);
    }
    return TR_OK;
}

/* The tile of A^T B for tr_optim_step_tn's fallback: the small-batch GEMM, as the stored
 * gradient is computed (alpha 1, beta 0: each element a multiply-add chain from 0). */
typedef struct tn_ctx {
    size_t rows, cols, K;
    const float *A, *B;
} tn_ctx;

static void tn_tile(const void *ctx, size_t r0, size_t r1, size_t c0, size_t c1, float *out) {
    const tn_ctx *t = ctx;
    tr_gemm_linear_f32(1, 0, (int64_t)(r1 - r0), (int64_t)(c1 - c0), (int64_t)t->K, 1, t->A + r0, (int64_t)t->rows,
                       t->B + c0, (int64_t)t->cols, 0, out, (int64_t)(c1 - c0));
}

tr_status tr_optim_step_tn(tr_optim *opt, float *param, size_t lo, size_t rows, size_t cols, size_t K,
                           const float *A, const float *B, float scale, double lr) {
    if (!opt || (rows && cols && (!param || (K && (!A || !B)))))
        return tr_error_set(TR_ERR_INVALID, "optimizer step: NULL argument");
    if (K < 1 || K > TR_GEMM_SMALL_MAX)
        return tr_error_set(TR_ERR_INVALID, "optimizer step: a product over K = %zu (1 to %d)", K, TR_GEMM_SMALL_MAX);
    tn_ctx t = {.rows = rows, .cols = cols, .K = K, .A = A, .B = B};
    int adam = opt->cfg.kind == TR_OPTIM_ADAM || opt->cfg.kind == TR_OPTIM_ADAMW;
    if (!adam || opt->accel || !rows || !cols) return tr_optim_step_tiles(opt, param, lo, rows, cols, tn_tile, &t, scale, lr);
    TR_CHECK(check_tiles(opt, lo, rows, cols, lr));
    optim_coef k;
    coef(opt, lr, &k);
    if (!optim_adam_apply_tn(&k, param, opt->state[0] + lo, opt->state[1] + lo, rows, cols, K, A, B, scale))
        return tr_optim_step_tiles(opt, param, lo, rows, cols, tn_tile, &t, scale, lr);
    return TR_OK;
}

void tr_optim_step_done(tr_optim *opt) {
    if (opt) opt->steps++;
}

int64_t tr_optim_steps(const tr_optim *opt) { return opt ? opt->steps : 0; }
size_t tr_optim_size(const tr_optim *opt) { return opt ? opt->n : 0; }
size_t tr_optim_state_bytes(const tr_optim *opt) { return opt ? opt->n * (size_t)opt->nstate * sizeof(float) : 0; }

/* For resuming: with the state buffers restored, the next step continues as the original
 * run would (Adam's bias correction, SGD's momentum buffer is not re-initialised when > 0).
 * A negative count is taken as 0. */
void tr_optim_set_steps(tr_optim *opt, int64_t steps) {
    if (opt) opt->steps = steps < 0 ? 0 : steps;
}

int tr_optim_state_count(const tr_optim *opt) { return opt ? opt->nstate : 0; }

const char *tr_optim_state_name(const tr_optim *opt, int i) {
    return opt && i >= 0 && i < opt->nstate ? opt->names[i] : NULL;
}

float *tr_optim_state(tr_optim *opt, int i) {
    return opt && i >= 0 && i < opt->nstate ? opt->state[i] : NULL;
}
