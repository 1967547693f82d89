/* Post-processors: BertProcessing, TemplateProcessing and a Sequence of them. They add the
 * special tokens and set the type ids; without special tokens the pair is appended as it is
 * (its type ids 1), as the Rust library does. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

static tr_status copy_seq(tok_enc *out, const tok_enc *x, int32_t type_id, int keep_type) {
    const tr_encoding *e = &x->e;
    for (size_t i = 0; i < e->len; i++) {
        TR_CHECK(tok_enc_push(out, e->ids[i], keep_type ? e->type_ids[i] : type_id, e->special_mask[i],
                              e->sequence_ids[i], e->offsets[2 * i], e->offsets[2 * i + 1]));
        if (e->tokens && e->tokens[i]) TR_CHECK(tok_enc_set_text(out, out->e.len - 1, e->tokens[i], e->token_lens[i]));
    }
    return TR_OK;
}

size_t tok_post_added(const tok_post *p, int pair) {
    if (!p) return 0;
    size_t n = 0;
    switch (p->kind) {
    case TOK_POST_BERT: return pair ? 3 : 2;
    case TOK_POST_TEMPLATE: {
        const tok_tpl_piece *t = pair ? p->pair : p->single;
        size_t k = pair ? p->npair : p->nsingle;
        for (size_t i = 0; i < k; i++)
            if (t[i].seq < 0) n += t[i].nids;
        return n;
    }
    case TOK_POST_SEQUENCE:
        for (size_t i = 0; i < p->nkids; i++) n += tok_post_added(&p->kids[i], pair);
        return n;
    }
    return 0;
}

static tr_status one(const tok_post *p, const tok_enc *a, const tok_enc *b, tok_enc *out) {
    switch (p->kind) {
    case TOK_POST_BERT:
        TR_CHECK(tok_enc_push(out, p->cls_id, 0, 1, -1, 0, 0));
        TR_CHECK(copy_seq(out, a, 0, 0));
        TR_CHECK(tok_enc_push(out, p->sep_id, 0, 1, -1, 0, 0));
        if (b) {
            TR_CHECK(copy_seq(out, b, 1, 0));
            TR_CHECK(tok_enc_push(out, p->sep_id, 1, 1, -1, 0, 0));
        }
        return TR_OK;
    case TOK_POST_TEMPLATE: {
        const tok_tpl_piece *t = b ? p->pair : p->single;
        size_t k = b ? p->npair : p->nsingle;
        for (size_t i = 0; i < k; i++) {
            if (t[i].seq < 0) {
                for (size_t j = 0; j < t[i].nids; j++) TR_CHECK(tok_enc_push(out, t[i].ids[j], t[i].type_id, 1, -1, 0, 0));
            } else {
                const tok_enc *x = t[i].seq == 0 ? a : b;
                if (x) TR_CHECK(copy_seq(out, x, t[i].type_id, 0));
            }
        }
        return TR_OK;
    }
    case TOK_POST_SEQUENCE: {
        tok_enc cur = {0};
        tr_status st = copy_seq(&cur, a, 0, 1);
        if (st == TR_OK && b) st = copy_seq(&cur, b, 0, 1);
        for (size_t i = 0; st == TR_OK && i < p->nkids; i++) {
            tok_enc next = {0};
            st = one(&p->kids[i], i == 0 ? a : &cur, i == 0 ? b : NULL, &next);
            tok_enc_free(&cur);
            cur = next;
        }
        if (st == TR_OK) st = copy_seq(out, &cur, 0, 1);
        tok_enc_free(&cur);
        return st;
    }
    }
    return tr_error_set(TR_ERR_INTERNAL, "tokenizer: unknown post-processor kind %d", (int)p->kind);
}

tr_status tok_post_process(const tok_post *p, const tok_enc *a, const tok_enc *b, int add_special,
                           tok_enc *out) {
    if (!p || !add_special) {
        TR_CHECK(copy_seq(out, a, 0, 1));
        if (b) TR_CHECK(copy_seq(out, b, 0, 1));
        return TR_OK;
    }
    return one(p, a, b, out);
}

void tok_post_free(tok_post *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nsingle; i++) free(p->single[i].ids);
    for (size_t i = 0; i < p->npair; i++) free(p->pair[i].ids);
    free(p->single);
    free(p->pair);
    for (size_t i = 0; i < p->nkids; i++) tok_post_free(&p->kids[i]);
    free(p->kids);
}
