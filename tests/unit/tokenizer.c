/* Tokenizers (core/src/tokenizer), WordPiece: ids, type ids, masks and offsets of small
 * hand-made tokenizer.json files (cased and uncased, accents, CJK, punctuation, long words,
 * pairs under each truncation strategy, padding left and right), decode, the message of each
 * refused file, and files on disk. The ids of real files are checked against Hugging Face's
 * tokenizers by the oracle tests; these pin the rules. SentencePiece-style tokenizers are
 * tokenizer_spm.c, byte-level BPE tokenizer_bpe.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tok_check.h"

static void uncased(void) {
    tr_tokenizer *t = tok_load(tok_bert_json("true", ""));
    if (!t) return;
    tok_expect_ids(t, "Hello, World!", NULL, 1, "2 5 6 7 8 3");
    tok_expect_ids(t, "Hello, World!", NULL, 0, "5 6 7 8");
    tok_expect_ids(t, "  Caf\xc3\xa9\tunaffable ", NULL, 1, "2 12 9 10 11 3"); /* accent stripped */
    tok_expect_ids(t, "\xe5\x8c\x97\xe4\xba\xac", NULL, 1, "2 14 15 3");          /* CJK split */
    tok_expect_ids(t, "aaaaa", NULL, 1, "2 16 17 17 17 17 3");
    tok_expect_ids(t, "aaaaaaaaaa", NULL, 1, "2 1 3"); /* over max_input_chars_per_word */
    tok_expect_ids(t, "unaffablex", NULL, 1, "2 1 3"); /* one piece missing: the whole word */
    tok_expect_ids(t, "", NULL, 1, "2 3");
    tok_expect_ids(t, "hello\xe2\x80\x8b\x01 [SEP]world", NULL, 1, "2 5 3 7 3"); /* control gone, special kept */
    tok_expect_ids(t, "hello", "world", 1, "2 5 3 7 3");
    tok_expect_ids(t, "hello", "world", 0, "5 7");

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
    tr_tokenizer *t = tok_load(tok_bert_json("false", ""));
    if (!t) return;
    tok_expect_ids(t, "Hello hello", NULL, 1, "2 13 5 3");
    tok_expect_ids(t, "Caf\xc3\xa9 cafe", NULL, 1, "2 1 12 3"); /* accents kept when cased */
    tr_tokenizer_free(t);
}

static void truncation_and_padding(void) {
    tr_tokenizer *t =
        tok_load(tok_bert_json("true", "\"truncation\": {\"max_length\": 6, \"strategy\": \"LongestFirst\", \"stride\": 0},"));
    if (!t) return;
    tok_expect_ids(t, "hello hello hello", "world", 1, "2 5 5 3 7 3");
    tok_expect_ids(t, "hello hello hello hello hello hello", NULL, 1, "2 5 5 5 5 3");
    tok_expect_ids(t, "hello hello hello", "world world world", 1, "2 5 3 7 7 3"); /* halves: 1 and 2 */
    tr_truncation tr;
    tr_tokenizer_truncation(t, &tr);
    CHECK(tr.enabled && tr.max_length == 6 && tr.strategy == TR_TRUNCATE_LONGEST_FIRST, "truncation from the file");
    tr.strategy = TR_TRUNCATE_ONLY_FIRST;
    CHECK(tr_tokenizer_set_truncation(t, &tr) == TR_OK, "only_first");
    tok_expect_ids(t, "hello hello hello", "world", 1, "2 5 5 3 7 3");
    tr.strategy = TR_TRUNCATE_ONLY_SECOND;
    tr_tokenizer_set_truncation(t, &tr);
    tok_expect_ids(t, "hello", "world world world world", 1, "2 5 3 7 7 3");
    tr_encoding e;
    CHECK(tr_tokenizer_encode(t, "hello hello hello", 17, "world", 5, 1, &e) == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "too short"),
          "only_second too short: %s", tr_error_msg());
    tr.direction = TR_SIDE_LEFT;
    tr.strategy = TR_TRUNCATE_LONGEST_FIRST;
    tr_tokenizer_set_truncation(t, &tr);
    tok_expect_ids(t, "un hello world world world", NULL, 1, "2 5 7 7 7 3");
    tr_tokenizer_set_truncation(t, NULL);

    tr_padding p = {.strategy = TR_PAD_FIXED, .length = 6, .direction = TR_SIDE_RIGHT, .pad_id = 0, .pad_token = "[PAD]"};
    CHECK(tr_tokenizer_set_padding(t, &p) == TR_OK, "padding");
    tok_expect_ids(t, "hello", NULL, 1, "2 5 3 0 0 0");
    CHECK(tr_tokenizer_encode(t, "hello", 5, NULL, 0, 1, &e) == TR_OK && e.length == 3 && e.attention_mask[3] == 0 &&
              e.attention_mask[2] == 1 && e.special_mask[4] == 1,
          "padding masks");
    tr_encoding_free(&e);
    p.direction = TR_SIDE_LEFT;
    p.pad_type_id = 1;
    tr_tokenizer_set_padding(t, &p);
    tok_expect_ids(t, "hello", NULL, 1, "0 0 0 2 5 3");
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
    tok_expect_ids(t, "hello world !", NULL, 1, "2 5 7 8 3 0 0 0");
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
    tr_tokenizer *t = tok_load(json);
    if (!t) return;
    tok_expect_ids(t, " \xef\xbc\xa8\xef\xbd\x85llo x12. ", NULL, 1, "2 7 1 4 5 6"); /* full-width Hello */
    tok_expect_ids(t, "a", "hello", 1, "1 3 7");
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
    tr_tokenizer *t = tok_load(json);
    if (!t) return;
    tok_expect_ids(t, "a\xcc\x81\xcc\x96", NULL, 1, "1");
    tok_expect_ids(t, "a\xcc\x81\xcc\x96\xcc\x81\xcc\x96\xcc\x81\xcc\x96 a\xcc\x96\xcc\x81", NULL, 1, "2 1");
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

static void refusals(void) {
    char buf[8192];
    tok_expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0", "malformed JSON");
    tok_expect_refused("[]", "expected a JSON object");
    tok_expect_refused("{}", "model: missing");
    const char *b = tok_bert_json("true", ""), *n = strstr(b, "BertNormalizer");
    snprintf(buf, sizeof buf, "%.*sFoo%s", (int)(n - b), b, n + strlen("BertNormalizer"));
    tok_expect_refused(buf, "normalizer: normalizer 'Foo' is not supported (supported: BertNormalizer");
    tok_expect_refused("{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Whitespace\"},"
                   " {\"type\": \"UnicodeScripts\"}]}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
                   "pre_tokenizer.pretokenizers[1]: pre-tokenizer 'UnicodeScripts' is not supported");
    tok_expect_refused("{\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}", "model: model 'WordLevel' is not supported");
    tok_expect_refused("{\"decoder\": {\"type\": \"CTC\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
                   "decoder 'CTC' is not supported");
    tok_expect_refused("{\"post_processor\": {\"type\": \"Foo\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "post_processor: post-processor 'Foo' is not supported");
    tok_expect_refused("{\"normalizer\": {\"type\": \"Nmt\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "normalizer 'Nmt' is not supported");
    tok_expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"b\": 0}}}", "model.vocab[\"b\"]: id 0 is given twice");
    tok_expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"b\": 2}}}", "without gaps");
    tok_expect_refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": \"x\"}}}", "model.vocab[\"a\"]");
    tok_expect_refused("{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"a(+\"}, \"content\": \"b\"},"
                   " \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "normalizer.pattern.Regex: the regular expression 'a(+' does not compile");
    tok_expect_refused("{\"truncation\": {\"max_length\": 8, \"stride\": 2}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "truncation.stride");
    tok_expect_refused("{\"padding\": {\"strategy\": \"Sometimes\"}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "padding.strategy");
    tok_expect_refused("{\"added_tokens\": [{\"id\": 5, \"content\": \"a\"}], \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
                   "added_tokens[0]: 'a' has id 5 here but 0 in model.vocab");

    tok_expect_refused("{\"padding\": {\"strategy\": {\"Fixed\": 100000000}}, \"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                   "padding: 100000000 tokens is more than the 16777216 this build pads to");

    /* Added tokens sharing first code points: leftmost-longest, in file order among equals;
     * decode skips the special ones by id. */
    tr_tokenizer *m = tok_load("{\"added_tokens\": [{\"id\": 1, \"content\": \"ab\", \"special\": true},"
                           " {\"id\": 2, \"content\": \"abc\", \"normalized\": false},"
                           " {\"id\": 3, \"content\": \"b\", \"special\": true},"
                           " {\"id\": 4, \"content\": \"zz\", \"normalized\": false}],"
                           " \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"ab\": 1, \"abc\": 2, \"b\": 3,"
                           " \"zz\": 4, \"a\": 5, \"##c\": 6}}}");
    if (m) {
        tok_expect_ids(m, "abcabzzbac", NULL, 0, "2 1 4 3 5 6");
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
    tr_tokenizer *sp = tok_load("{\"added_tokens\": [{\"id\": 5000, \"content\": \"<x>\", \"special\": true}],"
                            " \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"<x>\", 5000], \"cls\": [\"[CLS]\", 7000]},"
                            " \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"a\": 1, \"b\": 2}}}");
    if (sp) {
        CHECK(tr_tokenizer_vocab_size(sp) == 4 && tr_tokenizer_id_bound(sp) == 7001, "id bound: size %zu, bound %zu",
              tr_tokenizer_vocab_size(sp), tr_tokenizer_id_bound(sp));
        tr_tokenizer_free(sp);
    }

    /* An added token the normalizer empties matches nothing here and must not stall
     * (tokenizers 0.23.3 gives [UNK] [UNK] for this text: its empty pattern splits it). */
    tr_tokenizer *z = tok_load("{\"added_tokens\": [{\"id\": 1, \"content\": \"\\u200b\", \"normalized\": true}],"
                           " \"normalizer\": {\"type\": \"BertNormalizer\"},"
                           " \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"\\u200b\": 1, \"ab\": 2}}}");
    if (z) {
        tr_encoding e;
        CHECK(tr_tokenizer_encode(z, "a\xe2\x80\x8b" "b", 5, NULL, 0, 1, &e) == TR_OK, "emptied added token");
        tr_encoding_free(&e);
        tr_tokenizer_free(z);
    }

    /* The unknown token missing from the vocabulary is an error at encode time. */
    tr_tokenizer *t = tok_load("{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"a\": 0}}}");
    if (t) {
        tr_encoding e;
        CHECK(tr_tokenizer_encode(t, "zz", 2, NULL, 0, 1, &e) != TR_OK && strstr(tr_error_msg(), "'[UNK]'"),
              "missing unk: %s", tr_error_msg());
        tr_tokenizer_free(t);
    }
}

static void files(void) {
    char dir[] = "/tmp/trainer-tok-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    tr_tokenizer *t = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(tr_tokenizer_load(&t, dir) == TR_ERR_IO && strstr(tr_error_msg(), path), "missing file: %s", tr_error_msg());
    FILE *f = fopen(path, "w");
    const char *json = tok_bert_json("true", "");
    fwrite(json, 1, strlen(json), f);
    fclose(f);
    CHECK(tr_tokenizer_load(&t, dir) == TR_OK, "load a folder: %s", tr_error_msg());
    if (t) tok_expect_ids(t, "hello", NULL, 1, "2 5 3");
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
    refusals();
    files();
    return test_finish();
}
