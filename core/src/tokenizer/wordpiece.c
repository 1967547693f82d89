/* The WordPiece model: greedy longest match from the left, later pieces looked up with the
 * continuing-subword prefix; a word longer than max_input_chars_per_word, or one with a part
 * no piece matches, becomes the unknown token whole (as the Rust library does). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

tr_status tok_load_wordpiece(const char *file, json_t *j, tok_model *m) {
    m->kind = TOK_MODEL_WORDPIECE;
    json_t *unk = json_object_get(j, "unk_token"), *pre = json_object_get(j, "continuing_subword_prefix");
    if (unk && !json_is_string(unk)) return tok_bad(file, "model.unk_token", "expected a string");
    if (pre && !json_is_null(pre) && !json_is_string(pre)) return tok_bad(file, "model.continuing_subword_prefix", "expected a string");
    m->unk = tok_dup(unk ? json_string_value(unk) : "[UNK]");
    m->wp.prefix = tok_dup(json_is_string(pre) ? json_string_value(pre) : "##");
    if (!m->unk || !m->wp.prefix) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    json_t *v = json_object_get(j, "max_input_chars_per_word");
    m->wp.max_chars = 100;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tok_bad(file, "model.max_input_chars_per_word", "expected a non-negative integer");
        m->wp.max_chars = (size_t)json_integer_value(v);
    }
    TR_CHECK(tok_load_vocab(file, j, &m->vocab));
    m->unk_id = tok_vocab_find(&m->vocab, m->unk, strlen(m->unk));
    return TR_OK;
}

tr_status tok_wordpiece_encode(const tok_model *m, const tok_nstr *s, tok_range w,
                               int32_t type_id, int32_t seq, tok_enc *out) {
    size_t nch = w.e - w.b;
    if (nch == 0) return TR_OK;
    size_t plen = strlen(m->wp.prefix);
    char *buf = malloc(2 * plen + 8 * nch + 1); /* the word's UTF-8, then scratch */
    size_t *at = malloc((nch + 1) * sizeof *at); /* byte offset of each code point */
    if (!buf || !at) {
        free(buf);
        free(at);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    char *word = buf;
    size_t len = 0;
    for (size_t i = 0; i < nch; i++) {
        at[i] = len;
        len += tok_utf8_put(word + len, s->cp[w.b + i]);
    }
    at[nch] = len;
    size_t first = out->e.len;
    tr_status st = TR_OK;
    int bad = nch > m->wp.max_chars;
    size_t start = 0; /* code points */
    while (!bad && start < nch) {
        size_t end = nch;
        int32_t id = -1;
        while (start < end) {
            size_t n = at[end] - at[start];
            if (start) { /* the prefix, then the piece, in the scratch room after the word */
                char *t = word + len;
                memcpy(t, m->wp.prefix, plen);
                memcpy(t + plen, word + at[start], n);
                id = tok_vocab_find(&m->vocab, t, plen + n);
            } else {
                id = tok_vocab_find(&m->vocab, word, n);
            }
            if (id >= 0) break;
            end--;
        }
        if (id < 0) {
            bad = 1;
            break;
        }
        st = tok_enc_push(out, id, type_id, 0, seq, s->a0[w.b + start], s->a1[w.b + end - 1]);
        if (st != TR_OK) break;
        start = end;
    }
    free(buf);
    free(at);
    TR_CHECK(st);
    if (bad) {
        out->e.len = first;
        if (m->unk_id < 0)
            return tr_error_set(TR_ERR_INVALID, "WordPiece: the unknown token '%s' is not in the vocabulary", m->unk);
        TR_CHECK(tok_enc_push(out, m->unk_id, type_id, 0, seq, s->a0[w.b], s->a1[w.e - 1]));
    }
    return TR_OK;
}
