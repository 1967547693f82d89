/* Checkpoints: weights and optimizer state as safetensors, trainer state as JSON, written so
 * that a crash never leaves a broken "latest" (docs/design.md "Checkpoints").
 *
 *   tr_train_state s = {.epoch = 2, .step = 120, .batch_in_epoch = 0, .seed = 1};
 *   TR_CHECK(tr_checkpoint_save("runs/q/0/checkpoints", "step-00000120", P, opt, &s));
 *   TR_CHECK(tr_checkpoint_prune("runs/q/0/checkpoints", 3));       // keep the newest 3
 *   char path[1024];
 *   if (tr_checkpoint_latest("runs/q/0/checkpoints", path, sizeof path) == TR_OK)
 *       TR_CHECK(tr_checkpoint_load(path, P, opt, &s));               // exact resume
 *
 * A checkpoint is a directory <dir>/<name>/ holding model.safetensors (parameters by name,
 * then buffers by name), optimizer.safetensors ("<state>" flat buffers, e.g. "exp_avg", plus
 * the step count in metadata), state.json and the files the model is rebuilt from
 * (tr_params_add_file: hf_encoder's config.json). It is written as <name>.tmp-<pid>/, each file
 * fsync'ed, then renamed into place, and the directory fsync'ed: a directory without the
 * .tmp suffix is always complete. `latest` is the newest complete checkpoint by its step. */
#ifndef TRAINER_CHECKPOINT_H
#define TRAINER_CHECKPOINT_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/optim.h"
#include "trainer/params.h"
#include "trainer/status.h"
#include "trainer/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_train_state {
    int64_t epoch;            /* epoch to run next (or the one in progress) */
    int64_t step;             /* optimizer steps taken */
    int64_t batch_in_epoch;   /* batches of `epoch` already consumed (resume mid-epoch) */
    uint64_t seed;
    char config_hash[65];     /* hex digest of the training-relevant config */
    char model[64];           /* model plugin name */
} tr_train_state;

/* opt may be NULL (weights only); otherwise it covers the whole flat buffer of P. */
TR_API tr_status tr_checkpoint_save(const char *dir, const char *name, tr_params *P, tr_optim *opt,
                             const tr_train_state *s);
/* Loads a full or a sharded checkpoint (any world size) into P (names and shapes must match
 * exactly: a mismatch names the tensor and both shapes), opt (may be NULL; it must cover P's
 * whole flat buffer) and s (may be NULL). Nothing is changed when the checkpoint is refused.
 * path may also be a weights file (a .safetensors of parameters and buffers by name, as
 * tr_checkpoint_consolidate writes): its weights only (opt must be NULL; s is zeroed). */
TR_API tr_status tr_checkpoint_load(const char *path, tr_params *P, tr_optim *opt, tr_train_state *s);

/* ---- sharded checkpoints (ZeRO): every rank writes the pieces of the parameters it holds ----
 *
 * A sharded checkpoint directory holds index.json (world size, files, every parameter's and
 * buffer's name and shape, optimizer state names and step count), state.json, the model's files and one
 * shard-RRRRR-of-WWWWW.safetensors per rank: 1-D tensors "<param>" and "<param>.<state>"
 * holding elements [start, start + count) of the flattened parameter (the starts in the
 * file's metadata "starts", a JSON object), and, in rank 0's file, every buffer whole. Any
 * world size and any strategy loads it; `trainer checkpoint consolidate` turns it into one
 * model.safetensors. The save, with a barrier (e.g. an all-reduce) where marked:
 *
 *   rank 0:  tr_checkpoint_begin(dir, name, tag, tmp)             tag: same on every rank
 *   barrier; every rank: tr_checkpoint_write_shard(tmp, rank, world, P, opt, pieces, n)
 *   barrier (agree that all succeeded); rank 0: tr_checkpoint_commit(dir, name, tmp, world, P, opt, s)
 *   (on a failure rank 0 calls tr_checkpoint_abandon(tmp)) */
/* (tr_ckpt_piece, what a strategy holds of a parameter, is <trainer/strategy.h>'s.) */

/* tmp receives the temporary directory's path (cap bytes). */
TR_API tr_status tr_checkpoint_begin(const char *dir, const char *name, long tag, char *tmp, size_t cap);
/* The same path, for the other ranks (creates nothing). */
TR_API tr_status tr_checkpoint_tmp_path(const char *dir, const char *name, long tag, char *tmp, size_t cap);
TR_API tr_status tr_checkpoint_write_shard(const char *tmp, int rank, int world, tr_params *P, tr_optim *opt,
                                    const tr_ckpt_piece *pieces, int n);
TR_API tr_status tr_checkpoint_commit(const char *dir, const char *name, const char *tmp, int world, tr_params *P,
                               tr_optim *opt, const tr_train_state *s);
TR_API void tr_checkpoint_abandon(const char *tmp);
/* Loads the pieces (data and, with opt, optimizer state and its step count), every buffer of
 * P and s (may be NULL) from a full or sharded checkpoint of any world size. Everything is
 * checked (names, shapes, optimizer kind, every piece covered) before anything is changed. */
TR_API tr_status tr_checkpoint_load_pieces(const char *path, tr_params *P, tr_optim *opt, const tr_ckpt_piece *pieces,
                                    int n, tr_train_state *s);
/* Writes the weights (parameters, then buffers) of the checkpoint at path, full or sharded
 * (or a weights file, copied), as one safetensors file out_file (atomically). */
TR_API tr_status tr_checkpoint_consolidate(const char *path, const char *out_file);
/* Only the train state of the checkpoint at path (its state.json). */
TR_API tr_status tr_checkpoint_read_state(const char *path, tr_train_state *s);
/* Path of the complete checkpoint with the highest step in dir; TR_ERR_NOT_FOUND if none. */
TR_API tr_status tr_checkpoint_latest(const char *dir, char *out, size_t size);
/* The checkpoint a user's path means: a checkpoint folder (it holds state.json), a weights
 * file (.safetensors), a pointer a run keeps in its checkpoints/ (`best`, `last`: the
 * checkpoint it points at; RUN/best means RUN/checkpoints/best), else the newest complete one
 * in a checkpoints/ folder or in a run folder's checkpoints/; TR_ERR_NOT_FOUND, saying what to
 * give, if none. */
TR_API tr_status tr_checkpoint_find(const char *path, char *out, size_t size);
/* Removes all but the newest keep_last complete checkpoints and any stale .tmp dirs. */
TR_API tr_status tr_checkpoint_prune(const char *dir, int keep_last);

#ifdef __cplusplus
}
#endif
#endif
