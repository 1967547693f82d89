/* Private: the tape node and the helpers every op file uses to build one.
 *
 * An op file has: kernels written once in a `.inc` for real = float and double (generic.h),
 * a forward that checks its inputs, allocates its output with op_out, runs the kernel and,
 * when op_needs_grad, records a node with op_record; and a backward that reads the node,
 * fetches accumulation buffers with op_grad and adds (+=) the input gradients (or, with
 * op_grad_write, writes them when the buffer is new). */
#ifndef TRAINER_AUTOGRAD_NODE_H
#define TRAINER_AUTOGRAD_NODE_H

#include <stdarg.h>
#include <stdint.h>

#include "autograd/fusion.h"
#include "trainer/graph.h"
#include "trainer/kernels.h"

#define TR_NODE_MAX_IN 5

typedef struct tr_node tr_node;
typedef void (*tr_backward_fn)(tr_graph *g, tr_node *n);

struct tr_node {
    tr_node *prev;                  /* tape order, newest first */
    const char *name;               /* op name, for errors and profiles */
    tr_backward_fn backward;
    tr_tensor *out;
    tr_tensor *in[TR_NODE_MAX_IN];  /* inputs that may need a gradient; unused = NULL */
    tr_tensor **ins;                /* variable-length inputs (concat), n_ins of them */
    int n_ins;
    int64_t i[8];                   /* integer arguments */
    double f[4];                    /* real arguments */
    void *saved[4];                 /* arena data kept for backward (masks, statistics) */
    int always;                     /* backward runs even when out got no gradient (a
                                     * checkpointed block: its parameters' uses end there) */
};

/* Dispatch on a float dtype to the _f32 or _f64 kernel. */
#define TR_DISPATCH(dtype, fn, ...) \
    ((dtype) == TR_F64 ? fn##_f64(__VA_ARGS__) : fn##_f32(__VA_ARGS__))

/* The graph's device kernels (tr_graph_set_accel), NULL on the CPU. */
const tr_kernels *op_kernels(const tr_graph *g);
/* Runs kernel fn: the device's entry on a device graph (f32), else the CPU's _f32 or _f64. */
#define OP_RUN(g, dtype, fn, ...) \
    (op_kernels(g) ? op_kernels(g)->fn(__VA_ARGS__) : TR_DISPATCH(dtype, fn, __VA_ARGS__))
/* On a device graph: whether the device has every kernel the op needs (the entries named);
 * when not, records "op: device X has no kernel for this op" and is 0. 1 on the CPU. */
#define OP_DEVICE(g, op, ...) (!op_kernels(g) || op_device_has(g, op, OP_HAS_(g, __VA_ARGS__)))
#define OP_HAS_(g, ...)                                                                                  \
    OP_HAS_N_(__VA_ARGS__, OP_HAS_9_, OP_HAS_8_, OP_HAS_7_, OP_HAS_6_, OP_HAS_5_, OP_HAS_4_, OP_HAS_3_, OP_HAS_2_, \
              OP_HAS_1_, ~)(g, __VA_ARGS__)
#define OP_HAS_N_(_1, _2, _3, _4, _5, _6, _7, _8, _9, N, ...) N
#define OP_HAS_1_(g, a) (op_kernels(g)->a != NULL)
#define OP_HAS_2_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_1_(g, __VA_ARGS__))
#define OP_HAS_3_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_2_(g, __VA_ARGS__))
#define OP_HAS_4_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_3_(g, __VA_ARGS__))
#define OP_HAS_5_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_4_(g, __VA_ARGS__))
#define OP_HAS_6_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_5_(g, __VA_ARGS__))
#define OP_HAS_7_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_6_(g, __VA_ARGS__))
#define OP_HAS_8_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_7_(g, __VA_ARGS__))
#define OP_HAS_9_(g, a, ...) (OP_HAS_1_(g, a) && OP_HAS_8_(g, __VA_ARGS__))
int op_device_has(tr_graph *g, const char *op, int have);
/* Copies bytes of data memory (the device's on a device graph) to host dst; 0 after recording
 * a failed download. */
int op_read(tr_graph *g, void *dst, const void *src, size_t bytes);
/* The i32 indices t (what: "ids", "targets") of op on the host, to check: t->data on the CPU;
 * on a device the host's copy of an input (tr_graph_input_from), else a download into the
 * graph's host memory. NULL after recording the error: t in the other memory than the
 * graph's (naming the tensor beside it too, e.g. "table") or a failed download. */
const int32_t *op_host_indices(tr_graph *g, const char *op, const char *what, const tr_tensor *t,
                               const char *with_what, const tr_tensor *with);
/* Records that host memory [host, host + bytes), which lives until the graph's reset, holds
 * what data memory dev holds (an op's host-computed output it uploaded), so that
 * op_host_indices finds it without a download. Nothing on the CPU or when the graph's list
 * of copies is full. */
void op_note_host_copy(tr_graph *g, const void *dev, const void *host, size_t bytes);
/* The gradient of one-element t (f32 or f64) as a double: on a device, when t is what
 * tr_backward runs from, the seed it was given (no download); else read. 0 after recording a
 * failed download. */
int op_read_grad_scalar(tr_graph *g, const tr_tensor *t, double *v);
/* Copies bytes of host src into data memory; 0 after recording a failed upload. */
int op_write(tr_graph *g, void *dst, const void *src, size_t bytes);
/* Zero-fills data memory of the graph (a device's, or the host's). */
void op_zero(tr_graph *g, void *p, size_t bytes);
/* Copies bytes within data memory (disjoint ranges). */
void op_copy(tr_graph *g, void *dst, const void *src, size_t bytes);

/* Records the first error of the step and returns NULL. */
tr_tensor *op_fail(tr_graph *g, tr_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Checks an op's n float inputs (pass only present ones): returns 0, having recorded the
 * error, when one is NULL, an error is pending, or they are not all f32 or all f64. */
int op_check(tr_graph *g, const char *op, int n, ...);
/* Tells the graph's parameter-use hook that the op is about to read t (when t is a parameter
 * or a view of one); returns 0, having recorded the hook's error, when it fails. op_check
 * does this for every input it checks. */
int op_use(tr_graph *g, tr_tensor *t);
/* Starts an op for the use hook (op_check does): uses until the next op_begin are one op's. */
void op_begin(tr_graph *g);
/* A new arena tensor of the shape (data uninitialised, no grad). */
tr_tensor *op_out(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape);
/* Host arena memory that lives until the next reset (tensor headers, pointer lists); NULL
 * records out-of-memory. */
void *op_alloc(tr_graph *g, size_t bytes);
/* Memory kernels read and write (outputs, saved statistics, scratch): the device's on a
 * device graph, else as op_alloc. */
void *op_data(tr_graph *g, size_t bytes);
/* The scratch a device entry asked for (its *_work entry's bytes) from data memory: *work is
 * NULL when it asked for none. 0 after recording out of memory. */
int op_work(tr_graph *g, size_t bytes, void **work);
/* Whether the op must record a node: grad mode on and any of the n inputs requires grad. */
int op_needs_grad(tr_graph *g, int n, ...);
/* Appends a node for `out` (which becomes requires_grad) with inputs in[0..n). */
tr_node *op_record(tr_graph *g, const char *name, tr_backward_fn fn, tr_tensor *out, int n,
                   ...);
/* Attaches a variable-length input list (op_alloc'ed) to n, counting each use as op_record
 * does for in[]. */
void op_record_ins(tr_graph *g, tr_node *n, tr_tensor **ins, int n_ins);
/* The gradient buffer of t, zero-filled on first use; NULL when t needs no gradient. */
void *op_grad(tr_graph *g, tr_tensor *t);
/* As op_grad, for a kernel that sets every element of the buffer: on first use the buffer is
 * not zero-filled and *acc is 0 (the kernel writes, =); when it already holds a gradient *acc
 * is 1 (the kernel adds, +=). Saves a zero-fill pass per activation gradient. */
void *op_grad_write(tr_graph *g, tr_tensor *t, int *acc);
/* For an op that wrote parameter t's whole gradient (t a parameter, not a view of one) and
 * summed its squares on the way: records the sum for the gradient-ready hook
 * (tr_fusion_grad_sumsq_, autograd/fusion.h), valid until another op fetches that gradient.
 * Nothing for other tensors, nor for a sum that is not finite (the hook then sums the
 * gradient in double). */
void op_note_grad_sumsq(tr_graph *g, tr_tensor *t, double sumsq);
/* Whether op_note_grad_sumsq would record for t: the graph was lent a tr_fusion whose notes
 * are on and t is a parameter of the graph's set (an op that would do extra work for the sum
 * asks first). */
int op_wants_grad_sumsq(const tr_graph *g, const tr_tensor *t);
/* Per-plane statistics of an op's output t (N, C, ...), planes of S values in memory order:
 * ps[2p] the sum of plane p and ps[2p + 1] its squared deviations from c_p, the sum divided
 * by S and rounded to t's dtype (bn_plane_stats). The op that wrote t notes them when it had
 * the planes in cache (convolutions) and op_wants_plane_stats (training, and the graph was
 * lent a tr_fusion, which keeps the note); a batch-norm that reads t next (op_plane_stats)
 * takes its statistics from them instead of reading t twice. ps is graph data kept to the
 * reset. */
int op_wants_plane_stats(const tr_graph *g);
void op_note_plane_stats(tr_graph *g, const tr_tensor *t, const double *ps);
/* The statistics noted for t, when the op that wrote t noted them and is the last op begun
 * before the caller (so t is as it wrote it); else NULL. */
const double *op_plane_stats(const tr_graph *g, const tr_tensor *t);
/* Whether the op may defer parameter t's gradient (op_deferred, autograd/fusion.h): deferral
 * on, notes on for t, f32, host. */
int op_may_defer_grad(const tr_graph *g, const tr_tensor *t);
/* Records d for t (d->tile non-NULL) and notes its sum of squares (finite). */
void op_defer_grad(tr_graph *g, tr_tensor *t, const op_deferred *d, double sumsq);
/* Whether the op runs as a checkpointed block's recomputation in backward (tr_graph_block):
 * state kept across steps (batch-norm's running statistics) was updated by the forward. */
int op_recomputing(const tr_graph *g);
/* The graph's dropout randomness (tr_graph_set_rng) and a per-step call counter that gives
 * each random op of a step its own sub-stream. */
void tr_graph_rng_(tr_graph *g, uint64_t *seed, uint64_t *step, uint64_t *sample_base,
                   uint64_t *call);
/* Sums values over replicas with the graph's stat reducer: 1 done, 0 no reducer, -1 failed
 * (the graph's sticky error is set). */
int tr_graph_reduce_stats_(tr_graph *g, double *values, int n);
int tr_graph_syncs_stats_(const tr_graph *g);
/* Shape as text for messages, in a rotating thread-local buffer. */
const char *op_shape(const tr_tensor *t);

#endif
