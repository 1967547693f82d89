/* The tokenizer unit tests' helpers (tok_check.h). */
#include "tok_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

char *tok_bert_json(const char *lowercase, const char *extra) {
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"version\": \"1.0\", %s, %s"
             "\"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, "
             "\"handle_chinese_chars\": true, \"strip_accents\": null, \"lowercase\": %s},"
             "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
             "\"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 3], \"cls\": [\"[CLS]\", 2]},"
             "\"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},"
             "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
             "\"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": 9, " VOCAB "}}",
             ADDED, extra, lowercase);
    return buf;
}

tr_tokenizer *tok_load(const char *json) {
    tr_tokenizer *t = NULL;
    tr_status st = tr_tokenizer_load_json(&t, json, strlen(json), "t.json");
    CHECK(st == TR_OK && t, "load: %s", tr_error_msg());
    return t;
}

/* ids of text (and pair) as "2 5 3", with special tokens. */
void tok_expect_ids(tr_tokenizer *t, const char *text, const char *pair, int special, const char *want) {
    tr_encoding e;
    tr_status st = tr_tokenizer_encode(t, text, strlen(text), pair, pair ? strlen(pair) : 0, special, &e);
    CHECK(st == TR_OK, "encode '%s': %s", text, tr_error_msg());
    if (st != TR_OK) return;
    char got[1024] = "";
    for (size_t i = 0; i < e.len; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", i ? " " : "", e.ids[i]);
    CHECK(strcmp(got, want) == 0, "'%s' | '%s': ids %s, expected %s", text, pair ? pair : "", got, want);
    tr_encoding_free(&e);
}

void tok_expect_refused(const char *json, const char *needle) {
    tr_tokenizer *t = NULL;
    tr_status st = tr_tokenizer_load_json(&t, json, strlen(json), "t.json");
    CHECK(st != TR_OK && t == NULL, "refused: %s", needle);
    CHECK(strstr(tr_error_msg(), needle) && strstr(tr_error_msg(), "t.json"), "message '%s' lacks '%s'",
          tr_error_msg(), needle);
}

void tok_expect_token_text(tr_tokenizer *t, const char *text, size_t i, const char *want) {
    tr_encoding e;
    if (tr_tokenizer_encode(t, text, strlen(text), NULL, 0, 0, &e) != TR_OK) {
        CHECK(0, "encode '%s': %s", text, tr_error_msg());
        return;
    }
    const char *got = NULL;
    if (i < e.len && e.tokens && e.tokens[i]) got = e.tokens[i];
    else if (i < e.len) tr_tokenizer_id_to_token(t, e.ids[i], &got);
    CHECK(got && strcmp(got, want) == 0, "'%s' token %zu: '%s', expected '%s'", text, i, got ? got : "(none)", want);
    tr_encoding_free(&e);
}

void tok_expect_decode(tr_tokenizer *t, const int32_t *ids, size_t n, const char *want) {
    char *text = NULL;
    CHECK(tr_tokenizer_decode(t, ids, n, 0, &text) == TR_OK && text && strcmp(text, want) == 0, "decode: '%s', expected '%s'",
          text ? text : "(null)", want);
    free(text);
}
