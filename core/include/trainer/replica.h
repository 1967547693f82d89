/* A model replica: one instance of the model plugin with its own parameters, gradients and
 * graph — the unit a strategy places, copies and synchronises.
 *
 *   tr_replica *r;
 *   TR_CHECK(tr_replica_create(env->models, &r));          // same initial weights every time
 *   tr_model_out out;
 *   TR_CHECK(tr_replica_forward(r, hb, 0, hb->size, mb->normaliser, mb->step, 1, 1, &out));
 *   TR_CHECK(tr_backward(tr_replica_graph(r), out.loss, NULL)); // grads += into its params
 *   ...
 *   tr_replica_destroy(r);
 *
 * The trainer owns the factory (the model plugin, its resolved options, the dataset's spec
 * and the run seed); strategies call tr_replica_create once per replica at setup, never per
 * step. A replica's forward views its slice of the loader's host batch in place (no copy)
 * and keys dropout by (seed, step, global sample index), so a sample's mask does not depend
 * on which replica or rank computes it (docs/design.md "Strategy invariance"). */
#ifndef TRAINER_REPLICA_H
#define TRAINER_REPLICA_H

#include "trainer/export.h"

#include <stdint.h>

#include "trainer/data.h"
#include "trainer/graph.h"
#include "trainer/model.h"
#include "trainer/optim.h"
#include "trainer/params.h"
#include "trainer/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_model_factory tr_model_factory;
typedef struct tr_strategy_memory tr_strategy_memory;

/* Opaque (ABI 0.13): a strategy reaches a replica's parts through the accessors below. */
typedef struct tr_replica tr_replica;

/* model and opts are borrowed and must outlive the factory, which must outlive its replicas
 * (they use its copy of the model's ops table). A model table shorter than its first version,
 * or without create, destroy or forward, is refused naming the plugin. */
TR_API tr_status tr_model_factory_create(tr_model_factory **out, const tr_plugin *model,
                                  const tr_options *opts, const tr_data_spec *spec,
                                  uint64_t seed);
TR_API void tr_model_factory_destroy(tr_model_factory *f);
/* ABI 0.12. Replicas made from now on are for a run resumed from that checkpoint folder, or
 * for a command that loads it (eval, predict, embed, generate, export) (copied; NULL: none):
 * their registries say so (tr_params_restore) before the model's create, so that a model
 * built from files rebuilds itself from the checkpoint's. */
TR_API tr_status tr_model_factory_set_restore(tr_model_factory *f, const char *checkpoint);
TR_API const tr_data_spec *tr_model_factory_spec(const tr_model_factory *f);

/* A new replica with parameters initialised from the seed (identical for every replica). */
TR_API tr_status tr_replica_create(const tr_model_factory *f, tr_replica **out);
/* The same with every parameter starting on a multiple of `align` floats (0: the default;
 * see tr_params_set_align), as a sharded strategy needs. */
TR_API tr_status tr_replica_create_aligned(const tr_model_factory *f, size_t align, tr_replica **out);
/* A replica on a device: P is initialised on the host (identical to tr_replica_create's) and
 * uploaded; the graph, the parameters ops use (dP), gradients and buffers live on the device;
 * P stays as the host copy that checkpoints read (tr_replica_download refreshes it,
 * tr_replica_upload pushes it back). accel is borrowed and must outlive the replica. */
struct tr_accel;
TR_API tr_status tr_replica_create_on(const tr_model_factory *f, struct tr_accel *accel, tr_replica **out);
/* Which flat buffers tr_replica_create_on_aligned leaves off the device: a sharded strategy
 * keeps the parameters (stage 3) or gradients (stages 2-3) in buffers of its own and points
 * dP's tensors at them (NULL until it does; d_data or d_grad stays NULL). ABI 0.15:
 * TR_REPLICA_DEFER_INIT leaves the parameters uninitialised (tr_params_finalize_deferred on
 * the host P; on a device nothing of them uploaded): the strategy initialises the pieces it
 * keeps with tr_params_init_range, then calls tr_params_init_done, so that no rank ever
 * holds, reads or computes the whole model. */
enum { TR_REPLICA_NO_DEVICE_DATA = 1, TR_REPLICA_NO_DEVICE_GRAD = 2, TR_REPLICA_DEFER_INIT = 4 };
/* tr_replica_create_on with every parameter starting on a multiple of `align` floats (0: the
 * default) and without the buffers `flags` names. tr_replica_upload and _download then move
 * only what is on the device. accel NULL (ABI 0.15): a host replica, tr_replica_create_aligned's,
 * where only TR_REPLICA_DEFER_INIT applies. */
TR_API tr_status tr_replica_create_on_aligned(const tr_model_factory *f, struct tr_accel *accel, size_t align,
                                       unsigned flags, tr_replica **out);
/* For a forward's outputs that the host reads (validation, predict): on a device replica
 * copies out's loss, logits and embedding into host memory the replica owns (valid until the
 * next call) and points out at them; nothing for a CPU replica. */
TR_API tr_status tr_replica_outputs_to_host(tr_replica *r, tr_model_out *out);
/* Device -> host P (parameters and buffers), and back. No-ops for a CPU replica. */
TR_API tr_status tr_replica_download(tr_replica *r);
TR_API tr_status tr_replica_upload(tr_replica *r);
/* The parameters the replica's ops use: on a device, the layout over its device buffers,
 * else the host parameters. */
TR_API tr_params *tr_replica_params(tr_replica *r);
/* ABI 0.13, the replica's parts, all owned by it. Its host parameters, gradients and buffers
 * (on a device replica too: the host copy that tr_replica_download fills): */
TR_API tr_params *tr_replica_host_params(const tr_replica *r);
/* Its graph (the eager tape, reset by every forward): */
TR_API tr_graph *tr_replica_graph(const tr_replica *r);
/* On a device replica, its flat parameter, gradient and buffer memory on the device (NULL
 * for a CPU replica, and for a buffer tr_replica_create_on_aligned's flags left off): */
TR_API float *tr_replica_device_data(const tr_replica *r);
TR_API float *tr_replica_device_grad(const tr_replica *r);
TR_API float *tr_replica_device_buffers(const tr_replica *r);
TR_API void tr_replica_destroy(tr_replica *r);

/* Resets r's graph and records the forward of samples [offset, offset + count) of hb. train: the
 * training mode (dropout on, gradients recorded); otherwise eval mode without a tape. With
 * with_y the loss is computed, normalised by `normaliser`. out's tensors live until the next
 * forward on this replica; on a device they are in its memory. */
TR_API tr_status tr_replica_forward(tr_replica *r, const tr_host_batch *hb, int64_t offset,
                             int64_t count, double normaliser, int64_t step, int train,
                             int with_y, tr_model_out *out);

/* Adds r's parameters, gradients (the pages of their buffers in memory: measured, not the
 * buffers' sizes; on a device the buffers it holds) and activation peak, and opt's state when opt is not NULL (bytes), into m
 * (all_devices too). */
TR_API void tr_replica_memory(const tr_replica *r, const tr_optim *opt, tr_strategy_memory *m);

/* For a strategy's `nonfinite` op: marks which of r's parameters (flags[0, n)) and their
 * gradients (flags[n, 2n)) hold a NaN or infinity (tr_params_find_nonfinite), and names the
 * first non-finite activation of r's last forward in activation (tr_graph_first_nonfinite;
 * left as it is when there is none). */
TR_API void tr_replica_find_nonfinite(const tr_replica *r, double *flags, char *activation, size_t size);

/* Copies parameters and buffers from src (same model) into dst. */
TR_API void tr_replica_copy_params(tr_replica *dst, tr_replica *src);

#ifdef __cplusplus
}
#endif
#endif
