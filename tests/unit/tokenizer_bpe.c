/* Tokenizers (core/src/tokenizer), BPE: byte-level BPE (GPT-2 / RoBERTa style), the BPE
 * model's options, Split pre-tokenizers with regexes, and refused BPE files. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tok_check.h"

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
        tr_tokenizer *t = tok_load(bytelevel_json(k ? pairs : legacy, "false", ""));
        if (!t) return;
        tok_expect_ids(t, "hello world!", NULL, 1, "11 14 2 7 15");
        tok_expect_ids(t, "lll hell", NULL, 1, "9 2 4 10"); /* equal ranks: leftmost first */
        tok_expect_ids(t, "", NULL, 1, "");
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
    tr_tokenizer *t = tok_load(bytelevel_json(legacy, "true", ""));
    if (t) {
        tok_expect_ids(t, "hello", NULL, 1, "4 11");
        tok_expect_ids(t, " hello", NULL, 1, "4 11");
        tr_tokenizer_free(t);
    }
    /* RobertaProcessing: <s> A </s></s> B </s>, type ids all 0; offsets trimmed of the space. */
    t = tok_load(bytelevel_json(legacy, "true",
                            "\"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 19], \"cls\": [\"<s>\", 18],"
                            " \"trim_offsets\": true, \"add_prefix_space\": true},"));
    if (t) {
        tok_expect_ids(t, "hello", "world", 1, "18 4 11 19 19 14 2 7 19");
        tok_expect_ids(t, "hello", "world", 0, "4 11 14 2 7");
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
    tr_tokenizer *t = tok_load(buf); /* no "type": merges say BPE */
    if (t) {
        tok_expect_ids(t, "abc a", NULL, 1, "4 3 5");
        tok_expect_ids(t, "xxbc", NULL, 1, "0 2 3");
        int32_t ids[] = {4, 3, 5};
        char *text = NULL;
        CHECK(tr_tokenizer_decode(t, ids, 3, 1, &text) == TR_OK && strcmp(text, "ab##c a") == 0, "BPEDecoder: '%s'",
              text ? text : "(null)");
        free(text);
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, fmt, "false");
    t = tok_load(buf);
    if (t) {
        tok_expect_ids(t, "xxbc", NULL, 1, "0 0 2 3");
        tr_tokenizer_free(t);
    }
    /* byte_fallback: a character not in the vocabulary as its bytes when all of them are */
    t = tok_load("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"vocab\": {\"<unk>\": 0,"
             " \"a\": 1, \"<0xC3>\": 2, \"<0xA9>\": 3}, \"merges\": []}}");
    if (t) {
        tok_expect_ids(t, "a\xc3\xa9" "a", NULL, 1, "1 2 3 1");
        tok_expect_ids(t, "a\xe2\x98\x83", NULL, 1, "1 0");
        tr_tokenizer_free(t);
    }
    /* ignore_merges: a word in the vocabulary is taken whole */
    const char *im = "{\"model\": {\"type\": \"BPE\", \"ignore_merges\": %s, \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"abb\": 3,"
                     " \"bb\": 4}, \"merges\": [\"b b\", \"a b\"]}}";
    snprintf(buf, sizeof buf, im, "false");
    if ((t = tok_load(buf))) {
        tok_expect_ids(t, "abb", NULL, 1, "0 4");
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, im, "true");
    if ((t = tok_load(buf))) {
        tok_expect_ids(t, "abb", NULL, 1, "3");
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
        tr_tokenizer *t = tok_load(buf);
        if (!t) continue;
        tok_expect_ids(t, cases[i].text, NULL, 0, cases[i].want);
        tr_tokenizer_free(t);
    }
    snprintf(buf, sizeof buf, fmt, "(", "Isolated", "false");
    tok_expect_refused(buf, "pre_tokenizer.pattern.Regex: the regular expression '(' does not compile");
}

static void bpe_refusals(void) {
    const char *fmt = "{\"model\": {\"type\": \"BPE\", %s \"vocab\": {\"h\": 0, \"e\": 1, \"l\": 2, \"he\": 3}, \"merges\": %s}}";
    char buf[1024];
    snprintf(buf, sizeof buf, fmt, "", "[\"h e\", \"h x\"]");
    tok_expect_refused(buf, "model.merges[1]: 'h' + 'x': 'x' is not in model.vocab");
    snprintf(buf, sizeof buf, fmt, "", "[\"e l\"]");
    tok_expect_refused(buf, "model.merges[0]: 'e' + 'l' = 'el' is not in model.vocab");
    snprintf(buf, sizeof buf, fmt, "", "[\"h e l\"]");
    tok_expect_refused(buf, "model.merges[0]: 'h e l' is not two tokens separated by one space");
    snprintf(buf, sizeof buf, fmt, "", "[[\"h\", \"e\"], \"h e\"]");
    tok_expect_refused(buf, "model.merges[1]: expected [\"A\", \"B\"]");
    snprintf(buf, sizeof buf, fmt, "", "{}");
    tok_expect_refused(buf, "model.merges: expected a list");
    snprintf(buf, sizeof buf, fmt, "\"dropout\": 0.1,", "[]");
    tok_expect_refused(buf, "model.dropout: 0.1 is not supported (only null or 0");
    snprintf(buf, sizeof buf, fmt, "\"dropout\": 0.0,", "[\"#version: 0.2\", \"h e\"]");
    tr_tokenizer *t = tok_load(buf);
    if (t) {
        tok_expect_ids(t, "hel", NULL, 1, "3 2");
        tr_tokenizer_free(t);
    }
    tok_expect_refused("{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Foo\": 1}, \"behavior\": \"Isolated\"},"
                   " \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                   "pre_tokenizer.pattern: expected {\"String\": ...} or {\"Regex\": ...}");
}

int main(void) {
    bpe_bytelevel();
    bpe_options();
    split_regex();
    bpe_refusals();
    return test_finish();
}
