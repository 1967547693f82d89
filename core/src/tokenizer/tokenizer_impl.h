/* Private: the tokenizer's parts (docs/tokenizers.md). A normalized string keeps, per code
 * point, the byte range of the original text it came from, so token offsets point into the
 * caller's text. A word is a range of code points; a pre-tokenizer that marks text (Metaspace)
 * appends the marked word to the string, so the ranges of other pieces stay valid.
 * Everything here is hidden from libtrainer's exported symbols. */
#ifndef TRAINER_TOKENIZER_IMPL_H
#define TRAINER_TOKENIZER_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/tokenizer.h"

#pragma GCC visibility push(hidden)

/* ---- text ---- */
typedef struct tok_nstr {
    uint32_t *cp; // (n) code points
    size_t *a0;   // (n) original byte start of each
    size_t *a1;   // (n) original byte end of each
    size_t n, cap;
} tok_nstr;

tr_status tok_nstr_reserve(tok_nstr *s, size_t n);
tr_status tok_nstr_push(tok_nstr *s, uint32_t c, size_t a0, size_t a1);
void tok_nstr_free(tok_nstr *s);
/* Decodes UTF-8 text[0..len) into s, offsets shifted by base; TR_ERR_INVALID names the byte. */
tr_status tok_nstr_from_utf8(tok_nstr *s, const char *text, size_t len, size_t base);
/* Appends the UTF-8 of c to buf (4 bytes room); returns the byte count. */
size_t tok_utf8_put(char *buf, uint32_t c);
/* Decodes a whole NUL-terminated UTF-8 string into a malloc'ed code point array. */
tr_status tok_utf8_to_cps(const char *s, uint32_t **cps, size_t *n);

int tok_is_whitespace(uint32_t c); /* Rust's char::is_whitespace */
int tok_is_punctuation(uint32_t c); /* ASCII punctuation or Unicode P* */
int tok_is_control(uint32_t c);     /* Cc, Cf, Co, Cs but \t \n \r (the Rust crate's tables) */
int tok_is_nonspacing_mark(uint32_t c); /* Mn (the Rust crate's tables) */
int tok_is_mark(uint32_t c);            /* Mn, Mc, Me (the Rust crate's tables) */
int tok_is_word(uint32_t c);        /* regex \w */
int tok_is_numeric(uint32_t c);     /* Nd, Nl, No */
uint32_t tok_lower(uint32_t c);     /* Rust's char::to_lowercase for all but U+0130 */
/* The decomposition the Rust library applies to c: 0 none, 1 canonical, 2 compatibility
 * (never more than `compat` asks). */
int tok_decomposition(uint32_t c, int compat);
int tok_combining_class(uint32_t c);

/* ---- regular expressions (PCRE2, Unicode classes; regex.c) ---- */
typedef struct tok_regex tok_regex;
typedef struct tok_ranges tok_ranges;
/* Compiles a tokenizer.json pattern; a bad one is TR_ERR_PARSE naming FILE: PATH. */
tr_status tok_regex_compile(const char *file, const char *path, const char *pattern, tok_regex **out);
/* Pushes the matches in cp[b, e), left to right without overlap, as code point ranges. An
 * empty match is pushed unless it sits where the previous match ended (onig's find_iter, as
 * the Rust library runs it); the search then moves on one code point. Safe from several
 * threads. */
tr_status tok_regex_find_all(const tok_regex *re, const uint32_t *cp, size_t b, size_t e, tok_ranges *out);
void tok_regex_free(tok_regex *re);

/* ---- vocabulary: string -> id, id -> string ---- */
typedef struct tok_vocab {
    char **str;      // (n) by id, NULL for ids not used
    size_t n;        // ids 0..n-1
    int32_t *slots;  // (nslots) open addressing, -1 empty
    size_t nslots;
} tok_vocab;

tr_status tok_vocab_init(tok_vocab *v, size_t n);
/* Sets id's string (copied); TR_ERR_INVALID when id or string is taken already. */
tr_status tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t len);
int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t len); /* -1 when absent */
void tok_vocab_free(tok_vocab *v);

/* ---- components ---- */
typedef enum {
    TOK_NORM_BERT, TOK_NORM_NFC, TOK_NORM_NFD, TOK_NORM_NFKC, TOK_NORM_NFKD, TOK_NORM_LOWERCASE,
    TOK_NORM_STRIP, TOK_NORM_STRIP_ACCENTS, TOK_NORM_REPLACE, TOK_NORM_PREPEND, TOK_NORM_SEQUENCE,
    TOK_NORM_PRECOMPILED
} tok_norm_kind;

typedef struct tok_precompiled tok_precompiled; /* SentencePiece's charsmap (precompiled.c) */

typedef struct tok_normalizer {
    tok_norm_kind kind;
    int clean_text, chinese, strip_accents, lowercase; // Bert
    int left, right;                                   // Strip
    uint32_t *pat, *with;                              // Replace pattern/content, Prepend (with)
    size_t npat, nwith;
    tok_regex *re;                                     // Replace with a Regex pattern
    tok_precompiled *pc;                               // Precompiled
    struct tok_normalizer *kids;
    size_t nkids;
} tok_normalizer;

typedef enum {
    TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_PREV, TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS
} tok_split_behavior;

typedef enum {
    TOK_PRE_BERT, TOK_PRE_WHITESPACE, TOK_PRE_WHITESPACE_SPLIT, TOK_PRE_PUNCTUATION, TOK_PRE_DIGITS,
    TOK_PRE_SEQUENCE, TOK_PRE_BYTELEVEL, TOK_PRE_SPLIT, TOK_PRE_METASPACE
} tok_pre_kind;

/* Metaspace's prepend_scheme. */
typedef enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend_scheme;

typedef struct tok_pretok {
    tok_pre_kind kind;
    tok_split_behavior behavior;
    int individual_digits;
    int add_prefix_space, use_regex; // ByteLevel
    int invert;                      // Split
    tok_regex *re;                   // Split's pattern; ByteLevel's GPT-2 pattern (use_regex)
    uint32_t replacement;              // Metaspace
    tok_prepend_scheme prepend_scheme; // Metaspace
    int split;                         // Metaspace
    struct tok_pretok *kids;
    size_t nkids;
} tok_pretok;

typedef struct tok_range { size_t b, e; } tok_range; /* code points [b, e) of a tok_nstr */

typedef struct tok_ranges { tok_range *r; size_t n, cap; } tok_ranges;
tr_status tok_ranges_push(tok_ranges *r, size_t b, size_t e);

/* A word cut into pieces, matches flagged, covering it in order; merged as the behaviour says
 * and the non-empty kept pieces pushed to out (pretokenizer.c). */
typedef struct tok_piece { size_t b, e; int match; } tok_piece;
tr_status tok_split_pieces(const tok_piece *p, size_t np, tok_split_behavior how, tok_ranges *out);
/* Split: the matches of re in s[w.b, w.e) (flags flipped with invert), by behaviour (split.c). */
tr_status tok_split_regex(const tok_regex *re, int invert, tok_split_behavior how, const tok_nstr *s, tok_range w,
                          tok_ranges *out);
tr_status tok_load_split(const char *file, const char *path, json_t *j, tok_pretok *p);
/* ByteLevel (bytelevel.c): the word (with a prefix space), cut by the GPT-2 pattern, each UTF-8
 * byte as its GPT-2 character, appended to s past its end (earlier indices stay valid); the
 * pieces' ranges go to out. */
tr_status tok_bytelevel_split(const tok_pretok *p, tok_nstr *s, tok_range w, tok_ranges *out);
tr_status tok_load_bytelevel(const char *file, const char *path, json_t *j, tok_pretok *p);

struct tok_bpe;

/* The model: one kind, its vocabulary (every kind has one: token <-> id) and the kind's own
 * state. A kind lives in its own file (wordpiece.c, ...) with a loader and an encoder. */
typedef enum { TOK_MODEL_WORDPIECE, TOK_MODEL_BPE, TOK_MODEL_UNIGRAM } tok_model_kind;

typedef struct tok_unigram tok_unigram; /* scores and the piece trie (unigram.c) */

typedef struct tok_wordpiece {
    char *prefix;
    size_t max_chars;
} tok_wordpiece;

typedef struct tok_model {
    tok_model_kind kind;
    tok_vocab vocab;
    char *unk;      // NULL when the model has no unknown token
    int32_t unk_id; // -1 when the unk token is absent or not in the vocabulary
    tok_wordpiece wp;
    struct tok_bpe *bpe; // BPE (bpe.c)
    tok_unigram *uni; // Unigram
} tok_model;

typedef enum { TOK_POST_BERT, TOK_POST_TEMPLATE, TOK_POST_SEQUENCE, TOK_POST_ROBERTA, TOK_POST_BYTELEVEL } tok_post_kind;

typedef struct tok_tpl_piece {
    int seq;        // -1: special token, 0: A, 1: B
    int32_t type_id;
    int32_t *ids;   // the special token's ids
    size_t nids;
} tok_tpl_piece;

typedef struct tok_post {
    tok_post_kind kind;
    int32_t cls_id, sep_id;                // Bert
    tok_tpl_piece *single, *pair;          // Template
    size_t nsingle, npair;
    struct tok_post *kids;
    size_t nkids;
    int trim_offsets, add_prefix_space;    // Roberta, ByteLevel
    const struct tr_tokenizer *tk;         // borrowed: token strings for trim_offsets
} tok_post;

/* Decoders run as a chain, as the Rust library's decode_chain: each turns the list of token
 * strings into a new list; the last list is concatenated. */
typedef enum {
    TOK_DEC_WORDPIECE, TOK_DEC_SEQUENCE, TOK_DEC_BYTELEVEL, TOK_DEC_BPE, TOK_DEC_METASPACE, TOK_DEC_BYTE_FALLBACK,
    TOK_DEC_FUSE, TOK_DEC_REPLACE, TOK_DEC_STRIP
} tok_dec_kind;

typedef struct tok_decoder {
    tok_dec_kind kind;
    char *prefix; // WordPiece; BPEDecoder's suffix
    int cleanup;  // WordPiece
    uint32_t replacement;              // Metaspace
    tok_prepend_scheme prepend_scheme; // Metaspace
    tok_regex *re;                     // Replace (a String pattern is compiled escaped)
    char *content;                     // Replace
    size_t ncontent;                   // Replace
    uint32_t strip;                    // Strip: the character
    size_t start, stop;                // Strip
    struct tok_decoder *kids;
    size_t nkids;
} tok_decoder;

/* A list of malloc'ed token strings, each with its byte length (tokens may hold NUL bytes
 * only where a decoder made them). */
typedef struct tok_strs { char **s; size_t *len; size_t n, cap; } tok_strs;
tr_status tok_strs_push(tok_strs *v, const char *s, size_t len);
/* A growing byte buffer, kept NUL-terminated (decoder.c); tok_buf_put returns -1 when out of
 * memory. */
typedef struct tok_buf { char *p; size_t n, cap; } tok_buf;
int tok_buf_put(tok_buf *b, const char *s, size_t n);
void tok_strs_free(tok_strs *v);
/* ByteLevel decoder: GPT-2 characters back to bytes, one string (invalid UTF-8 as U+FFFD). */
tr_status tok_bytelevel_decode(const tok_strs *in, tok_strs *out);
/* ByteLevel's trim_offsets: offsets less the leading and trailing spaces of each token. */
void tok_bytelevel_trim(const struct tr_tokenizer *tk, tr_encoding *e, int add_prefix_space);

typedef struct tok_added {
    char *content;
    uint32_t *cp;   // (ncp) the content; normalized when `normalized`
    size_t ncp;
    int32_t id;
    int special, normalized, lstrip, rstrip, single_word;
} tok_added;

struct tr_tokenizer {
    char *name;
    tok_normalizer *normalizer; // NULL: none
    tok_pretok *pretok;         // NULL: none
    tok_model model;
    tok_post *post;             // NULL: none
    tok_decoder *decoder;       // NULL: join with spaces
    tok_added *added;
    size_t nadded;
    size_t *by_first; // (nadded) added token indices by first code point, then index
    size_t *by_id;    // (nadded) added token indices by id, then index
    tr_truncation trunc;
    tr_padding pad;
    char *pad_token;
};

/* The longest padding a file or caller may ask for (Fixed, pad_to_multiple_of): a typo of a
 * few digits must not allocate gigabytes per text. */
#define TOK_MAX_PAD ((size_t)1 << 24)

/* ---- pipeline steps ---- */
tr_status tok_normalize(const tok_normalizer *n, tok_nstr *s);
/* Splits the words (code point ranges of s) the caller put in `words`. A pre-tokenizer that
 * changes text (a space marker, bytes as characters) rewrites s and maps the ranges onto it. */
tr_status tok_pretokenize(const tok_pretok *p, tok_nstr *s, tok_ranges *words);

/* A growing encoding (tr_encoding plus capacity). */
typedef struct tok_enc { tr_encoding e; size_t cap; } tok_enc;
tr_status tok_enc_push(tok_enc *x, int32_t id, int32_t type_id, int special, int32_t seq,
                       size_t o0, size_t o1);
void tok_enc_free(tok_enc *x);
/* Gives token i its own text (tr_encoding.tokens), copied. */
tr_status tok_enc_set_text(tok_enc *x, size_t i, const char *s, size_t n);

/* Runs the model over one word s[w.b, w.e). */
tr_status tok_model_encode(const tok_model *m, const tok_nstr *s, tok_range w, int32_t type_id, int32_t seq,
                           tok_enc *out);
tr_status tok_wordpiece_encode(const tok_model *m, const tok_nstr *s, tok_range w,
                               int32_t type_id, int32_t seq, tok_enc *out);
tr_status tok_bpe_encode(const tok_model *m, const tok_nstr *s, tok_range w, int32_t type_id, int32_t seq,
                         tok_enc *out);
void tok_bpe_free(struct tok_bpe *b);
void tok_model_free(tok_model *m);
tr_status tok_unigram_encode(const tok_model *m, const tok_nstr *s, tok_range w, int32_t type_id, int32_t seq,
                             tok_enc *out);
void tok_unigram_free(tok_unigram *u);

/* The normalizers and pre-tokenizers of SentencePiece-style files (precompiled.c, replace.c,
 * metaspace.c). */
tr_status tok_precompiled_normalize(const tok_precompiled *pc, tok_nstr *s);
void tok_precompiled_free(tok_precompiled *pc);
tr_status tok_replace_regex(const tok_normalizer *n, tok_nstr *s);
/* Metaspace over one word: its text, marked, is appended to s; the pieces go to out. */
tr_status tok_metaspace(const tok_pretok *p, tok_nstr *s, tok_range w, tok_ranges *out);
/* Rewrites s by Rust's NormalizedString::transform: each new character with its change (1:
 * inserted, 0: replaces the next old one, -k: replaces it and removes k more). */
typedef struct tok_change { uint32_t c; int64_t change; } tok_change;
tr_status tok_nstr_transform(tok_nstr *s, const tok_change *ch, size_t n);

size_t tok_post_added(const tok_post *p, int pair);
/* Merges a (and b when not NULL) into out, with or without special tokens. */
tr_status tok_post_process(const tok_post *p, const tok_enc *a, const tok_enc *b, int add_special,
                           tok_enc *out);
tr_status tok_truncate(const tr_truncation *t, size_t n_added, tok_enc *a, tok_enc *b);
tr_status tok_pad(const tr_padding *p, size_t target, tok_enc *x);

/* Decodes token strings into one malloc'ed NUL-terminated text (joined by spaces without a
 * decoder); *len (when not NULL) is its length, which may hold NUL bytes. */
tr_status tok_decode_tokens(const tok_decoder *d, const char *const *tokens, size_t n, char **out, size_t *len);

/* ---- loading ---- */
/* Helpers for the loaders: messages are "FILE: JSON.PATH: what is wrong" (TR_ERR_PARSE). */
tr_status tok_bad(const char *file, const char *path, const char *what);
/* The object's "type" string; `kind` names the component in the message. */
tr_status tok_get_type(const char *file, const char *path, json_t *j, const char *kind, const char **type);
/* Optional fields: null or absent gives def. */
tr_status tok_get_bool(const char *file, const char *path, json_t *j, const char *key, int def, int *out);
tr_status tok_get_size(const char *file, const char *path, json_t *j, const char *key, size_t def, size_t *out);
tr_status tok_get_id(const char *file, const char *path, json_t *v, int32_t *out);
/* A required string field as code points. */
tr_status tok_get_cps(const char *file, const char *path, json_t *j, const char *key, uint32_t **cp, size_t *n);
char *tok_dup(const char *s); /* NULL when out of memory */
tr_status tok_load_normalizer(const char *file, const char *path, json_t *j, tok_normalizer *out);
tr_status tok_load_pretok(const char *file, const char *path, json_t *j, tok_pretok *out);
tr_status tok_load_post(const tr_tokenizer *t, const char *file, const char *path, json_t *j,
                        tok_post *out);
tr_status tok_load_decoder(const char *file, const char *path, json_t *j, tok_decoder *out);
tr_status tok_load_vocab(const char *file, json_t *j, tok_vocab *vocab);
tr_status tok_load_wordpiece(const char *file, json_t *j, tok_model *m);
tr_status tok_load_bpe(const char *file, json_t *j, tok_model *m);
tr_status tok_load_unigram(const char *file, json_t *j, tok_model *m);
tr_status tok_load_precompiled(const char *file, const char *path, json_t *j, tok_normalizer *n);
/* Metaspace's fields, shared by the pre-tokenizer and the decoder. */
tr_status tok_load_metaspace(const char *file, const char *path, json_t *j, uint32_t *replacement,
                             tok_prepend_scheme *scheme, int *split);
/* The decoders of decoder_spm.c (Metaspace, ByteFallback, Fuse, Replace, Strip): 1 in *done
 * when `type` is one of them. */
tr_status tok_load_decoder_spm(const char *file, const char *path, json_t *j, const char *type, tok_decoder *d,
                               int *done);
tr_status tok_decode_spm(const tok_decoder *d, const tok_strs *in, tok_strs *out);
tr_status tok_load_root(tr_tokenizer *t, const char *file, json_t *root);
void tok_decoder_free(tok_decoder *d);
void tok_normalizer_free(tok_normalizer *n);
void tok_pretok_free(tok_pretok *p);
void tok_post_free(tok_post *p);

#pragma GCC visibility pop
#endif
