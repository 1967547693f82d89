/* The model step: each kind's encoder over one word, and freeing whatever kind was loaded. */
#include <stdlib.h>

#include "tokenizer/tokenizer_impl.h"

tr_status tok_model_encode(const tok_model *m, const tok_nstr *s, tok_range w, int32_t type_id, int32_t seq,
                           tok_enc *out) {
    switch (m->kind) {
    case TOK_MODEL_WORDPIECE: return tok_wordpiece_encode(m, s, w, type_id, seq, out);
    case TOK_MODEL_BPE: return tok_bpe_encode(m, s, w, type_id, seq, out);
    case TOK_MODEL_UNIGRAM: return tok_unigram_encode(m, s, w, type_id, seq, out);
    }
    return tr_error_set(TR_ERR_INTERNAL, "tokenizer: unknown model kind %d", (int)m->kind);
}

void tok_model_free(tok_model *m) {
    tok_vocab_free(&m->vocab);
    free(m->unk);
    free(m->wp.prefix);
    tok_bpe_free(m->bpe);
    tok_unigram_free(m->uni);
}
