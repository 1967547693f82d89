/* A communication hook: gradient buckets go over the wire as bf16 and are summed in bf16
 * (torch's bf16_compress_hook), half the bytes of fp32, for ddp and sharded alike, keeping
 * their overlap with backward, their sharded update and their host staging on GPUs. The one
 * idea: convert a ready bucket into a bf16 copy, reduce that copy, convert the sum back.
 *   strategy: {comm_hook: bf16_compress}     (docs/writing-a-strategy.md, "Communication hooks")
 * Host buffers only: buckets in GPU memory (backend nccl) would need a conversion kernel. */
#include <stdint.h>

#include <trainer/grad_sync.h>
#include <trainer/half.h>
#include <trainer/memory.h>

typedef struct bf16_hook {
    uint16_t *wire; /* the flat gradient buffer's length in bf16: a bucket's copy at its offset */
} bf16_hook;

static tr_status create(void **state, const tr_options *opts, const tr_comm_hook_env *env) {
    (void)opts;
    if (env->device)
        return tr_error_set(TR_ERR_UNSUPPORTED, "bf16_compress converts buckets on the host, and these are in GPU "
                                                "memory (backend nccl): use a host backend (strategy.backend=shm)");
    bf16_hook *h = tr_calloc(1, sizeof *h);
    if (!h) return tr_error_set(TR_ERR_NOMEM, "bf16_compress: out of memory");
    /* Communicator memory (freed with it): shm reads the peers' copies in place. Collective:
     * every rank's engine creates its hook at the same point. */
    tr_status st = tr_comm_alloc(env->comm, (env->numel + 1) * sizeof *h->wire, (void **)&h->wire);
    if (st != TR_OK) {
        tr_free(h);
        return st;
    }
    *state = h;
    return TR_OK;
}

static void destroy(void *state) { tr_free(state); }

/* This rank's part of the sum: the whole bucket, or its slice of a reduce-scatter. */
static size_t part(const tr_grad_bucket *b, size_t *len) {
    *len = b->reduce == TR_GRAD_ALL_REDUCE ? b->numel : b->numel / (size_t)b->world;
    return b->reduce == TR_GRAD_ALL_REDUCE ? 0 : (size_t)b->rank * *len;
}

static tr_status reduce(void *state, const tr_grad_bucket *b, tr_comm_work **work) {
    bf16_hook *h = state;
    uint16_t *w = h->wire + b->offset;
    for (size_t i = 0; i < b->numel; i++) w[i] = tr_f32_to_bf16(b->grad[i]);
    size_t len, at = part(b, &len);
    if (b->reduce == TR_GRAD_ALL_REDUCE) return tr_comm_iall_reduce(b->comm, w, w, len, TR_BF16, TR_RED_SUM, work);
    return tr_comm_ireduce_scatter(b->comm, w, w + at, len, TR_BF16, TR_RED_SUM, work);
}

static tr_status finish(void *state, const tr_grad_bucket *b) {
    const bf16_hook *h = state;
    size_t len, at = part(b, &len);
    const uint16_t *w = h->wire + b->offset;
    for (size_t i = at; i < at + len; i++) b->grad[i] = tr_bf16_to_f32(w[i]);
    return TR_OK;
}

static const tr_comm_hook_ops ops = {.create = create, .destroy = destroy, .reduce = reduce, .finish = finish};

static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER,
    .kind = TR_PLUGIN_COMM_HOOK,
    .name = "bf16_compress",
    .version = "1.0.0",
    .description = "gradient buckets reduced in bf16: half the bytes on the wire",
    .ops = &ops,
    .ops_size = sizeof ops,
};

TR_PLUGIN_DEFINE(desc)
