/* Tokenizers (core/src/tokenizer): ids, type ids, masks and offsets of small hand-made
 * tokenizer.json files (cased and uncased WordPiece, accents, CJK, punctuation, long words,
 * pairs under each truncation strategy, padding left and right), decode, and the message of
 * each refused file. The ids of real files are checked against Hugging Face's tokenizers by
 * the oracle tests; these pin the rules. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
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

static char *bert_json(const char *lowercase, const char *extra) {
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

static tr_tokenizer *load(const char *json) {
    tr_tokenizer *t = NULL;
    tr_status st = tr_tokenizer_load_json(&t, json, strlen(json), "t.json");
    CHECK(st == TR_OK && t, "load: %s", tr_error_msg());
    return t;
}

/* ids of text (and pair) as "2 5 3", with special tokens. */
static void expect_ids(tr_tokenizer *t, const char *text, const char *pair, int special, const char *want) {
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

static void expect_refused(const char *json, const char *needle) {
    tr_tokenizer *t = NULL;
    tr_status st = tr_tokenizer_load_json(&t, json, strlen(json), "t.json");
    CHECK(st != TR_OK && t == NULL, "refused: %s", needle);
    CHECK(strstr(tr_error_msg(), needle) && strstr(tr_error_msg(), "t.json"), "message '%s' lacks '%s'",
          tr_error_msg(), needle);
}

static void uncased(void) {
    tr_tokenizer *t = load(bert_json("true", ""));
    if (!t) return;
    expect_ids(t, "Hello, World!", NULL, 1, "2 5 6 7 8 3");
    expect_ids(t, "Hello, World!", NULL, 0, "5 6 7 8");
    expect_ids(t, "  Caf\xc3\xa9\tunaffable ", NULL, 1, "2 12 9 10 11 3"); /* accent stripped */
    expect_ids(t, "\xe5\x8c\x97\xe4\xba\xac", NULL, 1, "2 14 15 3");          /* CJK split */
    expect_ids(t, "aaaaa", NULL, 1, "2 16 17 17 17 17 3");
    expect_ids(t, "aaaaaaaaaa", NULL, 1, "2 1 3"); /* over max_input_chars_per_word */
    expect_ids(t, "unaffablex", NULL, 1, "2 1 3"); /* one piece missing: the whole word */
    expect_ids(t, "", NULL, 1, "2 3");
    expect_ids(t, "hello\xe2\x80\x8b\x01 [SEP]world", NULL, 1, "2 5 3 7 3"); /* control gone, special kept */
    expect_ids(t, "hello", "world", 1, "2 5 3 7 3");
    expect_ids(t, "hello", "world", 0, "5 7");

    tr_encoding e;
    const char *s = "Hello, World!";
    CHECK(tr_tokenizer_encode(t, s, strlen(s), "world", 5, 1, &e) == TR_OK, "pair");
    int32_t types[] = {0, 0, 0, 0, 0, 0, 1, 1};
    size_t offs[] = {0, 0, 0, 5, 5, 6, 7, 12, 12, 13, 0, 0, 0, 5, 0, 0};
    CHECK(e.len == 8 && e.length == 8, "pair length %zu", e.len);
    for (size_t i = 0; i < e.len && i < 8; i++) {
        CHECK(e.type_ids[i] == types[i], "type id %zu: %d", i, e.type_ids[i]);
        CHECK(e.attention_mask[i] == 1, "mask %zu", i);
        CHECK(e.offsets[2 * i] == offs[2 * i] && e.offsets[2 * i + 1] == offs[2 * i + 1], "offsets %zu: %zu..%zu", i,
              e.offsets[2 * i], e.offsets[2 * i + 1]);
    }
    CHECK(e.special_mask[0] == 1 && e.special_mask[1] == 0 && e.sequence_ids[6] == 1 && e.sequence_ids[5] == -1,
          "special mask and sequence ids");
    tr_encoding_free(&e);

    char *text = NULL;
    int32_t ids[] = {2, 5, 6, 7, 8, 9, 10, 11, 3, 999};
    CHECK(tr_tokenizer_decode(t, ids, 10, 1, &text) == TR_OK && strcmp(text, "hello, world! unaffable") == 0,
          "decode: '%s'", text ? text : "(null)");
    free(text);
    CHECK(tr_tokenizer_decode(t, ids, 3, 0, &text) == TR_OK && strcmp(text, "[CLS] hello,") == 0, "decode special: '%s'",
          text ? text : "(null)");
    free(text);

    int32_t id = -1;
    const char *tok = NULL;
    CHECK(tr_tokenizer_token_to_id(t, "##able", &id) == TR_OK && id == 11, "token_to_id");
    CHECK(tr_tokenizer_token_to_id(t, "nope", &id) == TR_ERR_NOT_FOUND, "token_to_id absent");
    CHECK(tr_tokenizer_id_to_token(t, 14, &tok) == TR_OK && strcmp(tok, "\xe5\x8c\x97") == 0, "id_to_token");
    CHECK(tr_tokenizer_vocab_size(t) == 19 && tr_tokenizer_special_count(t) == 5, "sizes");
    CHECK(tr_tokenizer_special(t, 2, &tok, &id) == TR_OK && id == 2 && strcmp(tok, "[CLS]") == 0, "special 2");
    CHECK(tr_tokenizer_num_special(t, 0) == 2 && tr_tokenizer_num_special(t, 1) == 3, "num_special");

    CHECK(tr_tokenizer_encode(t, "ok\xff", 3, NULL, 0, 1, &e) == TR_ERR_INVALID && strstr(tr_error_msg(), "byte 2"),
          "invalid UTF-8: %s", tr_error_msg());
    CHECK(e.ids == NULL && e.len == 0, "zeroed on failure");
    tr_tokenizer_free(t);
}

static void cased(void) {
    tr_tokenizer *t = load(bert_json("false", ""));
    if (!t) return;
    expect_ids(t, "Hello hello", NULL, 1, "2 13 5 3");
    expect_ids(t, "Caf\xc3\xa9 cafe", NULL, 1, "2 1 12 3"); /* accents kept when cased */
    tr_tokenizer_free(t);
}

static void truncation_and_padding(void) {
    tr_tokenizer *t =
        load(bert_json("true", "\"truncation\": {\"max_length\": 6, \"strategy\": \"LongestFirst\", \"stride\": 0},"));
    if (!t) return;
    expect_ids(t, "hello hello hello", "world", 1, "2 5 5 3 7 3");
    expect_ids(t, "hello hello hello hello hello hello", NULL, 1, "2 5 5 5 5 3");
    expect_ids(t, "hello hello hello", "world world world", 1, "2 5 3 7 7 3"); /* halves: 1 and 2 */
    tr_truncation tr;
    tr_tokenizer_truncation(t, &tr);
    CHECK(tr.enabled && tr.max_length == 6 && tr.strategy == TR_TRUNCATE_LONGEST_FIRST, "truncation from the file");
    tr.strategy = TR_TRUNCATE_ONLY_FIRST;
    CHECK(tr_tokenizer_set_truncation(t, &tr) == TR_OK, "only_first");
    expect_ids(t, "hello hello hello", "world", 1, "2 5 5 3 7 3");
    tr.strategy = TR_TRUNCATE_ONLY_SECOND;
    tr_tokenizer_set_truncation(t, &tr);
    expect_ids(t, "hello", "world world world world", 1, "2 5 3 7 7 3");
    tr_encoding e;
    CHECK(tr_tokenizer_encode(t, "hello hello hello", 17, "world", 5, 1, &e) == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "too short"),
          "only_second too short: %s", tr_error_msg());
    tr.direction = TR_SIDE_LEFT;
    tr.strategy = TR_TRUNCATE_LONGEST_FIRST;
    tr_tokenizer_set_truncation(t, &tr);
    expect_ids(t, "un hello world world world", NULL, 1, "2 5 7 7 7 3");
    tr_tokenizer_set_truncation(t, NULL);

    tr_padding p = {.strategy = TR_PAD_FIXED, .length = 6, .direction = TR_SIDE_RIGHT, .pad_id = 0, .pad_token = "[PAD]"};
    CHECK(tr_tokenizer_set_padding(t, &p) == TR_OK, "padding");
    expect_ids(t, "hello", NULL, 1, "2 5 3 0 0 0");
    CHECK(tr_tokenizer_encode(t, "hello", 5, NULL, 0, 1, &e) == TR_OK && e.length == 3 && e.attention_mask[3] == 0 &&
              e.attention_mask[2] == 1 && e.special_mask[4] == 1,
          "padding masks");
    tr_encoding_free(&e);
    p.direction = TR_SIDE_LEFT;
    p.pad_type_id = 1;
    tr_tokenizer_set_padding(t, &p);
    expect_ids(t, "hello", NULL, 1, "0 0 0 2 5 3");
    CHECK(tr_tokenizer_encode(t, "hello", 5, NULL, 0, 1, &e) == TR_OK && e.type_ids[0] == 1 && e.type_ids[3] == 0,
          "pad type id");
    tr_encoding_free(&e);

    p.strategy = TR_PAD_LONGEST;
    p.direction = TR_SIDE_RIGHT;
    tr_tokenizer_set_padding(t, &p);
    const char *texts[] = {"hello", "hello world !"};
    size_t lens[] = {5, 13};
    tr_encoding out[2];
    CHECK(tr_tokenizer_encode_batch(t, 2, texts, lens, NULL, NULL, 1, out) == TR_OK, "batch: %s", tr_error_msg());
    CHECK(out[0].len == 5 && out[1].len == 5 && out[0].ids[4] == 0 && out[0].length == 3 && out[1].ids[3] == 8,
          "batch padded to the longest");
    tr_encoding_free(&out[0]);
    tr_encoding_free(&out[1]);
    p.multiple_of = 4;
    tr_tokenizer_set_padding(t, &p);
    expect_ids(t, "hello world !", NULL, 1, "2 5 7 8 3 0 0 0");
    tr_tokenizer_free(t);
}

static void other_components(void) {
    /* NFKC, Lowercase, Replace, Strip; Whitespace, Digits and Punctuation; a template. */
    const char *json =
        "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKC\"}, {\"type\": \"Lowercase\"},"
        " {\"type\": \"Replace\", \"pattern\": {\"String\": \"x\"}, \"content\": \"a\"},"
        " {\"type\": \"Strip\", \"strip_left\": true, \"strip_right\": true}]},"
        "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Whitespace\"},"
        " {\"type\": \"Digits\", \"individual_digits\": true}, {\"type\": \"Punctuation\", \"behavior\": \"Isolated\"}]},"
        "\"post_processor\": {\"type\": \"TemplateProcessing\","
        " \"single\": [{\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],"
        " \"pair\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}},"
        "  {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}],"
        " \"special_tokens\": {\"[CLS]\": {\"id\": \"[CLS]\", \"ids\": [2], \"tokens\": [\"[CLS]\"]},"
        "  \"[SEP]\": {\"id\": \"[SEP]\", \"ids\": [3], \"tokens\": [\"[SEP]\"]}}},"
        "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"[UNK]\": 0, \"[CLS]\": 2, "
        "\"[SEP]\": 3, \"a\": 1, \"1\": 4, \"2\": 5, \".\": 6, \"hello\": 7}}}";
    tr_tokenizer *t = load(json);
    if (!t) return;
    expect_ids(t, " \xef\xbc\xa8\xef\xbd\x85llo x12. ", NULL, 1, "2 7 1 4 5 6"); /* full-width Hello */
    expect_ids(t, "a", "hello", 1, "1 3 7");
    tr_encoding e;
    CHECK(tr_tokenizer_encode(t, "hello\0lo a", 10, NULL, 0, 0, &e) == TR_OK && e.len == 4 && e.ids[0] == 7 && e.ids[1] == 0 &&
              e.ids[2] == 0 && e.ids[3] == 1,
          "a NUL in the text: %zu tokens", e.len); /* hello, \0, lo ([UNK]s), a */
    tr_encoding_free(&e);
    char *text = NULL;
    int32_t ids[] = {7, 1};
    CHECK(tr_tokenizer_decode(t, ids, 2, 1, &text) == TR_OK && strcmp(text, "hello a") == 0, "no decoder: '%s'",
          text ? text : "(null)");
    free(text);
    tr_tokenizer_free(t);
}

/* NFD puts each run of combining marks in canonical order (stable by combining class): U+0316
 * (class 220) before U+0301 (230). A run of 200,000 marks takes linear time. */
static void canonical_order(void) {
    const char *json =
        "{\"normalizer\": {\"type\": \"NFD\"}, \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"},"
        "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\","
        " \"vocab\": {\"[UNK]\": 0, \"a\\u0316\\u0301\": 1, \"a\\u0316\\u0316\\u0316\\u0301\\u0301\\u0301\": 2,"
        " \"a\": 3, \"##\\u0316\": 4, \"##\\u0301\": 5}}}";
    tr_tokenizer *t = load(json);
    if (!t) return;
    expect_ids(t, "a\xcc\x81\xcc\x96", NULL, 1, "1");
    expect_ids(t, "a\xcc\x81\xcc\x96\xcc\x81\xcc\x96\xcc\x81\xcc\x96 a\xcc\x96\xcc\x81", NULL, 1, "2 1");
    size_t n = 100000, len = 1 + 4 * n;
    char *text = malloc(len);
    if (text) {
        text[0] = 'a';
        for (size_t i = 0; i < n; i++) memcpy(text + 1 + 4 * i, "\xcc\x81\xcc\x96", 4);
        tr_encoding e;
        tr_status st = tr_tokenizer_encode(t, text, len, NULL, 0, 0, &e);
        /* longer than max_input_chars_per_word: one [UNK] over the whole word */
        CHECK(st == TR_OK && e.len == 1 && e.ids[0] == 0, "a run of %zu marks: %s, %zu tokens",
              2 * n, st == TR_OK ? "ok" : tr_error_msg(), e.len);
        if (st == TR_OK) tr_encoding_free(&e);
        free(text);
    }
    tr_tokenizer_free(t);
}

/* ---- SentencePiece side: Unigram, Precompiled, Metaspace, regex Replace, decoders ---- */

#define UNIGRAM_VOCAB                                                                          \
    "[[\"<unk>\", 0.0], [\"a\", -1.0], [\"b\", -2.0], [\"ab\", -2.5], [\"c\", -3.0], "          \
    "[\"x\", -1.0], [\"y\", -1.0], [\"xy\", -2.0], [\"\\u2581\", -1.5], [\"\\u2581hi\", -1.0], " \
    "[\"\\u2581yo\", -1.0], [\"<s>\", 0.0], [\"<0xE2>\", -5.0], [\"<0x98>\", -5.0], "            \
    "[\"<0x83>\", -5.0], [\"\\u2581a\", -0.5]]"

static tr_tokenizer *unigram_tok(const char *model_extra, const char *parts) {
    char buf[8192];
    snprintf(buf, sizeof buf, "{\"model\": {\"type\": \"Unigram\", \"vocab\": " UNIGRAM_VOCAB "%s}%s}", model_extra, parts);
    return load(buf);
}

/* Token i's text as --tokens shows it: its own text, else the vocabulary's string. */
static void expect_token_text(tr_tokenizer *t, const char *text, size_t i, const char *want) {
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

static void expect_decode(tr_tokenizer *t, const int32_t *ids, size_t n, const char *want) {
    char *text = NULL;
    CHECK(tr_tokenizer_decode(t, ids, n, 0, &text) == TR_OK && text && strcmp(text, want) == 0, "decode: '%s', expected '%s'",
          text ? text : "(null)", want);
    free(text);
}

static void unigram(void) {
    tr_tokenizer *t = unigram_tok(", \"unk_id\": 0", "");
    if (!t) return;
    expect_ids(t, "ab", NULL, 0, "3");     /* -2.5 beats a + b = -3 */
    expect_ids(t, "abc", NULL, 0, "3 4");
    expect_ids(t, "xy", NULL, 0, "7");     /* a tie (-2 both ways): the piece that starts first */
    expect_ids(t, "xxy", NULL, 0, "5 7");
    /* Unknown characters score min - 10 and a run of them is one unknown token, whose text is
     * the run (as tokenizers shows it). */
    expect_ids(t, "a\xe2\x98\x83\xe2\x98\x83" "b", NULL, 0, "1 0 2");
    expect_token_text(t, "a\xe2\x98\x83\xe2\x98\x83" "b", 1, "\xe2\x98\x83\xe2\x98\x83");
    expect_token_text(t, "a\xe2\x98\x83\xe2\x98\x83" "b", 2, "b");
    expect_ids(t, "", NULL, 0, "");
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
        expect_ids(t, "a\xe2\x98\x83", NULL, 0, "1 12 13 14");
        expect_ids(t, "a\xe2\x98\x84", NULL, 0, "1 0"); /* 0x84 is no piece: unk */
        tr_tokenizer_free(t);
    }
    /* Without unk_id an unknown character is an error; known text still encodes. */
    t = unigram_tok(", \"unk_id\": null", "");
    if (t) {
        expect_ids(t, "ab", NULL, 0, "3");
        CHECK(tr_tokenizer_encode(t, "a?", 2, NULL, 0, 0, &e) != TR_OK && strstr(tr_error_msg(), "no unk_id"),
              "no unk_id: %s", tr_error_msg());
        tr_tokenizer_free(t);
    }
    /* No "type": a vocab list of [piece, score] is Unigram, as the Rust library reads it. */
    t = load("{\"model\": {\"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"q\", -1]]}}");
    if (t) {
        expect_ids(t, "qq!", NULL, 0, "1 1 0");
        tr_tokenizer_free(t);
    }
    /* Replace: the content takes the alignment of the match's last character (tokenizers 0.21.4). */
    t = load("{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \"``\"}, \"content\": \"\\\"\"},"
             " \"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"\\\"\", -1], [\"a\", -1]]}}");
    if (t) {
        CHECK(tr_tokenizer_encode(t, "a``a", 4, NULL, 0, 0, &e) == TR_OK && e.len == 3 && e.ids[1] == 1 && e.offsets[2] == 2 &&
                  e.offsets[3] == 3,
              "replace alignment");
        tr_encoding_free(&e);
        tr_tokenizer_free(t);
    }
    expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": {\"a\": 0}}}", "model.vocab: expected a list of [piece, score]");
    expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}",
                   "model.vocab[0][1]: expected the piece's score (a number)");
    expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1], [\"b\"]]}}", "model.vocab[1]: expected [piece, score]");
    expect_refused("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 2, \"vocab\": [[\"a\", -1], [\"b\", -1]]}}",
                   "model.unk_id: 2 is not a piece id (the vocabulary has 2 pieces)");
    expect_refused("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": []}}", "model.vocab: the vocabulary is empty");
    expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1], [\"a\", -2]]}}", "model.vocab[1]: token 'a' is given twice");
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
        expect_ids(t, "hi   yo", NULL, 0, "9 10");        /* spaces squeezed, marked, split before each mark */
        expect_ids(t, "hi<s>yo", NULL, 0, "9 11 10");     /* "always": after an added token too */
        expect_ids(t, "\xe2\x96\x81" "a", NULL, 0, "15"); /* starts with the mark: none prepended */
        expect_token_text(t, "hi yo", 1, "\xe2\x96\x81yo");
        tr_encoding e;
        CHECK(tr_tokenizer_encode(t, "hi  yo", 6, NULL, 0, 0, &e) == TR_OK && e.len == 2 && e.offsets[0] == 0 &&
                  e.offsets[1] == 2 && e.offsets[2] == 3 && e.offsets[3] == 6,
              "metaspace offsets %zu..%zu %zu..%zu", e.offsets[0], e.offsets[1], e.offsets[2], e.offsets[3]);
        tr_encoding_free(&e);
        int32_t ids[] = {9, 10, 1};
        expect_decode(t, ids, 3, "hi yoa"); /* the first token's mark dropped */
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, parts, "first", "true", "never");
    t = unigram_tok(", \"unk_id\": 0", buf);
    if (t) {
        expect_ids(t, "hi<s>yo", NULL, 0, "9 11 6 0"); /* "first": nothing before yo */
        int32_t ids[] = {9, 10};
        expect_decode(t, ids, 2, " hi yo");
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, parts, "never", "false", "always");
    t = unigram_tok(", \"unk_id\": 0", buf);
    if (t) {
        expect_ids(t, "a ab", NULL, 0, "1 15 2"); /* one word, nothing prepended */
        tr_tokenizer_free(t);
    }
    expect_refused("{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"add_prefix_space\": false},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}",
                   "pre_tokenizer.add_prefix_space: false does not match the prepend_scheme");
    expect_refused("{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"ab\"},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}",
                   "pre_tokenizer.replacement: expected one character");
    expect_refused("{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": \"sometimes\"},"
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
        expect_decode(t, ids, 5, "hi\xe2\x98\x83 yo");
        int32_t bad[] = {9, 12, 13, 10, 14};
        expect_decode(t, bad, 5, "hi\xef\xbf\xbd\xef\xbf\xbd yo\xef\xbf\xbd"); /* not UTF-8: U+FFFD per byte */
        tr_tokenizer_free(t);
    }
    t = unigram_tok(", \"unk_id\": 0",
                    ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": ["
                    "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"[ab]+\"}, \"content\": \"<>\"},"
                    "{\"type\": \"Strip\", \"content\": \"<\", \"start\": 2, \"stop\": 1}]}");
    if (t) {
        int32_t ids[] = {3, 4, 1, 9};
        expect_decode(t, ids, 4, ">c>\xe2\x96\x81hi"); /* each "<>" stripped to ">" */
        tr_tokenizer_free(t);
    }
    expect_refused("{\"decoder\": {\"type\": \"Strip\", \"content\": \" \", \"start\": 1},"
                   " \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}}", "decoder.stop: expected a non-negative integer");
    expect_refused("{\"decoder\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"(\"}, \"content\": \"\"},"
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
    tr_tokenizer *t = load(json);
    if (t) {
        expect_ids(t, "xAxC", NULL, 0, "4 1 4 2 2");
        expect_ids(t, "xBx", NULL, 0, "4 4");
        expect_ids(t, "e\xcc\x81", NULL, 0, "3"); /* the cluster (3 bytes) is looked up whole */
        expect_ids(t, "De\xcc\x81", NULL, 0, "7 3");
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
    expect_refused(json, "normalizer.precompiled_charsmap: not valid base64");
    snprintf(json, sizeof json, fmt, "QUJ=");
    expect_refused(json, "not valid base64: non-zero trailing bits");
    b64(raw, charsmap(raw, 100), enc); /* the trie cut short */
    snprintf(json, sizeof json, fmt, enc);
    expect_refused(json, "normalizer.precompiled_charsmap: truncated: the trie needs 4096 bytes, 400 follow");
    snprintf(json, sizeof json, fmt, "AAAAAA==");
    expect_refused(json, "the trie is empty");
    snprintf(json, sizeof json, "{\"normalizer\": {\"type\": \"Precompiled\"}, \"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
    expect_refused(json, "normalizer.precompiled_charsmap: expected the charsmap as a base64 string");
}

static void refusals(void) {
    char buf[8192];
    expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0", "malformed JSON");
    expect_refused("[]", "expected a JSON object");
    expect_refused("{}", "model: missing");
    const char *b = bert_json("true", ""), *n = strstr(b, "BertNormalizer");
    snprintf(buf, sizeof buf, "%.*sFoo%s", (int)(n - b), b, n + strlen("BertNormalizer"));
    expect_refused(buf, "normalizer: normalizer 'Foo' is not supported (supported: BertNormalizer");
    expect_refused("{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Whitespace\"},"
                   " {\"type\": \"UnicodeScripts\"}]}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
                   "pre_tokenizer.pretokenizers[1]: pre-tokenizer 'UnicodeScripts' is not supported");
    expect_refused("{\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}", "model: model 'WordLevel' is not supported");
    expect_refused("{\"decoder\": {\"type\": \"CTC\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
                   "decoder 'CTC' is not supported");
    expect_refused("{\"post_processor\": {\"type\": \"Foo\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "post_processor: post-processor 'Foo' is not supported");
    expect_refused("{\"normalizer\": {\"type\": \"Nmt\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "normalizer 'Nmt' is not supported");
    expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"b\": 0}}}", "model.vocab[\"b\"]: id 0 is given twice");
    expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"b\": 2}}}", "without gaps");
    expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": \"x\"}}}", "model.vocab[\"a\"]");
    expect_refused("{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"a(+\"}, \"content\": \"b\"},"
                   " \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "normalizer.pattern.Regex: the regular expression 'a(+' does not compile");
    expect_refused("{\"truncation\": {\"max_length\": 8, \"stride\": 2}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "truncation.stride");
    expect_refused("{\"padding\": {\"strategy\": \"Sometimes\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "padding.strategy");
    expect_refused("{\"added_tokens\": [{\"id\": 5, \"content\": \"a\"}], \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
                   "added_tokens[0]: 'a' has id 5 here but 0 in model.vocab");

    expect_refused("{\"padding\": {\"strategy\": {\"Fixed\": 100000000}}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "padding: 100000000 tokens is more than the 16777216 this build pads to");

    /* Added tokens sharing first code points: leftmost-longest, in file order among equals;
     * decode skips the special ones by id. */
    tr_tokenizer *m = load("{\"added_tokens\": [{\"id\": 1, \"content\": \"ab\", \"special\": true},"
                           " {\"id\": 2, \"content\": \"abc\", \"normalized\": false},"
                           " {\"id\": 3, \"content\": \"b\", \"special\": true},"
                           " {\"id\": 4, \"content\": \"zz\", \"normalized\": false}],"
                           " \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"ab\": 1, \"abc\": 2, \"b\": 3,"
                           " \"zz\": 4, \"a\": 5, \"##c\": 6}}}");
    if (m) {
        expect_ids(m, "abcabzzbac", NULL, 0, "2 1 4 3 5 6");
        int32_t ids[] = {2, 1, 4, 3, 5};
        char *text = NULL;
        CHECK(tr_tokenizer_decode(m, ids, 5, 1, &text) == TR_OK && strcmp(text, "abc zz a") == 0, "decode: '%s'",
              text ? text : "");
        free(text);
        tr_padding pad = {.strategy = TR_PAD_FIXED, .length = (size_t)1 << 30};
        CHECK(tr_tokenizer_set_padding(m, &pad) == TR_ERR_INVALID && strstr(tr_error_msg(), "more than"),
              "huge padding: %s", tr_error_msg());
        tr_tokenizer_free(m);
    }

    /* Sparse ids: an added token far past the vocabulary; the id bound covers it. */
    tr_tokenizer *sp = load("{\"added_tokens\": [{\"id\": 5000, \"content\": \"<x>\", \"special\": true}],"
                            " \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"<x>\", 5000], \"cls\": [\"[CLS]\", 7000]},"
                            " \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"a\": 1, \"b\": 2}}}");
    if (sp) {
        CHECK(tr_tokenizer_vocab_size(sp) == 4 && tr_tokenizer_id_bound(sp) == 7001, "id bound: size %zu, bound %zu",
              tr_tokenizer_vocab_size(sp), tr_tokenizer_id_bound(sp));
        tr_tokenizer_free(sp);
    }

    /* An added token the normalizer empties matches nothing here and must not stall
     * (tokenizers 0.23.3 gives [UNK] [UNK] for this text: its empty pattern splits it). */
    tr_tokenizer *z = load("{\"added_tokens\": [{\"id\": 1, \"content\": \"\\u200b\", \"normalized\": true}],"
                           " \"normalizer\": {\"type\": \"BertNormalizer\"},"
                           " \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"\\u200b\": 1, \"ab\": 2}}}");
    if (z) {
        tr_encoding e;
        CHECK(tr_tokenizer_encode(z, "a\xe2\x80\x8b" "b", 5, NULL, 0, 1, &e) == TR_OK, "emptied added token");
        tr_encoding_free(&e);
        tr_tokenizer_free(z);
    }

    /* The unknown token missing from the vocabulary is an error at encode time. */
    tr_tokenizer *t = load("{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"a\": 0}}}");
    if (t) {
        tr_encoding e;
        CHECK(tr_tokenizer_encode(t, "zz", 2, NULL, 0, 1, &e) != TR_OK && strstr(tr_error_msg(), "'[UNK]'"),
              "missing unk: %s", tr_error_msg());
        tr_tokenizer_free(t);
    }
}

/* ---- BPE ---- */

#define BL_VOCAB                                                                                 \
    "\"vocab\": {\"h\": 0, \"e\": 1, \"l\": 2, \"o\": 3, \"\\u0120\": 4, \"w\": 5, \"r\": 6, \"d\": 7, " \
    "\"he\": 8, \"ll\": 9, \"hell\": 10, \"hello\": 11, \"\\u0120w\": 12, \"or\": 13, \"\\u0120wor\": 14, " \
    "\"!\": 15, \"\\u00c3\": 16, \"\\u0100\": 17, \"<s>\": 18, \"</s>\": 19}"

static char *bytelevel_json(const char *merges, const char *prefix_space, const char *extra) {
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": %s, \"trim_offsets\": true,"
             " \"use_regex\": true},"
             "\"decoder\": {\"type\": \"ByteLevel\"}, %s"
             "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, " BL_VOCAB ", \"merges\": %s}}",
             prefix_space, extra, merges);
    return buf;
}

static void bpe_bytelevel(void) {
    const char *legacy = "[\"h e\", \"l l\", \"he ll\", \"hell o\", \"\\u0120 w\", \"o r\", \"\\u0120w or\"]";
    const char *pairs = "[[\"h\", \"e\"], [\"l\", \"l\"], [\"he\", \"ll\"], [\"hell\", \"o\"], [\"\\u0120\", \"w\"],"
                        " [\"o\", \"r\"], [\"\\u0120w\", \"or\"]]";
    for (int k = 0; k < 2; k++) {
        tr_tokenizer *t = load(bytelevel_json(k ? pairs : legacy, "false", ""));
        if (!t) return;
        expect_ids(t, "hello world!", NULL, 1, "11 14 2 7 15");
        expect_ids(t, "lll hell", NULL, 1, "9 2 4 10"); /* equal ranks: leftmost first */
        expect_ids(t, "", NULL, 1, "");
        int32_t ids[] = {11, 14, 2, 7, 15};
        char *text = NULL;
        size_t len = 0;
        CHECK(tr_tokenizer_decode(t, ids, 5, 1, &text) == TR_OK && strcmp(text, "hello world!") == 0, "decode: '%s'",
              text ? text : "(null)");
        free(text);
        int32_t bad[] = {16, 11}; /* a lone 0xC3 byte: U+FFFD */
        CHECK(tr_tokenizer_decode(t, bad, 2, 1, &text) == TR_OK && strcmp(text, "\xef\xbf\xbdhello") == 0, "lossy: '%s'",
              text ? text : "(null)");
        free(text);
        int32_t nul[] = {11, 17, 11};
        CHECK(tr_tokenizer_decode_len(t, nul, 3, 1, &text, &len) == TR_OK && len == 11 && memcmp(text, "hello\0hello", 11) == 0,
              "decode with NUL: %zu bytes", len);
        free(text);
        tr_tokenizer_free(t);
    }
    tr_tokenizer *t = load(bytelevel_json(legacy, "true", ""));
    if (t) {
        expect_ids(t, "hello", NULL, 1, "4 11");
        expect_ids(t, " hello", NULL, 1, "4 11");
        tr_tokenizer_free(t);
    }
    /* RobertaProcessing: <s> A </s></s> B </s>, type ids all 0; offsets trimmed of the space. */
    t = load(bytelevel_json(legacy, "true",
                            "\"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 19], \"cls\": [\"<s>\", 18],"
                            " \"trim_offsets\": true, \"add_prefix_space\": true},"));
    if (t) {
        expect_ids(t, "hello", "world", 1, "18 4 11 19 19 14 2 7 19");
        expect_ids(t, "hello", "world", 0, "4 11 14 2 7");
        tr_encoding e;
        CHECK(tr_tokenizer_encode(t, "hello  world", 12, "world", 5, 1, &e) == TR_OK, "roberta pair");
        int ok = e.len == 13;
        for (size_t i = 0; ok && i < e.len; i++) ok = e.type_ids[i] == 0;
        CHECK(ok, "roberta: %zu tokens, type ids all 0", e.len);
        /* "Ġwor" of "  world" (byte 6..10 after the two spaces' Ġ token at 5..6): no space in it */
        CHECK(ok && e.offsets[2 * 4] == 7 && e.offsets[2 * 4 + 1] == 10, "trimmed offsets %zu..%zu", e.offsets[8], e.offsets[9]);
        CHECK(tr_tokenizer_num_special(t, 0) == 2 && tr_tokenizer_num_special(t, 1) == 4, "roberta num_special");
        tr_encoding_free(&e);
        tr_tokenizer_free(t);
    }
}

static void bpe_options(void) {
    /* continuing_subword_prefix, end_of_word_suffix, unk fused or not */
    const char *fmt = "{\"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"}, \"decoder\": {\"type\": \"BPEDecoder\", \"suffix\": \"</w>\"},"
                      "\"model\": {\"unk_token\": \"<unk>\", \"continuing_subword_prefix\": \"##\", \"end_of_word_suffix\": \"</w>\","
                      " \"fuse_unk\": %s, \"vocab\": {\"<unk>\": 0, \"a\": 1, \"##b\": 2, \"##c</w>\": 3, \"ab\": 4, \"a</w>\": 5},"
                      " \"merges\": [\"a ##b\"]}}";
    char buf[1024];
    snprintf(buf, sizeof buf, fmt, "true");
    tr_tokenizer *t = load(buf); /* no "type": merges say BPE */
    if (t) {
        expect_ids(t, "abc a", NULL, 1, "4 3 5");
        expect_ids(t, "xxbc", NULL, 1, "0 2 3");
        int32_t ids[] = {4, 3, 5};
        char *text = NULL;
        CHECK(tr_tokenizer_decode(t, ids, 3, 1, &text) == TR_OK && strcmp(text, "ab##c a") == 0, "BPEDecoder: '%s'",
              text ? text : "(null)");
        free(text);
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, fmt, "false");
    t = load(buf);
    if (t) {
        expect_ids(t, "xxbc", NULL, 1, "0 0 2 3");
        tr_tokenizer_free(t);
    }
    /* byte_fallback: a character not in the vocabulary as its bytes when all of them are */
    t = load("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"vocab\": {\"<unk>\": 0,"
             " \"a\": 1, \"<0xC3>\": 2, \"<0xA9>\": 3}, \"merges\": []}}");
    if (t) {
        expect_ids(t, "a\xc3\xa9" "a", NULL, 1, "1 2 3 1");
        expect_ids(t, "a\xe2\x98\x83", NULL, 1, "1 0");
        tr_tokenizer_free(t);
    }
    /* ignore_merges: a word in the vocabulary is taken whole */
    const char *im = "{\"model\": {\"type\": \"BPE\", \"ignore_merges\": %s, \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"abb\": 3,"
                     " \"bb\": 4}, \"merges\": [\"b b\", \"a b\"]}}";
    snprintf(buf, sizeof buf, im, "false");
    if ((t = load(buf))) {
        expect_ids(t, "abb", NULL, 1, "0 4");
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, im, "true");
    if ((t = load(buf))) {
        expect_ids(t, "abb", NULL, 1, "3");
        tr_tokenizer_free(t);
    }
}

/* Split: empty matches count as onig's find_iter gives them; \w is Oniguruma's (marks in it). */
static void split_regex(void) {
    const char *fmt = "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"%s\","
                      " \"invert\": %s}, \"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"vocab\": {\"b\": 0, \"a\": 1,"
                      " \"c\": 2, \"ba\": 3, \"ac\": 4, \"bac\": 5, \"a\\u0301b\": 6, \" \": 7, \"-\": 8, \"b-\": 9}, \"merges\": []}}";
    static const struct { const char *re, *how, *inv, *text, *want; } cases[] = {
        {"b|(?=c)", "MergedWithNext", "false", "bac", "3 2"},
        {"b|(?=c)", "Isolated", "false", "bac", "0 1 2"},
        {"b|(?=c)", "MergedWithPrevious", "true", "bac", "3 2"},
        {"x*", "MergedWithNext", "false", "bac", "0 1 2"},
        {"\\\\w+", "Removed", "true", "a\xcc\x81" "b c", "6 2"},
        {"\\\\s", "Removed", "false", "ba\xe1\xa0\x8e" "c", "0 1 2"}, /* U+180E: no \s for onig, no token */
        {"-", "MergedWithPrevious", "false", "b-ac", "9 4"},
        {"\\\\bc", "Isolated", "false", "ba c", "0 1 7 2"},
        {"\\\\bc", "Isolated", "false", "bac", "5"},
    };
    char buf[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, fmt, cases[i].re, cases[i].how, cases[i].inv);
        tr_tokenizer *t = load(buf);
        if (!t) continue;
        expect_ids(t, cases[i].text, NULL, 0, cases[i].want);
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, fmt, "(", "Isolated", "false");
    expect_refused(buf, "pre_tokenizer.pattern.Regex: the regular expression '(' does not compile");
}

static void bpe_refusals(void) {
    const char *fmt = "{\"model\": {\"type\": \"BPE\", %s \"vocab\": {\"h\": 0, \"e\": 1, \"l\": 2, \"he\": 3}, \"merges\": %s}}";
    char buf[1024];
    snprintf(buf, sizeof buf, fmt, "", "[\"h e\", \"h x\"]");
    expect_refused(buf, "model.merges[1]: 'h' + 'x': 'x' is not in model.vocab");
    snprintf(buf, sizeof buf, fmt, "", "[\"e l\"]");
    expect_refused(buf, "model.merges[0]: 'e' + 'l' = 'el' is not in model.vocab");
    snprintf(buf, sizeof buf, fmt, "", "[\"h e l\"]");
    expect_refused(buf, "model.merges[0]: 'h e l' is not two tokens separated by one space");
    snprintf(buf, sizeof buf, fmt, "", "[[\"h\", \"e\"], \"h e\"]");
    expect_refused(buf, "model.merges[1]: expected [\"A\", \"B\"]");
    snprintf(buf, sizeof buf, fmt, "", "{}");
    expect_refused(buf, "model.merges: expected a list");
    snprintf(buf, sizeof buf, fmt, "\"dropout\": 0.1,", "[]");
    expect_refused(buf, "model.dropout: 0.1 is not supported (only null or 0");
    snprintf(buf, sizeof buf, fmt, "\"dropout\": 0.0,", "[\"#version: 0.2\", \"h e\"]");
    tr_tokenizer *t = load(buf);
    if (t) {
        expect_ids(t, "hel", NULL, 1, "3 2");
        tr_tokenizer_free(t);
    }
    expect_refused("{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Foo\": 1}, \"behavior\": \"Isolated\"},"
                   " \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                   "pre_tokenizer.pattern: expected {\"String\": ...} or {\"Regex\": ...}");
}

static void files(void) {
    char dir[] = "/tmp/trainer-tok-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    tr_tokenizer *t = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(tr_tokenizer_load(&t, dir) == TR_ERR_IO && strstr(tr_error_msg(), path), "missing file: %s", tr_error_msg());
    FILE *f = fopen(path, "w");
    const char *json = bert_json("true", "");
    fwrite(json, 1, strlen(json), f);
    fclose(f);
    CHECK(tr_tokenizer_load(&t, dir) == TR_OK, "load a folder: %s", tr_error_msg());
    if (t) expect_ids(t, "hello", NULL, 1, "2 5 3");
    tr_tokenizer_free(t);
    f = fopen(path, "w");
    fwrite(json, 1, strlen(json) / 2, f); /* truncated */
    fclose(f);
    CHECK(tr_tokenizer_load(&t, path) == TR_ERR_PARSE && strstr(tr_error_msg(), "malformed JSON") &&
              strstr(tr_error_msg(), path),
          "truncated file: %s", tr_error_msg());
    unlink(path);
    rmdir(dir);
    CHECK(tr_tokenizer_load(&t, "/nonexistent/tok.json") == TR_ERR_IO && t == NULL, "missing path");
}

int main(void) {
    uncased();
    cased();
    truncation_and_padding();
    other_components();
    canonical_order();
    unigram();
    metaspace();
    spm_decoders();
    precompiled();
    refusals();
    bpe_bytelevel();
    bpe_options();
    split_regex();
    bpe_refusals();
    files();
    return test_finish();
}
