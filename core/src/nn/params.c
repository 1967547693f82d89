/* Parameter registry: named shapes laid out in one flat parameter buffer, one flat gradient
 * buffer and one flat buffer for non-trainable state; plus the files a model is rebuilt from
 * (saved with its checkpoints) and the checkpoint a resumed run loads into it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "trainer/memory.h"
#include "trainer/params.h"
#include "trainer/rng.h"

#define PARAM_ALIGN 16 /* floats: each parameter starts on a 64-byte boundary */
#define NAME_MAX_LEN 127
#define MAX_NUMEL ((int64_t)1 << 40) /* per tensor, as the safetensors reader allows */
#define MAX_FILES 16
#define MAX_FILE_BYTES ((size_t)1 << 24)

typedef struct entry {
    char name[NAME_MAX_LEN + 1];
    tr_tensor t;
    size_t offset;
    tr_init init;
    double init_arg;
    tr_params_fill_fn fill; /* NULL: the init rule */
    tr_params_fill_range_fn fill_range; /* ... or a run of elements at a time */
    void *fill_ctx;
} entry;

typedef struct table {
    entry *e;
    int n, cap;
    float *data, *grad;
    size_t numel;
    int paged;    /* data and grad are tr_pages_alloc'ed (trainable parameters) */
    int borrowed; /* data and grad belong to someone else (tr_params_clone_view) */
    int data_borrowed; /* data does (tr_params_set_data_buffer) */
    int grad_borrowed; /* grad does (tr_params_set_grad_buffer) */
    int on_device; /* ... in a device's memory: the core never touches their bytes */
} table;

typedef struct model_file {
    char name[NAME_MAX_LEN + 1];
    void *data;
    size_t size;
} model_file;

struct tr_params {
    table p;  /* trainable */
    table b;  /* buffers */
    model_file files[MAX_FILES]; /* tr_params_add_file's, n_files of them */
    int n_files;
    char *restore; /* tr_params_set_restore's checkpoint folder, or NULL */
    size_t align;  /* floats; PARAM_ALIGN unless tr_params_set_align */
    uint64_t seed; /* finalize's */
    int finalized;
    int filling;   /* fills may still be called: the parameters are not all initialised */
};

tr_status tr_params_create(tr_params **out) {
    *out = tr_calloc(1, sizeof **out);
    if (!*out) return TR_ERR_NOMEM;
    (*out)->align = PARAM_ALIGN;
    return TR_OK;
}

static void free_table(table *t) {
    size_t bytes = (t->numel ? t->numel : 1) * sizeof(float);
    if (t->borrowed) {
    } else if (t->paged) {
        if (!t->data_borrowed) tr_pages_free(t->data, bytes);
        if (!t->grad_borrowed) tr_pages_free(t->grad, bytes);
    } else {
        tr_free(t->data);
        tr_free(t->grad);
    }
    tr_free(t->e);
}

void tr_params_destroy(tr_params *P) {
    if (!P) return;
    free_table(&P->p);
    free_table(&P->b);
    for (int i = 0; i < P->n_files; i++) tr_free(P->files[i].data);
    tr_free(P->restore);
    tr_free(P);
}

tr_status tr_params_set_align(tr_params *P, size_t floats) {
    if (P->finalized) return tr_error_set(TR_ERR_INVALID, "params: alignment set after finalize");
    if (floats == 0 || floats % PARAM_ALIGN)
        return tr_error_set(TR_ERR_INVALID, "params: alignment %zu is not a positive multiple of %d floats", floats,
                            PARAM_ALIGN);
    P->align = floats;
    return TR_OK;
}

size_t tr_params_align(const tr_params *P) { return P->align; }

static int find(const table *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->e[i].name, name) == 0) return i;
    return -1;
}

static tr_status add(tr_params *P, table *t, const char *what, const char *name, int ndim,
                     const int64_t *shape, tr_init init, double init_arg, int *index) {
    if (P->finalized)
        return tr_error_set(TR_ERR_INVALID, "params: cannot add %s '%s' after finalize", what,
                            name);
    if (!name || !*name || strlen(name) > NAME_MAX_LEN)
        return tr_error_set(TR_ERR_INVALID, "params: %s name must be 1..%d characters", what,
                            NAME_MAX_LEN);
    if (find(&P->p, name) >= 0 || find(&P->b, name) >= 0)
        return tr_error_set(TR_ERR_INVALID, "params: '%s' is registered twice", name);
    if (ndim < 1 || ndim > TR_MAX_DIMS)
        return tr_error_set(TR_ERR_INVALID, "params: '%s' has %d dims (1..%d)", name, ndim,
                            TR_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0)
            return tr_error_set(TR_ERR_INVALID, "params: '%s' dim %d is %lld (must be > 0)",
                                name, i, (long long)shape[i]);
        /* Shapes may come from files (a sharded checkpoint's index): no product overflows. */
        if (shape[i] > MAX_NUMEL / numel)
            return tr_error_set(TR_ERR_INVALID, "params: '%s' has more than 2^40 elements", name);
        numel *= shape[i];
    }
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 32;
        entry *e = tr_calloc((size_t)cap, sizeof *e);
        if (!e) return TR_ERR_NOMEM;
        if (t->n) memcpy(e, t->e, (size_t)t->n * sizeof *e);
        tr_free(t->e);
        t->e = e;
        t->cap = cap;
    }
    entry *e = &t->e[t->n];
    memset(e, 0, sizeof *e);
    strcpy(e->name, name);
    e->t = tr_tensor_view(NULL, TR_F32, ndim, shape);
    e->init = init;
    e->init_arg = init_arg;
    if (index) *index = t->n;
    t->n++;
    return TR_OK;
}

tr_status tr_params_add(tr_params *P, const char *name, int ndim, const int64_t *shape,
                        tr_init init, double init_arg, int *index) {
    return add(P, &P->p, "parameter", name, ndim, shape, init, init_arg, index);
}

tr_status tr_params_add_buffer(tr_params *P, const char *name, int ndim, const int64_t *shape,
                               tr_init init, double init_arg, int *index) {
    return add(P, &P->b, "buffer", name, ndim, shape, init, init_arg, index);
}

/* Elements [first, first + n) of e's initial values by its init rule. The counter RNG makes
 * each element a function of (seed, stream, its index): any run equals the whole tensor's. */
static void init_rule(const entry *e, float *out, size_t first, size_t n, uint64_t seed, uint64_t stream) {
    size_t numel = (size_t)tr_tensor_numel(&e->t);
    /* fan_in for (OC, C, ...) weights: C * prod(kernel dims). */
    double fan_in = (double)tr_tensor_dims(&e->t, 1, e->t.ndim);
    double bound;
    switch (e->init) {
    case TR_INIT_ZEROS: memset(out, 0, n * sizeof(float)); break;
    case TR_INIT_ONES:
        for (size_t i = 0; i < n; i++) out[i] = 1.0f;
        break;
    case TR_INIT_UNIFORM:
        tr_rng_fill_uniform(out, n, seed, stream, first, (float)-e->init_arg, (float)e->init_arg);
        break;
    case TR_INIT_NORMAL: tr_rng_fill_normal(out, n, seed, stream, first, 0.0f, (float)e->init_arg); break;
    case TR_INIT_KAIMING_UNIFORM:
        /* kaiming_uniform_(a=sqrt(5)) gives bound = 1/sqrt(fan_in). */
        bound = e->t.ndim >= 2 ? 1.0 / sqrt(fan_in) : 1.0 / sqrt((double)numel);
        tr_rng_fill_uniform(out, n, seed, stream, first, (float)-bound, (float)bound);
        break;
    case TR_INIT_FAN_IN_UNIFORM:
        bound = e->init_arg > 0 ? 1.0 / sqrt(e->init_arg) : 0.0;
        tr_rng_fill_uniform(out, n, seed, stream, first, (float)-bound, (float)bound);
        break;
    }
}

/* Elements [first, first + n) of parameter i's initial values into out: its fill or its rule.
 * A whole-tensor fill asked for part of its tensor writes the whole into scratch. */
static tr_status init_piece(tr_params *P, int i, float *out, size_t first, size_t n) {
    entry *e = &P->p.e[i];
    size_t numel = (size_t)tr_tensor_numel(&e->t);
    if (e->fill_range) return e->fill_range(e->fill_ctx, i, out, first, n);
    if (!e->fill) {
        init_rule(e, out, first, n, P->seed, tr_rng_stream(TR_RNG_STREAM_INIT, 0, (uint64_t)i));
        return TR_OK;
    }
    if (first == 0 && n == numel) return e->fill(e->fill_ctx, i, out, numel);
    float *whole = tr_malloc(numel * sizeof *whole);
    if (!whole) return tr_error_set(TR_ERR_NOMEM, "params: out of memory for '%s' (%zu floats) to fill", e->name, numel);
    tr_status st = e->fill(e->fill_ctx, i, whole, numel);
    if (st == TR_OK) memcpy(out, whole + first, n * sizeof *out);
    tr_free(whole);
    return st;
}

/* Offsets, then the flat buffers (zero: never-touched pages for trainable parameters). */
static tr_status layout(table *t, int with_grad, size_t align) {
    size_t off = 0;
    for (int i = 0; i < t->n; i++) {
        t->e[i].offset = off;
        off += ((size_t)tr_tensor_numel(&t->e[i].t) + align - 1) / align * align;
        if (off > ((size_t)1 << 50))
            return tr_error_set(TR_ERR_NOMEM, "params: %d tensors of more than 2^50 elements in all", t->n);
    }
    t->numel = off;
    /* Trainable parameters and gradients are page-backed, so a sharded strategy can give the
     * pages of the parts it does not hold back to the system, and never touches those of the
     * parts it does not initialise (tr_params_finalize_deferred). */
    t->paged = with_grad;
    t->data = with_grad ? tr_pages_alloc((off ? off : 1) * sizeof(float)) : tr_calloc(off ? off : 1, sizeof(float));
    if (!t->data) return TR_ERR_NOMEM;
    if (with_grad) {
        t->grad = tr_pages_alloc((off ? off : 1) * sizeof(float));
        if (!t->grad) return TR_ERR_NOMEM;
    }
    for (int i = 0; i < t->n; i++) {
        entry *e = &t->e[i];
        e->t.data = t->data + e->offset;
        e->t.grad = with_grad ? t->grad + e->offset : NULL;
        e->t.requires_grad = with_grad;
        e->t.param = with_grad ? i : -1;
    }
    return TR_OK;
}

static tr_status set_fill(tr_params *P, int index, tr_params_fill_fn fill, tr_params_fill_range_fn range, void *ctx) {
    if (P->finalized) return tr_error_set(TR_ERR_INVALID, "params: a fill set after finalize");
    if (index < 0 || index >= P->p.n) return tr_error_set(TR_ERR_INVALID, "params: no parameter %d to fill", index);
    P->p.e[index].fill = fill;
    P->p.e[index].fill_range = range;
    P->p.e[index].fill_ctx = ctx;
    return TR_OK;
}

tr_status tr_params_set_fill(tr_params *P, int index, tr_params_fill_fn fill, void *ctx) {
    return set_fill(P, index, fill, NULL, ctx);
}

tr_status tr_params_set_fill_range(tr_params *P, int index, tr_params_fill_range_fn fill, void *ctx) {
    return set_fill(P, index, NULL, fill, ctx);
}

tr_status tr_params_finalize_deferred(tr_params *P, uint64_t seed) {
    if (P->finalized) return tr_error_set(TR_ERR_INVALID, "params: finalized twice");
    TR_CHECK(layout(&P->p, 1, P->align));
    TR_CHECK(layout(&P->b, 0, PARAM_ALIGN));
    P->seed = seed;
    /* Buffers (running statistics: small, never sharded) are initialised whole now. */
    for (int i = 0; i < P->b.n; i++) {
        entry *e = &P->b.e[i];
        init_rule(e, e->t.data, 0, (size_t)tr_tensor_numel(&e->t), seed, tr_rng_stream(TR_RNG_STREAM_INIT, 1, (uint64_t)i));
    }
    P->finalized = 1;
    P->filling = 1;
    return TR_OK;
}

tr_status tr_params_init_range(tr_params *P, size_t lo, size_t hi, float *out) {
    if (!P->filling || lo > hi || hi > P->p.numel)
        return tr_error_set(TR_ERR_INVALID, "params: initial values of elements [%zu, %zu) of %zu asked %s", lo, hi,
                            P->p.numel, P->filling ? "outside the flat buffer" : "after tr_params_init_done");
    if (hi > lo && !out)
        return tr_error_set(TR_ERR_INVALID, "params: initial values of elements [%zu, %zu) asked into a NULL buffer", lo,
                            hi);
    size_t at = lo; /* out[at - lo] is the next element to write */
    for (int i = 0; i < P->p.n && at < hi; i++) {
        const entry *e = &P->p.e[i];
        size_t a = e->offset, b = a + (size_t)tr_tensor_numel(&e->t);
        if (b <= at) continue;
        if (a >= hi) break;
        if (a > at) memset(out + (at - lo), 0, (a - at) * sizeof *out); /* the alignment gap */
        if (a < at) a = at;
        if (b > hi) b = hi;
        tr_status st = init_piece(P, i, out + (a - lo), a - e->offset, b - a);
        if (st != TR_OK) {
            tr_error_prefix("params: initial values of '%s': ", e->name);
            return st;
        }
        at = b;
    }
    if (at < hi) memset(out + (at - lo), 0, (hi - at) * sizeof *out);
    return TR_OK;
}

void tr_params_init_done(tr_params *P) {
    if (!P->filling) return;
    P->filling = 0;
    /* Each ranged fill's context hears once that no more values are wanted. */
    for (int i = 0; i < P->p.n; i++) {
        const entry *e = &P->p.e[i];
        int seen = !e->fill_range;
        for (int k = 0; k < i && !seen; k++) seen = P->p.e[k].fill_range == e->fill_range && P->p.e[k].fill_ctx == e->fill_ctx;
        if (!seen) e->fill_range(e->fill_ctx, -1, NULL, 0, 0);
    }
}

tr_status tr_params_finalize(tr_params *P, uint64_t seed) {
    TR_CHECK(tr_params_finalize_deferred(P, seed));
    tr_status st = tr_params_init_range(P, 0, P->p.numel, P->p.data);
    tr_params_init_done(P);
    return st;
}

tr_status tr_params_add_file(tr_params *P, const char *name, const void *data, size_t size) {
    if (!name || !*name || strlen(name) > NAME_MAX_LEN || strchr(name, '/') || name[0] == '.')
        return tr_error_set(TR_ERR_INVALID, "params: a model file's name must be a plain file name of 1..%d characters, "
                                            "got '%s'", NAME_MAX_LEN, name ? name : "(null)");
    if (size > MAX_FILE_BYTES || (size && !data))
        return tr_error_set(TR_ERR_INVALID, "params: model file %s: %zu bytes (at most %zu)", name, size, MAX_FILE_BYTES);
    int i = 0;
    while (i < P->n_files && strcmp(P->files[i].name, name) != 0) i++;
    if (i == MAX_FILES) return tr_error_set(TR_ERR_INVALID, "params: more than %d model files (%s)", MAX_FILES, name);
    void *copy = tr_malloc(size ? size : 1);
    if (!copy) return tr_error_set(TR_ERR_NOMEM, "params: out of memory for model file %s (%zu bytes)", name, size);
    if (size) memcpy(copy, data, size);
    if (i == P->n_files) snprintf(P->files[P->n_files++].name, sizeof P->files[i].name, "%s", name);
    tr_free(P->files[i].data);
    P->files[i].data = copy;
    P->files[i].size = size;
    return TR_OK;
}

int tr_params_file_count(const tr_params *P) { return P->n_files; }

const char *tr_params_file(const tr_params *P, int i, const void **data, size_t *size) {
    if (i < 0 || i >= P->n_files) return NULL;
    *data = P->files[i].data;
    *size = P->files[i].size;
    return P->files[i].name;
}

tr_status tr_params_set_restore(tr_params *P, const char *checkpoint) {
    char *copy = NULL;
    if (checkpoint) {
        size_t n = strlen(checkpoint) + 1;
        if (!(copy = tr_malloc(n))) return tr_error_set(TR_ERR_NOMEM, "params: out of memory");
        memcpy(copy, checkpoint, n);
    }
    tr_free(P->restore);
    P->restore = copy;
    return TR_OK;
}

const char *tr_params_restore(const tr_params *P) { return P->restore; }

/* dst: src's entries over borrowed flat buffers. */
static tr_status clone_table(table *dst, const table *src, float *data, float *grad, tr_device device) {
    *dst = (table){.n = src->n, .cap = src->n, .numel = src->numel, .data = data, .grad = grad, .borrowed = 1,
                   .on_device = device.kind != TR_DEVICE_CPU};
    if (!src->n) return TR_OK;
    dst->e = tr_malloc((size_t)src->n * sizeof *dst->e);
    if (!dst->e) return TR_ERR_NOMEM;
    memcpy(dst->e, src->e, (size_t)src->n * sizeof *dst->e);
    for (int i = 0; i < src->n; i++) {
        tr_tensor *t = &dst->e[i].t;
        t->data = data ? data + dst->e[i].offset : NULL;
        t->grad = grad ? grad + dst->e[i].offset : NULL;
        t->device = device;
        t->uses = 0;
    }
    return TR_OK;
}

tr_status tr_params_clone_view(const tr_params *P, float *data, float *grad, float *buffers, tr_device device,
                               tr_params **out) {
    *out = NULL;
    if (!P->finalized) return tr_error_set(TR_ERR_INVALID, "params: a view of a registry not finalized");
    tr_params *c = tr_calloc(1, sizeof *c);
    if (!c) return TR_ERR_NOMEM;
    c->align = P->align;
    c->finalized = 1;
    tr_status st = clone_table(&c->p, &P->p, data, grad, device);
    if (st == TR_OK) st = clone_table(&c->b, &P->b, buffers, NULL, device);
    if (st != TR_OK) {
        tr_params_destroy(c);
        return tr_error_set(TR_ERR_NOMEM, "params: out of memory for a view of %d tensors", P->p.n + P->b.n);
    }
    *out = c;
    return TR_OK;
}

/* The flat parameter (grad 0) or gradient (grad 1) buffer moves to buf, the caller's. */
static tr_status adopt_buffer(tr_params *P, float *buf, int grad) {
    table *t = &P->p;
    const char *what = grad ? "gradient" : "parameter";
    if (!P->finalized || t->borrowed || t->on_device || !buf)
        return tr_error_set(TR_ERR_INVALID, "params: a new %s buffer needs a finalized host registry of its own", what);
    if ((uintptr_t)buf % TR_ALIGN)
        return tr_error_set(TR_ERR_INVALID, "params: a %s buffer must be %d-byte aligned", what, TR_ALIGN);
    float **cur = grad ? &t->grad : &t->data;
    int *borrowed = grad ? &t->grad_borrowed : &t->data_borrowed;
    if (buf == *cur) return TR_OK;
    size_t bytes = (t->numel ? t->numel : 1) * sizeof(float);
    memcpy(buf, *cur, bytes);
    if (!*borrowed) tr_pages_free(*cur, bytes);
    *cur = buf;
    *borrowed = 1;
    for (int i = 0; i < t->n; i++) {
        if (grad) t->e[i].t.grad = buf + t->e[i].offset;
        else t->e[i].t.data = buf + t->e[i].offset;
    }
    return TR_OK;
}

tr_status tr_params_set_grad_buffer(tr_params *P, float *grad) { return adopt_buffer(P, grad, 1); }
tr_status tr_params_set_data_buffer(tr_params *P, float *data) { return adopt_buffer(P, data, 0); }

int tr_params_count(const tr_params *P) { return P->p.n; }
int tr_params_buffer_count(const tr_params *P) { return P->b.n; }
tr_tensor *tr_params_get(tr_params *P, int i) { return i >= 0 && i < P->p.n ? &P->p.e[i].t : NULL; }
tr_tensor *tr_params_buffer(tr_params *P, int i) { return i >= 0 && i < P->b.n ? &P->b.e[i].t : NULL; }
const char *tr_params_name(const tr_params *P, int i) { return i >= 0 && i < P->p.n ? P->p.e[i].name : NULL; }
const char *tr_params_buffer_name(const tr_params *P, int i) { return i >= 0 && i < P->b.n ? P->b.e[i].name : NULL; }
int tr_params_find(const tr_params *P, const char *name) { return find(&P->p, name); }
int tr_params_find_buffer(const tr_params *P, const char *name) { return find(&P->b, name); }
size_t tr_params_offset(const tr_params *P, int i) { return P->p.e[i].offset; }
float *tr_params_data(tr_params *P) { return P->p.data; }
float *tr_params_grad(tr_params *P) { return P->p.grad; }
size_t tr_params_numel(const tr_params *P) { return P->p.numel; }
float *tr_params_buffers_data(tr_params *P) { return P->b.data; }
size_t tr_params_buffers_numel(const tr_params *P) { return P->b.numel; }

size_t tr_params_trainable(const tr_params *P) {
    size_t n = 0;
    for (int i = 0; i < P->p.n; i++) n += (size_t)tr_tensor_numel(&P->p.e[i].t);
    return n;
}

void tr_params_zero_grad(tr_params *P) {
    if (P->p.grad && !P->p.on_device) memset(P->p.grad, 0, P->p.numel * sizeof(float));
}

void tr_params_mark_nonfinite(const tr_params *P, const float *values, size_t lo, size_t hi, double *flags) {
    for (int k = 0; k < P->p.n; k++) {
        const entry *e = &P->p.e[k];
        size_t a = e->offset, b = e->offset + (size_t)tr_tensor_numel(&e->t);
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        for (size_t i = a; i < b; i++)
            if (!isfinite(values[i - lo])) {
                flags[k] = 1;
                break;
            }
    }
}

void tr_params_find_nonfinite(const tr_params *P, double *flags) {
    if (P->p.data) tr_params_mark_nonfinite(P, P->p.data, 0, P->p.numel, flags);
    if (P->p.grad) tr_params_mark_nonfinite(P, P->p.grad, 0, P->p.numel, flags + P->p.n);
}
