/* The BPE model (GPT-2, RoBERTa, Llama 3 files): each character of a word is looked up (with
 * continuing_subword_prefix after the first, end_of_word_suffix on the last; unknown ones become
 * byte-fallback pieces <0xAB> or the unknown token, fused or not), then merges apply by rank,
 * lowest first, leftmost first among equals: the Rust library's priority queue over adjacent
 * pairs, reproduced step for step (docs/tokenizers.md). Dropout is refused: it is training-time
 * randomness. No word cache: the Rust one does not change results, and a loaded tokenizer stays
 * read-only for threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

struct tok_bpe {
    uint64_t *key;    // (nslots) pair (a << 32 | b), UINT64_MAX empty
    uint32_t *rank;   // (nslots)
    int32_t *new_id;  // (nslots)
    size_t nslots;
    char *prefix, *suffix; // NULL when absent
    size_t plen, slen;
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_id[256]; // id of "<0xAB>", -1 when absent
};

#define EMPTY UINT64_MAX

static size_t slot_of(uint64_t k, size_t mask) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & mask;
}

/* The merge of (a, b), or 0 when there is none. */
static int merge_find(const struct tok_bpe *b, int32_t x, int32_t y, uint32_t *rank, int32_t *id) {
    uint64_t k = (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
    size_t m = b->nslots - 1;
    for (size_t i = slot_of(k, m);; i = (i + 1) & m) {
        if (b->key[i] == EMPTY) return 0;
        if (b->key[i] == k) {
            *rank = b->rank[i];
            *id = b->new_id[i];
            return 1;
        }
    }
}

/* A later duplicate of a pair replaces the earlier one, as the Rust map's collect does. */
static void merge_put(struct tok_bpe *b, int32_t x, int32_t y, uint32_t rank, int32_t id) {
    uint64_t k = (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
    size_t m = b->nslots - 1, i = slot_of(k, m);
    while (b->key[i] != EMPTY && b->key[i] != k) i = (i + 1) & m;
    b->key[i] = k;
    b->rank[i] = rank;
    b->new_id[i] = id;
}

void tok_bpe_free(struct tok_bpe *b) {
    if (!b) return;
    free(b->key);
    free(b->rank);
    free(b->new_id);
    free(b->prefix);
    free(b->suffix);
    free(b);
}

static tr_status opt_string(const char *file, const char *key, json_t *j, char **out) {
    json_t *v = json_object_get(j, key);
    *out = NULL;
    if (!v || json_is_null(v)) return TR_OK;
    char path[128];
    snprintf(path, sizeof path, "model.%s", key);
    if (!json_is_string(v)) return tok_bad(file, path, "expected a string or null");
    if (!(*out = tok_dup(json_string_value(v)))) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    return TR_OK;
}

/* One merge, model.merges[i]: "a b" or ["a", "b"]. `legacy` says which form the list uses. */
static tr_status load_merge(const char *file, tok_model *m, json_t *e, size_t i, int legacy, uint32_t rank) {
    struct tok_bpe *b = m->bpe;
    char path[64], msg[160];
    snprintf(path, sizeof path, "model.merges[%zu]", i);
    const char *x, *y;
    size_t nx, ny;
    if (legacy) {
        if (!json_is_string(e)) return tok_bad(file, path, "expected \"A B\" like the merges before it");
        x = json_string_value(e);
        const char *sp = strchr(x, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return tr_error_set(TR_ERR_PARSE, "%s: %s: '%s' is not two tokens separated by one space", file, path, x);
        nx = (size_t)(sp - x);
        y = sp + 1;
        ny = strlen(y);
    } else {
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
            !json_is_string(json_array_get(e, 1)))
            return tok_bad(file, path, "expected [\"A\", \"B\"] like the merges before it");
        x = json_string_value(json_array_get(e, 0));
        y = json_string_value(json_array_get(e, 1));
        nx = strlen(x);
        ny = strlen(y);
    }
    int32_t a = tok_vocab_find(&m->vocab, x, nx), c = tok_vocab_find(&m->vocab, y, ny);
    if (a < 0 || c < 0) {
        int first = a < 0;
        return tr_error_set(TR_ERR_PARSE, "%s: %s: '%.*s' + '%.*s': '%.*s' is not in model.vocab", file, path, (int)nx, x,
                            (int)ny, y, (int)(first ? nx : ny), first ? x : y);
    }
    /* The merged token: a, then b less the prefix's length in bytes (the Rust library cuts
     * that many bytes whatever they are). */
    size_t cut = b->prefix ? b->plen : 0;
    if (cut > ny || (cut < ny && ((unsigned char)y[cut] & 0xC0) == 0x80)) {
        snprintf(msg, sizeof msg, "'%.*s' is shorter than continuing_subword_prefix or the cut splits a character",
                 (int)(ny > 60 ? 60 : ny), y);
        return tok_bad(file, path, msg);
    }
    size_t nz = nx + ny - cut;
    char *z = malloc(nz + 1);
    if (!z) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(z, x, nx);
    memcpy(z + nx, y + cut, ny - cut);
    z[nz] = '\0';
    int32_t id = tok_vocab_find(&m->vocab, z, nz);
    if (id < 0) {
        tr_status st = tr_error_set(TR_ERR_PARSE, "%s: %s: '%.*s' + '%.*s' = '%s' is not in model.vocab", file, path,
                                    (int)nx, x, (int)ny, y, z);
        free(z);
        return st;
    }
    free(z);
    merge_put(b, a, c, rank, id);
    return TR_OK;
}

tr_status tok_load_bpe(const char *file, json_t *j, tok_model *m) {
    m->kind = TOK_MODEL_BPE;
    struct tok_bpe *b = m->bpe = calloc(1, sizeof *m->bpe);
    if (!b) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    json_t *d = json_object_get(j, "dropout");
    if (d && !json_is_null(d)) {
        if (!json_is_number(d)) return tok_bad(file, "model.dropout", "expected a number or null");
        if (json_number_value(d) != 0.0)
            return tr_error_set(TR_ERR_UNSUPPORTED,
                                "%s: model.dropout: %g is not supported (only null or 0: dropout is training-time randomness)",
                                file, json_number_value(d));
    }
    TR_CHECK(opt_string(file, "unk_token", j, &m->unk));
    TR_CHECK(opt_string(file, "continuing_subword_prefix", j, &b->prefix));
    TR_CHECK(opt_string(file, "end_of_word_suffix", j, &b->suffix));
    b->plen = b->prefix ? strlen(b->prefix) : 0;
    b->slen = b->suffix ? strlen(b->suffix) : 0;
    TR_CHECK(tok_get_bool(file, "model", j, "fuse_unk", 0, &b->fuse_unk));
    TR_CHECK(tok_get_bool(file, "model", j, "byte_fallback", 0, &b->byte_fallback));
    TR_CHECK(tok_get_bool(file, "model", j, "ignore_merges", 0, &b->ignore_merges));
    TR_CHECK(tok_load_vocab(file, j, &m->vocab));
    if (m->unk) m->unk_id = tok_vocab_find(&m->vocab, m->unk, strlen(m->unk));
    for (int i = 0; i < 256; i++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", i);
        b->byte_id[i] = tok_vocab_find(&m->vocab, t, 6);
    }

    json_t *a = json_object_get(j, "merges");
    if (!json_is_array(a)) return tok_bad(file, "model.merges", "expected a list of merges (\"A B\" or [\"A\", \"B\"])");
    size_t n = json_array_size(a), ns = 16;
    while (ns < 2 * n + 2) ns *= 2;
    b->key = malloc(ns * sizeof *b->key);
    b->rank = malloc(ns * sizeof *b->rank);
    b->new_id = malloc(ns * sizeof *b->new_id);
    if (!b->key || !b->rank || !b->new_id) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    memset(b->key, 0xff, ns * sizeof *b->key);
    b->nslots = ns;
    int legacy = n && json_is_string(json_array_get(a, 0));
    uint32_t rank = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        /* merges.txt's header line, skipped by the Rust library in the list too. */
        if (legacy && json_is_string(e) && strncmp(json_string_value(e), "#version", 8) == 0) continue;
        TR_CHECK(load_merge(file, m, e, i, legacy, rank++));
    }
    return TR_OK;
}

/* ---- encoding ---- */

typedef struct sym {
    int32_t c;        // token id
    int32_t prev, next; // -1 none
    size_t len;       // bytes of the word it covers; 0: merged away
} sym;

typedef struct cand { uint32_t rank; uint32_t pos; int32_t id; } cand;

static int before(cand x, cand y) { return x.rank != y.rank ? x.rank < y.rank : x.pos < y.pos; }

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!before(c, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--*n];
    size_t i = 0, k = *n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        cand best = last;
        if (l < k && before(h[l], best)) { m = l; best = h[l]; }
        if (r < k && before(h[r], best)) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (k) h[i] = last;
    return top;
}

/* Scratch for one word: on the stack for short words, malloc'ed for long ones. */
#define SMALL 64

typedef struct scratch {
    sym *s;
    cand *h;
    size_t *at;  // (nch + 1) byte offset of each code point in the word
    char *buf;   // the lookup string
    size_t nsym, nh, cap_sym, cap_h;
} scratch;

static void sym_add(scratch *w, int32_t c, size_t len) {
    size_t i = w->nsym++;
    w->s[i] = (sym){c, i ? (int32_t)i - 1 : -1, -1, len};
    if (i) w->s[i - 1].next = (int32_t)i;
}

static void merge_all(const struct tok_bpe *b, scratch *w) {
    w->nh = 0;
    for (size_t i = 0; i + 1 < w->nsym; i++) {
        uint32_t r;
        int32_t id;
        if (merge_find(b, w->s[i].c, w->s[i + 1].c, &r, &id)) heap_push(w->h, &w->nh, (cand){r, (uint32_t)i, id});
    }
    while (w->nh) {
        cand top = heap_pop(w->h, &w->nh);
        sym *cur = &w->s[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        sym right = w->s[cur->next];
        uint32_t r;
        int32_t id;
        /* An entry made stale by an earlier merge no longer names this pair's result. */
        if (!merge_find(b, cur->c, right.c, &r, &id) || id != top.id) continue;
        w->s[cur->next].len = 0;
        cur->c = top.id;
        cur->len += right.len;
        cur->next = right.next;
        if (right.next >= 0) w->s[right.next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && merge_find(b, w->s[cur->prev].c, cur->c, &r, &id))
            heap_push(w->h, &w->nh, (cand){r, (uint32_t)cur->prev, id});
        if (cur->next >= 0 && merge_find(b, cur->c, w->s[cur->next].c, &r, &id))
            heap_push(w->h, &w->nh, (cand){r, top.pos, id});
    }
}

/* The code point of the word holding byte `pos` (clamped to the word). */
static size_t cp_at(const size_t *at, size_t nch, size_t pos) {
    size_t lo = 0, hi = nch;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (at[mid] <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

static tr_status emit(const tok_nstr *s, tok_range w, const size_t *at, size_t nch, int32_t id, size_t p0, size_t p1,
                      int32_t type_id, int32_t seq, tok_enc *out) {
    size_t i = cp_at(at, nch, p0), k = cp_at(at, nch, p1 > p0 ? p1 - 1 : p0);
    if (k < i) k = i;
    return tok_enc_push(out, id, type_id, 0, seq, s->a0[w.b + i], s->a1[w.b + k]);
}

static tr_status encode_word(const tok_model *m, const tok_nstr *s, tok_range w, int32_t type_id, int32_t seq,
                             tok_enc *out, scratch *x) {
    const struct tok_bpe *b = m->bpe;
    size_t nch = w.e - w.b, *at = x->at;
    char *buf = x->buf, *word = buf + b->plen + 4 + b->slen; /* the lookup string, then the word */
    size_t len = 0;
    for (size_t i = 0; i < nch; i++) {
        at[i] = len;
        len += tok_utf8_put(word + len, s->cp[w.b + i]);
    }
    at[nch] = len;
    if (b->ignore_merges) {
        int32_t id = tok_vocab_find(&m->vocab, word, len);
        if (id >= 0) return tok_enc_push(out, id, type_id, 0, seq, s->a0[w.b], s->a1[w.e - 1]);
    }
    x->nsym = 0;
    int32_t unk = -1;
    size_t unk_len = 0;
    for (size_t i = 0; i < nch; i++) {
        size_t cl = at[i + 1] - at[i], n = 0;
        if (i && b->prefix) {
            memcpy(buf, b->prefix, b->plen);
            n = b->plen;
        }
        memcpy(buf + n, word + at[i], cl);
        n += cl;
        if (i + 1 == nch && b->suffix) {
            memcpy(buf + n, b->suffix, b->slen);
            n += b->slen;
        }
        int32_t id = tok_vocab_find(&m->vocab, buf, n);
        if (id >= 0) {
            if (unk >= 0) sym_add(x, unk, unk_len);
            unk = -1;
            sym_add(x, id, cl);
            continue;
        }
        if (b->byte_fallback) {
            size_t k = 0;
            while (k < n && b->byte_id[(unsigned char)buf[k]] >= 0) k++;
            /* Every byte of the lookup string, prefix and suffix included, one piece each; a
             * pending unknown token waits for the next known character (the Rust order). */
            if (k == n) {
                for (k = 0; k < n; k++) sym_add(x, b->byte_id[(unsigned char)buf[k]], 1);
                continue;
            }
        }
        if (!m->unk) continue;
        if (m->unk_id < 0)
            return tr_error_set(TR_ERR_INVALID, "BPE: the unknown token '%s' is not in the vocabulary", m->unk);
        if (unk >= 0 && b->fuse_unk) {
            unk_len += cl;
            continue;
        }
        if (unk >= 0) sym_add(x, unk, unk_len);
        unk = m->unk_id;
        unk_len = cl;
    }
    if (unk >= 0) sym_add(x, unk, unk_len);
    merge_all(b, x);
    size_t pos = 0;
    for (size_t i = 0; i < x->nsym; i++) {
        if (!x->s[i].len) continue;
        TR_CHECK(emit(s, w, at, nch, x->s[i].c, pos, pos + x->s[i].len, type_id, seq, out));
        pos += x->s[i].len;
    }
    return TR_OK;
}

tr_status tok_bpe_encode(const tok_model *m, const tok_nstr *s, tok_range w, int32_t type_id, int32_t seq,
                         tok_enc *out) {
    size_t nch = w.e - w.b;
    if (nch == 0) return TR_OK;
    const struct tok_bpe *b = m->bpe;
    /* Symbols: one per character, or per byte of the lookup string with byte fallback. */
    size_t nsym = b->byte_fallback ? nch * (4 + b->plen + b->slen) : nch;
    size_t nbuf = b->plen + 4 + b->slen + 4 * nch + 1;
    sym s_small[SMALL];
    cand h_small[4 * SMALL];
    size_t at_small[SMALL + 1];
    char buf_small[8 * SMALL];
    scratch x = {s_small, h_small, at_small, buf_small, 0, 0, SMALL, 4 * SMALL};
    void *heap = NULL;
    /* The queue holds at most the first pairs plus two per merge: under 3 per symbol. */
    if (nsym > SMALL || nch > SMALL || nbuf > sizeof buf_small) {
        size_t bytes = nsym * sizeof(sym) + 3 * nsym * sizeof(cand) + (nch + 1) * sizeof(size_t) + nbuf;
        heap = malloc(bytes);
        if (!heap) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        x.s = heap; /* most aligned first */
        x.at = (size_t *)(x.s + nsym);
        x.h = (cand *)(x.at + nch + 1);
        x.buf = (char *)(x.h + 3 * nsym);
    }
    tr_status st = encode_word(m, s, w, type_id, seq, out, &x);
    free(heap);
    return st;
}
