/* Tokenized text tables for the dataset plugins (csv, text): a CSV/TSV (RFC 4180 quoting),
 * JSON Lines or tab-separated line file read into rows of (text, pair, label), encoded once
 * with a Hugging Face tokenizer.json (<trainer/tokenizer.h>) into compact ids.
 *
 *   tt_config c;                                   // from the plugin's options
 *   tt_config_read(&c, opts, env);
 *   c.text_col = "text"; c.label_col = "label";    // the plugin's columns
 *   tt_data d = {0};
 *   TR_CHECK(tt_load(&d, &c, path, class_path, whole, env));
 *   tt_sample(&d, i, x, y);                        // x: (seqs, max_length) i32, -1 padding
 *   tt_free(&d);
 *
 * Compiled into each plugin that uses it (a static source, no exported symbol). Samples keep
 * only their tokens (a flat id array with offsets): padding is written by tt_sample. The
 * contract with models: a token id -1 is padding, always at the end of a sequence. */
#ifndef TRAINER_TOKEN_TABLE_H
#define TRAINER_TOKEN_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/model.h"
#include "trainer/plugin.h"
#include "trainer/tokenizer.h"

/* The option specs each plugin appends to its own (tt_config_read reads them). */
#define TT_OPTION_SPECS                                                                                          \
    {.key = "tokenizer", .type = TR_OPTION_PATH, .default_value = "",                                            \
     .doc = "a Hugging Face tokenizer.json, or a model folder holding one: texts become its token ids "          \
            "(x: (max_length) i32, -1 padding); empty: byte-level"},                                             \
    {.key = "max_length", .type = TR_OPTION_INT, .default_value = "0", .min = 0, .max = 1 << 20,                \
     .doc = "tokenizer: tokens per sample, special tokens included; 0 = the file's truncation "                  \
            "max_length, else 512"},                                                                             \
    {.key = "padding", .type = TR_OPTION_CHOICE, .default_value = "longest", .choices = "longest|max_length",  \
     .doc = "tokenizer: longest: each batch as long as its longest sample (DataCollatorWithPadding); "           \
            "max_length: every batch max_length long"},                                                         \
    {.key = "truncation", .type = TR_OPTION_CHOICE, .default_value = "true",                                     \
     .choices = "true|false|longest_first|only_first|only_second",                                               \
     .doc = "tokenizer: cut texts longer than max_length (true: the file's strategy, else longest_first); "      \
            "false: refuse them"},                                                                               \
    {.key = "text_column", .type = TR_OPTION_STRING, .default_value = "text",                                    \
     .doc = "tokenizer: the column (JSON key) of the text"},                                                     \
    {.key = "text_pair_column", .type = TR_OPTION_STRING, .default_value = "",                                  \
     .doc = "tokenizer: a second text column, encoded with the text as a pair ([CLS] a [SEP] b [SEP])"},        \
    {.key = "format", .type = TR_OPTION_CHOICE, .default_value = "auto", .choices = "auto|csv|tsv|jsonl",       \
     .doc = "tokenizer: the file's layout; auto: by extension (.jsonl/.json JSON Lines, .tsv/.tab TSV, "        \
            ".csv CSV; else the plugin's own)"},                                                                 \
    {.key = "label_column", .type = TR_OPTION_STRING, .default_value = "label",                                  \
     .doc = "tokenizer: the column (JSON key) of the label: a class name or integer id, or a number "            \
            "for regression"}

typedef struct tt_config {
    char tokenizer[4096];    /* resolved path; "" without a tokenizer */
    const char *tokenizer_given; /* as the config wrote it (messages) */
    int64_t max_length;      /* 0: the file's, else 512 */
    int pad_longest;
    const char *truncation;  /* true, false, longest_first, only_first, only_second */
    const char *text_col, *pair_col, *label_col; /* pair_col "" or NULL: none */
    int two_texts;           /* text and pair encoded apart: x (2, max_length) (bi-encoder pairs) */
    int regress;             /* labels are float targets */
    const char *classes;     /* "" (inferred), a count "N" or a list "[a, b]" */
    const char *plugin;      /* "csv" or "text", for messages */
    /* file layout */
    int header;              /* CSV/TSV: the first record names the columns */
    char delimiter;          /* 0: by the file's extension (.tsv/.tab: tab, else ','); 'j': JSON Lines */
    char format;             /* the format option: 0 auto, 'c' CSV, 't' TSV, 'j' JSON Lines (over delimiter) */
    int lines;               /* the text plugin's own layout: tab-separated, no header, no quoting, the
                              * last column takes the rest of the line; its columns are `names` */
    const char *const *names;
    int n_names;
} tt_config;

/* One split's samples. */
typedef struct tt_data {
    int64_t n;               /* samples */
    int seqs;                /* sequences per sample: 1, or 2 with two_texts */
    int64_t max_length;
    int64_t vocab;
    int pad_longest;
    int32_t *ids;            /* every sequence's tokens, one after another */
    int64_t *off;            /* (n * seqs + 1) where each sequence starts in ids */
    int32_t *yi;             /* (n) class ids (classify) */
    float *yf;               /* (n) targets (regress) */
    int64_t n_classes;
    char **class_names;      /* (n_classes) or NULL: the integer labels are the ids */
    char *class_buf;
    int unlabelled;          /* a validation file without labels, for predict (yi, yf NULL) */
} tt_data;

/* Fills c from the TT_OPTION_SPECS options of o (o's strings are borrowed: valid during
 * create). The plugin then sets its columns, classes and layout. */
void tt_config_read(tt_config *c, const tr_options *o, const char *base_dir);

/* Reads `path` and keeps its rows [lo, hi): all of them when `whole`, else the train split
 * (all but the last val_fraction) or the validation split (that last share, maybe none), as
 * env->split says. Inferred class names come from `class_path`'s labels (the train split's
 * file; NULL: path). A validation file read `whole` under env->labels_optional may have no
 * labels (d->unlabelled): a CSV/TSV without the label column, JSON Lines whose first object
 * has no label key (then none may), lines whose first one has one field fewer. Errors name
 * the file and line. */
tr_status tt_load(tt_data *d, const tt_config *c, const char *path, const char *class_path, int whole,
                  const tr_dataset_env *env);
/* The spec of d: x (seqs, max_length) or (max_length) i32 token ids. */
void tt_spec(const tt_data *d, int regress, tr_data_spec *out);
/* Sample i: x padded with -1, y (may be NULL; not written without labels). */
tr_status tt_sample(const tt_data *d, int64_t i, int32_t *x, void *y);
const char *tt_class_name(const tt_data *d, int64_t id);
void tt_free(tt_data *d);

#endif
