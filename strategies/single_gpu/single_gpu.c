/* Strategy `single-gpu`: the whole training loop on one device.
 *
 * The cpu strategy's step (the core's one-replica step, trainer/solo.h) with the replica made
 * on the device: parameters, gradients, buffers, activations and the optimizer state live in
 * the device's memory and every op runs the device's kernels. Per micro-batch the host
 * uploads the batch and waits once, downloading the loss (in the step's last micro-batch
 * with every parameter's gradient sum of squares, queued into device memory as backward made
 * each gradient); the update is queued without waiting (docs/gpu.md, "How often a step
 * waits"). The host keeps a copy of the parameters and optimizer state for checkpoints,
 * refreshed by state() and pushed back by sync(). */
#include <stdio.h>

#include "trainer/solo.h"

static tr_status create(void **ctx, const tr_options *opts, const tr_strategy_env *env, tr_strategy_info *info) {
    (void)opts;
    *ctx = NULL;
    if (env->accelerator != TR_ACCEL_GPU || !env->gpu_backend || env->n_gpu_ids < 1)
        return tr_error_set(TR_ERR_INVALID, "single-gpu: no GPU was chosen for this run (accelerator %s)",
                            tr_accelerator_name((tr_accelerator)env->accelerator));
    tr_accel *a;
    tr_solo *s;
    TR_CHECK(tr_accel_open(env->gpu_backend, env->gpu_ids[0], &a));
    TR_CHECK(tr_solo_create(env, a, &s)); /* owns a from here, also on failure */
    *info = (tr_strategy_info){.rank = 0, .world = 1, .data_rank = 0, .data_world = 1};
    tr_device_ops dops;
    tr_device_info di = {0};
    if (tr_device_ops_of(env->gpu_backend, &dops) == TR_OK) dops.info(env->gpu_ids[0], &di);
    snprintf(info->description, sizeof info->description, "single-gpu (%s, %s)", tr_accel_name(a),
             di.name[0] ? di.name : "unnamed device");
    *ctx = s;
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

static const tr_strategy_ops ops = {
    .create = create,
    .probe = probe,
    TR_SOLO_OPS,
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
