/* Private: which checkpoints a run keeps and names, as Lightning's ModelCheckpoint: the top k
 * by a monitored metric (checkpoint.monitor, mode, save_top_k), kept whatever keep_last says,
 * `checkpoints/best` pointing at the best of them and, with save_last, `checkpoints/last` at
 * the newest checkpoint. The top k travel in state.json (loop.selection), so a resumed run
 * goes on selecting among the same checkpoints. Every rank keeps the same state; rank 0 prunes
 * and points. */
#ifndef TRAINER_RUN_CKPT_SELECT_H
#define TRAINER_RUN_CKPT_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "run/monitor.h"

typedef struct ckpt_ranked {
    int64_t step;
    double score;
} ckpt_ranked;

typedef struct ckpt_select {
    monitor m;           /* metric MONITOR_OFF: no top k */
    int64_t k;           /* save_top_k; -1: every validation's checkpoint */
    int save_last;
    ckpt_ranked *top;    /* (n) best first; ties: the earlier step first. Owned */
    int64_t n, cap;
} ckpt_select;

/* The name of the checkpoint of step `step` ("step-00000040"). */
void select_name(char *out, size_t cap, int64_t step);
void select_init(ckpt_select *s, const monitor *m, int64_t k, int save_last);
void select_free(ckpt_select *s);
/* A validation's value at step: 1 when the step is (now) among the top k, its checkpoint
 * then due, else 0 (a value that is not finite never enters); -1 when out of memory. */
int select_offer(ckpt_select *s, int64_t step, double score);
/* Adds "selection" to the loop object of a checkpoint's state.json (nothing without a
 * monitor); 0 on success. */
int select_put(const ckpt_select *s, json_t *loop);
/* The top k from a checkpoint's loop object (loop and its "selection" may be NULL: none). A
 * monitor or mode other than the config's starts the top k afresh, and *note (cap bytes, ""
 * otherwise) says so. A malformed object is refused naming the file. */
tr_status select_restore(ckpt_select *s, json_t *loop, const char *path, char *note, size_t cap);
/* Rank 0, after a save and on a resume: prunes dir to its newest keep_last checkpoints and the
 * top k, points `best` at the best and, with save_last, `last` at step `newest`. */
tr_status select_after_save(const ckpt_select *s, const char *dir, int keep_last, int64_t newest);

#endif
