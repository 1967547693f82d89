/* Tokenizers (core/src/tokenizer), SentencePiece style: Unigram models, Metaspace, the
 * SentencePiece decoders and the precompiled normalizer's charsmap, on hand-made files. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tok_check.h"

#define UNIGRAM_VOCAB                                                                          \
    "[[\"<unk>\", 0.0], [\"a\", -1.0], [\"b\", -2.0], [\"ab\", -2.5], [\"c\", -3.0], "          \
    "[\"x\", -1.0], [\"y\", -1.0], [\"xy\", -2.0], [\"\\u2581\", -1.5], [\"\\u2581hi\", -1.0], " \
    "[\"\\u2581yo\", -1.0], [\"<s>\", 0.0], [\"<0xE2>\", -5.0], [\"<0x98>\", -5.0], "            \
    "[\"<0x83>\", -5.0], [\"\\u2581a\", -0.5]]"

static tr_tokenizer *unigram_tok(const char *model_extra, const char *parts) {
    char buf[8192];
    snprintf(buf, sizeof buf, "{\"model\": {\"type\": \"Unigram\", \"vocab\": " UNIGRAM_VOCAB "%s}%s}", model_extra, parts);
    return tok_load(buf);
}

/* Token i's text as --tokens shows it: its own text, else the vocabulary's string. */
static void unigram(void) {
    tr_tokenizer *t = unigram_tok(", \"unk_id\": 0", "");
    if (!t) return;
    tok_expect_ids(t, "ab", NULL, 0, "3");     /* -2.5 beats a + b = -3 */
    tok_expect_ids(t, "abc", NULL, 0, "3 4");
    tok_expect_ids(t, "xy", NULL, 0, "7");     /* a tie (-2 both ways): the piece that starts first */
    tok_expect_ids(t, "xxy", NULL, 0, "5 7");
    /* Unknown characters score min - 10 and a run of them is one unknown token, whose text is
     * the run (as tokenizers shows it). */
    tok_expect_ids(t, "a\xe2\x98\x83\xe2\x98\x83" "b", NULL, 0, "1 0 2");
    tok_expect_token_text(t, "a\xe2\x98\x83\xe2\x98\x83" "b", 1, "\xe2\x98\x83\xe2\x98\x83");
    tok_expect_token_text(t, "a\xe2\x98\x83\xe2\x98\x83" "b", 2, "b");
    tok_expect_ids(t, "", NULL, 0, "");
    tr_encoding e;
    CHECK(tr_tokenizer_encode(t, "za", 2, NULL, 0, 0, &e) == TR_OK && e.len == 2 && e.offsets[0] == 0 &&
              e.offsets[1] == 1 && e.offsets[2] == 1 && e.offsets[3] == 2,
          "unigram offsets");
    tr_encoding_free(&e);
    int32_t id = -1;
    CHECK(tr_tokenizer_token_to_id(t, "xy", &id) == TR_OK && id == 7 && tr_tokenizer_vocab_size(t) == 16, "lookups");
    tr_tokenizer_free(t);

    /* byte_fallback: an unknown character becomes its UTF-8 bytes when all are pieces. */
    t = unigram_tok(", \"unk_id\": 0, \"byte_fallback\": true", "");
    if (t) {
        tok_expect_ids(t, "a\xe2\x98\x83", NULL, 0, "1 12 13 14");
        tok_expect_ids(t, "a\xe2\x98\x84", NULL, 0, "1 0"); /* 0x84 is no piece: unk */
        tr_tokenizer_free(t);
    }
    /* Without unk_id an unknown character is an error; known text still encodes. */
    t = unigram_tok(", \"unk_id\": null", "");
    if (t) {
        tok_expect_ids(t, "ab", NULL, 0, "3");
        CHECK(tr_tokenizer_encode(t, "a?", 2, NULL, 0, 0, &e) != TR_OK && strstr(tr_error_msg(), "no unk_id"),
              "no unk_id: %s", tr_error_msg());
        tr_tokenizer_free(t);
    }
    /* No "type": a vocab list of [piece, score] is Unigram, as the Rust library reads it. */
    t = tok_load("{\"model\": {\"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"q\", -1]]}}");
    if (t) {
        tok_expect_ids(t, "qq!", NULL, 0, "1 1 0");
        tr_tokenizer_free(t);
    }
    /* Replace: the content takes the alignment of the match's last character (tokenizers 0.21.4). */
    t = tok_load("{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \"``\"}, \"content\": \"\\\"\"},"
             " \"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"\\\"\", -1], [\"a\", -1]]}}");
    if (t) {
        CHECK(tr_tokenizer_encode(t, "a``a", 4, NULL, 0, 0, &e) == TR_OK && e.len == 3 && e.ids[1] == 1 && e.offsets[2] == 2 &&
                  e.offsets[3] == 3,
              "replace alignment");
        tr_encoding_free(&e);
        tr_tokenizer_free(t);
    }
    tok_expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": {\"a\": 0}}}", "model.vocab: expected a list of [piece, score]");
    tok_expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}",
                   "model.vocab[0][1]: expected the piece's score (a number)");
    tok_expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1], [\"b\"]]}}", "model.vocab[1]: expected [piece, score]");
    tok_expect_refused("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 2, \"vocab\": [[\"a\", -1], [\"b\", -1]]}}",
                   "model.unk_id: 2 is not a piece id (the vocabulary has 2 pieces)");
    tok_expect_refused("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": []}}", "model.vocab: the vocabulary is empty");
    tok_expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1], [\"a\", -2]]}}", "model.vocab[1]: token 'a' is given twice");
}

static void metaspace(void) {
    const char *parts =
        ", \"added_tokens\": [{\"id\": 11, \"content\": \"<s>\", \"special\": true, \"normalized\": false}],"
        " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" {2,}\"}, \"content\": \" \"},"
        " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"%s\", \"split\": %s},"
        " \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"%s\"}";
    char buf[2048];
    snprintf(buf, sizeof buf, parts, "always", "true", "always");
    tr_tokenizer *t = unigram_tok(", \"unk_id\": 0", buf);
    if (t) {
        tok_expect_ids(t, "hi   yo", NULL, 0, "9 10");        /* spaces squeezed, marked, split before each mark */
        tok_expect_ids(t, "hi<s>yo", NULL, 0, "9 11 10");     /* "always": after an added token too */
        tok_expect_ids(t, "\xe2\x96\x81" "a", NULL, 0, "15"); /* starts with the mark: none prepended */
        tok_expect_token_text(t, "hi yo", 1, "\xe2\x96\x81yo");
        tr_encoding e;
        CHECK(tr_tokenizer_encode(t, "hi  yo", 6, NULL, 0, 0, &e) == TR_OK && e.len == 2 && e.offsets[0] == 0 &&
                  e.offsets[1] == 2 && e.offsets[2] == 3 && e.offsets[3] == 6,
              "metaspace offsets %zu..%zu %zu..%zu", e.offsets[0], e.offsets[1], e.offsets[2], e.offsets[3]);
        tr_encoding_free(&e);
        int32_t ids[] = {9, 10, 1};
        tok_expect_decode(t, ids, 3, "hi yoa"); /* the first token's mark dropped */
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, parts, "first", "true", "never");
    t = unigram_tok(", \"unk_id\": 0", buf);
    if (t) {
        tok_expect_ids(t, "hi<s>yo", NULL, 0, "9 11 6 0"); /* "first": nothing before yo */
        int32_t ids[] = {9, 10};
        tok_expect_decode(t, ids, 2, " hi yo");
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, parts, "never", "false", "always");
    t = unigram_tok(", \"unk_id\": 0", buf);
    if (t) {
        tok_expect_ids(t, "a ab", NULL, 0, "1 15 2"); /* one word, nothing prepended */
        tr_tokenizer_free(t);
    }
    tok_expect_refused("{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"add_prefix_space\": false},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}",
                   "pre_tokenizer.add_prefix_space: false does not match the prepend_scheme");
    tok_expect_refused("{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"ab\"},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}",
                   "pre_tokenizer.replacement: expected one character");
    tok_expect_refused("{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": \"sometimes\"},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}",
                   "pre_tokenizer.prepend_scheme: expected \"always\", \"first\" or \"never\"");
}

static void spm_decoders(void) {
    /* Llama's chain: Replace the mark by a space, bytes back, Fuse, Strip one leading space. */
    tr_tokenizer *t = unigram_tok(", \"unk_id\": 0",
                                  ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": ["
                                  "{\"type\": \"Replace\", \"pattern\": {\"String\": \"\\u2581\"}, \"content\": \" \"},"
                                  "{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
                                  "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}");
    if (t) {
        int32_t ids[] = {9, 12, 13, 14, 10};
        tok_expect_decode(t, ids, 5, "hi\xe2\x98\x83 yo");
        int32_t bad[] = {9, 12, 13, 10, 14};
        tok_expect_decode(t, bad, 5, "hi\xef\xbf\xbd\xef\xbf\xbd yo\xef\xbf\xbd"); /* not UTF-8: U+FFFD per byte */
        tr_tokenizer_free(t);
    }
    t = unigram_tok(", \"unk_id\": 0",
                    ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": ["
                    "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"[ab]+\"}, \"content\": \"<>\"},"
                    "{\"type\": \"Strip\", \"content\": \"<\", \"start\": 2, \"stop\": 1}]}");
    if (t) {
        int32_t ids[] = {3, 4, 1, 9};
        tok_expect_decode(t, ids, 4, ">c>\xe2\x96\x81hi"); /* each "<>" stripped to ">" */
        tr_tokenizer_free(t);
    }
    tok_expect_refused("{\"decoder\": {\"type\": \"Strip\", \"content\": \" \", \"start\": 1},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}", "decoder.stop: expected a non-negative integer");
    tok_expect_refused("{\"decoder\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"(\"}, \"content\": \"\"},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}", "decoder.pattern.Regex: the regular expression");
}

/* A hand-made charsmap: the double-array trie of the keys "A" -> "a", "B" -> "" (removed),
 * "C" -> "cc", "e\u0301" -> "\u00e9", in darts-clone's unit layout, base64-encoded. */
static void b64(const unsigned char *in, size_t n, char *out) {
    static const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[o++] = al[v >> 18 & 63];
        out[o++] = al[v >> 12 & 63];
        out[o++] = i + 1 < n ? al[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? al[v & 63] : '=';
    }
    out[o] = '\0';
}

#define UNIT(off, leaf, label) ((uint32_t)(off) << 10 | (uint32_t)(leaf) << 8 | (uint32_t)(label))

static size_t charsmap(unsigned char *raw, size_t trie_units) {
    static uint32_t a[1024];
    memset(a, 0, sizeof a);
    a[0] = UNIT(0x100, 0, 0);                        /* root: children at 0x100 ^ byte */
    a[0x141] = UNIT(0x141 ^ 0x1A0, 1, 'A');          /* "A", value at 0x1A0 */
    a[0x142] = UNIT(0x142 ^ 0x1A1, 1, 'B');
    a[0x143] = UNIT(0x143 ^ 0x1A2, 1, 'C');
    a[0x1A0] = 0, a[0x1A1] = 2, a[0x1A2] = 3;        /* offsets into the strings below */
    a[0x165] = UNIT(0x165 ^ 0x200, 0, 'e');          /* "e" -> 0x200 ^ next byte */
    a[0x2CC] = UNIT(0x2CC ^ 0x300, 0, 0xCC);
    a[0x381] = UNIT(0x381 ^ 0x3F0, 1, 0x81);
    a[0x3F0] = 6;
    static const char strings[] = "a\0\0cc\0\xc3\xa9";
    size_t n = 0;
    uint32_t bytes = (uint32_t)(4 * 1024);
    for (int k = 0; k < 4; k++) raw[n++] = (unsigned char)(bytes >> 8 * k);
    for (size_t i = 0; i < trie_units; i++)
        for (int k = 0; k < 4; k++) raw[n++] = (unsigned char)(a[i] >> 8 * k);
    memcpy(raw + n, strings, sizeof strings);
    return n + (trie_units == 1024 ? sizeof strings : 0);
}

static void precompiled(void) {
    static unsigned char raw[8192];
    static char enc[12000], json[16000];
    const char *fmt = "{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"%s\"},"
                      " \"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"a\", -1], [\"c\", -1],"
                      " [\"\\u00e9\", -1], [\"x\", -1], [\"e\", -1], [\"\\u0301\", -1], [\"D\", -1]]}}";
    b64(raw, charsmap(raw, 1024), enc);
    snprintf(json, sizeof json, fmt, enc);
    tr_tokenizer *t = tok_load(json);
    if (t) {
        tok_expect_ids(t, "xAxC", NULL, 0, "4 1 4 2 2");
        tok_expect_ids(t, "xBx", NULL, 0, "4 4");
        tok_expect_ids(t, "e\xcc\x81", NULL, 0, "3"); /* the cluster (3 bytes) is looked up whole */
        tok_expect_ids(t, "De\xcc\x81", NULL, 0, "7 3");
        /* A removal with nothing before it: the Rust library drops it, so the next character
         * takes the removed one's alignment ("a" at 0..1, not 1..2). */
        tr_encoding e;
        CHECK(tr_tokenizer_encode(t, "BA", 2, NULL, 0, 0, &e) == TR_OK && e.len == 1 && e.ids[0] == 1 &&
                  e.offsets[0] == 0 && e.offsets[1] == 1,
              "removal at the start: %zu..%zu", e.len ? e.offsets[0] : 0, e.len ? e.offsets[1] : 0);
        tr_encoding_free(&e);
        CHECK(tr_tokenizer_encode(t, "CA", 2, NULL, 0, 0, &e) == TR_OK && e.len == 3 && e.offsets[2] == 0 &&
                  e.offsets[3] == 1 && e.offsets[4] == 1 && e.offsets[5] == 2,
              "expansion offsets");
        tr_encoding_free(&e);
        tr_tokenizer_free(t);
    }
    /* Bad charsmaps are refused at load, never followed. */
    snprintf(json, sizeof json, fmt, "QUJD*");
    tok_expect_refused(json, "normalizer.precompiled_charsmap: not valid base64");
    snprintf(json, sizeof json, fmt, "QUJ=");
    tok_expect_refused(json, "not valid base64: non-zero trailing bits");
    b64(raw, charsmap(raw, 100), enc); /* the trie cut short */
    snprintf(json, sizeof json, fmt, enc);
    tok_expect_refused(json, "normalizer.precompiled_charsmap: truncated: the trie needs 4096 bytes, 400 follow");
    snprintf(json, sizeof json, fmt, "AAAAAA==");
    tok_expect_refused(json, "the trie is empty");
    snprintf(json, sizeof json, "{\"normalizer\": {\"type\": \"Precompiled\"}, \"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
    tok_expect_refused(json, "normalizer.precompiled_charsmap: expected the charsmap as a base64 string");
}

int main(void) {
    unigram();
    metaspace();
    spm_decoders();
    precompiled();
    return test_finish();
}
