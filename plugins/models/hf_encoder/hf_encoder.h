/* The hf_encoder plugin's state, shared by its forward (hf_encoder.c) and its loader
 * (hf_load.c: config.json, the pooling files, the safetensors shards, parameter registration)
 * and its export (hf_export.c). Private to the plugin. */
#ifndef HF_ENCODER_H
#define HF_ENCODER_H

#include <stdint.h>

#include "trainer/graph.h"
#include "trainer/model.h"
#include "trainer/params.h"
#include "trainer/safetensors.h"

enum { HF_ACT_GELU, HF_ACT_GELU_TANH, HF_ACT_RELU };
enum { HF_POOL_CLS, HF_POOL_MEAN, HF_POOL_POOLER };
#define HF_MAX_SHARDS 256
/* The key config.json keeps the run's choices under (hf_config_keep). */
#define HF_KEPT_KEY "trainer_hf_encoder"

typedef struct hf_layer {
    int q_w, q_b, k_w, k_b, v_w, v_b, ao_w, ao_b, ao_ln_w, ao_ln_b;
    int in_w, in_b, out_w, out_b, out_ln_w, out_ln_b;
} hf_layer;

/* Where parameter i's values come from: a tensor of an open shard, or nothing (new). */
typedef struct hf_source {
    const tr_st_entry *e; /* NULL: initialised by its init rule */
    const tr_safetensors *f; /* the shard e is in */
} hf_source;

typedef struct hf_model {
    char dir[4096];      /* where config.json was read: the pretrained folder, or a checkpoint */
    const char *folder;  /* model.params.pretrained (borrowed from the options): the tokenizer's */
    int classify;
    int pairs;       /* task pairs: x (B, 2, T) scored pairs; single texts embed as task embed */
    int roberta;     /* model_type roberta or xlm-roberta: positions from pad_id + 1, RoBERTa's head */
    int32_t pad_id;  /* config.json's pad_token_id (RoBERTa's position offset) */
    int64_t V, H, S, n_layer_, F, type_vocab, num_labels;
    int n_layer, n_head;
    int act, pooling, normalize;
    double eps, hidden_dropout, attn_dropout, classifier_dropout, init_range; /* attn: on the probabilities */
    int32_t sep_id;  /* -1: none */
    int word_emb, pos_emb, type_emb, emb_ln_w, emb_ln_b;
    hf_layer *layer;
    int pool_w, pool_b;  /* -1 when the file has no pooler and nothing needs it */
    int cls_w, cls_b;    /* classify: classifier (BERT) or classifier.out_proj (RoBERTa) */
    int cls_dense_w, cls_dense_b; /* classify, RoBERTa: classifier.dense; -1 otherwise */
    tr_safetensors *files[HF_MAX_SHARDS];
    int n_files;
    hf_source *src;      /* (n_src) by parameter index */
    int n_src;           /* src's size */
    const char *dump_dir; /* TR_HF_ENCODER_DUMP: hidden states written here (debug) */
    char *config_text;    /* config.json as read (config_len bytes), kept with the checkpoints */
    size_t config_len;
    int config_has_sep;   /* config.json has a sep_token_id key (maybe null) */
    int sep_from_tokenizer; /* sep_id came from the folder's tokenizer.json */
    int restored;         /* a resumed run: no weights read, the checkpoint's replace the initial values */
    int from_checkpoint;  /* ... built from the config.json its checkpoint keeps (hf_config_keep) */
    int config_has_kept;  /* config.json has the kept choices' key */
    int kept_pooling, kept_normalize, kept_pooler; /* those choices; -1 when not kept */
} hf_model;

/* 1 when dir/name is a regular file. */
int hf_file_exists(const char *dir, const char *name);
tr_status hf_config_read(hf_model *m, const char *dir);
tr_status hf_pooling_read(hf_model *m, const char *pooling, const char *normalize);
/* config.json as every checkpoint keeps it (tr_params_add_file), so that a resumed run is
 * built from the checkpoint alone: the file's bytes, with the sep_token_id that the folder's
 * tokenizer gave written in (the token types must not change at a resume). */
tr_status hf_config_keep(const hf_model *m, tr_params *P);
tr_status hf_files_open(hf_model *m);
void hf_files_close(hf_model *m);
tr_status hf_register(hf_model *m, tr_params *P);
/* tr_model_ops.export_to: the model as a Hugging Face folder (hf_export.c). */
tr_status hf_export(void *ctx, tr_params *P, const tr_model_export *env);
/* Debug: with TR_HF_ENCODER_DUMP=DIR, a float32 tensor of the batch written to DIR/NAME.npy
 * (on the CPU): hidden_<i> after layer i (0: the embeddings), (B, T, H); logits (classify). */
void hf_dump(const hf_model *m, tr_graph *g, const char *name, const tr_tensor *x);

#endif
