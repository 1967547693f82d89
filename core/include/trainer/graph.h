/* The graph: an arena for one step's activations and a tape of the ops that made them.
 *
 *   tr_graph *g;
 *   TR_CHECK(tr_graph_create(&g, 64 << 20));
 *   for (step ...) {
 *       tr_graph_reset(g);                                   // new step: arena + tape empty
 *       tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, 784});
 *       memcpy(x->data, batch, ...);
 *       tr_tensor *h = tr_relu(g, tr_linear(g, x, w1, b1));
 *       tr_tensor *loss = tr_cross_entropy(g, tr_linear(g, h, w2, b2), y, B, -1, 0.0f);
 *       TR_CHECK(tr_backward(g, loss, NULL));                // grads added into w1->grad ...
 *   }
 *
 * Ops run eagerly and, when an input requires a gradient and grad mode is on, record a tape
 * node. Errors are sticky: an op given NULL or bad input returns NULL and records the
 * status; later ops pass NULL through; tr_graph_status() and tr_backward() report the first
 * error with its message. tr_backward runs the tape in reverse, adds gradients into `grad`
 * buffers (parameters' grads point into the flat gradient buffer) and calls the gradient-ready
 * hook for a parameter as soon as its last use has been differentiated. */
#ifndef TRAINER_GRAPH_H
#define TRAINER_GRAPH_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/memory.h"
#include "trainer/status.h"
#include "trainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_graph tr_graph;
struct tr_params;

/* Called from tr_backward when the gradient of parameter `param` is final for this step. */
typedef void (*tr_grad_ready_fn)(void *user, int param);
/* Called before an op reads parameter `param`'s data: in forward when the op checks its
 * inputs, in backward (in_backward 1) before a node that has the parameter as an input is
 * differentiated, and before an op of a checkpointed block reads it when backward runs the
 * block again (tr_graph_block). `op` numbers the ops: calls with the same number are one op's inputs, all
 * needed at once. A sharded strategy gathers the parameter's shard there (ZeRO-3), and may
 * point the parameter tensor's data (and, in backward, grad) at another buffer: reshape
 * views of it follow. An error fails the op (the graph's sticky error). */
typedef tr_status (*tr_param_use_fn)(void *user, int param, int in_backward, uint64_t op);
/* Sums n doubles over every replica/rank in place (sync batch-norm); an error fails the op. */
typedef tr_status (*tr_stat_reducer_fn)(void *user, double *values, int n);

TR_API tr_status tr_graph_create(tr_graph **out, size_t arena_bytes);
TR_API void tr_graph_destroy(tr_graph *g);
/* Starts a new step: frees every activation and tape node, clears the error. */
TR_API void tr_graph_reset(tr_graph *g);
/* The graph's host arena (tensor headers, tape nodes; on the CPU also the activations). */
TR_API tr_arena *tr_graph_arena(tr_graph *g);
/* The peak bytes of the arena activations live in (a device's on a device graph), with the
 * graph's two input buffers where it has them (tr_graph_input_from), and with the scratch
 * memory of checkpointed blocks (tr_graph_block) where it held more together with it. */
TR_API size_t tr_graph_activation_peak(const tr_graph *g);

/* Training mode (dropout active, batch-norm uses batch statistics). Default on. */
TR_API void tr_graph_set_training(tr_graph *g, int training);
TR_API int tr_graph_training(const tr_graph *g);
/* Grad mode: when off, no tape is recorded (inference). Default on. */
TR_API void tr_graph_set_grad_enabled(tr_graph *g, int enabled);
TR_API int tr_graph_grad_enabled(const tr_graph *g);

/* Dropout randomness: element e of sample s draws index (sample_base + s) * per_sample + e of
 * stream tr_rng_stream(DROPOUT, step, call), so it does not depend on how a global batch is
 * split. `sample_base` is the global index of this batch's first sample. */
TR_API void tr_graph_set_rng(tr_graph *g, uint64_t seed, uint64_t step, uint64_t sample_base);
/* ABI 0.11: the ops' dim 0 holds `rows` rows per sample (a pair model encodes sample s's two
 * texts as rows 2s and 2s + 1), until the next tr_graph_set_rng or tr_graph_reset (then 1):
 * dropout draws row r of the batch as row sample_base * rows + r of the global batch, so the
 * masks still do not depend on how a global batch is split. rows >= 1. */
TR_API void tr_graph_set_rows_per_sample(tr_graph *g, uint64_t rows);

/* The parameters this graph's ops may use; tr_backward then also signals parameters that
 * the step never used (their gradient is final as it is). Borrowed. The graph keeps use
 * counts in parameter tensors until the next reset: reset (or destroy) the graph before
 * destroying parameters it has used. */
TR_API void tr_graph_set_params(tr_graph *g, struct tr_params *params);
/* Runs the graph on a device (trainer/accel.h; borrowed, must outlive the graph), set once
 * before any op: activations, gradients and scratch live in its memory, every op runs its
 * kernels (f32 only; an op the device has no kernel for fails naming both), inputs come from
 * tr_graph_input filled with tr_accel_upload (tr_graph_view of host memory is refused), and
 * the tensors ops take must be in the device's memory (device.kind TR_DEVICE_GPU). */
struct tr_accel;
TR_API tr_status tr_graph_set_accel(tr_graph *g, struct tr_accel *a);
TR_API struct tr_accel *tr_graph_accel(const tr_graph *g);
TR_API void tr_graph_set_grad_hook(tr_graph *g, tr_grad_ready_fn fn, void *user);
/* The next tr_backward writes the parameters' gradients instead of adding to them: the same
 * result as zero-filling the gradient buffer first (tr_params_zero_grad), without that pass
 * over it. The first op to produce a parameter's gradient writes it (a GEMM with beta 0); a
 * parameter that gets none is zero-filled before its ready hook runs. Call it after the
 * forward (tr_graph_reset clears it) and before tr_backward of a step's first micro-batch;
 * needs tr_graph_set_params. A strategy whose use hook moves gradients keeps zero_grad. */
TR_API tr_status tr_graph_write_param_grads(tr_graph *g);
/* NULL (the default): no hook. */
TR_API void tr_graph_set_use_hook(tr_graph *g, tr_param_use_fn fn, void *user);
/* With a reducer, training-mode batch-norm uses statistics over all replicas (SyncBatchNorm):
 * per-channel sums are reduced in forward and backward. Every replica must then run the same
 * batch-norm layers in the same order. NULL (the default): per-replica statistics. */
TR_API void tr_graph_set_stat_reducer(tr_graph *g, tr_stat_reducer_fn fn, void *user);

/* ABI 0.18: activation checkpointing. A model runs each of its blocks (a transformer layer, a
 * conv stage) through tr_graph_block; the graph's policy decides which blocks keep their
 * activations:
 *
 *   static tr_tensor *layer(tr_graph *g, tr_tensor *const *in, int n_in, const void *user) {
 *       const layer_args *a = user;                     // a copy the graph keeps
 *       return tr_add(g, in[0], tr_gelu(g, tr_linear(g, in[0], a->w, a->b), TR_GELU_TANH));
 *   }
 *   x = tr_graph_block(g, layer, (tr_tensor *[]){x}, 1, &(layer_args){w, b}, sizeof(layer_args));
 *
 * A checkpointed block's ops run and are recorded as usual, but in scratch memory given back
 * when fn returns: its output is copied into the step's memory and the tape keeps one node
 * holding the inputs. Backward runs fn again on the same inputs (same dropout masks, batch-norm
 * without a second running-statistics update, the use hook asked again with in_backward 1),
 * differentiates that copy in scratch memory and gives it back: the gradients are the bits
 * they are without checkpointing (on the CPU), and each parameter's ready hook still fires
 * once, after its last use. A block that is not checkpointed is fn called directly.
 * fn: a pure function of its inputs, the parameters and buffers it reads (it may run twice);
 * it returns a tensor it made (not an input, nor a view of one), or NULL after an op failed;
 * no pointer to its tensors may outlive the call, and it makes no graph inputs. in[0..n_in):
 * activations of this step (not parameters; ones without a gradient, a mask, are fine), kept
 * by the graph until the reset. user: user_bytes > 0 copies it into the graph's memory (fn
 * gets the copy, then and in backward); 0 passes the pointer, which must then stay valid until
 * the step's backward. Returns fn's output, or NULL with the graph's error set. */
typedef tr_tensor *(*tr_block_fn)(tr_graph *g, tr_tensor *const *in, int n_in, const void *user);
TR_API tr_tensor *tr_graph_block(tr_graph *g, tr_block_fn fn, tr_tensor *const *in, int n_in, const void *user,
                                 size_t user_bytes);
/* ABI 0.18. Which blocks are checkpointed: every 0 none (the default); N >= 1 the blocks
 * 0, N, 2N, ... of each step, counted in the order tr_graph_block is called since the reset
 * (1: every block). With grad mode off such a block runs in the scratch memory too, keeping
 * only its output (nothing to run again); a block inside a checkpointed one runs as plain ops.
 * The trainer sets it from trainer.activation_checkpointing. */
TR_API void tr_graph_set_checkpointing(tr_graph *g, int every);
TR_API int tr_graph_checkpointing(const tr_graph *g);

/* A tensor in the arena with uninitialised data and no gradient (a batch, targets). */
TR_API tr_tensor *tr_graph_input(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape);
/* A tensor holding host `data` (no gradient): on the CPU a view of it (tr_graph_view), on a
 * device an upload of it into the graph's memory. There the graph keeps `data` as the
 * tensor's host copy (for the first TR_GRAPH_HOST_COPIES inputs of a step): ops that check
 * values on the host (cross-entropy's targets, embedding's ids) read them there instead of
 * waiting for a download. Where the device uploads beside its compute stream
 * (tr_accel_can_upload_after), the inputs go to two buffers of the graph's own, taken in turn
 * step by step, and the copy waits only for the work of the step before last (a mark recorded
 * at each reset), so it overlaps what the previous step queued after its last op (the
 * update). Either way `data` must stay valid and unchanged until the next reset, no op may
 * write the tensor, and no work may read it after the next reset. A batch's inputs and
 * targets. */
#define TR_GRAPH_HOST_COPIES 8
TR_API tr_tensor *tr_graph_input_from(tr_graph *g, void *data, tr_dtype dtype, int ndim, const int64_t *shape);
/* ABI 0.13. t's values in host memory when they are there without a wait: a host tensor's own
 * data, a device tensor's host copy that tr_graph_input_from keeps (a batch's inputs); else
 * NULL. A model derives host-side inputs from a batch's token ids with it (hf_encoder's token
 * types and positions) and passes them in with tr_graph_input_from, on the CPU as on a device.
 * Valid until the next reset; never write through it. */
TR_API const void *tr_graph_host_values(const tr_graph *g, const tr_tensor *t);
/* A tensor in the arena viewing borrowed `data` (no copy, no gradient): e.g. a loader's batch
 * buffer, which must stay valid and unchanged until the next reset. */
TR_API tr_tensor *tr_graph_view(tr_graph *g, void *data, tr_dtype dtype, int ndim, const int64_t *shape);
/* A leaf that requires a gradient: data uninitialised, grad zero-filled. */
TR_API tr_tensor *tr_graph_leaf(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape);

/* The first error recorded since the last reset (TR_OK if none); message in tr_error_msg(). */
TR_API tr_status tr_graph_status(const tr_graph *g);

/* Differentiates the tape. `dout` (same dtype and size as out, borrowed) is the gradient of
 * `out`; NULL means ones (the usual case of a scalar loss). */
TR_API tr_status tr_backward(tr_graph *g, tr_tensor *out, const void *dout);

/* Number of tape nodes recorded since the last reset. */
TR_API size_t tr_graph_nodes(const tr_graph *g);
/* The oldest recorded op whose output holds a NaN or an infinity, read from the tape of the
 * last forward (valid until the next reset, backward leaves it): writes "the output of op 7
 * of 12 (linear), shape (32, 10)" and returns 1, or returns 0. For diagnostics: it scans
 * every recorded activation. */
TR_API int tr_graph_first_nonfinite(const tr_graph *g, char *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif
