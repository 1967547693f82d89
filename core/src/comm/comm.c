/* The communicator: a thread per communicator runs the backend's blocking operations in
 * issue order from a ring of works, so async calls overlap compute; sync calls issue and
 * wait. Checks arguments, divides AVG results, and breaks the communicator for good on the
 * first failure (the message is kept and repeated, as NCCL does). No allocation per call:
 * works live in a fixed ring. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/fault.h"
#include "comm/comm_impl.h"
#include "plugin/plugin_impl.h"
#include "trainer/comm_backend.h"
#include "trainer/log.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

enum { WORK_FREE = 0, WORK_QUEUED = 1, WORK_RUNNING = 2, WORK_DONE = 3 };

struct tr_comm_work {
    tr_comm *c;
    tr_comm_op op;
    tr_red_op user_op;
    int state;
    tr_status status;
    char msg[768];
};

typedef struct comm_mem {      /* a tr_comm_alloc'ed block */
    void *p;
    size_t bytes;
    int shared;               /* the backend's; else tr_pages_alloc'ed */
} comm_mem;

struct tr_comm {
    const tr_plugin *plugin;
    const tr_comm_backend_ops *ops; /* &ops_copy */
    tr_comm_backend_ops ops_copy;
    void *ctx;
    tr_comm_env env;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* the thread waits for work */
    pthread_cond_t cv_done;   /* callers wait for a work to finish or a slot to free */
    tr_comm_work works[TR_COMM_MAX_PENDING];
    uint64_t issued;          /* works issued (ring index of the next one) */
    uint64_t visible;         /* works handed to the thread (group_end moves it) */
    uint64_t started;         /* works the thread has taken */
    uint64_t seq;
    int group_depth;
    int stop;
    int broken;
    tr_status broken_status;
    char last_error[768];
    comm_mem *mem;
    int n_mem, cap_mem;
};

static const char *const kind_names[TR_COMM_KIND_COUNT] = {
    "barrier", "send", "recv", "broadcast", "reduce", "all_reduce", "gather", "scatter", "all_gather",
    "reduce_scatter"};
static const char *const op_names[TR_RED_COUNT] = {"sum", "avg", "max", "min", "prod"};

const char *tr_comm_kind_name(tr_comm_kind k) {
    return (unsigned)k < TR_COMM_KIND_COUNT ? kind_names[k] : "?";
}
const char *tr_red_op_name(tr_red_op op) { return (unsigned)op < TR_RED_COUNT ? op_names[op] : "?"; }

int tr_comm_rank(const tr_comm *c) { return c->env.rank; }
int tr_comm_size(const tr_comm *c) { return c->env.size; }
int tr_comm_local_rank(const tr_comm *c) { return c->env.local_rank; }
int tr_comm_local_size(const tr_comm *c) { return c->env.local_size; }
const char *tr_comm_backend_name(const tr_comm *c) { return c->plugin->desc->name; }

const char *tr_comm_last_error(const tr_comm *c) { return c->last_error; }

/* Elements the rank receives that a reduction wrote (AVG divides those). */
static size_t reduced_count(const tr_comm *c, const tr_comm_call *k) {
    switch (k->kind) {
    case TR_COMM_ALL_REDUCE:
    case TR_COMM_REDUCE_SCATTER: return k->count;
    case TR_COMM_REDUCE: return c->env.rank == k->root ? k->count : 0;
    default: return 0;
    }
}

/* The first failure breaks the communicator for good; its message is kept (call unlocked). */
static void mark_broken(tr_comm *c, tr_status st, const char *msg) {
    pthread_mutex_lock(&c->mu);
    if (!c->broken) {
        c->broken = 1;
        c->broken_status = st;
        snprintf(c->last_error, sizeof c->last_error, "%s", msg);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Fault point "collective" (base/fault.h): this rank runs the first half of the elements as
 * the same operation, so its peers see it arrive and exchange part of the data, then dies
 * while they wait for the rest. */
static void fault_collective(tr_comm *c, const tr_comm_op *op) {
    tr_comm_op half = *op;
    half.call.count = op->call.count / 2;
    tr_status st = c->ops->run(c->ctx, &half);
    tr_fault_kill("rank %d inside %s #%llu (%zu x %s) after %zu elements went through%s", c->env.rank,
                  tr_comm_kind_name(op->call.kind), (unsigned long long)op->seq, op->call.count,
                  tr_dtype_name(op->call.dtype), half.call.count, st == TR_OK ? "" : " (the partial call failed)");
}

static void run_work(tr_comm *c, tr_comm_work *w) {
    pthread_mutex_lock(&c->mu);
    int broken = c->broken;
    pthread_mutex_unlock(&c->mu);
    if (broken) {
        w->status = c->broken_status;
        snprintf(w->msg, sizeof w->msg, "%s", c->last_error);
        return;
    }
    double timeout = c->env.timeout_s > 0 ? c->env.timeout_s : 300;
    w->op.deadline = tr_now() + timeout;
    if (tr_fault_armed(TR_FAULT_COLLECTIVE) && w->op.call.count >= 2 && w->op.call.kind != TR_COMM_SEND &&
        w->op.call.kind != TR_COMM_RECV)
        fault_collective(c, &w->op);
    tr_status st = c->ops->run(c->ctx, &w->op);
    w->status = st;
    if (st != TR_OK) {
        const tr_comm_call *k = &w->op.call;
        snprintf(w->msg, sizeof w->msg, "comm %s rank %d: %s #%llu (%zu x %s): %s", c->plugin->desc->name,
                 c->env.rank, tr_comm_kind_name(k->kind), (unsigned long long)w->op.seq, k->count,
                 tr_dtype_name(k->dtype), tr_error_msg());
        mark_broken(c, st, w->msg);
        return;
    }
    size_t n = reduced_count(c, &w->op.call);
    if (w->user_op == TR_RED_AVG && !(c->ops->flags & TR_COMM_DEVICE_MEMORY) && n) tr_scale_div(w->op.call.recv, n, w->op.call.dtype, c->env.size);
}

static void *comm_thread(void *arg) {
    tr_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->started < c->visible) {
            tr_comm_work *w = &c->works[c->started % TR_COMM_MAX_PENDING];
            c->started++;
            w->state = WORK_RUNNING;
            pthread_mutex_unlock(&c->mu);
            run_work(c, w);
            pthread_mutex_lock(&c->mu);
            w->state = WORK_DONE;
            pthread_cond_broadcast(&c->cv_done);
            continue;
        }
        if (c->stop) break;
        pthread_cond_wait(&c->cv_work, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static tr_status check_call(const tr_comm *c, const tr_comm_call *k) {
    const char *name = tr_comm_kind_name(k->kind);
    if ((unsigned)k->kind >= TR_COMM_KIND_COUNT) return tr_error_set(TR_ERR_INVALID, "comm: unknown operation %d", (int)k->kind);
    if ((unsigned)k->dtype >= TR_DTYPE_COUNT) return tr_error_set(TR_ERR_INVALID, "comm %s: unknown dtype %d", name, (int)k->dtype);
    if ((unsigned)k->op >= TR_RED_COUNT) return tr_error_set(TR_ERR_INVALID, "comm %s: unknown reduction %d", name, (int)k->op);
    size_t total = k->count;
    int scaled = k->kind == TR_COMM_GATHER || k->kind == TR_COMM_SCATTER || k->kind == TR_COMM_ALL_GATHER ||
                 k->kind == TR_COMM_REDUCE_SCATTER;
    if (scaled && total > SIZE_MAX / (size_t)c->env.size) total = SIZE_MAX;
    else if (scaled) total *= (size_t)c->env.size;
    if (total > SIZE_MAX / 8 || total >= ((size_t)1 << 48))
        return tr_error_set(TR_ERR_INVALID, "comm %s: %zu elements is too many", name, k->count);
    int rooted = k->kind == TR_COMM_BROADCAST || k->kind == TR_COMM_REDUCE || k->kind == TR_COMM_GATHER ||
                 k->kind == TR_COMM_SCATTER || k->kind == TR_COMM_SEND || k->kind == TR_COMM_RECV;
    if (rooted && (k->root < 0 || k->root >= c->env.size))
        return tr_error_set(TR_ERR_INVALID, "comm %s: %s %d is not a rank of this %d-rank job", name,
                            k->kind == TR_COMM_SEND || k->kind == TR_COMM_RECV ? "peer" : "root", k->root, c->env.size);
    if ((k->kind == TR_COMM_SEND || k->kind == TR_COMM_RECV) && k->root == c->env.rank)
        return tr_error_set(TR_ERR_INVALID, "comm %s: rank %d cannot %s itself", name, k->root, name);
    if (k->count && k->kind != TR_COMM_BARRIER) {
        int needs_send = k->kind != TR_COMM_RECV && k->kind != TR_COMM_BROADCAST &&
                         !(k->kind == TR_COMM_SCATTER && c->env.rank != k->root);
        int needs_recv = k->kind != TR_COMM_SEND && !(k->kind == TR_COMM_REDUCE && c->env.rank != k->root) &&
                         !(k->kind == TR_COMM_GATHER && c->env.rank != k->root);
        if ((needs_send && !k->send) || (needs_recv && !k->recv))
            return tr_error_set(TR_ERR_INVALID, "comm %s: NULL %s buffer for %zu elements", name,
                                needs_send && !k->send ? "send" : "recv", k->count);
    }
    return TR_OK;
}

tr_status tr_comm_issue(tr_comm *c, const tr_comm_call *call, tr_comm_work **out) {
    *out = NULL;
    TR_CHECK(check_call(c, call));
    pthread_mutex_lock(&c->mu);
    tr_comm_work *w = &c->works[c->issued % TR_COMM_MAX_PENDING];
    while (w->state != WORK_FREE) pthread_cond_wait(&c->cv_done, &c->mu); /* ring full */
    memset(w, 0, sizeof *w);
    w->c = c;
    w->op.call = *call;
    if (call->kind == TR_COMM_BROADCAST) w->op.call.send = call->recv; /* one buffer */
    w->user_op = call->op;
    if (call->op == TR_RED_AVG && !(c->ops->flags & TR_COMM_DEVICE_MEMORY)) w->op.call.op = TR_RED_SUM;
    w->op.seq = c->seq + 1;
    if (c->ops->issued) {
        tr_status st = c->ops->issued(c->ctx, &w->op);
        if (st != TR_OK) {
            w->state = WORK_FREE;
            pthread_mutex_unlock(&c->mu);
            tr_error_prefix("comm %s: issuing %s: ", c->plugin->desc->name, tr_comm_kind_name(call->kind));
            return st;
        }
    }
    c->seq++;
    w->state = WORK_QUEUED;
    c->issued++;
    if (c->group_depth == 0) {
        c->visible = c->issued;
        pthread_cond_signal(&c->cv_work);
    }
    pthread_mutex_unlock(&c->mu);
    *out = w;
    return TR_OK;
}

tr_status tr_comm_wait(tr_comm_work *w) {
    if (!w) return tr_error_set(TR_ERR_INVALID, "comm wait: NULL work");
    tr_comm *c = w->c;
    pthread_mutex_lock(&c->mu);
    if (w->state == WORK_QUEUED && c->group_depth > 0) {
        pthread_mutex_unlock(&c->mu);
        return tr_error_set(TR_ERR_INVALID, "comm wait: the work was issued inside a group that has not ended");
    }
    while (w->state != WORK_DONE) pthread_cond_wait(&c->cv_done, &c->mu);
    tr_status st = w->status;
    char msg[sizeof w->msg];
    if (st != TR_OK) memcpy(msg, w->msg, sizeof msg);
    w->state = WORK_FREE;
    pthread_cond_broadcast(&c->cv_done);
    pthread_mutex_unlock(&c->mu);
    if (st != TR_OK) return tr_error_set(st, "%s", msg);
    return TR_OK;
}

tr_status tr_comm_test(tr_comm_work *w, int *done) {
    if (!w) return tr_error_set(TR_ERR_INVALID, "comm test: NULL work");
    pthread_mutex_lock(&w->c->mu);
    *done = w->state == WORK_DONE;
    pthread_mutex_unlock(&w->c->mu);
    return TR_OK;
}

void tr_comm_group_start(tr_comm *c) {
    pthread_mutex_lock(&c->mu);
    c->group_depth++;
    pthread_mutex_unlock(&c->mu);
}

tr_status tr_comm_group_end(tr_comm *c) {
    pthread_mutex_lock(&c->mu);
    if (c->group_depth == 0) {
        pthread_mutex_unlock(&c->mu);
        return tr_error_set(TR_ERR_INVALID, "comm group_end without group_start");
    }
    if (--c->group_depth == 0) {
        c->visible = c->issued;
        pthread_cond_signal(&c->cv_work);
    }
    pthread_mutex_unlock(&c->mu);
    return TR_OK;
}

/* Whether the calling thread is between group_start and group_end. */
static int in_group(tr_comm *c) {
    pthread_mutex_lock(&c->mu);
    int in = c->group_depth > 0;
    pthread_mutex_unlock(&c->mu);
    return in;
}

static tr_status call_sync(tr_comm *c, tr_comm_call k) {
    tr_comm_work *w;
    TR_CHECK(tr_comm_issue(c, &k, &w));
    if (in_group(c)) return tr_error_set(TR_ERR_INVALID, "comm %s: a synchronous call inside a group would wait forever",
                                      tr_comm_kind_name(k.kind));
    return tr_comm_wait(w);
}

tr_status tr_comm_barrier(tr_comm *c) { return call_sync(c, (tr_comm_call){.kind = TR_COMM_BARRIER}); }

tr_status tr_comm_send(tr_comm *c, const void *buf, size_t count, tr_dtype dtype, int peer) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_SEND, .send = buf, .count = count, .dtype = dtype, .root = peer});
}
tr_status tr_comm_recv(tr_comm *c, void *buf, size_t count, tr_dtype dtype, int peer) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_RECV, .recv = buf, .count = count, .dtype = dtype, .root = peer});
}
tr_status tr_comm_broadcast(tr_comm *c, void *buf, size_t count, tr_dtype dtype, int root) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_BROADCAST, .recv = buf, .count = count, .dtype = dtype, .root = root});
}
tr_status tr_comm_reduce(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype, tr_red_op op, int root) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_REDUCE, .send = send, .recv = recv, .count = count,
                                       .dtype = dtype, .op = op, .root = root});
}
tr_status tr_comm_all_reduce(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype, tr_red_op op) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_ALL_REDUCE, .send = send, .recv = recv, .count = count,
                                       .dtype = dtype, .op = op});
}
tr_status tr_comm_gather(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype, int root) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_GATHER, .send = send, .recv = recv, .count = count,
                                       .dtype = dtype, .root = root});
}
tr_status tr_comm_scatter(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype, int root) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_SCATTER, .send = send, .recv = recv, .count = count,
                                       .dtype = dtype, .root = root});
}
tr_status tr_comm_all_gather(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_ALL_GATHER, .send = send, .recv = recv, .count = count,
                                       .dtype = dtype});
}
tr_status tr_comm_reduce_scatter(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype,
                                 tr_red_op op) {
    return call_sync(c, (tr_comm_call){.kind = TR_COMM_REDUCE_SCATTER, .send = send, .recv = recv, .count = count,
                                       .dtype = dtype, .op = op});
}

tr_status tr_comm_iall_reduce(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype,
                              tr_red_op op, tr_comm_work **w) {
    return tr_comm_issue(c, &(tr_comm_call){.kind = TR_COMM_ALL_REDUCE, .send = send, .recv = recv,
                                            .count = count, .dtype = dtype, .op = op}, w);
}
tr_status tr_comm_ireduce_scatter(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype,
                                  tr_red_op op, tr_comm_work **w) {
    return tr_comm_issue(c, &(tr_comm_call){.kind = TR_COMM_REDUCE_SCATTER, .send = send, .recv = recv,
                                            .count = count, .dtype = dtype, .op = op}, w);
}
tr_status tr_comm_iall_gather(tr_comm *c, const void *send, void *recv, size_t count, tr_dtype dtype,
                              tr_comm_work **w) {
    return tr_comm_issue(c, &(tr_comm_call){.kind = TR_COMM_ALL_GATHER, .send = send, .recv = recv,
                                            .count = count, .dtype = dtype}, w);
}
tr_status tr_comm_ibroadcast(tr_comm *c, void *buf, size_t count, tr_dtype dtype, int root, tr_comm_work **w) {
    return tr_comm_issue(c, &(tr_comm_call){.kind = TR_COMM_BROADCAST, .recv = buf, .count = count,
                                            .dtype = dtype, .root = root}, w);
}

/* Waits until no operation is queued or running (the backend is then the caller's to use). */
static tr_status drain(tr_comm *c, const char *what) {
    pthread_mutex_lock(&c->mu);
    if (c->group_depth > 0) {
        pthread_mutex_unlock(&c->mu);
        return tr_error_set(TR_ERR_INVALID, "comm %s inside a group", what);
    }
    for (;;) {
        int busy = 0;
        for (int i = 0; i < TR_COMM_MAX_PENDING && !busy; i++)
            busy = c->works[i].state == WORK_QUEUED || c->works[i].state == WORK_RUNNING;
        if (!busy) break;
        pthread_cond_wait(&c->cv_done, &c->mu);
    }
    tr_status st = c->broken ? tr_error_set(c->broken_status, "%s", c->last_error) : TR_OK;
    pthread_mutex_unlock(&c->mu);
    return st;
}

static int backend_allocates(const tr_comm *c) {
    return c->ops->alloc && c->ops->free;
}

static void release(tr_comm *c, const comm_mem *m) {
    if (m->shared) c->ops->free(c->ctx, m->p);
    else tr_pages_free(m->p, m->bytes);
}

tr_status tr_comm_alloc(tr_comm *c, size_t bytes, void **ptr) {
    *ptr = NULL;
    if (!bytes) bytes = 1;
    TR_CHECK(drain(c, "alloc"));
    comm_mem m = {.bytes = bytes};
    if (backend_allocates(c)) { /* collective: every rank gets here, whatever fails locally after */
        tr_status st = c->ops->alloc(c->ctx, bytes, tr_now() + c->env.timeout_s, &m.p);
        if (st != TR_OK) {
            char msg[768];
            snprintf(msg, sizeof msg, "comm %s rank %d: alloc (%zu bytes): %s", c->plugin->desc->name, c->env.rank,
                     bytes, tr_error_msg());
            mark_broken(c, st, msg);
            return tr_error_set(st, "%s", msg);
        }
        m.shared = m.p != NULL;
    }
    if (!m.p) m.p = tr_pages_alloc(bytes);
    comm_mem *grown = c->n_mem < c->cap_mem ? c->mem : tr_malloc((size_t)(c->cap_mem ? 2 * c->cap_mem : 8) * sizeof *grown);
    if (!m.p || !grown) {
        if (m.p) release(c, &m);
        return tr_error_set(TR_ERR_NOMEM, "comm alloc: out of memory for %zu bytes", bytes);
    }
    if (grown != c->mem) {
        if (c->n_mem) memcpy(grown, c->mem, (size_t)c->n_mem * sizeof *grown);
        tr_free(c->mem);
        c->mem = grown;
        c->cap_mem = c->cap_mem ? 2 * c->cap_mem : 8;
    }
    c->mem[c->n_mem++] = m;
    *ptr = m.p;
    return TR_OK;
}

void tr_comm_free(tr_comm *c, void *ptr) {
    if (!c || !ptr) return;
    /* Inside a group queued works may still name it: then it stays until the communicator
     * goes. A broken communicator has nothing running, so its memory can go. */
    if (in_group(c)) return;
    (void)drain(c, "free");
    for (int i = 0; i < c->n_mem; i++)
        if (c->mem[i].p == ptr) {
            release(c, &c->mem[i]);
            c->mem[i] = c->mem[--c->n_mem];
            return;
        }
}

int tr_comm_device_memory(const tr_comm *c) { return c && (c->ops->flags & TR_COMM_DEVICE_MEMORY) != 0; }

int tr_comm_is_shared(const tr_comm *c, const void *ptr) {
    for (int i = 0; c && i < c->n_mem; i++)
        if (c->mem[i].p == ptr) return c->mem[i].shared;
    return 0;
}

void tr_comm_abort(tr_comm *c) {
    char msg[256];
    snprintf(msg, sizeof msg, "comm %s rank %d: aborted by this rank", c->plugin->desc->name, c->env.rank);
    mark_broken(c, TR_ERR_ABORTED, msg);
    if (c->ops->abort) c->ops->abort(c->ctx);
}

tr_status comm_backend_ops(const tr_plugin *p, tr_comm_backend_ops *ops) {
    return plugin_copy_ops(p, ops, sizeof *ops, offsetof(tr_comm_backend_ops, abort), "comm backend",
                           "create, destroy, run");
}

tr_status tr_comm_create(tr_comm **out, const tr_plugin *backend, const tr_options *opts, const tr_comm_env *env) {
    *out = NULL;
    if (!backend || backend->desc->kind != TR_PLUGIN_COMM)
        return tr_error_set(TR_ERR_INVALID, "comm: %s is not a communication backend plugin",
                            backend ? backend->desc->name : "(null)");
    tr_comm_backend_ops ops_copy; /* an older plugin's shorter table, zero-extended */
    TR_CHECK(comm_backend_ops(backend, &ops_copy));
    if (!ops_copy.create || !ops_copy.destroy || !ops_copy.run)
        return tr_error_set(TR_ERR_PLUGIN, "%s: comm backend %s lacks create, destroy or run", backend->path,
                            backend->desc->name);
    const tr_comm_backend_ops *ops = &ops_copy;
    if (env->size < 1 || env->rank < 0 || env->rank >= env->size || env->local_size < 1 || env->local_rank < 0 ||
        env->local_rank >= env->local_size)
        return tr_error_set(TR_ERR_INVALID, "comm: rank %d of %d (local %d of %d) is not a valid place in a job",
                            env->rank, env->size, env->local_rank, env->local_size);
    tr_comm *c = tr_calloc(1, sizeof *c);
    if (!c) return tr_error_set(TR_ERR_NOMEM, "comm: out of memory");
    c->plugin = backend;
    c->ops_copy = ops_copy;
    c->ops = &c->ops_copy;
    c->env = *env;
    if (c->env.timeout_s <= 0) c->env.timeout_s = 300;
    tr_options *own = NULL;
    tr_status st = TR_OK;
    if (!opts) {
        st = tr_options_create(&own, backend->desc->options, backend->desc->n_options, NULL, 0, backend->desc->name);
        opts = own;
    }
    if (st == TR_OK) {
        st = ops->create(&c->ctx, opts, &c->env, tr_now() + c->env.timeout_s);
        if (st != TR_OK) {
            c->ctx = NULL;
            tr_error_prefix("comm %s rank %d of %d: ", backend->desc->name, env->rank, env->size);
        }
    }
    tr_options_destroy(own);
    if (st != TR_OK) {
        tr_free(c);
        return st;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_work, NULL);
    pthread_cond_init(&c->cv_done, NULL);
    if (pthread_create(&c->thread, NULL, comm_thread, c) != 0) {
        if (ops->abort) ops->abort(c->ctx); /* the peers never see this rank again: no leaving */
        ops->destroy(c->ctx);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv_work);
        pthread_cond_destroy(&c->cv_done);
        tr_free(c);
        return tr_error_set(TR_ERR_INTERNAL, "comm: cannot start the communicator thread");
    }
    c->thread_started = 1;
    *out = c;
    return TR_OK;
}

void tr_comm_destroy(tr_comm *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->group_depth = 0;
    c->visible = c->issued;
    c->stop = 1;
    pthread_cond_signal(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
    if (c->thread_started) pthread_join(c->thread, NULL);
    for (int i = 0; i < c->n_mem; i++) release(c, &c->mem[i]);
    tr_free(c->mem);
    c->ops->destroy(c->ctx);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv_work);
    pthread_cond_destroy(&c->cv_done);
    tr_free(c);
}
