/* Private: batch-norm's statistics and backward sums, shared by batch_norm (batch_norm.c),
 * the fused batch-norm, max-pool and ReLU (batch_norm_pool.c) and the ops that note their
 * output's plane statistics (conv2d). */
#ifndef TR_OPS_BATCH_NORM_H
#define TR_OPS_BATCH_NORM_H

#include <stdint.h>

#include "trainer/graph.h"
#include "trainer/tensor.h"

/* The statistics one batch-norm forward normalises with. */
typedef struct bn_stats {
    void *mean, *invstd; /* (C), graph data */
    int64_t N, C, S;     /* x viewed as (N, C, S), S = H * W (1 for 2-D input) */
    int64_t M;           /* values per channel they cover: N * S, or the global count (sync) */
    int batch;           /* the batch's own statistics (they depend on x), not the running ones */
    int sync;            /* reduced over replicas (ddp's sync_batchnorm) */
} bn_stats;

/* Checks x (N, C) or (N, C, H, W) and the optional gamma, beta, running_mean, running_var
 * (C), and fills s's shape and which statistics apply (batch ones in training or without
 * running statistics, else the running ones; synchronised over replicas when the graph's
 * stat reducer says so). op names the caller in messages. 0 after recording the error. */
int bn_check(tr_graph *g, const char *op, tr_tensor *x, tr_tensor *gamma, tr_tensor *beta,
             tr_tensor *running_mean, tr_tensor *running_var, double momentum, double eps,
             bn_stats *s);

/* After bn_check and the caller's allocations (so that a failed step leaves the running
 * statistics alone): s->mean and s->invstd = 1/sqrt(var + eps), and in training the running
 * statistics updated. 0 after recording the error. */
int bn_compute(tr_graph *g, tr_tensor *x, tr_tensor *running_mean, tr_tensor *running_var,
               double momentum, double eps, bn_stats *s);

/* n doubles at p (graph data memory) added over the replicas (sync_batchnorm), and with M the
 * count *M as one more value; on a device through host (n + 1 doubles of host memory; NULL
 * on the CPU). 0 after recording the error. */
int bn_reduce(tr_graph *g, double *p, double *host, int64_t n, int64_t *M);

/* ps[0] = the sum of plane x's S values, ps[1] = their squared deviations from its mean
 * rounded to the element type (the plane statistics of op_note_plane_stats): an op that has
 * just written a plane takes them from cache. */
void bn_plane_stats_f32(double *ps, const float *x, int64_t S);
void bn_plane_stats_f64(double *ps, const double *x, int64_t S);

/* *sdy += sum(dy), *sdyx += sum(dy * (x - m) * is) over n values: blocks of BN_BLOCK summed
 * in the element type, added into doubles (the order both ops use, so they agree bit for
 * bit). */
void bn_dsums_f32(double *sdy, double *sdyx, const float *dy, const float *x, int64_t n, float m,
                  float is);
void bn_dsums_f64(double *sdy, double *sdyx, const double *dy, const double *x, int64_t n,
                  double m, double is);

#endif
