/* Post-processors: BertProcessing, TemplateProcessing, RobertaProcessing, ByteLevel and a
 * Sequence of them. As in the Rust library each maps a list of encodings (the text, the pair)
 * to a new list, merged at the end: they add the special tokens and set the type ids (Roberta:
 * all 0, with or without special tokens); ByteLevel and Roberta trim offsets of spaces. */
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
    case TOK_POST_ROBERTA: return pair ? 4 : 2;
    case TOK_POST_BYTELEVEL: return 0;
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

/* A list of encodings, as the Rust processors pass along: the text and the pair, then whatever
 * pieces the processors make of them; merged in order at the end. */
typedef struct encs { tok_enc *e; size_t n; } encs;

static void encs_free(encs *l) {
    for (size_t i = 0; i < l->n; i++) tok_enc_free(&l->e[i]);
    free(l->e);
    l->e = NULL;
    l->n = 0;
}

static tr_status encs_new(encs *l, size_t n) {
    l->n = 0;
    l->e = calloc(n ? n : 1, sizeof *l->e);
    if (!l->e) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    l->n = n;
    return TR_OK;
}

static void set_seq(tok_enc *x, int32_t seq) {
    for (size_t i = 0; i < x->e.len; i++) x->e.sequence_ids[i] = seq;
}

static void set_type(tok_enc *x, int32_t type_id) {
    for (size_t i = 0; i < x->e.len; i++) x->e.type_ids[i] = type_id;
}

/* Encoding i wrapped in special tokens (`pre` and `post` ids, -1 none), its types kept. */
static tr_status wrap(tok_enc *out, const tok_enc *x, int32_t pre, int32_t post, int32_t type_pre, int32_t type_post) {
    if (pre >= 0) TR_CHECK(tok_enc_push(out, pre, type_pre, 1, -1, 0, 0));
    TR_CHECK(copy_seq(out, x, 0, 1));
    if (post >= 0) TR_CHECK(tok_enc_push(out, post, type_post, 1, -1, 0, 0));
    return TR_OK;
}

/* Runs p over the list, replacing it. */
static tr_status run(const tok_post *p, encs *l, int add_special) {
    encs o = {0};
    tr_status st = TR_OK;
    switch (p->kind) {
    case TOK_POST_SEQUENCE:
        for (size_t i = 0; i < p->nkids; i++) TR_CHECK(run(&p->kids[i], l, add_special));
        return TR_OK;
    case TOK_POST_BYTELEVEL:
        for (size_t i = 0; i < l->n; i++) {
            if (p->trim_offsets) tok_bytelevel_trim(p->tk, &l->e[i].e, p->add_prefix_space);
            set_seq(&l->e[i], (int32_t)i);
        }
        return TR_OK;
    case TOK_POST_BERT:
        if (!add_special) return TR_OK;
        TR_CHECK(encs_new(&o, l->n));
        for (size_t i = 0; st == TR_OK && i < l->n; i++)
            st = i == 0 ? wrap(&o.e[i], &l->e[i], p->cls_id, p->sep_id, 0, 0) : wrap(&o.e[i], &l->e[i], -1, p->sep_id, 0, 1);
        break;
    case TOK_POST_ROBERTA:
        for (size_t i = 0; i < l->n; i++) {
            if (p->trim_offsets) tok_bytelevel_trim(p->tk, &l->e[i].e, p->add_prefix_space);
            set_type(&l->e[i], 0);
        }
        if (!add_special) return TR_OK;
        TR_CHECK(encs_new(&o, l->n));
        for (size_t i = 0; st == TR_OK && i < l->n; i++)
            st = wrap(&o.e[i], &l->e[i], i == 0 ? p->cls_id : p->sep_id, p->sep_id, 0, 0);
        break;
    case TOK_POST_TEMPLATE: {
        if (l->n != 1 && l->n != 2)
            return tr_error_set(TR_ERR_INVALID, "tokenizer: TemplateProcessing got %zu encodings (expected 1 or 2)", l->n);
        const tok_tpl_piece *t = l->n == 2 ? p->pair : p->single;
        size_t k = l->n == 2 ? p->npair : p->nsingle;
        TR_CHECK(encs_new(&o, k));
        for (size_t i = 0; st == TR_OK && i < k; i++) {
            if (t[i].seq < 0) {
                for (size_t j = 0; add_special && st == TR_OK && j < t[i].nids; j++)
                    st = tok_enc_push(&o.e[i], t[i].ids[j], t[i].type_id, 1, -1, 0, 0);
            } else if ((size_t)t[i].seq < l->n) {
                st = copy_seq(&o.e[i], &l->e[t[i].seq], t[i].type_id, 0);
                set_seq(&o.e[i], t[i].seq);
            }
        }
        break;
    }
    }
    if (st != TR_OK) {
        encs_free(&o);
        return st;
    }
    encs_free(l);
    *l = o;
    return TR_OK;
}

tr_status tok_post_process(const tok_post *p, const tok_enc *a, const tok_enc *b, int add_special,
                           tok_enc *out) {
    if (!p) {
        TR_CHECK(copy_seq(out, a, 0, 1));
        if (b) TR_CHECK(copy_seq(out, b, 0, 1));
        return TR_OK;
    }
    encs l = {0};
    tr_status st = encs_new(&l, b ? 2 : 1);
    if (st == TR_OK) st = copy_seq(&l.e[0], a, 0, 1);
    if (st == TR_OK && b) st = copy_seq(&l.e[1], b, 0, 1);
    if (st == TR_OK) st = run(p, &l, add_special);
    for (size_t i = 0; st == TR_OK && i < l.n; i++) st = copy_seq(out, &l.e[i], 0, 1);
    encs_free(&l);
    return st;
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
