/* The tokenizer: loading, the encode pipeline (added tokens, normalizer, pre-tokenizer,
 * WordPiece, truncation, post-processor, padding), decode and lookups. Added tokens are split
 * out first: the non-normalized ones on the original text, the normalized ones on each
 * normalized piece, leftmost-longest, with lstrip/rstrip/single_word (docs/tokenizers.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/tokenizer_impl.h"

void tr_tokenizer_free(tr_tokenizer *t) {
    if (!t) return;
    free(t->name);
    tok_normalizer_free(t->normalizer);
    free(t->normalizer);
    tok_pretok_free(t->pretok);
    free(t->pretok);
    tok_model_free(&t->model);
    tok_post_free(t->post);
    free(t->post);
    tok_decoder_free(t->decoder);
    free(t->decoder);
    for (size_t i = 0; i < t->nadded; i++) {
        free(t->added[i].content);
        free(t->added[i].cp);
    }
    free(t->added);
    free(t->by_first);
    free(t->by_id);
    free(t->pad_token);
    free(t);
}

/* Normalized added tokens are matched in normalized text: their content is normalized once. */
static tr_status normalize_added(tr_tokenizer *t) {
    if (!t->normalizer) return TR_OK;
    for (size_t i = 0; i < t->nadded; i++) {
        tok_added *x = &t->added[i];
        if (!x->normalized) continue;
        tok_nstr s = {0};
        tr_status st = tok_nstr_from_utf8(&s, x->content, strlen(x->content), 0);
        if (st == TR_OK) st = tok_normalize(t->normalizer, &s);
        if (st != TR_OK) {
            tok_nstr_free(&s);
            return st;
        }
        free(x->cp);
        x->cp = s.cp;
        x->ncp = s.n;
        free(s.a0);
        free(s.a1);
    }
    return TR_OK;
}

/* Sort keys of the two added-token indexes (qsort's context through a file-scope pointer is
 * not thread-safe, so each entry carries its key). */
typedef struct keyed { uint64_t key; size_t i; } keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* The added tokens by first code point (the splitter's lookup) and by id (id_to_token's). */
static tr_status index_added(tr_tokenizer *t) {
    size_t n = t->nadded;
    keyed *k = malloc((n + 1) * sizeof *k);
    t->by_first = malloc((n + 1) * sizeof *t->by_first);
    t->by_id = malloc((n + 1) * sizeof *t->by_id);
    if (!k || !t->by_first || !t->by_id) {
        free(k);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < n; i++) k[i] = (keyed){t->added[i].ncp ? t->added[i].cp[0] : UINT64_MAX, i};
    qsort(k, n, sizeof *k, cmp_keyed);
    for (size_t i = 0; i < n; i++) t->by_first[i] = k[i].i;
    for (size_t i = 0; i < n; i++) k[i] = (keyed){(uint64_t)(uint32_t)t->added[i].id, i};
    qsort(k, n, sizeof *k, cmp_keyed);
    for (size_t i = 0; i < n; i++) t->by_id[i] = k[i].i;
    free(k);
    return TR_OK;
}

tr_status tr_tokenizer_load_json(tr_tokenizer **out, const char *json, size_t len, const char *name) {
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return tr_error_set(TR_ERR_PARSE, "%s:%d:%d: malformed JSON: %s", name, err.line, err.column, err.text);
    tr_tokenizer *t = calloc(1, sizeof *t);
    tr_status st = TR_ERR_NOMEM;
    if (!t || !(t->name = malloc(strlen(name) + 1))) {
        tr_error_set(st, "tokenizer: out of memory");
        goto fail;
    }
    strcpy(t->name, name);
    TR_CHECK_GOTO(tok_load_root(t, name, root), fail);
    TR_CHECK_GOTO(normalize_added(t), fail);
    TR_CHECK_GOTO(index_added(t), fail);
    json_decref(root);
    *out = t;
    return TR_OK;
fail:
    json_decref(root);
    tr_tokenizer_free(t);
    return st;
}

tr_status tr_tokenizer_load(tr_tokenizer **out, const char *path) {
    *out = NULL;
    struct stat sb;
    char file[4096];
    if (stat(path, &sb) != 0)
        return tr_error_set(TR_ERR_IO, "%s: cannot open: %s (expected a tokenizer.json or a folder holding one)", path,
                            strerror(errno));
    int w = S_ISDIR(sb.st_mode) ? snprintf(file, sizeof file, "%s/tokenizer.json", path)
                                : snprintf(file, sizeof file, "%s", path);
    if (w < 0 || (size_t)w >= sizeof file)
        return tr_error_set(TR_ERR_INVALID, "%.200s...: the path is longer than %zu bytes", path, sizeof file - 1);
    FILE *f = fopen(file, "rb");
    if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot open: %s", file, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (!buf) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory reading it", file);
    if (rerr) {
        free(buf);
        return tr_error_set(TR_ERR_IO, "%s: read error", file);
    }
    if (n == 0) {
        free(buf);
        return tr_error_set(TR_ERR_PARSE, "%s: empty file (expected a tokenizer.json)", file);
    }
    tr_status st = tr_tokenizer_load_json(out, buf, n, file);
    free(buf);
    return st;
}

/* ---- added tokens ---- */

typedef struct seg { size_t b, e; int32_t id; } seg; /* code points [b, e); id -1: text */
typedef struct segs { seg *s; size_t n, cap; } segs;

static tr_status seg_push(segs *v, size_t b, size_t e, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 8;
        seg *p = realloc(v->s, cap * sizeof *p);
        if (!p) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        v->s = p;
        v->cap = cap;
    }
    v->s[v->n++] = (seg){b, e, id};
    return TR_OK;
}

static int word_char(uint32_t c) { return c == '_' || tok_is_word(c); }

/* Splits s[b, e) around the added tokens whose `normalized` flag equals `normalized`. */
static tr_status split_added(const tr_tokenizer *t, const tok_nstr *s, size_t b, size_t e, int normalized, segs *out) {
    size_t from = b, i = b;
    while (i < e) {
        const tok_added *best = NULL;
        /* The tokens starting with this code point: the first by binary search, then in order.
         * A token its normalizer empties (a lone control character) matches nothing. */
        uint32_t c = s->cp[i];
        size_t lo = 0, hi = t->nadded;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const tok_added *x = &t->added[t->by_first[mid]];
            if (x->ncp && x->cp[0] < c) lo = mid + 1;
            else hi = mid;
        }
        for (size_t k = lo; k < t->nadded; k++) {
            const tok_added *x = &t->added[t->by_first[k]];
            if (!x->ncp || x->cp[0] != c) break;
            if (x->normalized != normalized || x->ncp > e - i || (best && x->ncp <= best->ncp)) continue;
            if (memcmp(s->cp + i, x->cp, x->ncp * sizeof(uint32_t)) == 0) best = x;
        }
        if (!best) {
            i++;
            continue;
        }
        size_t start = i, stop = i + best->ncp;
        if (best->single_word && ((start > b && word_char(s->cp[start - 1])) || (stop < e && word_char(s->cp[stop])))) {
            i = stop;
            continue;
        }
        if (best->lstrip)
            while (start > from && tok_is_whitespace(s->cp[start - 1])) start--;
        if (best->rstrip)
            while (stop < e && tok_is_whitespace(s->cp[stop])) stop++;
        if (from < start) TR_CHECK(seg_push(out, from, start, -1));
        TR_CHECK(seg_push(out, start, stop, best->id));
        from = i = stop;
    }
    if (from < e) TR_CHECK(seg_push(out, from, e, -1));
    return TR_OK;
}

static int has_added(const tr_tokenizer *t, int normalized) {
    for (size_t k = 0; k < t->nadded; k++)
        if (t->added[k].normalized == normalized) return 1;
    return 0;
}

/* Normalizes, pre-tokenizes and runs the model over one piece of original text. */
static tr_status encode_piece(const tr_tokenizer *t, const tok_nstr *orig, size_t b, size_t e, int32_t type_id,
                              int32_t seq, tok_enc *out) {
    tok_nstr s = {0};
    tok_ranges words = {0};
    segs parts = {0};
    tr_status st = TR_OK;
    TR_CHECK_GOTO(tok_nstr_reserve(&s, e - b + 1), done);
    memcpy(s.cp, orig->cp + b, (e - b) * sizeof *s.cp);
    memcpy(s.a0, orig->a0 + b, (e - b) * sizeof *s.a0);
    memcpy(s.a1, orig->a1 + b, (e - b) * sizeof *s.a1);
    s.n = e - b;
    if (t->normalizer) TR_CHECK_GOTO(tok_normalize(t->normalizer, &s), done);
    if (has_added(t, 1)) TR_CHECK_GOTO(split_added(t, &s, 0, s.n, 1, &parts), done);
    else if (s.n) TR_CHECK_GOTO(seg_push(&parts, 0, s.n, -1), done);
    for (size_t i = 0; i < parts.n; i++) {
        seg g = parts.s[i];
        if (g.id >= 0) {
            TR_CHECK_GOTO(tok_enc_push(out, g.id, type_id, 0, seq, s.a0[g.b], s.a1[g.e - 1]), done);
            continue;
        }
        words.n = 0;
        TR_CHECK_GOTO(tok_ranges_push(&words, g.b, g.e), done);
        TR_CHECK_GOTO(tok_pretokenize(t->pretok, &s, &words), done);
        for (size_t w = 0; w < words.n; w++)
            TR_CHECK_GOTO(tok_model_encode(&t->model, &s, words.r[w], type_id, seq, out), done);
    }
done:
    tok_nstr_free(&s);
    free(words.r);
    free(parts.s);
    return st;
}

static tr_status encode_one(const tr_tokenizer *t, const char *text, size_t len, int32_t type_id, tok_enc *out) {
    tok_nstr orig = {0};
    segs parts = {0};
    tr_status st = TR_OK;
    TR_CHECK_GOTO(tok_nstr_from_utf8(&orig, text, len, 0), done);
    if (has_added(t, 0)) TR_CHECK_GOTO(split_added(t, &orig, 0, orig.n, 0, &parts), done);
    else if (orig.n) TR_CHECK_GOTO(seg_push(&parts, 0, orig.n, -1), done);
    for (size_t i = 0; i < parts.n; i++) {
        seg g = parts.s[i];
        if (g.id >= 0) TR_CHECK_GOTO(tok_enc_push(out, g.id, type_id, 0, type_id, orig.a0[g.b], orig.a1[g.e - 1]), done);
        else TR_CHECK_GOTO(encode_piece(t, &orig, g.b, g.e, type_id, type_id, out), done);
    }
done:
    tok_nstr_free(&orig);
    free(parts.s);
    return st;
}

/* Encodes without padding. */
static tr_status encode_unpadded(const tr_tokenizer *t, const char *text, size_t len, const char *pair,
                                 size_t pair_len, int add_special, tok_enc *out) {
    tok_enc a = {0}, b = {0};
    tr_status st = TR_OK;
    if (!text && len) return tr_error_set(TR_ERR_INVALID, "tokenizer: text is NULL");
    st = encode_one(t, text ? text : "", len, 0, &a);
    if (st != TR_OK) {
        tr_error_prefix("text: ");
        goto done;
    }
    if (pair) {
        st = encode_one(t, pair, pair_len, 1, &b);
        if (st != TR_OK) {
            tr_error_prefix("pair: ");
            goto done;
        }
    }
    size_t added = add_special ? tok_post_added(t->post, pair != NULL) : 0;
    TR_CHECK_GOTO(tok_truncate(&t->trunc, added, &a, pair ? &b : NULL), done);
    TR_CHECK_GOTO(tok_post_process(t->post, &a, pair ? &b : NULL, add_special, out), done);
done:
    tok_enc_free(&a);
    tok_enc_free(&b);
    return st;
}

tr_status tr_tokenizer_encode(const tr_tokenizer *t, const char *text, size_t text_len, const char *pair,
                              size_t pair_len, int add_special, tr_encoding *out) {
    memset(out, 0, sizeof *out);
    tok_enc x = {0};
    tr_status st = encode_unpadded(t, text, text_len, pair, pair_len, add_special, &x);
    size_t target = t->pad.strategy == TR_PAD_FIXED ? t->pad.length : x.e.len;
    if (st == TR_OK) st = tok_pad(&t->pad, target, &x);
    if (st != TR_OK) {
        tok_enc_free(&x);
        return st;
    }
    *out = x.e;
    return TR_OK;
}

tr_status tr_tokenizer_encode_batch(const tr_tokenizer *t, size_t n, const char *const *texts,
                                    const size_t *text_lens, const char *const *pairs, const size_t *pair_lens,
                                    int add_special, tr_encoding *out) {
    tok_enc *x = calloc(n ? n : 1, sizeof *x);
    if (!x) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    tr_status st = TR_OK;
    size_t longest = 0;
    for (size_t i = 0; st == TR_OK && i < n; i++) {
        const char *p = pairs ? pairs[i] : NULL;
        st = encode_unpadded(t, texts[i], text_lens[i], p, p ? pair_lens[i] : 0, add_special, &x[i]);
        if (st != TR_OK) tr_error_prefix("batch item %zu: ", i);
        else if (x[i].e.len > longest) longest = x[i].e.len;
    }
    size_t target = t->pad.strategy == TR_PAD_FIXED ? t->pad.length : longest;
    for (size_t i = 0; st == TR_OK && i < n; i++) st = tok_pad(&t->pad, target, &x[i]);
    for (size_t i = 0; i < n; i++) {
        if (st == TR_OK) out[i] = x[i].e;
        else {
            tok_enc_free(&x[i]);
            memset(&out[i], 0, sizeof out[i]);
        }
    }
    free(x);
    return st;
}

/* ---- lookups and decode ---- */

/* The first added token (in file order) with this id: binary search of by_id. */
static const tok_added *added_by_id(const tr_tokenizer *t, int32_t id) {
    size_t lo = 0, hi = t->nadded;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->added[t->by_id[mid]].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < t->nadded && t->added[t->by_id[lo]].id == id ? &t->added[t->by_id[lo]] : NULL;
}

tr_status tr_tokenizer_id_to_token(const tr_tokenizer *t, int32_t id, const char **token) {
    const tok_added *a = added_by_id(t, id);
    if (a) {
        *token = a->content;
        return TR_OK;
    }
    if (id >= 0 && (size_t)id < t->model.vocab.n && t->model.vocab.str[id]) {
        *token = t->model.vocab.str[id];
        return TR_OK;
    }
    *token = NULL;
    return tr_error_set(TR_ERR_NOT_FOUND, "%s: no token has id %d", t->name, id);
}

tr_status tr_tokenizer_token_to_id(const tr_tokenizer *t, const char *token, int32_t *id) {
    for (size_t i = 0; i < t->nadded; i++)
        if (strcmp(t->added[i].content, token) == 0) {
            *id = t->added[i].id;
            return TR_OK;
        }
    *id = tok_vocab_find(&t->model.vocab, token, strlen(token));
    if (*id < 0) return tr_error_set(TR_ERR_NOT_FOUND, "%s: '%s' is not in the vocabulary", t->name, token);
    return TR_OK;
}

size_t tr_tokenizer_vocab_size(const tr_tokenizer *t) {
    size_t n = t->model.vocab.n;
    for (size_t i = 0; i < t->nadded; i++)
        if (tok_vocab_find(&t->model.vocab, t->added[i].content, strlen(t->added[i].content)) < 0) n++;
    return n;
}

/* One more than the largest id a post-processor adds. */
static size_t post_bound(const tok_post *p) {
    if (!p) return 0;
    size_t b = 0;
    if (p->kind == TOK_POST_BERT || p->kind == TOK_POST_ROBERTA) {
        b = (size_t)p->cls_id + 1;
        if ((size_t)p->sep_id + 1 > b) b = (size_t)p->sep_id + 1;
    }
    for (int pair = 0; pair < 2; pair++) {
        const tok_tpl_piece *t = pair ? p->pair : p->single;
        size_t n = pair ? p->npair : p->nsingle;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < t[i].nids; k++)
                if ((size_t)t[i].ids[k] + 1 > b) b = (size_t)t[i].ids[k] + 1;
    }
    for (size_t i = 0; i < p->nkids; i++) {
        size_t k = post_bound(&p->kids[i]);
        if (k > b) b = k;
    }
    return b;
}

size_t tr_tokenizer_id_bound(const tr_tokenizer *t) {
    size_t b = t->model.vocab.n, k = post_bound(t->post);
    if (k > b) b = k;
    for (size_t i = 0; i < t->nadded; i++)
        if ((size_t)t->added[i].id + 1 > b) b = (size_t)t->added[i].id + 1;
    if (t->pad.strategy != TR_PAD_NONE && (size_t)t->pad.pad_id + 1 > b) b = (size_t)t->pad.pad_id + 1;
    return b;
}

size_t tr_tokenizer_special_count(const tr_tokenizer *t) {
    size_t n = 0;
    for (size_t i = 0; i < t->nadded; i++) n += t->added[i].special != 0;
    return n;
}

tr_status tr_tokenizer_special(const tr_tokenizer *t, size_t i, const char **token, int32_t *id) {
    for (size_t k = 0; k < t->nadded; k++) {
        if (!t->added[k].special) continue;
        if (i-- == 0) {
            *token = t->added[k].content;
            *id = t->added[k].id;
            return TR_OK;
        }
    }
    return tr_error_set(TR_ERR_NOT_FOUND, "%s: there are %zu special tokens", t->name, tr_tokenizer_special_count(t));
}

size_t tr_tokenizer_num_special(const tr_tokenizer *t, int pair) { return tok_post_added(t->post, pair); }

tr_status tr_tokenizer_decode_len(const tr_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **out,
                                  size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    const char **toks = malloc((n ? n : 1) * sizeof *toks);
    if (!toks) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s;
        if (tr_tokenizer_id_to_token(t, ids[i], &s) != TR_OK) continue;
        /* An id of the vocabulary that is also an added token has its id (checked at load). */
        const tok_added *a = skip_special ? added_by_id(t, ids[i]) : NULL;
        if (a && a->special) continue;
        toks[k++] = s;
    }
    tr_error_clear();
    tr_status st = tok_decode_tokens(t->decoder, toks, k, out, len);
    free(toks);
    return st;
}

tr_status tr_tokenizer_decode(const tr_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **out) {
    return tr_tokenizer_decode_len(t, ids, n, skip_special, out, NULL);
}

/* ---- settings ---- */

tr_status tr_tokenizer_truncation(const tr_tokenizer *t, tr_truncation *out) {
    *out = t->trunc;
    return TR_OK;
}

tr_status tr_tokenizer_set_truncation(tr_tokenizer *t, const tr_truncation *tr) {
    if (!tr || !tr->enabled) {
        memset(&t->trunc, 0, sizeof t->trunc);
        return TR_OK;
    }
    if (tr->stride) return tr_error_set(TR_ERR_UNSUPPORTED, "truncation: stride %zu is not supported (only 0)", tr->stride);
    if ((unsigned)tr->strategy > TR_TRUNCATE_ONLY_SECOND || (unsigned)tr->direction > TR_SIDE_LEFT)
        return tr_error_set(TR_ERR_INVALID, "truncation: unknown strategy or direction");
    t->trunc = *tr;
    return TR_OK;
}

tr_status tr_tokenizer_padding(const tr_tokenizer *t, tr_padding *out) {
    *out = t->pad;
    return TR_OK;
}

tr_status tr_tokenizer_set_padding(tr_tokenizer *t, const tr_padding *p) {
    if (!p || p->strategy == TR_PAD_NONE) {
        memset(&t->pad, 0, sizeof t->pad);
        t->pad.pad_token = t->pad_token;
        return TR_OK;
    }
    if ((unsigned)p->strategy > TR_PAD_FIXED || (unsigned)p->direction > TR_SIDE_LEFT)
        return tr_error_set(TR_ERR_INVALID, "padding: unknown strategy or direction");
    if ((p->strategy == TR_PAD_FIXED && p->length > TOK_MAX_PAD) || p->multiple_of > TOK_MAX_PAD)
        return tr_error_set(TR_ERR_INVALID, "padding: %zu tokens is more than the %zu this build pads to",
                            p->length > p->multiple_of ? p->length : p->multiple_of, TOK_MAX_PAD);
    char *tok = NULL;
    const char *src = p->pad_token ? p->pad_token : "[PAD]";
    if (!(tok = malloc(strlen(src) + 1))) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    strcpy(tok, src);
    free(t->pad_token);
    t->pad_token = tok;
    t->pad = *p;
    t->pad.pad_token = tok;
    return TR_OK;
}
