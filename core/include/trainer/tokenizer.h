/* Hugging Face tokenizers: a model's own tokenizer.json, giving the ids `tokenizers` gives.
 *
 *   tr_tokenizer *tok = NULL;
 *   if (tr_tokenizer_load(&tok, "models/all-MiniLM-L6-v2") != TR_OK)   // folder or file
 *       fprintf(stderr, "error: %s\n", tr_error_msg());
 *   tr_encoding enc;
 *   const char *q = "How are you?";
 *   TR_CHECK(tr_tokenizer_encode(tok, q, strlen(q), NULL, 0, 1, &enc));
 *   for (size_t i = 0; i < enc.len; i++) printf("%d ", enc.ids[i]);   // 101 2129 2024 ... 102
 *   tr_encoding_free(&enc);
 *   tr_tokenizer_free(tok);
 *
 * The pipeline is the file's: added tokens, normalizer, pre-tokenizer, model, post-processor,
 * decoder, and its truncation and padding (which the caller may change). Components this build
 * does not implement are refused at load by name (docs/tokenizers.md lists them). A tokenizer is
 * read-only once loaded: encode and decode may run from several threads at once; the setters
 * may not run beside them. Messages go to tr_error_msg(). */
#ifndef TRAINER_TOKENIZER_H
#define TRAINER_TOKENIZER_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_tokenizer tr_tokenizer;

typedef enum tr_truncation_strategy {
    TR_TRUNCATE_LONGEST_FIRST = 0, /* cut the longer of the two, token by token */
    TR_TRUNCATE_ONLY_FIRST = 1,
    TR_TRUNCATE_ONLY_SECOND = 2
} tr_truncation_strategy;

typedef enum tr_side { TR_SIDE_RIGHT = 0, TR_SIDE_LEFT = 1 } tr_side;

/* Truncation (Hugging Face's `truncation` object). max_length counts the special tokens the
 * post-processor adds. Only stride 0 is supported. */
typedef struct tr_truncation {
    int enabled;
    size_t max_length;
    size_t stride;
    tr_truncation_strategy strategy;
    tr_side direction;
} tr_truncation;

typedef enum tr_pad_strategy {
    TR_PAD_NONE = 0,
    TR_PAD_LONGEST = 1, /* to the longest encoding of a batch ("BatchLongest") */
    TR_PAD_FIXED = 2    /* to `length` ("Fixed") */
} tr_pad_strategy;

/* Padding (Hugging Face's `padding` object). pad_token is borrowed from the tokenizer. */
typedef struct tr_padding {
    tr_pad_strategy strategy;
    size_t length;      /* TR_PAD_FIXED */
    size_t multiple_of; /* 0: none */
    tr_side direction;
    int32_t pad_id;
    int32_t pad_type_id;
    const char *pad_token;
} tr_padding;

/* One encoded text or pair. Every array holds `len` entries (padding included) and is owned
 * by the encoding: tr_encoding_free releases them. */
typedef struct tr_encoding {
    int32_t *ids;            // (len)
    int32_t *type_ids;       // (len) 0 for the text, 1 for the pair, as the post-processor says
    uint8_t *attention_mask; // (len) 1 for tokens, 0 for padding
    uint8_t *special_mask;   // (len) 1 for special tokens and padding
    int32_t *sequence_ids;   // (len) 0 text, 1 pair, -1 special tokens and padding
    size_t *offsets;         // (len, 2) byte range in the text (or the pair) the token came from
    size_t len;              // tokens, padding included
    size_t length;           // tokens without padding (the attention mask's sum)
    /* NULL, or (len): a token's own text where it is not the vocabulary's string for its id
     * (a Unigram run of unknown characters: the text, where the id is the unknown token's),
     * NULL entries elsewhere; token_lens[i] bytes (the text may hold U+0000). */
    char **tokens;
    size_t *token_lens;
} tr_encoding;

/* Loads PATH: a tokenizer.json, or a folder holding one. *out is NULL on failure. */
TR_API tr_status tr_tokenizer_load(tr_tokenizer **out, const char *path);

/* Loads a tokenizer.json from memory; `name` names it in messages. */
TR_API tr_status tr_tokenizer_load_json(tr_tokenizer **out, const char *json, size_t len, const char *name);

TR_API void tr_tokenizer_free(tr_tokenizer *tok);

/* Encodes UTF-8 `text` (and `pair` when not NULL) into *out. add_special adds the
 * post-processor's special tokens ([CLS] ... [SEP]). Truncation and padding follow the
 * tokenizer's settings (TR_PAD_LONGEST pads nothing for one encoding). Invalid UTF-8 is
 * refused with its byte offset. *out is zeroed on failure. */
TR_API tr_status tr_tokenizer_encode(const tr_tokenizer *tok, const char *text, size_t text_len,
                              const char *pair, size_t pair_len, int add_special, tr_encoding *out);

/* Encodes n texts (pairs may be NULL, or hold NULL entries) into out[0..n-1], padded together
 * as the padding settings say. On failure every out[i] is zeroed. */
TR_API tr_status tr_tokenizer_encode_batch(const tr_tokenizer *tok, size_t n, const char *const *texts,
                                    const size_t *text_lens, const char *const *pairs,
                                    const size_t *pair_lens, int add_special, tr_encoding *out);

TR_API void tr_encoding_free(tr_encoding *enc);

/* The byte offset of the first invalid UTF-8 sequence of text[0..n) (RFC 3629), or n when it
 * is all valid: where a reader names the bad byte. */
TR_API size_t tr_utf8_valid_prefix(const char *text, size_t n);

/* Decodes ids back to text with the file's decoder (tokens joined by spaces without one);
 * skip_special leaves out the special tokens. Unknown ids are skipped. *out is malloc'ed:
 * the caller frees it. */
TR_API tr_status tr_tokenizer_decode(const tr_tokenizer *tok, const int32_t *ids, size_t n,
                              int skip_special, char **out);
/* The same with the text's length in bytes: a byte-level decoder can give U+0000 inside it. */
TR_API tr_status tr_tokenizer_decode_len(const tr_tokenizer *tok, const int32_t *ids, size_t n,
                                  int skip_special, char **out, size_t *len);

/* Token <-> id, through the added tokens and then the model's vocabulary. TR_ERR_NOT_FOUND
 * when absent. *token is borrowed from the tokenizer. */
TR_API tr_status tr_tokenizer_token_to_id(const tr_tokenizer *tok, const char *token, int32_t *id);
TR_API tr_status tr_tokenizer_id_to_token(const tr_tokenizer *tok, int32_t id, const char **token);

/* The number of ids: the model's vocabulary with the added tokens. */
TR_API size_t tr_tokenizer_vocab_size(const tr_tokenizer *tok);

/* One more than the largest id encoding can give: the model's vocabulary, the added tokens,
 * the post-processor's special tokens and the padding id (an embedding table needs this many
 * rows; it exceeds tr_tokenizer_vocab_size when ids are sparse). */
TR_API size_t tr_tokenizer_id_bound(const tr_tokenizer *tok);

/* The special tokens the file declares (added tokens marked special), i in [0, count). */
TR_API size_t tr_tokenizer_special_count(const tr_tokenizer *tok);
TR_API tr_status tr_tokenizer_special(const tr_tokenizer *tok, size_t i, const char **token, int32_t *id);

/* The number of special tokens the post-processor adds to a text (pair = 0) or a pair. */
TR_API size_t tr_tokenizer_num_special(const tr_tokenizer *tok, int pair);

/* The truncation and padding settings (from the file until changed). Setting NULL turns them
 * off; a set pad_token is copied. */
TR_API tr_status tr_tokenizer_truncation(const tr_tokenizer *tok, tr_truncation *out);
TR_API tr_status tr_tokenizer_set_truncation(tr_tokenizer *tok, const tr_truncation *t);
TR_API tr_status tr_tokenizer_padding(const tr_tokenizer *tok, tr_padding *out);
TR_API tr_status tr_tokenizer_set_padding(tr_tokenizer *tok, const tr_padding *p);

#ifdef __cplusplus
}
#endif
#endif
