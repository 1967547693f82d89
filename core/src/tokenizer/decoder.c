/* Decoders, as the Rust library's decode_chain: each decoder turns the list of token strings
 * into a new list, a Sequence runs its decoders in order, and the last list is concatenated.
 * Without a decoder the tokens are joined by spaces. WordPiece: a piece with the prefix joins
 * the one before, others get a space, then the cleanup of " ." and the like. ByteLevel is in
 * bytelevel.c; BPEDecoder turns its suffix into spaces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

#define DECODERS "WordPiece, ByteLevel, BPEDecoder, Metaspace, ByteFallback, Fuse, Replace, Strip, Sequence"

tr_status tok_strs_push(tok_strs *v, const char *s, size_t len) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 16;
        char **p = realloc(v->s, cap * sizeof *p);
        if (p) v->s = p;
        size_t *l = p ? realloc(v->len, cap * sizeof *l) : NULL;
        if (!p || !l) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        v->len = l;
        v->cap = cap;
    }
    char *d = malloc(len + 1);
    if (!d) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(d, s, len);
    d[len] = '\0';
    v->s[v->n] = d;
    v->len[v->n++] = len;
    return TR_OK;
}

void tok_strs_free(tok_strs *v) {
    for (size_t i = 0; i < v->n; i++) free(v->s[i]);
    free(v->s);
    free(v->len);
    memset(v, 0, sizeof *v);
}

int tok_buf_put(tok_buf *b, const char *s, size_t n) {
    if (n >= SIZE_MAX / 2 - b->n) return -1;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* The Rust library's cleanup, replacement by replacement, in its order. */
static int cleanup(tok_buf *t) {
    static const char *const rules[][2] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        const char *from = rules[r][0], *to = rules[r][1];
        size_t nf = strlen(from), nt = strlen(to);
        if (!t->n || !strstr(t->p, from)) continue;
        tok_buf o = {0};
        const char *s = t->p, *hit;
        while ((hit = strstr(s, from))) {
            if (tok_buf_put(&o, s, (size_t)(hit - s)) || tok_buf_put(&o, to, nt)) goto fail;
            s = hit + nf;
        }
        if (tok_buf_put(&o, s, strlen(s))) goto fail;
        free(t->p);
        *t = o;
        continue;
    fail:
        free(o.p);
        return -1;
    }
    return 0;
}

static tr_status wordpiece(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    size_t pl = strlen(d->prefix);
    for (size_t i = 0; i < in->n; i++) {
        const char *t = in->s[i];
        size_t tl = in->len[i];
        tok_buf piece = {0};
        int ok;
        if (i && pl && tl >= pl && memcmp(t, d->prefix, pl) == 0) ok = tok_buf_put(&piece, t + pl, tl - pl) == 0;
        else if (i) ok = tok_buf_put(&piece, " ", 1) == 0 && tok_buf_put(&piece, t, tl) == 0;
        else ok = tok_buf_put(&piece, t, tl) == 0;
        if (ok && d->cleanup && piece.n) ok = cleanup(&piece) == 0;
        tr_status st = ok ? tok_strs_push(out, piece.p ? piece.p : "", piece.n) : TR_ERR_NOMEM;
        free(piece.p);
        if (!ok) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        TR_CHECK(st);
    }
    return TR_OK;
}

/* BPEDecoder: the end-of-word suffix becomes a space, nothing on the last token (Rust's
 * str::replace, so an empty suffix goes around every character). */
static tr_status bpe_suffix(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    size_t sl = strlen(d->prefix);
    for (size_t i = 0; i < in->n; i++) {
        const char *t = in->s[i], *end = t + in->len[i];
        const char *rep = i + 1 == in->n ? "" : " ";
        size_t rl = strlen(rep);
        tok_buf b = {0};
        int bad = tok_buf_put(&b, "", 0);
        if (!sl) {
            /* Before each character and at the end. */
            while (!bad && t < end) {
                size_t k = 1;
                while (t + k < end && ((unsigned char)t[k] & 0xC0) == 0x80) k++;
                bad = tok_buf_put(&b, rep, rl) || tok_buf_put(&b, t, k);
                t += k;
            }
            if (!bad) bad = tok_buf_put(&b, rep, rl);
        } else {
            while (!bad && t < end) {
                const char *hit = NULL;
                for (const char *q = t; q + sl <= end; q++)
                    if (memcmp(q, d->prefix, sl) == 0) {
                        hit = q;
                        break;
                    }
                if (!hit) {
                    bad = tok_buf_put(&b, t, (size_t)(end - t));
                    break;
                }
                bad = tok_buf_put(&b, t, (size_t)(hit - t)) || tok_buf_put(&b, rep, rl);
                t = hit + sl;
            }
        }
        tr_status st = bad ? tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory") : tok_strs_push(out, b.p, b.n);
        free(b.p);
        TR_CHECK(st);
    }
    return TR_OK;
}

/* Runs one decoder over *list, replacing it. */
static tr_status chain(const tok_decoder *d, tok_strs *list) {
    if (d->kind == TOK_DEC_SEQUENCE) {
        for (size_t i = 0; i < d->nkids; i++) TR_CHECK(chain(&d->kids[i], list));
        return TR_OK;
    }
    tok_strs out = {0};
    tr_status st = TR_OK;
    switch (d->kind) {
    case TOK_DEC_WORDPIECE: st = wordpiece(d, list, &out); break;
    case TOK_DEC_BYTELEVEL: st = tok_bytelevel_decode(list, &out); break;
    case TOK_DEC_BPE: st = bpe_suffix(d, list, &out); break;
    case TOK_DEC_SEQUENCE: break;
    case TOK_DEC_METASPACE: case TOK_DEC_BYTE_FALLBACK: case TOK_DEC_FUSE: case TOK_DEC_REPLACE:
    case TOK_DEC_STRIP:
        st = tok_decode_spm(d, list, &out);
        break;
    }
    if (st != TR_OK) {
        tok_strs_free(&out);
        return st;
    }
    tok_strs_free(list);
    *list = out;
    return TR_OK;
}

tr_status tok_decode_tokens(const tok_decoder *d, const char *const *tokens, size_t n, char **out, size_t *len) {
    *out = NULL;
    tok_strs list = {0};
    tok_buf b = {0};
    tr_status st = TR_OK;
    for (size_t i = 0; st == TR_OK && i < n; i++) st = tok_strs_push(&list, tokens[i], strlen(tokens[i]));
    if (st == TR_OK && d) st = chain(d, &list);
    if (st == TR_OK && tok_buf_put(&b, "", 0)) st = tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; st == TR_OK && i < list.n; i++)
        if ((!d && i && tok_buf_put(&b, " ", 1)) || tok_buf_put(&b, list.s[i], list.len[i]))
            st = tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    tok_strs_free(&list);
    if (st != TR_OK) {
        free(b.p);
        return st;
    }
    *out = b.p;
    if (len) *len = b.n;
    return TR_OK;
}

tr_status tok_load_decoder(const char *file, const char *path, json_t *j, tok_decoder *d) {
    memset(d, 0, sizeof *d);
    const char *type = "";
    char sub[512];
    TR_CHECK(tok_get_type(file, path, j, "decoder", &type));
    if (strcmp(type, "WordPiece") == 0) {
        d->kind = TOK_DEC_WORDPIECE;
        json_t *p = json_object_get(j, "prefix");
        snprintf(sub, sizeof sub, "%s.prefix", path);
        if (p && !json_is_string(p)) return tok_bad(file, sub, "expected a string");
        d->prefix = tok_dup(p ? json_string_value(p) : "##");
        if (!d->prefix) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        return tok_get_bool(file, path, j, "cleanup", 1, &d->cleanup);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        d->kind = TOK_DEC_BYTELEVEL;
        return TR_OK;
    }
    if (strcmp(type, "BPEDecoder") == 0) {
        d->kind = TOK_DEC_BPE;
        json_t *p = json_object_get(j, "suffix");
        snprintf(sub, sizeof sub, "%s.suffix", path);
        if (p && !json_is_string(p)) return tok_bad(file, sub, "expected a string");
        d->prefix = tok_dup(p ? json_string_value(p) : "</w>");
        if (!d->prefix) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        return TR_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        d->kind = TOK_DEC_SEQUENCE;
        json_t *a = json_object_get(j, "decoders");
        snprintf(sub, sizeof sub, "%s.decoders", path);
        if (!json_is_array(a)) return tok_bad(file, sub, "expected a list of decoders");
        d->kids = calloc(json_array_size(a) + 1, sizeof *d->kids);
        if (!d->kids) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < json_array_size(a); i++) {
            snprintf(sub, sizeof sub, "%s.decoders[%zu]", path, i);
            d->nkids = i + 1;
            TR_CHECK(tok_load_decoder(file, sub, json_array_get(a, i), &d->kids[i]));
        }
        return TR_OK;
    }
    int done = 0;
    TR_CHECK(tok_load_decoder_spm(file, path, j, type, d, &done));
    if (done) return TR_OK;
    return tr_error_set(TR_ERR_UNSUPPORTED, "%s: %s: decoder '%s' is not supported (supported: %s)", file, path, type,
                        DECODERS);
}

void tok_decoder_free(tok_decoder *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nkids; i++) tok_decoder_free(&d->kids[i]);
    free(d->kids);
    free(d->prefix);
    tok_regex_free(d->re);
    free(d->content);
}
