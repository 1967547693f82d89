/* Pre-tokenizers: BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits, Sequence
 * (ByteLevel in bytelevel.c, Split in split.c).
 * Each splits the words it is given into smaller words (code point ranges); the split
 * behaviours (removed, isolated, merged with previous or next, contiguous) are the Rust
 * library's. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

typedef tok_piece piece;

tr_status tok_split_pieces(const tok_piece *p, size_t np, tok_split_behavior how, tok_ranges *out) {
    /* Merge as the behaviour says, into q (kept pieces only). */
    piece *q = malloc((np + 1) * sizeof *q);
    if (!q) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    size_t nq = 0;
    int prev = 0;
    switch (how) {
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < np; i++)
            if (!p[i].match) q[nq++] = p[i];
        break;
    case TOK_SPLIT_ISOLATED:
        memcpy(q, p, np * sizeof *p);
        nq = np;
        break;
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < np; i++) {
            if (p[i].match && !prev && nq) q[nq - 1].e = p[i].e;
            else q[nq++] = p[i];
            prev = p[i].match;
        }
        break;
    case TOK_SPLIT_MERGED_NEXT:
        for (size_t k = np; k-- > 0;) {
            if (p[k].match && !prev && nq) q[nq - 1].b = p[k].b;
            else q[nq++] = p[k];
            prev = p[k].match;
        }
        for (size_t i = 0; i < nq / 2; i++) {
            piece t = q[i]; q[i] = q[nq - 1 - i]; q[nq - 1 - i] = t;
        }
        break;
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < np; i++) {
            if (p[i].match == prev && nq) q[nq - 1].e = p[i].e;
            else q[nq++] = p[i];
            prev = p[i].match;
        }
        break;
    }
    tr_status st = TR_OK;
    for (size_t i = 0; st == TR_OK && i < nq; i++)
        if (q[i].b < q[i].e) st = tok_ranges_push(out, q[i].b, q[i].e);
    free(q);
    return st;
}

/* Splits w where pred() holds (each such code point one match) and pushes the pieces the
 * behaviour keeps to out. */
static tr_status split_pred(const tok_nstr *s, tok_range w, int (*pred)(uint32_t), tok_split_behavior how,
                            tok_ranges *out) {
    size_t n = w.e - w.b;
    piece *p = malloc((2 * n + 1) * sizeof *p);
    if (!p) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    size_t np = 0, last = w.b;
    for (size_t i = w.b; i < w.e; i++) {
        if (!pred(s->cp[i])) continue;
        if (last < i) p[np++] = (piece){last, i, 0};
        p[np++] = (piece){i, i + 1, 1};
        last = i + 1;
    }
    if (last < w.e) p[np++] = (piece){last, w.e, 0};
    tr_status st = tok_split_pieces(p, np, how, out);
    free(p);
    return st;
}

/* Whitespace: the regex \w+|[^\w\s]+, everything else dropped. */
static tr_status whitespace(const tok_nstr *s, tok_range w, tok_ranges *out) {
    size_t i = w.b;
    while (i < w.e) {
        uint32_t c = s->cp[i];
        if (tok_is_whitespace(c)) {
            i++;
            continue;
        }
        int word = tok_is_word(c);
        size_t j = i + 1;
        while (j < w.e && !tok_is_whitespace(s->cp[j]) && tok_is_word(s->cp[j]) == word) j++;
        TR_CHECK(tok_ranges_push(out, i, j));
        i = j;
    }
    return TR_OK;
}

static tr_status apply(const tok_pretok *p, tok_nstr *s, tok_ranges *words) {
    if (p->kind == TOK_PRE_SEQUENCE) {
        for (size_t i = 0; i < p->nkids; i++) TR_CHECK(apply(&p->kids[i], s, words));
        return TR_OK;
    }
    tok_ranges out = {0}, mid = {0};
    tr_status st = TR_OK;
    for (size_t i = 0; st == TR_OK && i < words->n; i++) {
        tok_range w = words->r[i];
        switch (p->kind) {
        case TOK_PRE_BERT:
            mid.n = 0;
            st = split_pred(s, w, tok_is_whitespace, TOK_SPLIT_REMOVED, &mid);
            for (size_t k = 0; st == TR_OK && k < mid.n; k++)
                st = split_pred(s, mid.r[k], tok_is_punctuation, TOK_SPLIT_ISOLATED, &out);
            break;
        case TOK_PRE_WHITESPACE: st = whitespace(s, w, &out); break;
        case TOK_PRE_WHITESPACE_SPLIT: st = split_pred(s, w, tok_is_whitespace, TOK_SPLIT_REMOVED, &out); break;
        case TOK_PRE_PUNCTUATION: st = split_pred(s, w, tok_is_punctuation, p->behavior, &out); break;
        case TOK_PRE_DIGITS:
            st = split_pred(s, w, tok_is_numeric, p->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS, &out);
            break;
        case TOK_PRE_BYTELEVEL: st = tok_bytelevel_split(p, s, w, &out); break;
        case TOK_PRE_SPLIT: st = tok_split_regex(p->re, p->invert, p->behavior, s, w, &out); break;
        case TOK_PRE_METASPACE: st = tok_metaspace(p, s, w, &out); break;
        case TOK_PRE_SEQUENCE: break;
        }
    }
    free(mid.r);
    if (st != TR_OK) {
        free(out.r);
        return st;
    }
    free(words->r);
    *words = out;
    return TR_OK;
}

tr_status tok_pretokenize(const tok_pretok *p, tok_nstr *s, tok_ranges *words) {
    if (!p) return TR_OK;
    return apply(p, s, words);
}

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nkids; i++) tok_pretok_free(&p->kids[i]);
    free(p->kids);
    tok_regex_free(p->re);
}
