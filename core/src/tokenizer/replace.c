/* Replace with a Regex pattern (the normalizer): every match, left to right without overlap,
 * becomes the content; as in the Rust library, the content's characters take the alignment of
 * the match's last character (of the one before an empty match). The Replace decoder is in
 * decoder_spm.c. */
#include <stdlib.h>

#include "tokenizer/tokenizer_impl.h"

tr_status tok_replace_regex(const tok_normalizer *n, tok_nstr *s) {
    if (s->n == 0) return TR_OK;
    tok_ranges m = {0};
    tr_status st = tok_regex_find_all(n->re, s->cp, 0, s->n, &m);
    if (st != TR_OK || m.n == 0) {
        free(m.r);
        return st;
    }
    tok_nstr t = {0};
    st = tok_nstr_reserve(&t, s->n + 1);
    size_t last = 0;
    for (size_t k = 0; st == TR_OK && k < m.n; k++) {
        size_t b = m.r[k].b, e = m.r[k].e;
        for (; st == TR_OK && last < b; last++) st = tok_nstr_push(&t, s->cp[last], s->a0[last], s->a1[last]);
        size_t a0 = e ? s->a0[e - 1] : s->a0[0], a1 = e ? s->a1[e - 1] : s->a0[0];
        for (size_t j = 0; st == TR_OK && j < n->nwith; j++) st = tok_nstr_push(&t, n->with[j], a0, a1);
        last = e;
    }
    for (; st == TR_OK && last < s->n; last++) st = tok_nstr_push(&t, s->cp[last], s->a0[last], s->a1[last]);
    free(m.r);
    if (st != TR_OK) {
        tok_nstr_free(&t);
        return st;
    }
    tok_nstr_free(s);
    *s = t;
    return TR_OK;
}
