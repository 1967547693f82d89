/* Comm hooks for the engine's tests (e2e_comm_hook), one source built twice: `fp32_sum`
 * reduces each bucket as the engine itself would (fp32 sums, in place), so runs with it must
 * match runs without a hook bit for bit; `fail_at_3` fails its third bucket (only on rank
 * TRAINER_TEST_HOOK_RANK when set), so the run must end on every rank with its message. */
#include <stdlib.h>

#include <trainer/grad_sync.h>

static tr_status reduce(void *state, const tr_grad_bucket *b, tr_comm_work **work) {
#ifdef HOOK_FAIL
    int *calls = state;
    const char *only = getenv("TRAINER_TEST_HOOK_RANK");
    if (++*calls == 3 && (!only || atoi(only) == b->rank)) return tr_error_set(TR_ERR_INVALID, "fail_at_3: refused bucket %d of %d", b->index, b->count);
#else
    (void)state;
#endif
    if (b->reduce == TR_GRAD_ALL_REDUCE)
        return tr_comm_iall_reduce(b->comm, b->grad, b->grad, b->numel, TR_F32, TR_RED_SUM, work);
    size_t len = b->numel / (size_t)b->world;
    return tr_comm_ireduce_scatter(b->comm, b->grad, b->grad + (size_t)b->rank * len, len, TR_F32, TR_RED_SUM, work);
}

#ifdef HOOK_FAIL
#include <trainer/memory.h>
static tr_status create(void **state, const tr_options *opts, const tr_comm_hook_env *env) {
    (void)opts;
    (void)env;
    *state = tr_calloc(1, sizeof(int));
    return *state ? TR_OK : tr_error_set(TR_ERR_NOMEM, "fail_at_3: out of memory");
}
static void destroy(void *state) { tr_free(state); }
static const tr_comm_hook_ops ops = {.create = create, .destroy = destroy, .reduce = reduce};
#define HOOK_NAME "fail_at_3"
#else
static const tr_comm_hook_ops ops = {.reduce = reduce};
#define HOOK_NAME "fp32_sum"
#endif

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_COMM_HOOK,
    .name = HOOK_NAME,
    .version = "0.1.0",
    .description = "a comm hook for the tests",
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
