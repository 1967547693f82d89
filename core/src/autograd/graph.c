/* The graph: step arena, tape recording, reverse-mode differentiation with ready hooks. */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "autograd/node.h"
#include "trainer/accel.h"
#include "trainer/params.h"
#include "trainer/profile.h"

/* An input uploaded by tr_graph_input_from: its device memory and the host's copy. */
typedef struct host_copy {
    const char *dev;
    const void *host;
    size_t bytes;
} host_copy;

/* One half of the device memory batch inputs go to (tr_graph_input_from): steps use the two
 * halves in turn, so the next step's inputs are copied into the half whose last readers were
 * queued before the previous reset (its mark), while the current step's work runs. */
typedef struct input_half {
    char *p;
    size_t cap, used;
    void *retired;            /* the compute stream's mark at the reset that ended its last step */
    int fresh;                /* (re)allocated since: its block's earlier work is unmarked */
} input_half;

struct tr_graph {
    tr_arena *arena;          /* host: tensor headers, tape nodes; and data without a device */
    tr_arena *data;           /* with a device: activations, gradients, kernel scratch on it */
    tr_accel *accel;          /* NULL: the CPU */
    const tr_kernels *kern;   /* the device's kernels */
    tr_node *tape;            /* newest node */
    size_t n_nodes;
    tr_status status;
    int training;
    int grad_enabled;
    uint64_t seed, step, sample_base, dropout_calls;
    uint64_t rows_per_sample; /* dim 0 rows per sample (tr_graph_set_rows_per_sample) */
    tr_params *params;
    tr_grad_ready_fn hook;
    void *hook_user;
    tr_stat_reducer_fn reducer;
    void *reducer_user;
    tr_param_use_fn use_hook;
    void *use_user;
    uint64_t op_seq;          /* ops that have checked their inputs (use hook's `op`) */
    tr_tensor **used;         /* parameters used this step (arena array) */
    int n_used, cap_used;
    int in_backward;
    unsigned char *fresh;     /* per parameter: its gradient is to be written, not added to */
    int n_fresh, cap_fresh;   /* parameters still fresh; length of `fresh` */
    tr_fusion *fusion;        /* borrowed (tr_graph_set_fusion_): what ops note for the step's runner */
    const tr_tensor *ps_t;    /* op_note_plane_stats: the tensor, its data then, the stats and */
    const void *ps_data;      /* the op (op_seq) that noted them */
    const double *ps;
    uint64_t ps_seq;
    host_copy host_copies[TR_GRAPH_HOST_COPIES]; /* tr_graph_input_from on a device */
    int n_host_copies;
    input_half in[2];         /* on a device that uploads beside its compute stream */
    int in_cur;               /* the half this step's inputs go to */
    size_t in_step, in_need;  /* input bytes this step; the most any step asked */
    const tr_tensor *root;    /* during tr_backward on a device: its output, and the value */
    double root_seed;         /* its one-element seed gradient has (root_known) */
    int root_known;
};

/* A parameter used through a reshape view is a use of the parameter itself. */
static tr_tensor *use_target(tr_tensor *t) { return t && t->view_of ? t->view_of : t; }

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
    if (g->n_fresh) memset(g->fresh, 0, (size_t)g->cap_fresh);
    g->n_fresh = 0;
    if (g->fusion) tr_fusion_drop_deferred_(g->fusion); /* their data is gone */
    g->ps_t = NULL, g->ps_data = NULL, g->ps = NULL;
    g->n_host_copies = 0;
    g->root = NULL;
    if (in_st != TR_OK) op_fail(g, in_st, "graph: marking the end of the inputs' use: %s", in_msg); /* fails the step */
}

void tr_graph_reset(tr_graph *g) { reset_step(g, 1); }

tr_arena *tr_graph_arena(tr_graph *g) { return g->arena; }
size_t tr_graph_activation_peak(const tr_graph *g) {
    return tr_arena_peak(g->data ? g->data : g->arena) + g->in[0].cap + g->in[1].cap; /* the input buffers too */
}

static tr_status accel_chunk(void *user, size_t bytes, void **out) { return tr_accel_alloc(user, bytes, out); }
static void accel_chunk_free(void *user, void *p, size_t bytes) { tr_accel_free(user, p, bytes); }

tr_status tr_graph_set_accel(tr_graph *g, tr_accel *a) {
    if (!a) return tr_error_set(TR_ERR_INVALID, "graph: no device given");
    if (g->tape || g->data) return tr_error_set(TR_ERR_INVALID, "graph: the device is set once, before any op");
    tr_arena_memory mem = {.alloc = accel_chunk, .free = accel_chunk_free, .user = a};
    TR_CHECK(tr_arena_create_on(&g->data, 0, &mem));
    g->accel = a;
    g->kern = tr_accel_kernels(a);
    return TR_OK;
}

tr_accel *tr_graph_accel(const tr_graph *g) { return g->accel; }
const tr_kernels *op_kernels(const tr_graph *g) { return g->kern; }

void op_zero(tr_graph *g, void *p, size_t bytes) { tr_accel_zero(g->accel, p, bytes); }
void op_copy(tr_graph *g, void *dst, const void *src, size_t bytes) { tr_accel_copy(g->accel, dst, src, bytes); }

/* A copy between the host and the graph's data memory (plain memory on the CPU). */
static int op_copy_host(tr_graph *g, void *dst, const void *src, size_t bytes, int upload) {
    if (!g->accel) {
        memmove(dst, src, bytes);
        return 1;
    }
    tr_status st = upload ? tr_accel_upload(g->accel, dst, src, bytes) : tr_accel_download(g->accel, dst, src, bytes);
    if (st != TR_OK) op_fail(g, st, "%s", tr_error_msg());
    return st == TR_OK;
}

int op_read(tr_graph *g, void *dst, const void *src, size_t bytes) { return op_copy_host(g, dst, src, bytes, 0); }
int op_write(tr_graph *g, void *dst, const void *src, size_t bytes) { return op_copy_host(g, dst, src, bytes, 1); }

/* Whether t lies in the graph's memory: the host's on the CPU, its device's on a device. */
static int in_graph_memory(const tr_graph *g, const tr_tensor *t) {
    if (!g->accel) return t->device.kind != TR_DEVICE_GPU;
    return t->device.kind == TR_DEVICE_GPU && t->device.index == tr_accel_device(g->accel).index;
}

/* The host's copy of [p, p + bytes) of device memory (tr_graph_input_from), or NULL. */
static const void *host_copy_of(const tr_graph *g, const void *p, size_t bytes) {
    const char *c = p;
    for (int i = 0; i < g->n_host_copies; i++) {
        const host_copy *h = &g->host_copies[i];
        if (c >= h->dev && bytes <= h->bytes && (size_t)(c - h->dev) <= h->bytes - bytes)
            return (const char *)h->host + (c - h->dev);
    }
    return NULL;
}

int op_read_grad_scalar(tr_graph *g, const tr_tensor *t, double *v) {
    if (g->accel && t == g->root && g->root_known) {
        *v = g->root_seed;
        return 1;
    }
    union { float f; double d; } u;
    if (!op_read(g, &u, t->grad, tr_dtype_size(t->dtype))) return 0;
    *v = t->dtype == TR_F64 ? u.d : (double)u.f;
    return 1;
}

const int32_t *op_host_indices(tr_graph *g, const char *op, const char *what, const tr_tensor *t,
                               const char *with_what, const tr_tensor *with) {
    if (!in_graph_memory(g, t)) {
        op_fail(g, TR_ERR_INVALID, "%s: %s %s are in %s memory, %s %s in %s memory", op, what, op_shape(t),
                t->device.kind == TR_DEVICE_GPU ? "device" : "host", with_what, op_shape(with),
                with->device.kind == TR_DEVICE_GPU ? "device" : "host");
        return NULL;
    }
    if (!g->accel) return t->data;
    size_t n = (size_t)tr_tensor_numel(t);
    const int32_t *known = host_copy_of(g, t->data, n * sizeof *known);
    if (known) return known; /* the batch's own host memory: no wait for the device */
    int32_t *copy = op_alloc(g, (n ? n : 1) * sizeof *copy);
    return copy && op_read(g, copy, t->data, n * sizeof *copy) ? copy : NULL;
}

void op_note_host_copy(tr_graph *g, const void *dev, const void *host, size_t bytes) {
    if (g->accel && g->n_host_copies < TR_GRAPH_HOST_COPIES)
        g->host_copies[g->n_host_copies++] = (host_copy){(const char *)dev, host, bytes};
}

int op_device_has(tr_graph *g, const char *op, int have) {
    if (!have) op_fail(g, TR_ERR_UNSUPPORTED, "%s: device %s has no kernel for this op (train this model on the CPU, "
                       "or on a device whose plugin has one)", op, tr_accel_name(g->accel));
    return have;
}
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
static int take_fresh(tr_graph *g, tr_tensor *t) {
    tr_tensor *b = use_target(t);
    if (!g->n_fresh || !b || b->param < 0 || b->param >= g->cap_fresh || !g->fresh[b->param]) return 0;
    g->fresh[b->param] = 0;
    g->n_fresh--;
    return 1;
}

/* A fresh parameter whose gradient no op produced: zero it, as the skipped zero-fill would. */
static void settle_fresh(tr_graph *g, tr_tensor *t) {
    if (take_fresh(g, t) && t->grad) op_zero(g, t->grad, tr_tensor_bytes(t));
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
        } else if (!in_graph_memory(g, t)) {
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
static tr_tensor *new_header(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape) {
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
    tr_tensor *t = new_header(g, dtype, ndim, shape);
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

/* dst for `bytes` of this step's inputs in its half, uploaded beside the compute stream (the
 * half grown first where the last steps needed more); NULL: no room (the input goes to the
 * step's memory instead, and the half grows at its next use). */
static void *input_place(tr_graph *g, const void *src, size_t bytes) {
    input_half *h = &g->in[g->in_cur];
    size_t at = h->used, span = (bytes + 255) & ~(size_t)255;
    g->in_step += span;
    if (at == 0 && h->cap < g->in_need) {
        tr_accel_free(g->accel, h->p, h->cap);
        h->p = NULL;
        h->cap = 0;
        if (tr_accel_alloc(g->accel, g->in_need, (void **)&h->p) != TR_OK) return NULL;
        h->cap = g->in_need;
        h->fresh = 1;
    }
    if (!h->p || span > h->cap - at) return NULL;
    /* A fresh block's earlier work is ordered only on the compute stream: the upload is too. */
    tr_status st = h->fresh ? tr_accel_upload(g->accel, h->p + at, src, bytes)
                            : tr_accel_upload_after(g->accel, h->p + at, src, bytes, h->retired);
    if (st != TR_OK) {
        op_fail(g, st, "input of %zu bytes: %s", bytes, tr_error_msg());
        return NULL;
    }
    h->used = at + span;
    return h->p + at;
}

tr_tensor *tr_graph_input_from(tr_graph *g, void *data, tr_dtype dtype, int ndim, const int64_t *shape) {
    if (!g->accel) return tr_graph_view(g, data, dtype, ndim, shape);
    tr_tensor *t = new_header(g, dtype, ndim, shape);
    if (!t) return NULL;
    size_t bytes = tr_tensor_bytes(t);
    t->data = bytes && tr_accel_can_upload_after(g->accel) ? input_place(g, data, bytes) : NULL;
    if (g->status != TR_OK) return NULL;
    if (!t->data) { /* in the step's memory, uploaded in stream order */
        t->data = op_data(g, bytes ? bytes : 1);
        if (!t->data || !op_write(g, t->data, data, bytes)) return NULL;
    }
    if (g->n_host_copies < TR_GRAPH_HOST_COPIES) /* more: their checks download, as before */
        g->host_copies[g->n_host_copies++] = (host_copy){t->data, data, bytes};
    return t;
}

const void *tr_graph_host_values(const tr_graph *g, const tr_tensor *t) {
    if (!t || !t->data) return NULL;
    if (t->device.kind != TR_DEVICE_GPU) return t->data;
    return g->accel ? host_copy_of(g, t->data, tr_tensor_bytes(t)) : NULL;
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
    if (!t || t->param < 0 || !t->requires_grad) return;
    if (t->uses++ > 0) return;
    if (g->n_used == g->cap_used) {
        int cap = g->cap_used ? g->cap_used * 2 : 64;
        tr_tensor **a = op_alloc(g, (size_t)cap * sizeof *a);
        if (!a) return;
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

void tr_graph_set_fusion_(tr_graph *g, tr_fusion *f) { g->fusion = f; }

int op_wants_grad_sumsq(const tr_graph *g, const tr_tensor *t) {
    return g->fusion && t && !t->view_of && t->param >= 0 && fusion_notes(g->fusion, t->param) &&
           tr_params_get(g->params, t->param) == t;
}

void op_note_grad_sumsq(tr_graph *g, tr_tensor *t, double sumsq) {
    /* Else the hook sums it in double. */
    if (isfinite(sumsq) && op_wants_grad_sumsq(g, t)) fusion_note(g->fusion, t->param, sumsq);
}

void op_note_plane_stats(tr_graph *g, const tr_tensor *t, const double *ps) {
    g->ps_t = t, g->ps_data = t->data, g->ps = ps, g->ps_seq = g->op_seq;
}

const double *op_plane_stats(const tr_graph *g, const tr_tensor *t) {
    int fresh = g->ps && g->ps_t == t && g->ps_data == t->data && g->ps_seq + 1 == g->op_seq;
    return fresh ? g->ps : NULL;
}

int op_may_defer_grad(const tr_graph *g, const tr_tensor *t) {
    return g->fusion && !g->accel && t->dtype == TR_F32 && op_wants_grad_sumsq(g, t) &&
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
        if (take_fresh(g, t)) *acc = 0;
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
    settle_fresh(g, t);
    if (!g->hook) return;
    (void)profile_enter(g, "backward", "(gradient-ready hooks)", NULL, NULL); /* a failure ends the loop */
    g->hook(g->hook_user, t->param);
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
    for (tr_node *node = g->tape; node && g->status == TR_OK; node = node->prev) {
        /* A node whose output got no gradient contributes nothing. */
        if (node->out->grad || (node->out->view_of && node->out->view_of->grad)) {
            if (!node->out->grad) node->out->grad = node->out->view_of->grad;
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
    g->in_backward = 0;
    g->root = NULL;
    if (g->status != TR_OK) return g->status;
    /* Parameters the step never touched have final gradients too: unchanged, or zero when
     * they were to be written. */
    if (g->n_fresh) {
        int np = tr_params_count(g->params);
        for (int p = 0; p < np && g->n_fresh; p++) settle_fresh(g, tr_params_get(g->params, p));
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
