/* Fuzz target `tokenizer`: tokenizer.json loading and encoding (core/src/tokenizer). Input:
 * "TOKENIZER.JSON\n--8<--\nTEXT[\n--8<--\nPAIR]". A refused file must name it; an accepted
 * one encodes the text alone and with the pair, with and without special tokens, and as a
 * batch: every array holds len entries, the attention mask sums to `length`, each token's
 * offsets lie inside the text it came from, and decode succeeds. Invalid UTF-8 in the text is
 * refused with a message. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "trainer/tokenizer.h"

static void check(const tr_tokenizer *t, const tr_encoding *e, size_t text_len, size_t pair_len) {
    size_t ones = 0;
    for (size_t i = 0; i < e->len; i++) {
        ones += e->attention_mask[i];
        size_t lim = e->sequence_ids[i] == 1 ? pair_len : text_len;
        if (e->offsets[2 * i] > e->offsets[2 * i + 1] || e->offsets[2 * i + 1] > lim)
            fuzz_fail("token %zu: offsets %zu..%zu outside a %zu-byte text", i, e->offsets[2 * i], e->offsets[2 * i + 1], lim);
        if (e->sequence_ids[i] < -1 || e->sequence_ids[i] > 1) fuzz_fail("token %zu: sequence id %d", i, e->sequence_ids[i]);
    }
    if (ones != e->length || e->length > e->len) fuzz_fail("mask sums to %zu, length %zu of %zu", ones, e->length, e->len);
    char *text = NULL;
    if (tr_tokenizer_decode(t, e->ids, e->len, 1, &text) != TR_OK || !text) fuzz_fail("decode failed: %s", tr_error_msg());
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_part part[3];
    int n = fuzz_split(data, size, part, 3);
    tr_tokenizer *t = NULL;
    if (tr_tokenizer_load_json(&t, (const char *)part[0].data, part[0].size, "fuzz.json") != TR_OK) {
        static const char *const needles[] = {"fuzz.json", NULL};
        if (t) fuzz_fail("refused but returned a tokenizer");
        fuzz_expect_message("tokenizer.json", needles);
        return 0;
    }
    const char *text = n > 1 ? (const char *)part[1].data : "";
    size_t text_len = n > 1 ? part[1].size : 0;
    const char *pair = n > 2 ? (const char *)part[2].data : NULL;
    size_t pair_len = n > 2 ? part[2].size : 0;
    for (int special = 0; special < 2; special++) {
        for (int with_pair = 0; with_pair < 1 + (pair != NULL); with_pair++) {
            tr_encoding e;
            tr_status st = tr_tokenizer_encode(t, text, text_len, with_pair ? pair : NULL, with_pair ? pair_len : 0, special, &e);
            if (st != TR_OK) {
                static const char *const needles[] = {"UTF-8", "truncation", "unknown token", "too long", NULL};
                if (e.ids || e.len) fuzz_fail("refused encoding left %zu tokens", e.len);
                fuzz_expect_message("encode", needles);
                continue;
            }
            check(t, &e, text_len, with_pair ? pair_len : 0);
            tr_encoding_free(&e);
        }
    }
    const char *texts[2] = {text, pair ? pair : text};
    size_t lens[2] = {text_len, pair ? pair_len : text_len};
    tr_encoding out[2];
    if (tr_tokenizer_encode_batch(t, 2, texts, lens, NULL, NULL, 1, out) == TR_OK) {
        /* Padding never truncates: Fixed pads what is shorter, BatchLongest to the longest. */
        tr_padding p;
        tr_tokenizer_padding(t, &p);
        if (p.strategy == TR_PAD_LONGEST && !p.multiple_of && out[0].len != out[1].len)
            fuzz_fail("batch padded to %zu and %zu", out[0].len, out[1].len);
        if (p.strategy == TR_PAD_FIXED && (out[0].len < p.length || out[1].len < p.length))
            fuzz_fail("padded to %zu and %zu, under the fixed %zu", out[0].len, out[1].len, p.length);
        for (int i = 0; i < 2; i++) {
            check(t, &out[i], lens[i], 0);
            tr_encoding_free(&out[i]);
        }
    }
    tr_tokenizer_free(t);
    return 0;
}
