/* Strategy `cpu`: one process, one replica, all cores (OpenMP kernels and threaded GEMM).
 *
 * The reference every other strategy is compared against. The step is the core's one-replica
 * step (trainer/solo.h): micro-batches accumulate into the replica's flat gradient buffer,
 * then clipping by the global norm and one fused optimizer update over the flat parameter
 * buffer; the norm's sum of squares is taken per parameter in the last micro-batch's
 * backward, from the gradient-ready hook, while the gradient the op just wrote is still in
 * cache, instead of in a pass over the whole buffer before the update. In a step of one
 * micro-batch, small-batch linear layers' weight gradients are recomputed inside the update
 * instead of stored (tr_solo_set_defer). */
#include <stdio.h>

#include "trainer/runtime.h"
#include "trainer/solo.h"

static tr_status create(void **ctx, const tr_options *opts, const tr_strategy_env *env,
                        tr_strategy_info *info) {
    (void)opts;
    tr_solo *s;
    *ctx = NULL;
    TR_CHECK(tr_solo_create(env, NULL, &s));
    tr_solo_set_defer(s, 1); /* the trainer keeps each batch until the step's optim_step returns */
    *info = (tr_strategy_info){.rank = 0, .world = 1, .data_rank = 0, .data_world = 1};
    snprintf(info->description, sizeof info->description, "cpu (%d threads)", tr_get_num_threads());
    *ctx = s;
    return TR_OK;
}

static const tr_strategy_ops ops = {
    .create = create,
    TR_SOLO_OPS,
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
