/* Encodings: growing token lists, truncation (longest_first, only_first, only_second) and
 * padding, with the Rust library's arithmetic for splitting max_length over a pair. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

static tr_status grow(tok_enc *x, size_t need) {
    if (need <= x->cap) return TR_OK;
    /* A padding length from the file can ask for 2^63 tokens, where the sizes below wrap around
     * to a smaller reallocation: refuse any encoding longer than an int32 can index. */
    if (need > INT32_MAX)
        return tr_error_set(TR_ERR_INVALID, "tokenizer: an encoding of %zu tokens is too long (at most %d)", need,
                            INT32_MAX);
    size_t cap = x->cap ? x->cap : 32;
    while (cap < need) cap *= 2;
    tr_encoding *e = &x->e;
    int32_t *ids = realloc(e->ids, cap * sizeof *ids);
    if (ids) e->ids = ids;
    int32_t *ty = realloc(e->type_ids, cap * sizeof *ty);
    if (ty) e->type_ids = ty;
    uint8_t *am = realloc(e->attention_mask, cap);
    if (am) e->attention_mask = am;
    uint8_t *sm = realloc(e->special_mask, cap);
    if (sm) e->special_mask = sm;
    int32_t *sq = realloc(e->sequence_ids, cap * sizeof *sq);
    if (sq) e->sequence_ids = sq;
    size_t *of = realloc(e->offsets, 2 * cap * sizeof *of);
    if (of) e->offsets = of;
    if (!ids || !ty || !am || !sm || !sq || !of) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    if (e->tokens) {
        char **tk = realloc(e->tokens, cap * sizeof *tk);
        if (tk) e->tokens = tk;
        size_t *tl = tk ? realloc(e->token_lens, cap * sizeof *tl) : NULL;
        if (!tk || !tl) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        e->token_lens = tl;
    }
    x->cap = cap;
    return TR_OK;
}

tr_status tok_enc_push(tok_enc *x, int32_t id, int32_t type_id, int special, int32_t seq, size_t o0,
                       size_t o1) {
    TR_CHECK(grow(x, x->e.len + 1));
    tr_encoding *e = &x->e;
    size_t i = e->len++;
    e->ids[i] = id;
    e->type_ids[i] = type_id;
    e->attention_mask[i] = 1;
    e->special_mask[i] = (uint8_t)(special != 0);
    e->sequence_ids[i] = seq;
    e->offsets[2 * i] = o0;
    e->offsets[2 * i + 1] = o1;
    if (e->tokens) {
        e->tokens[i] = NULL;
        e->token_lens[i] = 0;
    }
    e->length = e->len;
    return TR_OK;
}

tr_status tok_enc_set_text(tok_enc *x, size_t i, const char *s, size_t n) {
    tr_encoding *e = &x->e;
    if (!e->tokens) {
        e->tokens = calloc(x->cap, sizeof *e->tokens);
        e->token_lens = calloc(x->cap, sizeof *e->token_lens);
        if (!e->tokens || !e->token_lens) {
            free(e->tokens);
            free(e->token_lens);
            e->tokens = NULL;
            e->token_lens = NULL;
            return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        }
    }
    char *c = malloc(n + 1);
    if (!c) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(c, s, n);
    c[n] = '\0';
    free(e->tokens[i]);
    e->tokens[i] = c;
    e->token_lens[i] = n;
    return TR_OK;
}

/* Frees the texts of tokens [b, b + n) (before they are dropped or overwritten). */
static void drop_text(tr_encoding *e, size_t b, size_t n) {
    if (!e->tokens) return;
    for (size_t i = b; i < b + n; i++) {
        free(e->tokens[i]);
        e->tokens[i] = NULL;
    }
}

void tok_enc_free(tok_enc *x) {
    tr_encoding_free(&x->e);
    x->cap = 0;
}

static void move_tokens(tr_encoding *e, size_t dst, size_t src, size_t n) {
    memmove(e->ids + dst, e->ids + src, n * sizeof *e->ids);
    memmove(e->type_ids + dst, e->type_ids + src, n * sizeof *e->type_ids);
    memmove(e->attention_mask + dst, e->attention_mask + src, n);
    memmove(e->special_mask + dst, e->special_mask + src, n);
    memmove(e->sequence_ids + dst, e->sequence_ids + src, n * sizeof *e->sequence_ids);
    memmove(e->offsets + 2 * dst, e->offsets + 2 * src, 2 * n * sizeof *e->offsets);
    if (e->tokens) {
        memmove(e->tokens + dst, e->tokens + src, n * sizeof *e->tokens);
        memmove(e->token_lens + dst, e->token_lens + src, n * sizeof *e->token_lens);
    }
}

/* Keeps n tokens: the first ones (right truncation) or the last ones (left). */
static void keep(tok_enc *x, size_t n, tr_side dir) {
    tr_encoding *e = &x->e;
    if (n >= e->len) return;
    drop_text(e, dir == TR_SIDE_LEFT ? 0 : n, e->len - n);
    if (dir == TR_SIDE_LEFT) move_tokens(e, 0, e->len - n, n);
    e->len = e->length = n;
}

tr_status tok_truncate(const tr_truncation *t, size_t n_added, tok_enc *a, tok_enc *b) {
    if (!t->enabled) return TR_OK;
    if (t->stride) return tr_error_set(TR_ERR_UNSUPPORTED, "truncation: stride %zu is not supported (only 0)", t->stride);
    /* A max_length below the special tokens' count wraps around in the Rust library (usize),
     * which then truncates nothing: the same here, so that the ids agree. */
    if (t->max_length < n_added) return TR_OK;
    size_t max = t->max_length - n_added;
    if (max == 0) {
        keep(a, 0, t->direction);
        if (b) keep(b, 0, t->direction);
        return TR_OK;
    }
    size_t total = a->e.len + (b ? b->e.len : 0);
    if (total <= max) return TR_OK;
    size_t remove = total - max;
    switch (t->strategy) {
    case TR_TRUNCATE_LONGEST_FIRST:
        if (!b) {
            keep(a, max, t->direction);
            return TR_OK;
        } else {
            size_t n1 = a->e.len, n2 = b->e.len;
            int swapped = n1 > n2;
            if (swapped) { size_t k = n1; n1 = n2; n2 = k; }
            /* The Rust library's split: n2 is at least n1, then both halve if still too long. */
            if (n1 > max) n2 = n1;
            else n2 = n1 > max - n1 ? n1 : max - n1;
            if (n1 + n2 > max) {
                n1 = max / 2;
                n2 = n1 + max % 2;
            }
            if (swapped) { size_t k = n1; n1 = n2; n2 = k; }
            keep(a, n1, t->direction);
            keep(b, n2, t->direction);
            return TR_OK;
        }
    case TR_TRUNCATE_ONLY_FIRST:
    case TR_TRUNCATE_ONLY_SECOND: {
        tok_enc *x = t->strategy == TR_TRUNCATE_ONLY_FIRST ? a : b;
        if (!x) return tr_error_set(TR_ERR_INVALID, "truncation: only_second needs a pair");
        if (x->e.len <= remove)
            return tr_error_set(TR_ERR_INVALID,
                                "truncation: the %s sequence (%zu tokens) is too short to cut %zu tokens for max_length %zu",
                                x == a ? "first" : "second", x->e.len, remove, t->max_length);
        keep(x, x->e.len - remove, t->direction);
        return TR_OK;
    }
    }
    return TR_OK;
}

tr_status tok_pad(const tr_padding *p, size_t target, tok_enc *x) {
    if (p->strategy == TR_PAD_NONE) return TR_OK;
    if (p->multiple_of && target % p->multiple_of) {
        size_t add = p->multiple_of - target % p->multiple_of;
        if (target > SIZE_MAX - add)
            return tr_error_set(TR_ERR_INVALID, "padding: %zu rounded up to a multiple of %zu is too long", target,
                                p->multiple_of);
        target += add;
    }
    tr_encoding *e = &x->e;
    if (e->len >= target) return TR_OK;
    size_t n = target - e->len, old = e->len;
    TR_CHECK(grow(x, target));
    size_t at = old;
    if (p->direction == TR_SIDE_LEFT) {
        move_tokens(e, n, 0, old);
        at = 0;
    }
    for (size_t i = at; i < at + n; i++) {
        e->ids[i] = p->pad_id;
        e->type_ids[i] = p->pad_type_id;
        e->attention_mask[i] = 0;
        e->special_mask[i] = 1;
        e->sequence_ids[i] = -1;
        e->offsets[2 * i] = e->offsets[2 * i + 1] = 0;
        if (e->tokens) {
            e->tokens[i] = NULL;
            e->token_lens[i] = 0;
        }
    }
    e->len = target;
    e->length = old;
    return TR_OK;
}

void tr_encoding_free(tr_encoding *enc) {
    if (!enc) return;
    free(enc->ids);
    free(enc->type_ids);
    free(enc->attention_mask);
    free(enc->special_mask);
    free(enc->sequence_ids);
    free(enc->offsets);
    if (enc->tokens)
        for (size_t i = 0; i < enc->len; i++) free(enc->tokens[i]);
    free(enc->tokens);
    free(enc->token_lens);
    memset(enc, 0, sizeof *enc);
}
