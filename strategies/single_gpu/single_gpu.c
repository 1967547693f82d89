/* Strategy `single-gpu`: the whole training loop on one device.
 *
 * One replica made on the device (tr_replica_create_on): parameters, gradients, buffers,
 * activations and the optimizer state live in the device's memory, every op runs the
 * device's kernels. Per step the host uploads the batch and downloads the loss, each
 * parameter's gradient sum of squares (one waiting call each), the targets for
 * cross-entropy's range check and its seed gradient. The math is the cpu
 * strategy's, step for step: the gradient norm is summed per parameter from the
 * gradient-ready hook in the same order, clipping and the update are the same formulas as
 * kernels. The host keeps a copy of the parameters and optimizer state for checkpoints,
 * refreshed by state() and pushed back by sync(). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trainer/accel.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"
#include "trainer/strategy.h"

typedef struct gpu_strategy {
    tr_accel *a;
    const tr_kernels *k;
    tr_replica *r;
    tr_optim *opt;               /* placed on the device; its host state is the checkpoint copy */
    size_t n;                    /* floats of the flat parameter buffer */
    double *sumsq;               /* per parameter, from the last micro-batch's ready hook */
    int last;
} gpu_strategy;

static void grad_ready(void *user, int p) {
    gpu_strategy *s = user;
    if (!s->last) return;
    tr_tensor *t = tr_params_get(s->r->dP, p);
    s->sumsq[p] = tr_accel_grad_sumsq(s->a, t->grad, (size_t)tr_tensor_numel(t));
}

static void destroy(void *ctx) {
    gpu_strategy *s = ctx;
    if (!s) return;
    tr_replica_destroy(s->r);
    tr_optim_destroy(s->opt);
    tr_accel_close(s->a);
    tr_free(s->sumsq);
    tr_free(s);
}

/* Whether the device has what the loop itself needs (ops are checked as they run). */
static tr_status check_kernels(gpu_strategy *s) {
    const char *missing = !s->k->optim_update ? "optim_update" : !s->k->sumsq ? "sumsq"
                          : !s->k->scale_inplace ? "scale_inplace" : NULL;
    if (missing)
        return tr_error_set(TR_ERR_UNSUPPORTED, "single-gpu: device %s has no '%s' kernel", tr_accel_name(s->a), missing);
    return TR_OK;
}

static tr_status create(void **ctx, const tr_options *opts, const tr_strategy_env *env, tr_strategy_info *info) {
    (void)opts;
    *ctx = NULL;
    if (env->accelerator != TR_ACCEL_GPU || !env->gpu_backend || env->n_gpu_ids < 1)
        return tr_error_set(TR_ERR_INVALID, "single-gpu: no GPU was chosen for this run (accelerator %s)",
                            tr_accelerator_name((tr_accelerator)env->accelerator));
    gpu_strategy *s = tr_calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "single-gpu strategy: out of memory");
    tr_status st;
    TR_CHECK_GOTO(tr_accel_open(env->gpu_backend, env->gpu_ids[0], &s->a), fail);
    TR_CHECK_GOTO(tr_accel_bind(s->a), fail);
    s->k = tr_accel_kernels(s->a);
    TR_CHECK_GOTO(check_kernels(s), fail);
    TR_CHECK_GOTO(tr_replica_create_on(env->models, s->a, &s->r), fail);
    s->n = tr_params_numel(s->r->P);
    TR_CHECK_GOTO(tr_optim_create(&s->opt, &env->optim, s->n), fail);
    TR_CHECK_GOTO(tr_optim_place(s->opt, s->a), fail);
    s->sumsq = tr_calloc((size_t)tr_params_count(s->r->P) + 1, sizeof *s->sumsq);
    if (!s->sumsq) {
        st = tr_error_set(TR_ERR_NOMEM, "single-gpu strategy: out of memory");
        goto fail;
    }
    tr_graph_set_grad_hook(s->r->g, grad_ready, s);
    *info = (tr_strategy_info){.rank = 0, .world = 1, .data_rank = 0, .data_world = 1};
    tr_device_ops dops;
    tr_device_info di = {0};
    if (tr_device_ops_of(env->gpu_backend, &dops) == TR_OK) dops.info(env->gpu_ids[0], &di);
    snprintf(info->description, sizeof info->description, "single-gpu (%s, %s)", tr_accel_name(s->a),
             di.name[0] ? di.name : "unnamed device");
    *ctx = s;
    return TR_OK;
fail:
    destroy(s);
    return st;
}

static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) {
    gpu_strategy *s = ctx;
    tr_model_out out;
    TR_CHECK(tr_replica_forward(s->r, mb->hb, 0, mb->hb->size, mb->normaliser, mb->step, 1, 1, &out));
    if (mb->first) TR_CHECK(tr_graph_write_param_grads(s->r->g));
    s->last = mb->last;
    tr_status st = tr_backward(s->r->g, out.loss, NULL);
    s->last = 0;
    TR_CHECK(st);
    float v;
    TR_CHECK(tr_accel_download(s->a, &v, out.loss->data, sizeof v));
    *loss = v;
    return tr_accel_sync(s->a);
}

static tr_status optim_step(void *ctx, double lr, double max_norm, double *grad_norm) {
    gpu_strategy *s = ctx;
    double sumsq = 0;
    for (int k = 0; k < tr_params_count(s->r->P); k++) sumsq += s->sumsq[k];
    *grad_norm = sqrt(sumsq);
    if (!isfinite(sumsq)) return TR_OK; /* never applied: the trainer stops or skips the step */
    if (max_norm > 0) tr_accel_clip_grad_norm(s->a, s->r->d_grad, s->n, max_norm, sumsq);
    TR_CHECK(tr_optim_step(s->opt, s->r->d_data, s->r->d_grad, s->n, lr));
    return tr_accel_sync(s->a);
}

static tr_status forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    gpu_strategy *s = ctx;
    TR_CHECK(tr_replica_forward(s->r, hb, 0, hb->size, 1.0, 0, 0, with_y, out));
    return tr_replica_outputs_to_host(s->r, out);
}

/* The host copies, refreshed from the device, for a checkpoint to save or load into. */
static tr_status state(void *ctx, tr_params **P, tr_optim **opt) {
    gpu_strategy *s = ctx;
    TR_CHECK(tr_replica_download(s->r));
    TR_CHECK(tr_optim_download(s->opt));
    *P = s->r->P;
    *opt = s->opt;
    return TR_OK;
}

/* After a checkpoint was loaded into state()'s copies: onto the device. */
static tr_status sync(void *ctx) {
    gpu_strategy *s = ctx;
    TR_CHECK(tr_replica_upload(s->r));
    TR_CHECK(tr_optim_upload(s->opt));
    return tr_accel_sync(s->a);
}

static tr_status memory(void *ctx, tr_strategy_memory *m) {
    gpu_strategy *s = ctx;
    *m = (tr_strategy_memory){0};
    tr_replica_memory(s->r, s->opt, m);
    return TR_OK;
}

static tr_status nonfinite(void *ctx, double *flags, int n, char *activation, size_t size) {
    gpu_strategy *s = ctx;
    (void)n;
    tr_replica_find_nonfinite(s->r, flags, activation, size);
    return TR_OK;
}

static tr_status probe(const tr_options *o, const tr_strategy_probe *env) {
    (void)o;
    if (env->accelerator != TR_ACCEL_GPU)
        return tr_error_set(TR_ERR_UNSUPPORTED, "single-gpu trains on one GPU; on the CPU use strategy cpu");
    if (env->devices != 1)
        return tr_error_set(TR_ERR_UNSUPPORTED, "single-gpu uses one GPU, %d were asked for (ddp or dataparallel use "
                                                "several)", env->devices);
    return tr_accel_probe(env->gpu_backend);
}

/* `trainer plan`: one replica on the whole global batch, on the device. */
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
    .sync = sync,
    .memory = memory,
    .probe = probe,
    .estimate = estimate,
    .nonfinite = nonfinite,
};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_STRATEGY,
    .name = "single-gpu",
    .version = "0.1.0",
    .description = "the whole training loop on one GPU: parameters, activations and optimizer on the device",
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
