/* The tape: ops recorded as they run (op_check, op_out, op_record), gradients fetched for
 * them, and reverse-mode differentiation with the gradient-ready hooks (tr_backward). */
#include "autograd/graph_impl.h"

tr_tensor *op_fail(tr_graph *g, tr_status s, const char *fmt, ...) {
    if (g->status == TR_OK) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        g->status = tr_error_set(s, "%s", msg);
    }
    return NULL;
}

const char *op_shape(const tr_tensor *t) {
    static _Thread_local char bufs[4][96];
    static _Thread_local int next;
    char *b = bufs[next++ & 3];
    return t ? tr_shape_str(t, b, sizeof bufs[0]) : "(null)";
}

int op_use(tr_graph *g, tr_tensor *t) {
    tr_tensor *b = use_target(t);
    if (!g->use_hook || !b || b->param < 0) return 1;
    tr_status st = g->use_hook(g->use_user, b->param, g->in_backward, g->op_seq);
    if (st != TR_OK) op_fail(g, st, "parameter %d: %s", b->param, tr_error_msg());
    /* The hook may have moved the parameter's data (a sharded strategy's unit buffers): a
     * reshape view follows its base. */
    if (t != b) t->data = b->data;
    return st == TR_OK;
}

void op_begin(tr_graph *g) { g->op_seq++; }

/* trainer.profile: the op that starts now gets a region of its own (with TR_PROFILE_OPS_SHAPES
 * named with the shapes of its first two inputs, t and u, where present: a linear layer's
 * input and weight). On a device the work queued so far is waited for first, so it counts in
 * the region that queued it; the wait reports (and clears) a failure of that work, which
 * becomes the graph's error: 0 then. */
static int profile_enter(tr_graph *g, const char *phase, const char *name, const tr_tensor *t, const tr_tensor *u) {
    int level = tr_profile_ops();
    if (!level) return 1;
    if (g->accel && g->status == TR_OK) {
        tr_status st = tr_accel_sync(g->accel);
        if (st != TR_OK) {
            op_fail(g, st, "%s", tr_error_msg());
            return 0;
        }
    }
    char named[TR_PROFILE_NAME_MAX];
    if (level == TR_PROFILE_OPS_SHAPES && t) {
        snprintf(named, sizeof named, "%s %s%s%s", name, op_shape(t), u ? " " : "", u ? op_shape(u) : "");
        name = named;
    }
    tr_profile_enter(phase, name);
    return 1;
}

int op_check(tr_graph *g, const char *op, int n, ...) {
    if (g->status != TR_OK) return 0;
    if (tr_profile_ops()) {
        va_list first;
        va_start(first, n);
        tr_tensor *t = n > 0 ? va_arg(first, tr_tensor *) : NULL, *u = n > 1 ? va_arg(first, tr_tensor *) : NULL;
        va_end(first);
        if (!profile_enter(g, g->in_backward ? "backward" : "forward", op, t, u)) return 0;
    }
    op_begin(g);
    va_list ap;
    va_start(ap, n);
    tr_dtype dt = TR_F32;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        tr_tensor *t = va_arg(ap, tr_tensor *);
        if (!t) {
            op_fail(g, TR_ERR_INVALID, "%s: input %d is NULL (an earlier op failed?)", op, i);
            ok = 0;
        } else if (!op_use(g, t)) {
            ok = 0;
        } else if (t->dtype != TR_F32 && t->dtype != TR_F64) {
            op_fail(g, TR_ERR_UNSUPPORTED, "%s: input %d has dtype %s; expected f32 or f64", op,
                    i, tr_dtype_name(t->dtype));
            ok = 0;
        } else if (!tr_graph_in_memory_(g, t)) {
            op_fail(g, TR_ERR_INVALID, "%s: input %d is in %s memory but the graph runs on %s", op, i,
                    t->device.kind != TR_DEVICE_GPU ? "host" : g->accel ? "another device's" : "device",
                    g->accel ? tr_accel_name(g->accel) : "the CPU");
            ok = 0;
        } else if (g->accel && t->dtype != TR_F32) {
            op_fail(g, TR_ERR_UNSUPPORTED, "%s: input %d has dtype %s; on %s ops take f32", op, i,
                    tr_dtype_name(t->dtype), tr_accel_name(g->accel));
            ok = 0;
        } else if (i == 0) {
            dt = t->dtype;
        } else if (t->dtype != dt) {
            op_fail(g, TR_ERR_INVALID, "%s: input %d has dtype %s, input 0 has %s", op, i,
                    tr_dtype_name(t->dtype), tr_dtype_name(dt));
            ok = 0;
        }
    }
    va_end(ap);
    return ok;
}

void *op_alloc(tr_graph *g, size_t bytes) {
    void *p = tr_arena_alloc(g->arena, bytes);
    if (!p && g->status == TR_OK) g->status = TR_ERR_NOMEM; /* message set by the arena */
    return p;
}

void *op_data(tr_graph *g, size_t bytes) {
    if (!g->data) return op_alloc(g, bytes);
    void *p = tr_arena_alloc(g->data, bytes);
    if (!p && g->status == TR_OK) g->status = TR_ERR_NOMEM; /* message set by the arena */
    return p;
}

int op_work(tr_graph *g, size_t bytes, void **work) {
    *work = bytes ? op_data(g, bytes) : NULL;
    return !bytes || *work;
}

/* A checked tensor header in the graph's memory, its data not placed yet. */
tr_tensor *tr_graph_new_header_(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape) {
    if (g->status != TR_OK) return NULL;
    if (ndim < 0 || ndim > TR_MAX_DIMS)
        return op_fail(g, TR_ERR_INVALID, "tensor: %d dims (at most %d)", ndim, TR_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return op_fail(g, TR_ERR_INVALID, "tensor: dim %d is negative (%lld)", i,
                           (long long)shape[i]);
    tr_tensor *t = op_alloc(g, sizeof *t);
    if (!t) return NULL;
    *t = tr_tensor_view(NULL, dtype, ndim, shape);
    if (g->accel) t->device = tr_accel_device(g->accel);
    return t;
}

static tr_tensor *new_tensor(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape) {
    tr_tensor *t = tr_graph_new_header_(g, dtype, ndim, shape);
    if (!t) return NULL;
    size_t bytes = tr_tensor_bytes(t);
    t->data = op_data(g, bytes ? bytes : 1);
    return t->data ? t : NULL;
}

tr_tensor *op_out(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape) {
    return new_tensor(g, dtype, ndim, shape);
}

tr_tensor *tr_graph_input(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape) {
    return new_tensor(g, dtype, ndim, shape);
}

tr_tensor *tr_graph_view(tr_graph *g, void *data, tr_dtype dtype, int ndim, const int64_t *shape) {
    if (g->status != TR_OK) return NULL;
    if (ndim < 0 || ndim > TR_MAX_DIMS)
        return op_fail(g, TR_ERR_INVALID, "tensor: %d dims (at most %d)", ndim, TR_MAX_DIMS);
    if (g->accel)
        return op_fail(g, TR_ERR_INVALID, "graph: a view of host memory on %s (upload into tr_graph_input instead)",
                       tr_accel_name(g->accel));
    tr_tensor *t = op_alloc(g, sizeof *t);
    if (t) *t = tr_tensor_view(data, dtype, ndim, shape);
    return t;
}

tr_tensor *tr_graph_leaf(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape) {
    tr_tensor *t = new_tensor(g, dtype, ndim, shape);
    if (!t) return NULL;
    t->requires_grad = 1;
    size_t bytes = tr_tensor_bytes(t) ? tr_tensor_bytes(t) : 1;
    t->grad = op_data(g, bytes);
    if (!t->grad) return op_fail(g, TR_ERR_NOMEM, "leaf: out of memory");
    op_zero(g, t->grad, bytes);
    return t;
}

int op_needs_grad(tr_graph *g, int n, ...) {
    if (!g->grad_enabled) return 0;
    va_list ap;
    va_start(ap, n);
    int need = 0;
    for (int i = 0; i < n; i++) {
        tr_tensor *t = va_arg(ap, tr_tensor *);
        if (t && t->requires_grad) need = 1;
    }
    va_end(ap);
    return need;
}

static void note_use(tr_graph *g, tr_tensor *t) {
    t = use_target(t);
    /* A checkpointed block's uses were counted when it first ran (block.c). */
    if (!t || t->param < 0 || !t->requires_grad || g->ck.recompute) return;
    if (t->uses++ > 0) return;
    if (g->n_used == g->cap_used) {
        int cap = g->cap_used ? g->cap_used * 2 : 64;
        tr_tensor **a = tr_arena_alloc(step_arena(g), (size_t)cap * sizeof *a); /* lives to the reset */
        if (!a) {
            if (g->status == TR_OK) g->status = TR_ERR_NOMEM; /* message set by the arena */
            return;
        }
        if (g->n_used) memcpy(a, g->used, (size_t)g->n_used * sizeof *a);
        g->used = a;
        g->cap_used = cap;
    }
    g->used[g->n_used++] = t;
}

tr_node *op_record(tr_graph *g, const char *name, tr_backward_fn fn, tr_tensor *out, int n,
                   ...) {
    tr_node *node = op_alloc(g, sizeof *node);
    if (!node) return NULL;
    memset(node, 0, sizeof *node);
    node->name = name;
    node->backward = fn;
    node->out = out;
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n && i < TR_NODE_MAX_IN; i++) {
        node->in[i] = va_arg(ap, tr_tensor *);
        note_use(g, node->in[i]);
    }
    va_end(ap);
    out->requires_grad = 1;
    node->prev = g->tape;
    g->tape = node;
    g->n_nodes++;
    return node;
}

void op_record_ins(tr_graph *g, tr_node *n, tr_tensor **ins, int n_ins) {
    n->ins = ins;
    n->n_ins = n_ins;
    for (int i = 0; i < n_ins; i++) note_use(g, ins[i]);
}

void tr_graph_set_fusion_(tr_graph *g, tr_fusion *f) {
    if (f) fusion_forget_planes(f); /* notes of another graph's ops */
    g->fusion = f;
}

int op_wants_grad_sumsq(const tr_graph *g, const tr_tensor *t) {
    return g->fusion && t && !t->view_of && t->param >= 0 && fusion_notes(g->fusion, t->param) &&
           tr_params_get(g->params, t->param) == t;
}

void op_note_grad_sumsq(tr_graph *g, tr_tensor *t, double sumsq) {
    /* Else the hook sums it in double. */
    if (isfinite(sumsq) && op_wants_grad_sumsq(g, t)) fusion_note(g->fusion, t->param, sumsq);
}

int op_wants_plane_stats(const tr_graph *g) { return g->fusion && g->training; }

void op_note_plane_stats(tr_graph *g, const tr_tensor *t, const double *ps) {
    if (g->fusion) fusion_note_planes(g->fusion, t, ps, g->op_seq);
}

const double *op_plane_stats(const tr_graph *g, const tr_tensor *t) {
    return g->fusion ? fusion_planes(g->fusion, t, g->op_seq) : NULL;
}

int op_may_defer_grad(const tr_graph *g, const tr_tensor *t) {
    /* Not in a checkpointed block: what a deferred gradient is computed from is its scratch. */
    return g->fusion && !g->accel && !g->ck.active && t->dtype == TR_F32 && op_wants_grad_sumsq(g, t) &&
           fusion_defers(g->fusion, t->param);
}

void op_defer_grad(tr_graph *g, tr_tensor *t, const op_deferred *d, double sumsq) {
    fusion_defer(g->fusion, t->param, d, sumsq);
}

void *op_grad_write(tr_graph *g, tr_tensor *t, int *acc) {
    *acc = 1;
    if (!t || !t->requires_grad) return NULL;
    if (g->fusion) {
        int p = use_target(t)->param;
        if (p >= 0) fusion_settle(g->fusion, g->params, p); /* a second use adds to it */
        fusion_forget(g->fusion, p);
    }
    if (t->grad) {
        if (tr_graph_take_fresh_(g, t)) *acc = 0;
        return t->grad;
    }
    if (t->view_of) {
        /* A reshape view shares its base's gradient buffer (same layout, same numel). */
        t->grad = op_grad_write(g, t->view_of, acc);
        return t->grad;
    }
    size_t bytes = tr_tensor_bytes(t);
    t->grad = op_data(g, bytes ? bytes : 1);
    if (!t->grad) op_fail(g, TR_ERR_NOMEM, "backward: out of memory for a gradient");
    *acc = 0;
    return t->grad;
}

void *op_grad(tr_graph *g, tr_tensor *t) {
    int acc;
    void *d = op_grad_write(g, t, &acc);
    if (d && !acc) op_zero(g, d, tr_tensor_bytes(t));
    return d;
}

static void release(tr_graph *g, tr_tensor *t) {
    t = use_target(t);
    if (!t || t->param < 0 || t->uses <= 0) return;
    if (--t->uses > 0) return;
    tr_graph_settle_fresh_(g, t);
    if (!g->hook) return;
    (void)profile_enter(g, "backward", "(gradient-ready hooks)", NULL, NULL); /* a failure ends the loop */
    g->hook(g->hook_user, t->param);
}

void tr_graph_run_tape_(tr_graph *g, tr_node *from, const tr_node *stop) {
    for (tr_node *node = from; node && node != stop && g->status == TR_OK; node = node->prev) {
        /* A node whose output got no gradient contributes nothing. */
        if (node->out->grad || (node->out->view_of && node->out->view_of->grad) || node->always) {
            if (!node->out->grad && node->out->view_of) node->out->grad = node->out->view_of->grad;
            int ok = profile_enter(g, "backward", node->name, node->n_ins ? node->ins[0] : node->in[0],
                                   node->n_ins ? (node->n_ins > 1 ? node->ins[1] : NULL) : node->in[1]);
            op_begin(g);
            for (int i = 0; i < TR_NODE_MAX_IN && ok; i++) ok = op_use(g, node->in[i]);
            for (int i = 0; i < node->n_ins && ok; i++) ok = op_use(g, node->ins[i]);
            if (ok) node->backward(g, node);
        }
        for (int i = 0; i < TR_NODE_MAX_IN; i++) release(g, node->in[i]);
        for (int i = 0; i < node->n_ins; i++) release(g, node->ins[i]);
    }
}

tr_status tr_backward(tr_graph *g, tr_tensor *out, const void *dout) {
    if (g->status != TR_OK) return tr_error_set(g->status, "%s", tr_error_msg());
    if (!out) return tr_error_set(TR_ERR_INVALID, "backward: output is NULL");
    if (!out->requires_grad)
        return tr_error_set(TR_ERR_INVALID,
                            "backward: the output does not depend on anything that requires a "
                            "gradient (grad mode off, or no parameter used?)");
    int acc; /* the seed below sets every element */
    void *d = op_grad_write(g, out, &acc);
    if (!d) return g->status;
    int64_t n = tr_tensor_numel(out);
    if (g->accel) { /* dout (host) or ones (host arena), uploaded */
        float *ones = dout ? NULL : op_alloc(g, tr_tensor_bytes(out) ? tr_tensor_bytes(out) : 1);
        if (!dout && !ones) return g->status;
        for (int64_t i = 0; ones && i < n; i++) ones[i] = 1.0f; /* device graphs are f32 */
        TR_CHECK(tr_accel_upload(g->accel, d, dout ? dout : ones, tr_tensor_bytes(out)));
        g->root = out; /* op_read_grad_scalar: its gradient is this seed throughout */
        g->root_known = n == 1 && out->dtype == TR_F32;
        g->root_seed = dout ? (double)*(const float *)dout : 1.0;
    } else if (dout) {
        memcpy(d, dout, tr_tensor_bytes(out));
    } else if (out->dtype == TR_F64) {
        for (int64_t i = 0; i < n; i++) ((double *)d)[i] = 1.0;
    } else {
        for (int64_t i = 0; i < n; i++) ((float *)d)[i] = 1.0f;
    }
    if (g->fusion) fusion_clear_sums(g->fusion);
    if (!profile_enter(g, "backward", "(seed gradient)", NULL, NULL)) return g->status;
    g->in_backward = 1;
    tr_graph_run_tape_(g, g->tape, NULL);
    g->in_backward = 0;
    g->root = NULL;
    if (g->status != TR_OK) return g->status;
    /* Parameters the step never touched have final gradients too: unchanged, or zero when
     * they were to be written. */
    if (g->n_fresh) {
        int np = tr_params_count(g->params);
        for (int p = 0; p < np && g->n_fresh; p++) tr_graph_settle_fresh_(g, tr_params_get(g->params, p));
    }
    if (g->hook && g->params) {
        (void)profile_enter(g, "backward", "(gradient-ready hooks)", NULL, NULL); /* returned below */
        int np = tr_params_count(g->params);
        for (int p = 0; p < np; p++) {
            tr_tensor *t = tr_params_get(g->params, p);
            int used = 0;
            for (int i = 0; i < g->n_used && !used; i++) used = g->used[i] == t;
            if (!used) g->hook(g->hook_user, p);
        }
    }
    (void)profile_enter(g, "strategy", "train_micro after backward", NULL, NULL);
    return g->status;
}
