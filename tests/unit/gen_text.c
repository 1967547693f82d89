/* The text side of `trainer generate` (run/gen_text.h): a prompt as bytes or as a tokenizer's
 * ids (a leading special token kept, a trailing one dropped), the end-of-text token found by
 * name, and the continuation emitted as Hugging Face's pipeline gives it (decode of prompt and
 * new ids, special tokens skipped, past the decoded prompt), held back to its last space while
 * tokens come, a character split over byte-level tokens emitted whole, invalid bytes as they
 * are (bytes) or as U+FFFD (a byte-level decoder). Tokenizers: tests/data/tokdata's WordPiece
 * file, and byte-level ones written here (one token per byte, ids = byte values). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "run/gen_text.h"

typedef struct sink {
    char buf[512];
    size_t len;
    int calls;
} sink;

static void emit(void *user, const char *text, size_t len) {
    sink *s = user;
    if (s->len + len <= sizeof s->buf) memcpy(s->buf + s->len, text, len);
    s->len += len;
    s->calls++;
}

/* Pushes id and checks what the sink holds after it (all of the continuation so far). */
static void push(gen_text *t, sink *s, int32_t id, const char *want, size_t want_len) {
    CHECK(gen_text_push(t, id) == TR_OK, "push %d: %s", id, tr_error_msg());
    CHECK(s->len == want_len && memcmp(s->buf, want, want_len) == 0, "after id %d: '%.*s' (%zu bytes), expected '%.*s'",
          id, (int)s->len, s->buf, s->len, (int)want_len, want);
}

static void test_bytes(void) {
    gen_text t;
    sink s = {0};
    CHECK(gen_text_open(&t, NULL, emit, &s) == TR_OK, "open: %s", tr_error_msg());
    const char prompt[] = "a\xff" "b";
    CHECK(gen_text_prompt(&t, prompt, 3) == TR_OK, "prompt: %s", tr_error_msg());
    CHECK(t.n == 3 && t.ids[0] == 'a' && t.ids[1] == 255 && t.ids[2] == 'b', "byte ids: %zu: %d %d %d", t.n, t.ids[0],
          t.ids[1], t.ids[2]);
    CHECK(t.eos == -1 && s.len == 0, "bytes: no end-of-text token (%d), nothing emitted by the prompt", t.eos);
    push(&t, &s, 0xC3, "\xC3", 1); /* half a character: written as it comes */
    push(&t, &s, 0xA9, "\xC3\xA9", 2);
    push(&t, &s, 0xFE, "\xC3\xA9\xFE", 3);
    CHECK(gen_text_finish(&t) == TR_OK && s.len == 3, "finish adds nothing: %zu", s.len);
    gen_text_close(&t);
}

static void test_wordpiece(void) {
    gen_text t;
    sink s = {0};
    CHECK(gen_text_open(&t, TRAINER_SOURCE_DIR "/tests/data/tokdata/tokenizer.json", emit, &s) == TR_OK, "open: %s",
          tr_error_msg());
    CHECK(t.eos == -1, "WordPiece file: no end-of-text token ([SEP] is not one): %d", t.eos);
    CHECK(gen_text_prompt(&t, "The Movie", 9) == TR_OK, "prompt: %s", tr_error_msg());
    /* [CLS] the movie, without the template's [SEP] */
    CHECK(t.n == 3 && t.ids[0] == 2 && t.ids[1] == 5 && t.ids[2] == 15, "prompt ids (%zu): %d %d %d", t.n, t.ids[0],
          t.n > 1 ? t.ids[1] : -1, t.n > 2 ? t.ids[2] : -1);
    CHECK(t.prompt_len == 9, "decode of the prompt: 9 bytes ('the movie'), got %zu", t.prompt_len);
    push(&t, &s, 23, " ", 1);            /* " was": the space is safe, "was" may grow */
    push(&t, &s, 43, " was ", 5);        /* " was great" */
    push(&t, &s, 3, " was ", 5);         /* [SEP]: a special token, skipped */
    CHECK(gen_text_finish(&t) == TR_OK && s.len == 10 && memcmp(s.buf, " was great", 10) == 0, "finish: '%.*s'",
          (int)s.len, s.buf);
    gen_text_close(&t);
    sink e = {0};
    CHECK(gen_text_open(&t, TRAINER_SOURCE_DIR "/tests/data/tokdata/tokenizer.json", emit, &e) == TR_OK, "open");
    tr_status st = gen_text_prompt(&t, "bad \xff byte", 10);
    CHECK(st != TR_OK && strstr(tr_error_msg(), "the prompt: "), "invalid UTF-8 refused, naming the prompt: %s",
          tr_error_msg());
    gen_text_close(&t);
}

/* GPT-2's byte-to-character map: printable Latin-1 characters stand for themselves, the
 * other bytes for U+0100 onwards. */
static unsigned byte_char(unsigned b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256 + n;
}

/* A byte-level tokenizer.json: ids 0..255 the bytes, then the special tokens `added` (a JSON
 * list's items), and `post` as the post-processor. Returns the file's path (static). */
static const char *write_byte_level(const char *added, const char *post) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/trainer-gen-text-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fprintf(f, "{\"version\": \"1.0\", \"added_tokens\": [%s], \"normalizer\": null,\n"
               "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
               "\"use_regex\": true},\n\"post_processor\": %s,\n"
               "\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
               "\"use_regex\": true},\n\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {",
            added, post);
    for (unsigned b = 0; b < 256; b++) {
        unsigned c = byte_char(b);
        char u[4];
        int n = c < 0x80 ? (u[0] = (char)c, 1) : (u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 63)), 2);
        fprintf(f, "%s\"%s%.*s\": %u", b ? ", " : "", c == '"' || c == '\\' ? "\\" : "", n, u, b);
    }
    fprintf(f, "}}}\n");
    return fclose(f) == 0 ? path : NULL;
}

static void test_byte_level(void) {
    const char *path = write_byte_level(
        "{\"id\": 256, \"content\": \"<|endoftext|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
        "\"normalized\": false, \"special\": true}", "null");
    CHECK(path != NULL, "cannot write the tokenizer");
    if (!path) return;
    gen_text t;
    sink s = {0};
    CHECK(gen_text_open(&t, path, emit, &s) == TR_OK, "open: %s", tr_error_msg());
    CHECK(t.eos == 256 && t.eos_token && strcmp(t.eos_token, "<|endoftext|>") == 0, "end-of-text: %d", t.eos);
    CHECK(gen_text_prompt(&t, "h\xC3\xA9", 3) == TR_OK, "prompt: %s", tr_error_msg());
    CHECK(t.n == 3 && t.ids[0] == 'h' && t.ids[1] == 0xC3 && t.ids[2] == 0xA9, "prompt ids = its bytes (%zu)", t.n);
    push(&t, &s, ' ', " ", 1);
    push(&t, &s, 'w', " ", 1);
    push(&t, &s, 0xC3, " ", 1);          /* "w" and half of "ö": held */
    push(&t, &s, 0xB6, " ", 1);
    push(&t, &s, ' ', " w\xC3\xB6 ", 5);  /* the word, whole */
    push(&t, &s, 0xFF, " w\xC3\xB6 ", 5); /* a byte no character completes */
    CHECK(gen_text_finish(&t) == TR_OK && s.len == 8 && memcmp(s.buf + 5, "\xEF\xBF\xBD", 3) == 0,
          "finish: the stray byte as U+FFFD ('%.*s', %zu bytes)", (int)s.len, s.buf, s.len);
    gen_text_close(&t);

    /* a template <s> $A </s>: <s> stays before the prompt, </s> is dropped, and ends the text */
    path = write_byte_level(
        "{\"id\": 256, \"content\": \"<s>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
        "\"normalized\": false, \"special\": true}, {\"id\": 257, \"content\": \"</s>\", \"single_word\": false, "
        "\"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}",
        "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, "
        "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], "
        "\"pair\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}], "
        "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [256], \"tokens\": [\"<s>\"]}, "
        "\"</s>\": {\"id\": \"</s>\", \"ids\": [257], \"tokens\": [\"</s>\"]}}}");
    CHECK(path != NULL, "cannot write the tokenizer");
    if (!path) return;
    sink s2 = {0};
    CHECK(gen_text_open(&t, path, emit, &s2) == TR_OK, "open: %s", tr_error_msg());
    CHECK(t.eos == 257, "end-of-text </s>: %d", t.eos);
    CHECK(gen_text_prompt(&t, "hi", 2) == TR_OK, "prompt: %s", tr_error_msg());
    CHECK(t.n == 3 && t.ids[0] == 256 && t.ids[1] == 'h' && t.ids[2] == 'i', "<s> h i, no </s> (%zu ids, last %d)", t.n,
          t.n ? t.ids[t.n - 1] : -1);
    CHECK(t.prompt_len == 2, "decoded prompt: 2 bytes (<s> skipped), got %zu", t.prompt_len);
    push(&t, &s2, '!', "", 0);
    CHECK(gen_text_finish(&t) == TR_OK && s2.len == 1 && s2.buf[0] == '!', "finish: '%.*s'", (int)s2.len, s2.buf);
    gen_text_close(&t);
    remove(path);
}

int main(void) {
    test_bytes();
    test_wordpiece();
    test_byte_level();
    return test_finish();
}
