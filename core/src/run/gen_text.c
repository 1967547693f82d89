/* The prompt and the continuation of `trainer generate` as text (gen_text.h). With a
 * tokenizer every new token decodes the whole sequence again (as Hugging Face's pipeline and
 * streamer do): quadratic in the tokens generated, a few hundred at most in practice. */
#include "gen_text.h"

#include <stdlib.h>
#include <string.h>

/* End-of-text tokens of the common tokenizer families (GPT-2, Llama, Llama 3, ChatML, Gemma). */
static const char *const eos_names[] = {"<|endoftext|>", "</s>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>", "<eos>"};

static void find_eos(gen_text *t) {
    t->eos = -1;
    size_t n = tr_tokenizer_special_count(t->tok);
    for (size_t k = 0; k < sizeof eos_names / sizeof eos_names[0] && t->eos < 0; k++)
        for (size_t i = 0; i < n; i++) {
            const char *tok;
            int32_t id;
            if (tr_tokenizer_special(t->tok, i, &tok, &id) == TR_OK && strcmp(tok, eos_names[k]) == 0) {
                t->eos = id;
                t->eos_token = tok;
                break;
            }
        }
}

tr_status gen_text_open(gen_text *t, const char *tokenizer, gen_emit_fn emit, void *user) {
    memset(t, 0, sizeof *t);
    t->eos = -1;
    t->emit = emit;
    t->user = user;
    if (!tokenizer) return TR_OK;
    TR_CHECK(tr_tokenizer_load(&t->tok, tokenizer));
    TR_CHECK(tr_tokenizer_set_truncation(t->tok, NULL));
    TR_CHECK(tr_tokenizer_set_padding(t->tok, NULL));
    find_eos(t);
    return TR_OK;
}

void gen_text_close(gen_text *t) {
    tr_tokenizer_free(t->tok);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static tr_status reserve(gen_text *t, size_t n) {
    if (n <= t->cap) return TR_OK;
    size_t cap = t->cap ? t->cap : 256;
    while (cap < n) cap *= 2;
    int32_t *ids = realloc(t->ids, cap * sizeof *ids);
    if (!ids) return tr_error_set(TR_ERR_NOMEM, "out of memory for %zu tokens", n);
    t->ids = ids;
    t->cap = cap;
    return TR_OK;
}

/* decode(ids) with special tokens skipped; *out malloc'ed. */
static tr_status decode(const gen_text *t, size_t n, char **out, size_t *len) {
    tr_status st = tr_tokenizer_decode_len(t->tok, t->ids, n, 1, out, len);
    if (st != TR_OK) tr_error_prefix("decoding %zu tokens: ", n);
    return st;
}

static tr_status encode_prompt(gen_text *t, const char *text, size_t len) {
    tr_encoding enc;
    tr_status st = tr_tokenizer_encode(t->tok, text, len, NULL, 0, 1, &enc);
    if (st != TR_OK) {
        tr_error_prefix("the prompt: ");
        return st;
    }
    size_t n = enc.len, trailing = tr_tokenizer_num_special(t->tok, 0);
    while (n > 0 && trailing > 0 && enc.sequence_ids[n - 1] < 0) n--, trailing--;
    st = reserve(t, n);
    if (st == TR_OK) {
        memcpy(t->ids, enc.ids, n * sizeof *t->ids);
        t->n = t->n_prompt = n;
    }
    tr_encoding_free(&enc);
    if (st != TR_OK) return st;
    char *s;
    TR_CHECK(decode(t, t->n, &s, &t->prompt_len));
    free(s);
    return TR_OK;
}

tr_status gen_text_prompt(gen_text *t, const char *text, size_t len) {
    t->n = t->n_prompt = t->prompt_len = t->emitted = 0;
    if (t->tok) {
        TR_CHECK(encode_prompt(t, text, len));
    } else {
        TR_CHECK(reserve(t, len));
        for (size_t i = 0; i < len; i++) t->ids[i] = (unsigned char)text[i];
        t->n = t->n_prompt = len;
    }
    return TR_OK;
}

/* Emits the continuation past what was emitted: all of it at the end, else up to its last
 * space or newline. */
static tr_status emit_continuation(gen_text *t, int final) {
    char *s;
    size_t len;
    TR_CHECK(decode(t, t->n, &s, &len));
    const char *c = s + (len > t->prompt_len ? t->prompt_len : len);
    size_t clen = len > t->prompt_len ? len - t->prompt_len : 0, end = clen;
    if (!final)
        while (end > t->emitted && c[end - 1] != ' ' && c[end - 1] != '\n') end--;
    if (end > t->emitted && t->emit) t->emit(t->user, c + t->emitted, end - t->emitted);
    if (end > t->emitted) t->emitted = end;
    free(s);
    return TR_OK;
}

tr_status gen_text_push(gen_text *t, int32_t id) {
    TR_CHECK(reserve(t, t->n + 1));
    t->ids[t->n++] = id;
    if (t->tok) return emit_continuation(t, 0);
    char b = (char)(unsigned char)id;
    if (t->emit) t->emit(t->user, &b, 1);
    return TR_OK;
}

tr_status gen_text_finish(gen_text *t) {
    return t->tok && t->n > t->n_prompt ? emit_continuation(t, 1) : TR_OK;
}
