/* Private: what ops note for the code that runs the step, beside the gradients they write:
 * each parameter gradient's sum of squares as the op that wrote it summed it, weight
 * gradients deferred to the optimizer, and a convolution's output plane statistics for the
 * batch-norm after it (docs/architecture.md, "Kernels and dtypes").
 *
 * Each replica (run/replica.c) owns a tr_fusion and lends it to its graph
 * (tr_graph_set_fusion_); the step's runner (run/solo.c) turns its notes on. Ops reach it
 * through the graph (op_note_grad_sumsq, op_defer_grad, op_note_plane_stats in
 * autograd/node.h). A graph lent none notes nothing, defers nothing and fuses no plane
 * statistics (a batch-norm reads them: the same values). */
#ifndef TRAINER_AUTOGRAD_FUSION_H
#define TRAINER_AUTOGRAD_FUSION_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/graph.h"
#include "trainer/params.h"

/* A deferred parameter gradient. A backward in which deferral is on (tr_fusion_defer_grads_)
 * may leave a parameter's gradient unwritten: the op that would write all of it (op_grad_write
 * gave *acc 0) and notes its sum of squares instead records how to compute any tile of it
 * from data that stays valid until the graph's next reset (a small-batch linear layer's
 * dW = dy^T x, 8 multiply-adds an element, which the optimizer recomputes a tile at a time
 * rather than storing 2.7 MB and reading it back). The buffer gets the values when another op
 * adds to that gradient (op_grad_write settles it first) or tr_fusion_settle_deferred_ is
 * called; tr_fusion_drop_deferred_ (the caller applied them through tr_optim_step_tiles or
 * _tn) and the graph's reset forget them. Whoever turns deferral on settles or applies every
 * deferred gradient before the next forward: a reset only drops them. */
typedef struct op_deferred {
    /* Called with the record itself as ctx: a tr_grad_tile_fn (trainer/optim.h), spelled out
     * so that autograd needs nothing of the optimizer's. */
    void (*tile)(const void *ctx, size_t r0, size_t r1, size_t c0, size_t c1, float *out);
    size_t rows, cols;      /* the gradient's shape (rows x cols, row-major) */
    const void *a, *b;      /* the op's operands and sizes, for tile */
    int64_t i[4];
    int tn;                 /* the gradient is a^T b, a (i[0] x rows), b (i[0] x cols): tr_optim_step_tn */
} op_deferred;

typedef struct tr_fusion tr_fusion;

tr_status tr_fusion_create_(tr_fusion **out);
/* After the graph it was lent to (whose reset and destroy drop its deferred gradients). */
void tr_fusion_destroy_(tr_fusion *f);
/* Lends f to g (borrowed; NULL takes it back): the notes of g's ops go to f from now on. */
void tr_graph_set_fusion_(tr_graph *g, tr_fusion *f);

/* Notes on (for the backwards whose gradient norm a hook reads: the cpu strategy's last
 * micro-batch) or off (the default: no op does the work), for the parameters of P (the
 * graph's set). Turning them on reserves the notes (an allocation the first time, outside
 * backward) and clears them. */
tr_status tr_fusion_note_grad_sumsq_(tr_fusion *f, const tr_params *P, int on);
/* The sum of squares of parameter p's gradient, as the op that last wrote it noted in this
 * backward: 1 and *sumsq set, or 0 (none noted, or another op added to it since). */
int tr_fusion_grad_sumsq_(const tr_fusion *f, int p, double *sumsq);
/* Deferral on for the backwards that follow (the cpu strategy's step of one micro-batch on
 * the host) or off (the default). Turning it on reserves the records (an allocation the
 * first time, outside backward). */
tr_status tr_fusion_defer_grads_(tr_fusion *f, const tr_params *P, int on);
/* Parameter p's deferred gradient, or NULL when its buffer holds it. */
const op_deferred *tr_fusion_deferred_(const tr_fusion *f, int p);
int tr_fusion_deferred_any_(const tr_fusion *f);
/* Writes every deferred gradient into its buffer (P's gradients). */
void tr_fusion_settle_deferred_(tr_fusion *f, tr_params *P);
void tr_fusion_drop_deferred_(tr_fusion *f);

/* For the graph (autograd/graph.c): whether notes are on for parameter p (0 <= p); notes
 * sumsq for p; whether deferral is on for p; records d for p with its sum; forgets p's sum
 * (another op fetches its gradient); writes p's deferred gradient, if any, into P's buffer;
 * clears every sum (a backward begins). */
int fusion_notes(const tr_fusion *f, int p);
void fusion_note(tr_fusion *f, int p, double sumsq);
int fusion_defers(const tr_fusion *f, int p);
void fusion_defer(tr_fusion *f, int p, const op_deferred *d, double sumsq);
void fusion_forget(tr_fusion *f, int p);
void fusion_settle(tr_fusion *f, tr_params *P, int p);
void fusion_clear_sums(tr_fusion *f);

/* For the graph (autograd/tape.c): notes ps, the plane statistics of t as it is now, taken by
 * the op numbered seq (the graph's op_seq); the statistics noted for t when t's data is
 * still where it was and the op asking is the next one (seq + 1), else NULL; forgets them
 * (a reset, a checkpointed block's edges: they are one op's, never across). */
void fusion_note_planes(tr_fusion *f, const tr_tensor *t, const double *ps, uint64_t seq);
const double *fusion_planes(const tr_fusion *f, const tr_tensor *t, uint64_t seq);
void fusion_forget_planes(tr_fusion *f);

#endif
