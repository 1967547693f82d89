/* Helpers for the tokenizer unit tests (tests/unit/tokenizer*.c): a small WordPiece
 * vocabulary, tokenizer.json text around it, and checks of ids, refusals and decoding. */
#ifndef TRAINER_TEST_TOK_CHECK_H
#define TRAINER_TEST_TOK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/tokenizer.h"

#define VOCAB                                                                                  \
    "\"vocab\": {\"[PAD]\": 0, \"[UNK]\": 1, \"[CLS]\": 2, \"[SEP]\": 3, \"[MASK]\": 4, "       \
    "\"hello\": 5, \",\": 6, \"world\": 7, \"!\": 8, \"un\": 9, \"##aff\": 10, \"##able\": 11, " \
    "\"cafe\": 12, \"Hello\": 13, \"\\u5317\": 14, \"\\u4eac\": 15, \"a\": 16, \"##a\": 17, "    \
    "\".\": 18}"

#define ADDED                                                                                  \
    "\"added_tokens\": ["                                                                      \
    "{\"id\": 0, \"content\": \"[PAD]\", \"special\": true, \"normalized\": false},"           \
    "{\"id\": 1, \"content\": \"[UNK]\", \"special\": true, \"normalized\": false},"           \
    "{\"id\": 2, \"content\": \"[CLS]\", \"special\": true, \"normalized\": false},"           \
    "{\"id\": 3, \"content\": \"[SEP]\", \"special\": true, \"normalized\": false},"           \
    "{\"id\": 4, \"content\": \"[MASK]\", \"special\": true, \"normalized\": false}]"

/* A BertNormalizer + WordPiece tokenizer.json over VOCAB: lowercase "true"/"false", extra
 * components (each followed by a comma) or "". A static buffer: one at a time. */
char *tok_bert_json(const char *lowercase, const char *extra);
/* Loads json as "t.json"; a failure is a check failure (and NULL). */
tr_tokenizer *tok_load(const char *json);
/* ids of text (and pair) as "2 5 3", with special tokens when special. */
void tok_expect_ids(tr_tokenizer *t, const char *text, const char *pair, int special, const char *want);
/* json is refused with a message holding needle and the file name. */
void tok_expect_refused(const char *json, const char *needle);
/* Token i of text's encoding reads want. */
void tok_expect_token_text(tr_tokenizer *t, const char *text, size_t i, const char *want);
/* ids[0..n) decode to want. */
void tok_expect_decode(tr_tokenizer *t, const int32_t *ids, size_t n, const char *want);

#endif
