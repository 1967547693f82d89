/* A model's blocks, checkpointed or not (tr_graph_block; docs/design.md "Activation
 * checkpointing"). The one idea: a checkpointed block runs twice, in forward and again in
 * backward, and both times its ops run and record exactly as they would without
 * checkpointing, on the graph's own tape, hooks and counters, only in scratch memory that
 * lives while the block runs. So use counts, ready hooks, dropout draws and gradients are
 * what they are without it, and the step's memory keeps just each block's inputs and output. */
#include "autograd/graph_impl.h"

/* What backward needs to run a checkpointed block again (step memory). */
typedef struct block_rec {
    tr_block_fn fn;
    const void *user;
    tr_node *kept;  /* the first run's tape (newest node) and output, valid while the scratch */
    tr_tensor *y;   /* holds them: g->ck.kept is this record */
    uint64_t calls; /* the dropout call counter when the block began: the same masks again */
    uint64_t rows;  /* rows per sample then */
    int training;
} block_rec;

/* The graph's state as a block's run found it. */
typedef struct region {
    tr_node *tape;
    size_t n_nodes;
    uint64_t calls, rows;
    int n_host_copies, grad_enabled, training;
} region;

void tr_graph_block_free_(tr_graph *g) {
    tr_arena_destroy(g->ck.arena);
    tr_arena_destroy(g->ck.data);
    g->ck.arena = g->ck.data = NULL;
}

static int scratch_ready(tr_graph *g) {
    tr_status st = TR_OK;
    if (!g->ck.arena) st = tr_arena_create(&g->ck.arena, 0);
    if (st == TR_OK && g->accel && !g->ck.data) st = tr_graph_data_arena_(g, &g->ck.data);
    if (st != TR_OK) op_fail(g, st, "checkpointed block: scratch memory: %s", tr_error_msg());
    return st == TR_OK;
}

/* The block's ops allocate from the scratch arenas, emptied now (the block before is done)
 * unless `keep`. */
static void enter(tr_graph *g, region *r, int keep) {
    *r = (region){.tape = g->tape, .n_nodes = g->n_nodes, .calls = g->dropout_calls, .rows = g->rows_per_sample,
                  .n_host_copies = g->n_host_copies, .grad_enabled = g->grad_enabled, .training = g->training};
    if (!keep) {
        tr_arena_reset(g->ck.arena);
        if (g->ck.data) tr_arena_reset(g->ck.data);
    }
    g->ck.kept = NULL;
    g->ck.main_arena = g->arena;
    g->ck.main_data = g->data;
    g->arena = g->ck.arena;
    if (g->data) g->data = g->ck.data;
    g->ck.active = 1;
    if (g->fusion) fusion_forget_planes(g->fusion); /* plane statistics are one op's, never across */
}

/* Allocations go to the step's memory again; the scratch holds its contents until the next
 * block. */
static void back_to_step(tr_graph *g) {
    g->arena = g->ck.main_arena;
    g->data = g->ck.main_data;
    g->ck.active = 0;
}

/* The end of a block's run: the most the step's memory and the scratch held together, and the
 * graph's tape, host copies and modes as the block found them. */
static void leave(tr_graph *g, const region *r) {
    size_t both = tr_arena_used(g->data ? g->data : g->arena) + tr_arena_used(g->ck.data ? g->ck.data : g->ck.arena);
    if (both > g->ck.peak) g->ck.peak = both;
    g->tape = r->tape;
    g->n_nodes = r->n_nodes;
    g->n_host_copies = r->n_host_copies; /* those the block made are scratch */
    g->grad_enabled = r->grad_enabled;
    g->training = r->training;
    g->rows_per_sample = r->rows;
    if (g->fusion) fusion_forget_planes(g->fusion);
}

static int check_inputs(tr_graph *g, tr_tensor *const *in, int n_in) {
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) {
            op_fail(g, TR_ERR_INVALID, "block: input %d is NULL (an earlier op failed?)", i);
            return 0;
        }
        if (use_target(in[i])->param >= 0) {
            op_fail(g, TR_ERR_INVALID, "block: input %d is a parameter; a block's inputs are activations "
                    "(its function reads parameters itself)", i);
            return 0;
        }
        if (!tr_graph_in_memory_(g, in[i])) {
            op_fail(g, TR_ERR_INVALID, "block: input %d is not in the graph's memory (%s)", i,
                    g->accel ? tr_accel_name(g->accel) : "the host");
            return 0;
        }
        for (int j = 0; j < i; j++)
            if (use_target(in[i]) == use_target(in[j])) {
                op_fail(g, TR_ERR_INVALID, "block: inputs %d and %d are the same tensor (pass it once)", j, i);
                return 0;
            }
    }
    return 1;
}

/* The gradient t had before the block's backward (its base's, for a view), or NULL. */
static void *grad_before(const tr_tensor *t) { return t->grad ? t->grad : t->view_of ? t->view_of->grad : NULL; }

/* Input t's gradient `made` in scratch, written into the step's memory: t had none before the
 * block's backward (where it had one, the block added to it in place). */
static void take_grad(tr_graph *g, tr_tensor *t, const void *made) {
    if (!t->requires_grad || !made) return;
    int acc;
    void *d = op_grad_write(g, t, &acc);
    if (!d) return;
    if (acc) { /* nothing else reads t's gradient while the block runs again */
        op_fail(g, TR_ERR_INTERNAL, "block: an input's gradient appeared during the block's backward");
        return;
    }
    op_copy(g, d, made, tr_tensor_bytes(t));
}

/* The last checkpointed block of the forward, whose first run is still in the scratch (nothing
 * ran there since): its own tape is differentiated, with no second run. Its nodes read the
 * inputs themselves, so a gradient they make for an input that had none lies in the scratch
 * and moves to the step's memory. */
static void backward_kept(tr_graph *g, tr_node *n, const block_rec *rec) {
    region r;
    enter(g, &r, 1);
    int n_in = n->n_ins;
    void **had = op_alloc(g, (size_t)(n_in ? n_in : 1) * sizeof *had);
    for (int i = 0; had && i < n_in; i++) had[i] = grad_before(n->ins[i]);
    if (g->status == TR_OK) {
        rec->y->grad = n->out->grad;
        if (rec->y->view_of && !rec->y->view_of->grad) rec->y->view_of->grad = n->out->grad;
        tr_graph_run_tape_(g, rec->kept, n->prev);
    }
    back_to_step(g);
    for (int i = 0; g->status == TR_OK && i < n_in; i++) {
        tr_tensor *t = n->ins[i], *b = t->view_of ? t->view_of : t;
        void *made = had[i] ? NULL : b->grad;
        if (!made) continue;
        b->grad = t->grad = NULL;
        take_grad(g, t, made);
    }
    leave(g, &r);
}

/* Runs the block again on its inputs, with the same dropout calls, and differentiates that
 * run from the gradient of the block's output; the inputs' gradients go to the step's memory,
 * the parameters' to theirs as always (their uses counted in forward, so each ready hook fires
 * at the last). Runs also when the output got no gradient: the uses end here. */
static void block_backward(tr_graph *g, tr_node *n) {
    const block_rec *rec = n->saved[0];
    if (g->ck.kept == rec) {
        backward_kept(g, n, rec);
        return;
    }
    int n_in = n->n_ins;
    region r;
    enter(g, &r, 0);
    g->ck.recompute = 1;
    g->grad_enabled = 1;
    g->training = rec->training;
    g->rows_per_sample = rec->rows;
    g->dropout_calls = rec->calls;
    size_t list = (size_t)(n_in ? n_in : 1) * sizeof(void *);
    tr_tensor **x = op_alloc(g, list);
    void **had = op_alloc(g, list);
    for (int i = 0; x && had && i < n_in; i++) {
        /* A copy of the input that is no view and starts from its gradient so far. */
        tr_tensor *t = n->ins[i];
        had[i] = grad_before(t);
        if (!(x[i] = op_alloc(g, sizeof *x[i]))) break;
        *x[i] = *t;
        x[i]->view_of = NULL;
        x[i]->grad = had[i];
    }
    tr_tensor *y = g->status == TR_OK ? rec->fn(g, x, n_in, rec->user) : NULL;
    if (y && g->status == TR_OK && (y->dtype != n->out->dtype || !tr_tensor_same_shape(y, n->out)))
        op_fail(g, TR_ERR_PLUGIN, "block: run again in backward, the block gave %s where it gave %s (a block must be a "
                "function of its inputs)", op_shape(y), op_shape(n->out));
    else if (!y && g->status == TR_OK)
        op_fail(g, TR_ERR_PLUGIN, "block: run again in backward, the block returned no tensor and no error");
    if (g->status == TR_OK) {
        y->grad = n->out->grad;
        if (y->view_of && !y->view_of->grad) y->view_of->grad = n->out->grad;
        tr_graph_run_tape_(g, g->tape, r.tape);
    }
    g->ck.recompute = 0;
    g->dropout_calls = r.calls;
    back_to_step(g);
    for (int i = 0; g->status == TR_OK && i < n_in; i++)
        if (!had[i]) take_grad(g, n->ins[i], x[i]->grad);
    leave(g, &r);
}

/* Whether y is one of the inputs, a parameter, or a view of one: not a tensor the block made. */
static int not_made(tr_tensor *y, tr_tensor *const *in, int n_in) {
    if (use_target(y)->param >= 0) return 1;
    for (int i = 0; i < n_in; i++)
        if (use_target(y) == use_target(in[i])) return 1;
    return 0;
}

tr_tensor *tr_graph_block(tr_graph *g, tr_block_fn fn, tr_tensor *const *in, int n_in, const void *user,
                          size_t user_bytes) {
    if (g->status != TR_OK) return NULL;
    if (!fn || n_in < 0 || (n_in > 0 && !in))
        return op_fail(g, TR_ERR_INVALID, "block: no function, or %d inputs and no list of them", n_in);
    int k = g->ck.blocks++;
    /* Grad mode off (validation, inference): the block's activations are garbage once it
     * returns, so every block runs in the scratch, checkpointed or not, recording nothing: the
     * step's memory holds the blocks' outputs only, and each block reuses the memory of the one
     * before, still in cache (all-MiniLM-L6-v2 embedding 64 texts of 128 tokens: 1.3 GB of
     * activations, their first touch 6% of a run, became one layer's). */
    int checkpointed = g->ck.every > 0 && k % g->ck.every == 0;
    if (g->ck.active || (!checkpointed && g->grad_enabled)) return fn(g, in, n_in, user);
    if (!check_inputs(g, in, n_in)) return NULL;
    block_rec *rec = op_alloc(g, sizeof *rec);
    tr_tensor **ins = op_alloc(g, (size_t)(n_in ? n_in : 1) * sizeof *ins);
    void *copy = user_bytes ? op_alloc(g, user_bytes) : NULL;
    if (!rec || !ins || (user_bytes && !copy) || !scratch_ready(g)) return NULL;
    for (int i = 0; i < n_in; i++) ins[i] = in[i];
    if (copy) memcpy(copy, user, user_bytes);
    *rec = (block_rec){.fn = fn, .user = copy ? copy : user, .calls = g->dropout_calls, .rows = g->rows_per_sample,
                       .training = g->training};
    region r;
    enter(g, &r, 0);
    tr_tensor *y = fn(g, ins, n_in, rec->user);
    tr_node *top = g->tape;
    back_to_step(g);
    tr_tensor *out = NULL;
    if (y && g->status == TR_OK && not_made(y, ins, n_in))
        op_fail(g, TR_ERR_PLUGIN, "block: the block returned its input or a parameter (or a view of one); a block makes "
                "a new tensor");
    else if (!y && g->status == TR_OK)
        op_fail(g, TR_ERR_PLUGIN, "block: the block returned no tensor and no error");
    if (g->status == TR_OK) {
        out = op_out(g, y->dtype, y->ndim, y->shape); /* the output in the step's memory */
        if (out) op_copy(g, out->data, y->data, tr_tensor_bytes(y));
    }
    leave(g, &r);
    if (!out || !y->requires_grad) return out;
    tr_node *node = op_record(g, "checkpointed block", block_backward, out, 0);
    if (!node) return NULL;
    op_record_ins(g, node, ins, n_in);
    node->always = 1;
    node->saved[0] = rec;
    /* Until another block runs in the scratch, backward may differentiate this run itself. */
    rec->kept = top;
    rec->y = y;
    g->ck.kept = rec;
    return out;
}
