/* Strategy `cpu`: one process, one replica, all cores (OpenMP kernels and threaded GEMM).
 *
 * The reference every other strategy is compared against: micro-batches accumulate into
 * the replica's flat gradient buffer, then clipping by the global norm and one fused
 * optimizer update over the flat parameter buffer. The norm's sum of squares is taken per
 * parameter in the last micro-batch's backward, from the gradient-ready hook, while the
 * gradient the op just wrote is still in cache, instead of in a pass over the whole buffer
 * before the update. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#include "trainer/memory.h"
#include "trainer/runtime.h"
#include "trainer/strategy.h"

typedef struct cpu_strategy {
    tr_replica *r;
    tr_optim *opt;
    double *sumsq;  /* per parameter, from the last micro-batch's ready hook */
    int last;       /* the backward running is the step's last */
} cpu_strategy;

static void grad_ready(void *user, int p) {
    cpu_strategy *s = user;
    if (!s->last) return;
    tr_tensor *t = tr_params_get(s->r->P, p);
    s->sumsq[p] = tr_grad_sumsq(t->grad, (size_t)tr_tensor_numel(t));
}

static void destroy(void *ctx) {
    cpu_strategy *s = ctx;
    if (!s) return;
    tr_optim_destroy(s->opt);
    tr_replica_destroy(s->r);
    tr_free(s->sumsq);
    tr_free(s);
}

static tr_status create(void **ctx, const tr_options *opts, const tr_strategy_env *env,
                        tr_strategy_info *info) {
    (void)opts;
    *ctx = NULL;
    cpu_strategy *s = tr_malloc(sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "cpu strategy: out of memory");
    *s = (cpu_strategy){0};
    tr_status st;
    TR_CHECK_GOTO(tr_replica_create(env->models, &s->r), fail);
    TR_CHECK_GOTO(tr_optim_create(&s->opt, &env->optim, tr_params_numel(s->r->P)), fail);
    s->sumsq = tr_calloc((size_t)tr_params_count(s->r->P) + 1, sizeof *s->sumsq);
    if (!s->sumsq) {
        st = tr_error_set(TR_ERR_NOMEM, "cpu strategy: out of memory");
        goto fail;
    }
    tr_graph_set_grad_hook(s->r->g, grad_ready, s);
    *info = (tr_strategy_info){.rank = 0, .world = 1, .data_rank = 0, .data_world = 1};
    snprintf(info->description, sizeof info->description, "cpu (%d threads)", tr_get_num_threads());
    *ctx = s;
    return TR_OK;
fail:
    destroy(s);
    return st;
}

static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    cpu_strategy *s = ctx;
    tr_model_out out;
    TR_CHECK(tr_replica_forward(s->r, mb->hb, 0, mb->hb->size, mb->normaliser, mb->step, 1, 1, &out));
    if (mb->first) TR_CHECK(tr_graph_write_param_grads(s->r->g));
    s->last = mb->last;
    tr_status st = tr_backward(s->r->g, out.loss, NULL);
    s->last = 0;
    TR_CHECK(st);
    *loss = ((const float *)out.loss->data)[0];
    return TR_OK;
}

static tr_status optim_step(void *ctx, double lr, double max_norm, double *grad_norm) {
    cpu_strategy *s = ctx;
    float *p = tr_params_data(s->r->P), *g = tr_params_grad(s->r->P);
    size_t n = tr_params_numel(s->r->P);
    double sumsq = 0;
    for (int k = 0; k < tr_params_count(s->r->P); k++) sumsq += s->sumsq[k];
    *grad_norm = sqrt(sumsq);
    if (!isfinite(sumsq)) return TR_OK; /* never applied: the trainer stops or skips the step */
    if (max_norm > 0) tr_clip_grad_norm(g, n, max_norm, sumsq);
    return tr_optim_step(s->opt, p, g, n, lr);
}

static tr_status nonfinite(void *ctx, double *flags, int n, char *activation, size_t size) {
    cpu_strategy *s = ctx;
    (void)n;
    tr_replica_find_nonfinite(s->r, flags, activation, size);
    return TR_OK;
}

static tr_status forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    cpu_strategy *s = ctx;
    return tr_replica_forward(s->r, hb, 0, hb->size, 1.0, 0, 0, with_y, out);
}

static tr_status state(void *ctx, tr_params **P, tr_optim **opt) {
    cpu_strategy *s = ctx;
    *P = s->r->P;
    *opt = s->opt;
    return TR_OK;
}

static tr_status memory(void *ctx, tr_strategy_memory *m) {
    cpu_strategy *s = ctx;
    *m = (tr_strategy_memory){0};
    tr_replica_memory(s->r, s->opt, m);
    return TR_OK;
}

/* `trainer plan`: one replica on the whole global batch. */
static tr_status estimate(const tr_options *o, const tr_strategy_estimate_env *env, tr_strategy_estimate *out) {
    (void)o;
    out->world = 1;
    out->rank_batch = env->global_batch;
    return tr_estimate_replica(env, 0, env->global_batch, &out->memory);
}

static const tr_strategy_ops ops = {
    .create = create,
    .destroy = destroy,
    .train_micro = train_micro,
    .optim_step = optim_step,
    .forward = forward,
    .state = state,
    .memory = memory,
    .estimate = estimate,
    .nonfinite = nonfinite,
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_STRATEGY,
    .name = "cpu",
    .version = "0.1.0",
    .description = "one process, one replica on all CPU cores (the reference strategy)",
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
