/* Model replicas and the factory that makes them (see trainer/replica.h). */
#include "trainer/replica.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "autograd/fusion.h"
#include "base/log_mute.h"
#include "plugin/plugin_impl.h"
#include "run/model_factory.h"
#include "run/replica_impl.h"
#include "trainer/accel.h"
#include "trainer/memory.h"
#include "trainer/strategy.h"

struct tr_model_factory {
    const tr_plugin *plugin;
    tr_model_ops ops;  /* the plugin's table, entries past its ops_size NULL */
    const tr_options *opts;
    tr_data_spec spec;
    uint64_t seed;
    char restore[4096]; /* tr_model_factory_set_restore's checkpoint, or "" */
    int quiet;          /* model_factory_set_quiet */
    int ckpt_every;     /* model_factory_set_checkpointing */
    atomic_int made;    /* replicas made: the model's info lines are the first one's */
};

tr_status tr_model_factory_create(tr_model_factory **out, const tr_plugin *model,
                                  const tr_options *opts, const tr_data_spec *spec,
                                  uint64_t seed) {
    *out = NULL;
    if (!model || model->desc->kind != TR_PLUGIN_MODEL)
        return tr_error_set(TR_ERR_INVALID, "model factory: %s is not a model plugin",
                            model ? model->desc->name : "(null)");
    tr_model_factory *f = tr_malloc(sizeof *f);
    if (!f) return tr_error_set(TR_ERR_NOMEM, "model factory: out of memory");
    *f = (tr_model_factory){.plugin = model, .opts = opts, .spec = *spec, .seed = seed};
    atomic_init(&f->made, 0);
    tr_status st = plugin_model_ops(model, &f->ops);
    if (st != TR_OK) {
        tr_free(f);
        return st;
    }
    *out = f;
    return TR_OK;
}

void tr_model_factory_destroy(tr_model_factory *f) { tr_free(f); }

tr_status tr_model_factory_set_restore(tr_model_factory *f, const char *checkpoint) {
    if ((size_t)snprintf(f->restore, sizeof f->restore, "%s", checkpoint ? checkpoint : "") >= sizeof f->restore)
        return tr_error_set(TR_ERR_INVALID, "model factory: checkpoint path of more than %zu bytes: %s",
                            sizeof f->restore - 1, checkpoint);
    return TR_OK;
}

void model_factory_set_quiet(tr_model_factory *f, int quiet) { f->quiet = quiet != 0; }
void model_factory_set_checkpointing(tr_model_factory *f, int every) { f->ckpt_every = every > 0 ? every : 0; }
int model_factory_checkpointing(const tr_model_factory *f) { return f->ckpt_every; }

const tr_data_spec *tr_model_factory_spec(const tr_model_factory *f) { return &f->spec; }

static size_t param_bytes(tr_replica *r) { return tr_params_numel(r->P) * sizeof(float); }
static size_t buffer_bytes(tr_replica *r) { return tr_params_buffers_numel(r->P) * sizeof(float); }

void tr_replica_destroy(tr_replica *r) {
    if (!r) return;
    if (r->g) tr_graph_destroy(r->g); /* before the parameters its tensors point into */
    tr_fusion_destroy_(r->fusion);     /* after the graph it was lent to */
    if (r->model) r->ops->destroy(r->model);
    tr_accel_free(r->accel, r->d_data, param_bytes(r)); /* NULL on the host */
    tr_accel_free(r->accel, r->d_grad, param_bytes(r));
    tr_accel_free(r->accel, r->d_buffers, buffer_bytes(r));
    tr_params_destroy(r->dP);
    tr_params_destroy(r->P);
    tr_free(r->h_out);
    tr_free(r);
}

tr_params *tr_replica_params(tr_replica *r) { return r->dP ? r->dP : r->P; }

tr_status tr_replica_outputs_to_host(tr_replica *r, tr_model_out *out) {
    if (!r->accel) return TR_OK;
    tr_tensor **ts[3] = {&out->loss, &out->logits, &out->embedding};
    size_t need = 0;
    for (int i = 0; i < 3; i++) need += *ts[i] ? (size_t)tr_tensor_numel(*ts[i]) : 0;
    if (need > r->h_cap) {
        float *b = tr_malloc(need * sizeof *b);
        if (!b) return tr_error_set(TR_ERR_NOMEM, "replica: out of memory for %zu output floats", need);
        tr_free(r->h_out);
        r->h_out = b;
        r->h_cap = need;
    }
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        const tr_tensor *t = *ts[i];
        if (!t) continue;
        if (t->dtype != TR_F32) return tr_error_set(TR_ERR_UNSUPPORTED, "replica: a %s output on a device", tr_dtype_name(t->dtype));
        r->h_t[i] = *t;
        r->h_t[i].device = (tr_device){TR_DEVICE_CPU, 0};
        r->h_t[i].grad = NULL;
        r->h_t[i].view_of = NULL;
        r->h_t[i].data = r->h_out + at;
        TR_CHECK(tr_accel_download(r->accel, r->h_t[i].data, t->data, tr_tensor_bytes(t)));
        at += (size_t)tr_tensor_numel(t);
        *ts[i] = &r->h_t[i];
    }
    return TR_OK;
}

tr_status tr_replica_upload(tr_replica *r) {
    if (!r->accel) return TR_OK;
    if (r->d_data) TR_CHECK(tr_accel_upload(r->accel, r->d_data, tr_params_data(r->P), param_bytes(r)));
    return tr_accel_upload(r->accel, r->d_buffers, tr_params_buffers_data(r->P), buffer_bytes(r));
}

tr_status tr_replica_download(tr_replica *r) {
    if (!r->accel) return TR_OK;
    if (r->d_data) TR_CHECK(tr_accel_download(r->accel, tr_params_data(r->P), r->d_data, param_bytes(r)));
    return tr_accel_download(r->accel, tr_params_buffers_data(r->P), r->d_buffers, buffer_bytes(r));
}

tr_status tr_replica_create_on(const tr_model_factory *f, tr_accel *accel, tr_replica **out) {
    return tr_replica_create_on_aligned(f, accel, 0, 0, out);
}

static tr_status make(const tr_model_factory *f, size_t align, int deferred, tr_replica **out);

tr_status tr_replica_create_on_aligned(const tr_model_factory *f, tr_accel *accel, size_t align, unsigned flags,
                                       tr_replica **out) {
    *out = NULL;
    tr_replica *r;
    TR_CHECK(make(f, align, (flags & TR_REPLICA_DEFER_INIT) != 0, &r));
    if (!accel) {
        *out = r;
        return TR_OK;
    }
    r->accel = accel;
    tr_status st;
    if (!(flags & TR_REPLICA_NO_DEVICE_DATA)) TR_CHECK_GOTO(tr_accel_alloc(accel, param_bytes(r), (void **)&r->d_data), fail);
    if (!(flags & TR_REPLICA_NO_DEVICE_GRAD)) {
        TR_CHECK_GOTO(tr_accel_alloc(accel, param_bytes(r), (void **)&r->d_grad), fail);
        /* The alignment gaps of the gradient stay zero, as on the host. */
        tr_accel_zero(accel, r->d_grad, param_bytes(r));
    }
    TR_CHECK_GOTO(tr_accel_alloc(accel, buffer_bytes(r), (void **)&r->d_buffers), fail);
    /* Deferred: the owner uploads the parameters it initialises (the buffers are whole now). */
    if (flags & TR_REPLICA_DEFER_INIT)
        TR_CHECK_GOTO(tr_accel_upload(accel, r->d_buffers, tr_params_buffers_data(r->P), buffer_bytes(r)), fail);
    else
        TR_CHECK_GOTO(tr_replica_upload(r), fail);
    TR_CHECK_GOTO(tr_params_clone_view(r->P, r->d_data, r->d_grad, r->d_buffers, tr_accel_device(accel), &r->dP), fail);
    TR_CHECK_GOTO(tr_graph_set_accel(r->g, accel), fail);
    tr_graph_set_params(r->g, r->dP);
    *out = r;
    return TR_OK;
fail:
    tr_replica_destroy(r);
    return st;
}

tr_status tr_replica_create(const tr_model_factory *f, tr_replica **out) {
    return tr_replica_create_aligned(f, 0, out);
}

tr_status tr_replica_create_aligned(const tr_model_factory *f, size_t align, tr_replica **out) {
    return make(f, align, 0, out);
}

/* A host replica; deferred: its parameters not initialised (tr_params_finalize_deferred). */
static tr_status make(const tr_model_factory *f, size_t align, int deferred, tr_replica **out) {
    *out = NULL;
    tr_replica *r = tr_malloc(sizeof *r);
    if (!r) return tr_error_set(TR_ERR_NOMEM, "replica: out of memory");
    memset(r, 0, sizeof *r);
    r->ops = &f->ops;
    r->spec = f->spec;
    r->seed = f->seed;
    tr_status st;
    TR_CHECK_GOTO(tr_params_create(&r->P), fail);
    TR_CHECK_GOTO(tr_params_set_restore(r->P, f->restore[0] ? f->restore : NULL), fail);
    /* What a model says when it is built (hf_encoder: the tensors it did not use), it says
     * for the first replica of the job only. The count is the factory's only mutable state. */
    int mute = f->quiet || atomic_fetch_add(&((tr_model_factory *)f)->made, 1) > 0;
    if (mute) log_mute_info(1);
    st = r->ops->create(&r->model, f->opts, &r->spec, r->P);
    if (st != TR_OK) {
        if (mute) log_mute_info(0);
        r->model = NULL;
        tr_error_prefix("model %s: ", f->plugin->desc->name);
        goto fail;
    }
    if (align) st = tr_params_set_align(r->P, align);
    if (st == TR_OK) st = deferred ? tr_params_finalize_deferred(r->P, f->seed) : tr_params_finalize(r->P, f->seed);
    if (mute) log_mute_info(0);
    if (st != TR_OK) goto fail;
    TR_CHECK_GOTO(tr_graph_create(&r->g, 0), fail);
    TR_CHECK_GOTO(tr_fusion_create_(&r->fusion), fail);
    tr_graph_set_fusion_(r->g, r->fusion); /* its notes stay off until a runner turns them on */
    tr_graph_set_params(r->g, r->P);
    tr_graph_set_checkpointing(r->g, f->ckpt_every);
    *out = r;
    return TR_OK;
fail:
    tr_replica_destroy(r);
    return st;
}

/* A batch tensor: a view of the loader's host memory, or on a device an upload of it (whose
 * indices the ops then check in that host memory). */
static tr_status batch_tensor(tr_replica *r, void *host, tr_dtype dtype, int ndim, const int64_t *shape, tr_tensor **out) {
    *out = tr_graph_input_from(r->g, host, dtype, ndim, shape);
    return tr_graph_status(r->g);
}

tr_status tr_replica_forward(tr_replica *r, const tr_host_batch *hb, int64_t offset,
                             int64_t count, double normaliser, int64_t step, int train,
                             int with_y, tr_model_out *out) {
    memset(out, 0, sizeof *out);
    const tr_data_spec *s = &r->spec;
    tr_graph *g = r->g;
    tr_graph_reset(g);
    tr_graph_set_training(g, train);
    tr_graph_set_grad_enabled(g, train);
    tr_graph_set_rng(g, r->seed, (uint64_t)step, (uint64_t)(hb->first + offset));
    int64_t shape[TR_MAX_DIMS];
    shape[0] = count;
    for (int d = 0; d < s->x_ndim; d++) shape[1 + d] = s->x_shape[d];
    /* a batch cut to its longest sample (x_trim_pad): its last dim, and samples that much closer */
    int64_t x_numel = s->x_numel;
    if (s->x_ndim > 0 && hb->x_len > 0 && hb->x_len != s->x_shape[s->x_ndim - 1]) {
        x_numel = x_numel / s->x_shape[s->x_ndim - 1] * hb->x_len;
        shape[s->x_ndim] = hb->x_len;
    }
    tr_batch b = {.size = count, .first = hb->first + offset, .normaliser = normaliser};
    char *x = (char *)hb->x + (size_t)offset * (size_t)x_numel * tr_dtype_size(s->x_dtype);
    TR_CHECK(batch_tensor(r, x, s->x_dtype, 1 + s->x_ndim, shape, &b.x));
    if (with_y) {
        for (int d = 0; d < s->y_ndim; d++) shape[1 + d] = s->y_shape[d];
        char *y = (char *)hb->y + (size_t)offset * (size_t)s->y_numel * tr_dtype_size(s->y_dtype);
        TR_CHECK(batch_tensor(r, y, s->y_dtype, 1 + s->y_ndim, shape, &b.y));
    }
    TR_CHECK(r->ops->forward(r->model, g, tr_replica_params(r), &b, out));
    TR_CHECK(tr_graph_status(g));
    if (with_y && !out->loss) return tr_error_set(TR_ERR_PLUGIN, "the model returned no loss");
    return TR_OK;
}

void tr_replica_copy_params(tr_replica *dst, tr_replica *src) {
    memcpy(tr_params_data(dst->P), tr_params_data(src->P), tr_params_numel(src->P) * sizeof(float));
    if (tr_params_buffers_numel(src->P))
        memcpy(tr_params_buffers_data(dst->P), tr_params_buffers_data(src->P),
               tr_params_buffers_numel(src->P) * sizeof(float));
}

void tr_replica_memory(const tr_replica *r, const tr_optim *opt, tr_strategy_memory *m) {
    /* Measured: the pages of the parameter and gradient buffers in memory now (on a device:
     * the sizes of the buffers it holds). */
    uint64_t p = tr_pages_resident(tr_params_data(r->P), tr_params_numel(r->P) * sizeof(float)) +
                 tr_params_buffers_numel(r->P) * sizeof(float);
    uint64_t g = tr_pages_resident(tr_params_grad(r->P), tr_params_numel(r->P) * sizeof(float));
    if (r->accel) {
        p = ((r->d_data ? tr_params_numel(r->P) : 0) + tr_params_buffers_numel(r->P)) * sizeof(float);
        g = r->d_grad ? tr_params_numel(r->P) * sizeof(float) : 0;
    }
    uint64_t a = tr_graph_activation_peak(r->g);
    uint64_t o = tr_optim_state_bytes(opt);
    m->params += p;
    m->grads += g;
    m->activations += a;
    m->optimizer += o;
    m->all_devices += p + g + a + o;
}

void tr_replica_find_nonfinite(const tr_replica *r, double *flags, char *activation, size_t size) {
    if (r->accel) { /* copies of the device's parameters and gradients (a failed copy finds nothing) */
        size_t n = tr_params_numel(r->P);
        float *h = tr_malloc((n ? n : 1) * sizeof *h);
        if (h && r->d_data && tr_accel_download(r->accel, h, r->d_data, n * sizeof *h) == TR_OK)
            tr_params_mark_nonfinite(r->P, h, 0, n, flags);
        if (h && r->d_grad && tr_accel_download(r->accel, h, r->d_grad, n * sizeof *h) == TR_OK)
            tr_params_mark_nonfinite(r->P, h, 0, n, flags + tr_params_count(r->P));
        tr_free(h);
        tr_graph_first_nonfinite(r->g, activation, size);
        return;
    }
    tr_params_find_nonfinite(r->P, flags);
    tr_graph_first_nonfinite(r->g, activation, size);
}
