/* The parameter registry: named shapes in, one flat parameter buffer and one flat gradient
 * buffer out (docs/design.md "Flat buffers").
 *
 *   tr_params *P;
 *   TR_CHECK(tr_params_create(&P));
 *   int w, b, rm;
 *   TR_CHECK(tr_params_add(P, "fc.weight", 2, (int64_t[]){10, 784}, TR_INIT_KAIMING_UNIFORM, 0, &w));
 *   TR_CHECK(tr_params_add(P, "fc.bias", 1, (int64_t[]){10}, TR_INIT_FAN_IN_UNIFORM, 784, &b));
 *   TR_CHECK(tr_params_add_buffer(P, "bn.running_mean", 1, (int64_t[]){64}, TR_INIT_ZEROS, 0, &rm));
 *   TR_CHECK(tr_params_finalize(P, seed));                 // allocates and initialises
 *   tr_tensor *W = tr_params_get(P, w);                    // view: data and grad in the flat buffers
 *
 * Parameters are laid out in registration order, each starting on a 16-float boundary (or
 * tr_params_set_align's; the gaps are zero and stay zero), so a parameter's slice is contiguous and slices of the flat
 * buffer (DDP buckets, ZeRO shards) are plain ranges. Buffers (batch-norm running stats) are
 * registered separately: they get no gradient and are not optimised. Initialisation draws
 * from the counter-based RNG keyed by (seed, parameter index, element index), so it is the
 * same on every rank and in every build, and any piece of a parameter can be initialised
 * alone (tr_params_init_range). */
#ifndef TRAINER_PARAMS_H
#define TRAINER_PARAMS_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"
#include "trainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tr_init {
    TR_INIT_ZEROS = 0,
    TR_INIT_ONES = 1,
    TR_INIT_UNIFORM = 2,          /* U(-arg, arg) */
    TR_INIT_NORMAL = 3,           /* N(0, arg^2) */
    TR_INIT_KAIMING_UNIFORM = 4,  /* PyTorch's Linear/Conv weight default: U(-1/sqrt(fan_in), +) */
    TR_INIT_FAN_IN_UNIFORM = 5    /* PyTorch's Linear/Conv bias default: arg = fan_in */
} tr_init;

typedef struct tr_params tr_params;

TR_API tr_status tr_params_create(tr_params **out);
TR_API void tr_params_destroy(tr_params *P);

/* Registers a trainable parameter (before finalize); `name` is copied; *index receives its id. */
TR_API tr_status tr_params_add(tr_params *P, const char *name, int ndim, const int64_t *shape,
                        tr_init init, double init_arg, int *index);
/* ABI 0.10. Before finalize: parameter `index`'s initial values come from fill(ctx, index,
 * data, numel) instead of its init rule (a pretrained model's weights read from a file).
 * finalize calls it once, with the parameter's numel floats to write, on the thread that
 * finalizes; an error it returns stops finalize with its message. ctx is borrowed and must
 * live until finalize returns (after tr_params_finalize_deferred: until tr_params_init_done;
 * an init_range of part of the parameter calls it into scratch of numel floats). */
typedef tr_status (*tr_params_fill_fn)(void *ctx, int index, float *data, size_t numel);
TR_API tr_status tr_params_set_fill(tr_params *P, int index, tr_params_fill_fn fill, void *ctx);
/* ABI 0.15. The same for a source that can give any run of a parameter's elements, so that a
 * sharded strategy initialises only the pieces it owns (tr_params_finalize_deferred):
 * fill(ctx, index, data, start, count) writes elements [start, start + count) of parameter
 * `index` (row-major) into data[0, count), the same values whatever the run, and may be
 * called several times for one parameter. When P needs no more initial values (at the end of
 * tr_params_finalize, or at tr_params_init_done) each ctx is called once more with index -1
 * and data NULL: release what the fills read (a file's mapping). ctx is borrowed and must
 * live until then. Replaces a tr_params_set_fill of the same parameter (and the reverse). */
typedef tr_status (*tr_params_fill_range_fn)(void *ctx, int index, float *data, size_t start, size_t count);
TR_API tr_status tr_params_set_fill_range(tr_params *P, int index, tr_params_fill_range_fn fill, void *ctx);
/* ABI 0.12. A file the model is rebuilt from, kept with its weights: every checkpoint saved
 * from P holds `name` (a plain file name, e.g. "config.json") with these `size` bytes (copied;
 * the same name again replaces them). A model whose shapes come from a file (hf_encoder's
 * config.json) so never needs the original again: a resumed run builds it from the
 * checkpoint's copy (tr_params_restore). At most 16 files of 16 MiB. Views
 * (tr_params_clone_view) carry none. */
TR_API tr_status tr_params_add_file(tr_params *P, const char *name, const void *data, size_t size);
TR_API int tr_params_file_count(const tr_params *P);
/* File i's name (NULL when out of range), its bytes in *data and *size (borrowed from P). */
TR_API const char *tr_params_file(const tr_params *P, int i, const void **data, size_t *size);
/* ABI 0.12. The checkpoint folder a resumed run (and eval, predict, embed, generate or export
 * of a checkpoint folder) loads into P after finalize, set by the core before the model's
 * create (the path is copied; NULL: none, P keeps its initial values). A
 * model then needs no initial values (fills, files read for them): the checkpoint's replace
 * them; the files it added to P (tr_params_add_file) are in that folder. */
TR_API tr_status tr_params_set_restore(tr_params *P, const char *checkpoint);
TR_API const char *tr_params_restore(const tr_params *P);
/* Registers a non-trainable buffer; its tensor has param = -1 and no grad. */
TR_API tr_status tr_params_add_buffer(tr_params *P, const char *name, int ndim, const int64_t *shape,
                               tr_init init, double init_arg, int *index);
/* Before finalize: start every parameter on a multiple of `floats` (a positive multiple of
 * 16) instead of 16, e.g. 16 x world size so that any run of whole parameters splits into
 * world-size equal, 64-byte aligned shards. */
TR_API tr_status tr_params_set_align(tr_params *P, size_t floats);
TR_API size_t tr_params_align(const tr_params *P);
/* Allocates the flat buffers and initialises every parameter and buffer from `seed`. The
 * parameter and gradient buffers are page-backed (tr_pages_alloc). */
TR_API tr_status tr_params_finalize(tr_params *P, uint64_t seed);
/* ABI 0.15. Finalize in two parts, for an owner that keeps only some of the parameters (a
 * sharded strategy, docs/strategies.md "sharded"): finalize_deferred lays out and allocates
 * the flat buffers (their pages untouched, so not resident) and initialises the buffers (the
 * running statistics) but no parameter; init_range then writes the initial values of flat
 * elements [lo, hi) (alignment gaps 0) into out[0, hi - lo), which may be the flat buffer at
 * lo or memory of the caller's, computing only those elements (the counter RNG; a ranged
 * fill reads only their bytes), the same values tr_params_finalize gives; init_done says
 * that no more are wanted (the fills' release, above; init_range is refused after it).
 * tr_params_finalize is finalize_deferred, init_range of everything and init_done. */
TR_API tr_status tr_params_finalize_deferred(tr_params *P, uint64_t seed);
TR_API tr_status tr_params_init_range(tr_params *P, size_t lo, size_t hi, float *out);
TR_API void tr_params_init_done(tr_params *P);

/* A registry with P's names, shapes and layout whose tensors view borrowed flat buffers laid
 * out as P's: data and grad (tr_params_numel floats each; either may be NULL: the tensors'
 * pointers are then NULL until their owner points them somewhere, as a sharded strategy
 * does) and buffers (tr_params_buffers_numel floats), e.g. a device's memory (device.kind
 * TR_DEVICE_GPU: the tensors say so, the core never touches their bytes and
 * tr_params_zero_grad does nothing). The clone frees only itself. */
TR_API tr_status tr_params_clone_view(const tr_params *P, float *data, float *grad, float *buffers,
                               tr_device device, tr_params **out);

/* After finalize, on a host registry of its own: the flat gradient buffer becomes `grad`
 * (max(tr_params_numel, 1) floats, 64-byte aligned, owned by the caller and outliving P, e.g.
 * memory from tr_comm_alloc that a communicator all-reduces without staging copies). The
 * gradients are copied there and the old buffer is freed; views made before
 * (tr_params_clone_view) keep the old pointer. tr_pages_discard on it is the owner's
 * business (shared memory does not read back as zero). */
TR_API tr_status tr_params_set_grad_buffer(tr_params *P, float *grad);
/* The same for the flat parameter buffer (the values are copied there), e.g. so that an
 * all-gather of updated parameter slices runs in place in shared memory. */
TR_API tr_status tr_params_set_data_buffer(tr_params *P, float *data);

TR_API int tr_params_count(const tr_params *P);
TR_API int tr_params_buffer_count(const tr_params *P);
/* Views, owned by P. NULL for an index out of range. */
TR_API tr_tensor *tr_params_get(tr_params *P, int index);
TR_API tr_tensor *tr_params_buffer(tr_params *P, int index);
TR_API const char *tr_params_name(const tr_params *P, int index);
TR_API const char *tr_params_buffer_name(const tr_params *P, int index);
/* Index of the parameter called name, or -1. */
TR_API int tr_params_find(const tr_params *P, const char *name);
TR_API int tr_params_find_buffer(const tr_params *P, const char *name);
/* Element offset of a parameter in the flat buffers. */
TR_API size_t tr_params_offset(const tr_params *P, int index);

/* The flat buffers, owned by P; numel counts the alignment gaps. */
TR_API float *tr_params_data(tr_params *P);
TR_API float *tr_params_grad(tr_params *P);
TR_API size_t tr_params_numel(const tr_params *P);
/* Number of trainable scalars, gaps not counted. */
TR_API size_t tr_params_trainable(const tr_params *P);
TR_API float *tr_params_buffers_data(tr_params *P);
TR_API size_t tr_params_buffers_numel(const tr_params *P);

TR_API void tr_params_zero_grad(tr_params *P);
/* Sets flags[k] = 1 for every parameter k with a NaN or an infinity among the elements of
 * [lo, hi) of a buffer laid out like the flat parameter buffer, of which `values` holds just
 * that range (values[0] is element lo): the data or gradient buffer whole (lo 0, hi numel)
 * or a shard of either. flags has tr_params_count(P) entries; others are left alone. */
TR_API void tr_params_mark_nonfinite(const tr_params *P, const float *values, size_t lo, size_t hi, double *flags);
/* Both flat buffers whole, for a strategy holding whole replicas (its nonfinite()): flags[k]
 * for parameter k's values, flags[n + k] for its gradient, n = tr_params_count(P). */
TR_API void tr_params_find_nonfinite(const tr_params *P, double *flags);

#ifdef __cplusplus
}
#endif
#endif
