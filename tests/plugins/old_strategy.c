/* A strategy built for plugin ABI 0.2 (before optim_step promised to leave a non-finite step
 * out): the core must refuse trainer.on_nan skip with it before creating anything. Its entries
 * are never reached in that test; called anyway, they fail cleanly. */
#include "trainer/strategy.h"

static tr_status refuse(void) { return tr_error_set(TR_ERR_UNSUPPORTED, "old_strategy: a test fixture, it does not train"); }
static tr_status create(void **ctx, const tr_options *o, const tr_strategy_env *e, tr_strategy_info *i) {
    (void)o, (void)e, (void)i;
    *ctx = NULL;
    return refuse();
}
static void destroy(void *ctx) { (void)ctx; }
static tr_status train_micro(void *ctx, const tr_micro_batch *mb, double *loss) { return (void)ctx, (void)mb, (void)loss, refuse(); }
static tr_status optim_step(void *ctx, double lr, double max_norm, double *gn) {
    return (void)ctx, (void)lr, (void)max_norm, (void)gn, refuse();
}
static tr_status forward(void *ctx, const tr_host_batch *hb, int with_y, tr_model_out *out) {
    return (void)ctx, (void)hb, (void)with_y, (void)out, refuse();
}
static tr_status state(void *ctx, tr_params **P, tr_optim **opt) { return (void)ctx, (void)P, (void)opt, refuse(); }

static const tr_strategy_ops ops = {.create = create, .destroy = destroy, .train_micro = train_micro,
                                    .optim_step = optim_step, .forward = forward, .state = state};

static const tr_plugin_desc desc = {
    .abi_major = 0,
    .abi_minor = 2,
    .struct_size = sizeof(tr_plugin_desc),
    .kind = TR_PLUGIN_STRATEGY,
    .name = "old_strategy",
    .version = "0.2.0",
    .description = "a strategy built for ABI 0.2 (test fixture)",
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
