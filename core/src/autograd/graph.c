/* The graph: the step arena, its settings and hooks, and the parameters' gradients. Recording
 * and backward: tape.c; a device's inputs: graph_device.c. */
#include "autograd/graph_impl.h"


tr_status tr_graph_create(tr_graph **out, size_t arena_bytes) {
    *out = NULL;
    tr_graph *g = tr_calloc(1, sizeof *g);
    if (!g) return TR_ERR_NOMEM;
    tr_status st = tr_arena_create(&g->arena, arena_bytes);
    if (st) {
        tr_free(g);
        return st;
    }
    g->training = 1;
    g->grad_enabled = 1;
    g->rows_per_sample = 1;
    *out = g;
    return TR_OK;
}

static void reset_step(tr_graph *g, int retire);

void tr_graph_destroy(tr_graph *g) {
    if (!g) return;
    reset_step(g, 0); /* no mark: nothing follows (and the thread may have another device bound) */
    for (int h = 0; h < 2; h++) {
        tr_accel_free(g->accel, g->in[h].p, g->in[h].cap);
        tr_accel_mark_free(g->accel, g->in[h].retired);
    }
    tr_graph_block_free_(g);
    tr_arena_destroy(g->arena);
    tr_arena_destroy(g->data);
    tr_free(g->fresh);
    tr_free(g);
}

/* Ends the step's use of its input half: the work that reads the half's inputs is queued by
 * now (a step's tensors die at reset), so the mark recorded here is what a copy into the half,
 * two steps on, waits for. */
static tr_status retire_inputs(tr_graph *g) {
    input_half *h = &g->in[g->in_cur];
    tr_status st = TR_OK;
    if (h->used) {
        st = tr_accel_mark(g->accel, &h->retired);
        h->fresh = st != TR_OK; /* unmarked: ordered uploads until the next mark */
    }
    if (g->in_step > g->in_need) g->in_need = g->in_step;
    g->in_step = 0;
    g->in_cur ^= 1;
    g->in[g->in_cur].used = 0;
    return st;
}

static void reset_step(tr_graph *g, int retire) {
    tr_status in_st = retire && tr_accel_can_upload_after(g->accel) ? retire_inputs(g) : TR_OK;
    char in_msg[256] = "";
    if (in_st != TR_OK) snprintf(in_msg, sizeof in_msg, "%s", tr_error_msg());
    /* Parameters keep their use counts in their own tensors: clear the ones this step set. */
    for (int i = 0; i < g->n_used; i++) g->used[i]->uses = 0;
    g->used = NULL;
    g->n_used = g->cap_used = 0;
    tr_arena_reset(g->arena);
    if (g->data) tr_arena_reset(g->data);
    g->tape = NULL;
    g->n_nodes = 0;
    g->status = TR_OK;
    g->dropout_calls = 0;
    g->rows_per_sample = 1;
    g->ck.blocks = 0;
    g->ck.kept = NULL;
    if (g->n_fresh) memset(g->fresh, 0, (size_t)g->cap_fresh);
    g->n_fresh = 0;
    if (g->fusion) { /* their data is gone */
        tr_fusion_drop_deferred_(g->fusion);
        fusion_forget_planes(g->fusion);
    }
    g->n_host_copies = 0;
    g->root = NULL;
    if (in_st != TR_OK) op_fail(g, in_st, "graph: marking the end of the inputs' use: %s", in_msg); /* fails the step */
}

void tr_graph_reset(tr_graph *g) { reset_step(g, 1); }

tr_arena *tr_graph_arena(tr_graph *g) { return g->arena; }
size_t tr_graph_activation_peak(const tr_graph *g) {
    size_t step = tr_arena_peak(g->data ? g->data : g->arena);
    if (g->ck.peak > step) step = g->ck.peak; /* with a checkpointed block's scratch */
    return step + g->in[0].cap + g->in[1].cap; /* the input buffers too */
}

static tr_status accel_chunk(void *user, size_t bytes, void **out) { return tr_accel_alloc(user, bytes, out); }
static void accel_chunk_free(void *user, void *p, size_t bytes) { tr_accel_free(user, p, bytes); }

tr_status tr_graph_data_arena_(tr_graph *g, tr_arena **out) {
    if (!g->accel) return tr_arena_create(out, 0);
    tr_arena_memory mem = {.alloc = accel_chunk, .free = accel_chunk_free, .user = g->accel};
    return tr_arena_create_on(out, 0, &mem);
}

tr_status tr_graph_set_accel(tr_graph *g, tr_accel *a) {
    if (!a) return tr_error_set(TR_ERR_INVALID, "graph: no device given");
    if (g->tape || g->data || g->ck.arena) return tr_error_set(TR_ERR_INVALID, "graph: the device is set once, before any op");
    g->accel = a;
    tr_status st = tr_graph_data_arena_(g, &g->data);
    if (st != TR_OK) {
        g->accel = NULL;
        return st;
    }
    g->kern = tr_accel_kernels(a);
    return TR_OK;
}

tr_accel *tr_graph_accel(const tr_graph *g) { return g->accel; }
const tr_kernels *op_kernels(const tr_graph *g) { return g->kern; }

void op_zero(tr_graph *g, void *p, size_t bytes) { tr_accel_zero(g->accel, p, bytes); }
void op_copy(tr_graph *g, void *dst, const void *src, size_t bytes) { tr_accel_copy(g->accel, dst, src, bytes); }

void tr_graph_set_training(tr_graph *g, int training) { g->training = training != 0; }
int tr_graph_training(const tr_graph *g) { return g->training; }
void tr_graph_set_grad_enabled(tr_graph *g, int enabled) { g->grad_enabled = enabled != 0; }
int tr_graph_grad_enabled(const tr_graph *g) { return g->grad_enabled; }

void tr_graph_set_rng(tr_graph *g, uint64_t seed, uint64_t step, uint64_t sample_base) {
    g->seed = seed;
    g->step = step;
    g->sample_base = sample_base;
    g->rows_per_sample = 1;
}

void tr_graph_set_rows_per_sample(tr_graph *g, uint64_t rows) { g->rows_per_sample = rows ? rows : 1; }

void tr_graph_rng_(tr_graph *g, uint64_t *seed, uint64_t *step, uint64_t *sample_base,
                   uint64_t *call) {
    *seed = g->seed;
    *step = g->step;
    *sample_base = g->sample_base * g->rows_per_sample; /* in rows: ops count dim 0 */
    *call = g->dropout_calls++;
}

void tr_graph_set_checkpointing(tr_graph *g, int every) { g->ck.every = every > 0 ? every : 0; }
int tr_graph_checkpointing(const tr_graph *g) { return g->ck.every; }
int op_recomputing(const tr_graph *g) { return g->ck.recompute; }

void tr_graph_set_params(tr_graph *g, tr_params *params) { g->params = params; }

/* The graph's per-parameter fresh flags grown to the parameter count of its set; the old
 * contents are not kept. */
static tr_status reserve_per_param(tr_graph *g, void **a, int *cap, size_t elem, const char *what) {
    if (!g->params) return tr_error_set(TR_ERR_INVALID, "graph: %s needs tr_graph_set_params", what);
    int np = tr_params_count(g->params);
    if (np <= *cap) return TR_OK;
    void *n = tr_calloc((size_t)np, elem);
    if (!n) return tr_error_set(TR_ERR_NOMEM, "graph: out of memory for %s of %d parameters", what, np);
    tr_free(*a);
    *a = n;
    *cap = np;
    return TR_OK;
}

tr_status tr_graph_write_param_grads(tr_graph *g) {
    TR_CHECK(reserve_per_param(g, (void **)&g->fresh, &g->cap_fresh, 1, "writing parameter gradients"));
    int np = tr_params_count(g->params);
    memset(g->fresh, 1, (size_t)np);
    g->n_fresh = np;
    return TR_OK;
}

/* Whether parameter tensor t (or a whole view of it) is still fresh; clears the flag: the
 * caller's op now owns writing the whole gradient. */
int tr_graph_take_fresh_(tr_graph *g, tr_tensor *t) {
    tr_tensor *b = use_target(t);
    if (!g->n_fresh || !b || b->param < 0 || b->param >= g->cap_fresh || !g->fresh[b->param]) return 0;
    g->fresh[b->param] = 0;
    g->n_fresh--;
    return 1;
}

/* A fresh parameter whose gradient no op produced: zero it, as the skipped zero-fill would. */
void tr_graph_settle_fresh_(tr_graph *g, tr_tensor *t) {
    if (tr_graph_take_fresh_(g, t) && t->grad) op_zero(g, t->grad, tr_tensor_bytes(t));
}

void tr_graph_set_stat_reducer(tr_graph *g, tr_stat_reducer_fn fn, void *user) {
    g->reducer = fn;
    g->reducer_user = user;
}

int tr_graph_syncs_stats_(const tr_graph *g) { return g->reducer != NULL; }

int tr_graph_reduce_stats_(tr_graph *g, double *values, int n) {
    if (!g->reducer) return 0;
    tr_status st = g->reducer(g->reducer_user, values, n);
    if (st != TR_OK) op_fail(g, st, "synchronised statistics: %s", tr_error_msg());
    return st == TR_OK ? 1 : -1;
}

void tr_graph_set_grad_hook(tr_graph *g, tr_grad_ready_fn fn, void *user) {
    g->hook = fn;
    g->hook_user = user;
}

void tr_graph_set_use_hook(tr_graph *g, tr_param_use_fn fn, void *user) {
    g->use_hook = fn;
    g->use_user = user;
}

tr_status tr_graph_status(const tr_graph *g) { return g->status; }
size_t tr_graph_nodes(const tr_graph *g) { return g->n_nodes; }

static int has_nonfinite(const tr_graph *g, const tr_tensor *t) {
    int64_t n = tr_tensor_numel(t);
    if (!t->data || (t->dtype != TR_F32 && t->dtype != TR_F64)) return 0;
    const void *data = t->data;
    void *host = NULL;
    if (g->accel) { /* read a copy; a failed copy finds nothing */
        host = tr_malloc(tr_tensor_bytes(t));
        if (!host || tr_accel_download(g->accel, host, t->data, tr_tensor_bytes(t)) != TR_OK) {
            tr_free(host);
            return 0;
        }
        data = host;
    }
    int found = 0;
    for (int64_t i = 0; i < n && !found; i++)
        found = t->dtype == TR_F32 ? !isfinite(((const float *)data)[i]) : !isfinite(((const double *)data)[i]);
    tr_free(host);
    return found;
}

int tr_graph_first_nonfinite(const tr_graph *g, char *out, size_t size) {
    const tr_node *found = NULL;
    size_t at = g->n_nodes, found_at = 0; /* the tape runs newest first: keep the last hit */
    for (const tr_node *node = g->tape; node; node = node->prev, at--)
        if (node->out && !node->out->view_of && has_nonfinite(g, node->out)) {
            found = node;
            found_at = at;
        }
    if (!found) return 0;
    int k = snprintf(out, size, "the output of op %zu of %zu (%s), shape (", found_at, g->n_nodes, found->name);
    for (int d = 0; d < found->out->ndim && k > 0 && (size_t)k < size; d++)
        k += snprintf(out + k, size - (size_t)k, d ? ", %lld" : "%lld", (long long)found->out->shape[d]);
    if (k > 0 && (size_t)k < size) k += snprintf(out + k, size - (size_t)k, ")");
    for (int i = 0; i < TR_NODE_MAX_IN && g->params && k > 0 && (size_t)k < size; i++) { /* the layer, by its weight */
        const tr_tensor *t = found->in[i] && found->in[i]->view_of ? found->in[i]->view_of : found->in[i];
        if (t && t->param >= 0 && t->param < tr_params_count(g->params)) {
            snprintf(out + k, size - (size_t)k, ", reading %s", tr_params_name(g->params, t->param));
            break;
        }
    }
    return 1;
}
