/* Private: what the checkpoint files (checkpoint.c: the folder protocol, full save,
 * state.json; checkpoint_dir.c: a checkpoints folder's latest, pointers, pruning;
 * checkpoint_load.c: loading and consolidation; checkpoint_shard.c: sharded save) share. */
#ifndef TRAINER_RUN_CHECKPOINT_IMPL_H
#define TRAINER_RUN_CHECKPOINT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "trainer/checkpoint.h"

#define PATH_CAP 1100
#define CKPT_NAME_CAP 160 /* a parameter name (127) + "." + a state name */
#define MODEL_FILE "model.safetensors"
#define OPTIM_FILE "optimizer.safetensors"
#define STATE_FILE "state.json"
#define INDEX_FILE "index.json"

tr_status ckpt_join(char *out, size_t cap, const char *a, const char *b);
void ckpt_fsync_path(const char *path);
/* Removes a file or a directory tree (symlinks are removed, never followed). */
tr_status ckpt_remove_tree(const char *path, int depth);
void ckpt_shape_str(char *out, size_t cap, int ndim, const int64_t *shape);
/* n bytes into path (created or truncated), fsync'ed; every failure names path. */
tr_status ckpt_write_bytes(const char *path, const void *data, size_t n);
/* The files the model is rebuilt from (tr_params_add_file) into dir. */
tr_status ckpt_write_files(const char *dir, const tr_params *P);
/* o as JSON text into path (created or truncated), fsync'ed; every failure names path. */
tr_status ckpt_write_json(json_t *o, const char *path, size_t flags);
struct run_classes;
/* state.json, with the run's classes (classes.h) when c is not NULL; loop (borrowed, may be
 * NULL) goes in as its "loop" object: the training loop's running figures
 * (run/loop_totals.h), which tr_train_state, a struct callers allocate (docs/abi.md), cannot
 * grow to hold. Readers of s ignore both. */
tr_status ckpt_write_state(const char *dir, const tr_train_state *s, const struct run_classes *c, json_t *loop);
tr_status ckpt_read_state(const char *path, tr_train_state *s);
/* The "loop" object of the state.json of the checkpoint at path (a new reference in *loop),
 * or *loop NULL when it has none (a checkpoint of an older trainer). */
tr_status ckpt_read_loop(const char *path, json_t **loop);
/* tr_checkpoint_save and tr_checkpoint_commit with the run's classes (c may be NULL) and the
 * loop's figures (loop may be NULL) in state.json: what `trainer run` saves. */
tr_status ckpt_save(const char *dir, const char *name, tr_params *P, tr_optim *opt, const tr_train_state *s,
                    const struct run_classes *c, json_t *loop);
tr_status ckpt_commit_shards(const char *dir, const char *name, const char *tmp, int world, tr_params *P, tr_optim *opt,
                             const tr_train_state *s, const struct run_classes *c, json_t *loop);
/* model.safetensors: parameters by name, then buffers by name. */
tr_status ckpt_write_model(const char *dir, tr_params *P);
tr_status ckpt_write_model_file(const char *path, tr_params *P);
/* Checks the name, refuses an existing <dir>/<name>, creates <dir>/<name>.tmp-<tag>. Both
 * paths are PATH_CAP bytes. */
tr_status ckpt_begin(const char *dir, const char *name, long tag, char *final_path, char *tmp_path);
/* Removes dir's "<name>.tmp-<pid>" folders whose writer is gone (a killed save); *removed
 * (may be NULL) counts them. A missing dir is not an error. */
tr_status ckpt_remove_stale(const char *dir, int *removed);
/* fsyncs tmp, renames it to final, fsyncs dir. */
tr_status ckpt_commit(const char *dir, const char *final_path, const char *tmp_path);
/* tr_checkpoint_prune, keeping also the n checkpoints named in keep (a monitored metric's top k:
 * ckpt_select.h) whatever their age. */
tr_status ckpt_prune(const char *dir, int keep_last, const char *const *keep, int n);
/* Points dir/link (`best`, `last`) at the checkpoint dir/target: a relative symbolic link, made
 * under a temporary name and renamed over the old one, so a reader sees the old or the new. */
tr_status ckpt_link(const char *dir, const char *link, const char *target);
/* Whether path is a regular file: a weights file (.safetensors, e.g. what
 * tr_checkpoint_consolidate writes) rather than a checkpoint folder. */
int ckpt_is_file(const char *path);
/* Removes tmp, keeps st's message (prefixed with the checkpoint's path); returns st. */
tr_status ckpt_abandon(const char *final_path, const char *tmp_path, tr_status st);

#endif
