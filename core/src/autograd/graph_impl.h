/* Private to autograd: struct tr_graph and what its four files share: graph.c (the step
 * arena, settings, hooks, parameters' gradients), tape.c (recording ops and reverse-mode
 * differentiation), graph_device.c (a device's batch inputs and host copies) and block.c
 * (checkpointed blocks). */
#ifndef TRAINER_AUTOGRAD_GRAPH_IMPL_H
#define TRAINER_AUTOGRAD_GRAPH_IMPL_H

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

/* Activation checkpointing (block.c): while a checkpointed block runs, the graph's arena and
 * data point at the scratch ones and the step's wait in main_*. */
typedef struct ck_state {
    int every;                /* tr_graph_set_checkpointing: 0 off, N: blocks 0, N, 2N, ... */
    int blocks;               /* tr_graph_block calls since the reset */
    int active;               /* a checkpointed block is running (forward, or again in backward) */
    int recompute;            /* it runs again in backward: no use counts, no running statistics */
    tr_arena *arena, *data;   /* scratch: host; a device's (NULL on the CPU) */
    tr_arena *main_arena, *main_data;
    size_t peak;              /* most bytes the step's memory and the scratch held together */
    const void *kept;         /* the block whose first run the scratch still holds, or NULL */
} ck_state;

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
    host_copy host_copies[TR_GRAPH_HOST_COPIES]; /* tr_graph_input_from on a device */
    int n_host_copies;
    input_half in[2];         /* on a device that uploads beside its compute stream */
    int in_cur;               /* the half this step's inputs go to */
    size_t in_step, in_need;  /* input bytes this step; the most any step asked */
    const tr_tensor *root;    /* during tr_backward on a device: its output, and the value */
    double root_seed;         /* its one-element seed gradient has (root_known) */
    int root_known;
    ck_state ck;
};

/* The arena of the step's host memory (a block's scratch is not): what lives to the reset. */
static inline tr_arena *step_arena(const tr_graph *g) { return g->ck.active ? g->ck.main_arena : g->arena; }
/* Runs the backward of the tape's nodes from `from` (newest) down to `stop` (excluded). */
void tr_graph_run_tape_(tr_graph *g, tr_node *from, const tr_node *stop);
/* A new, empty arena in the graph's data memory (a device's, else the host's). */
tr_status tr_graph_data_arena_(tr_graph *g, tr_arena **out);
/* Scratch arenas given back (graph destroy). */
void tr_graph_block_free_(tr_graph *g);

/* A parameter used through a reshape view is a use of the parameter itself. */
static inline tr_tensor *use_target(tr_tensor *t) { return t && t->view_of ? t->view_of : t; }

/* Whether a parameter's gradient is still to be written (not added to) this backward, taking
 * that turn; and the end of its turn. */
int tr_graph_take_fresh_(tr_graph *g, tr_tensor *t);
void tr_graph_settle_fresh_(tr_graph *g, tr_tensor *t);
/* Whether t's data lies in the graph's own memory (its arenas or its device inputs). */
int tr_graph_in_memory_(const tr_graph *g, const tr_tensor *t);
/* A tensor header (no data) in the host arena. */
tr_tensor *tr_graph_new_header_(tr_graph *g, tr_dtype dtype, int ndim, const int64_t *shape);

#endif
