/* The Unigram model (SentencePiece): the best segmentation of a word into vocabulary pieces by
 * the sum of their scores (Viterbi over the pieces a byte trie finds at each character), as the
 * Rust library's encode_optimized does, ties to the piece that starts first. A character no
 * one-character piece covers is the unknown piece (score: lowest score - 10); runs of unknown
 * pieces are fused into one; with byte_fallback an unknown run becomes <0xAB> pieces, one per
 * UTF-8 byte, when all are in the vocabulary (docs/tokenizers.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

#define UNK_PENALTY 10.0
#define STACK_CHARS 128 /* words up to this many characters need no allocation */

/* The trie: node 0 is the root; a child is found through an open-addressing table keyed by
 * (node, byte). */
struct tok_unigram {
    double *score;      // (n) by id
    double min_score;
    int byte_fallback;
    int32_t *piece;     // (nnodes) the piece id ending at a node, -1 none
    size_t nnodes, capnodes;
    uint64_t *keys;     // (nslots) node * 256 + byte + 1; 0 empty
    int32_t *child;     // (nslots)
    size_t nslots, used;
};

/* The score as the Rust library reads it: serde_json (without float_roundtrip) turns the
 * digits into an integer significand, converts that to a double and divides by a power of
 * ten, which rounds twice when the significand passes 2^53 (17 digits), and can land one unit
 * in the last place from strtod's value. Files hold the shortest digits that give back the
 * double (ryu, Python's repr), so those digits are recovered from jansson's double and read
 * again the serde_json way; Viterbi ties between paths of equal pieces then break the same. */
static double serde_f64(double d) {
    char buf[40];
    if (!isfinite(d) || d == 0) return d;
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, d);
        if (p < 17 && strtod(buf, NULL) != d) continue;
        /* buf: [-]D.DDDDe[+-]X */
        uint64_t sig = 0;
        const char *c = buf + (buf[0] == '-');
        for (; *c && *c != 'e'; c++)
            if (*c >= '0' && *c <= '9') sig = sig * 10 + (uint64_t)(*c - '0');
        int exp = atoi(c + 1) - (p - 1);
        if (sig < (1ull << 53)) return d; /* one rounding: the correctly rounded value */
        double f = (double)sig;
        while (exp < -308) { /* as serde_json: scale by 1e308 until the table holds the power */
            f /= 1e308;
            exp += 308;
        }
        char pw[16];
        snprintf(pw, sizeof pw, "1e%d", exp < 0 ? -exp : exp);
        double ten = strtod(pw, NULL);
        f = exp < 0 ? f / ten : f * ten;
        return d < 0 ? -f : f;
    }
    return d;
}

static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static int32_t trie_child(const tok_unigram *u, int32_t node, unsigned char b) {
    uint64_t key = (uint64_t)node * 256 + b + 1;
    size_t m = u->nslots - 1;
    for (size_t i = (size_t)mix(key) & m;; i = (i + 1) & m) {
        if (u->keys[i] == key) return u->child[i];
        if (u->keys[i] == 0) return -1;
    }
}

static tr_status trie_grow(tok_unigram *u) {
    size_t ns = u->nslots ? 2 * u->nslots : 1024;
    uint64_t *keys = calloc(ns, sizeof *keys);
    int32_t *child = malloc(ns * sizeof *child);
    if (!keys || !child) {
        free(keys);
        free(child);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < u->nslots; i++) {
        if (!u->keys[i]) continue;
        size_t j = (size_t)mix(u->keys[i]) & (ns - 1);
        while (keys[j]) j = (j + 1) & (ns - 1);
        keys[j] = u->keys[i];
        child[j] = u->child[i];
    }
    free(u->keys);
    free(u->child);
    u->keys = keys;
    u->child = child;
    u->nslots = ns;
    return TR_OK;
}

static tr_status trie_node(tok_unigram *u, int32_t *out) {
    if (u->nnodes == u->capnodes) {
        size_t cap = u->capnodes ? 2 * u->capnodes : 1024;
        if (cap > INT32_MAX) return tr_error_set(TR_ERR_NOMEM, "tokenizer: the Unigram vocabulary is too large");
        int32_t *p = realloc(u->piece, cap * sizeof *p);
        if (!p) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        u->piece = p;
        u->capnodes = cap;
    }
    u->piece[u->nnodes] = -1;
    *out = (int32_t)u->nnodes++;
    return TR_OK;
}

static tr_status trie_insert(tok_unigram *u, const char *s, size_t len, int32_t id) {
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t next = trie_child(u, node, (unsigned char)s[i]);
        if (next < 0) {
            if (2 * (u->used + 1) > u->nslots) TR_CHECK(trie_grow(u));
            TR_CHECK(trie_node(u, &next));
            uint64_t key = (uint64_t)node * 256 + (unsigned char)s[i] + 1;
            size_t m = u->nslots - 1, j = (size_t)mix(key) & m;
            while (u->keys[j]) j = (j + 1) & m;
            u->keys[j] = key;
            u->child[j] = next;
            u->used++;
        }
        node = next;
    }
    u->piece[node] = id;
    return TR_OK;
}

void tok_unigram_free(tok_unigram *u) {
    if (!u) return;
    free(u->score);
    free(u->piece);
    free(u->keys);
    free(u->child);
    free(u);
}

tr_status tok_load_unigram(const char *file, json_t *j, tok_model *m) {
    m->kind = TOK_MODEL_UNIGRAM;
    m->unk_id = -1;
    char sub[128];
    json_t *v = json_object_get(j, "vocab");
    if (!json_is_array(v)) return tok_bad(file, "model.vocab", "expected a list of [piece, score]");
    size_t n = json_array_size(v);
    if (n > INT32_MAX) return tok_bad(file, "model.vocab", "too many pieces");
    json_t *unk = json_object_get(j, "unk_id");
    if (unk && !json_is_null(unk)) {
        if (!json_is_integer(unk) || json_integer_value(unk) < 0)
            return tok_bad(file, "model.unk_id", "expected null or a piece id (a non-negative integer)");
        if (n == 0) return tok_bad(file, "model.vocab", "the vocabulary is empty but unk_id needs a piece");
        if ((json_int_t)n <= json_integer_value(unk))
            return tr_error_set(TR_ERR_PARSE, "%s: model.unk_id: %lld is not a piece id (the vocabulary has %zu pieces)",
                                file, (long long)json_integer_value(unk), n);
        m->unk_id = (int32_t)json_integer_value(unk);
    }
    tok_unigram *u = calloc(1, sizeof *u);
    if (!u) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    m->uni = u;
    TR_CHECK(tok_get_bool(file, "model", j, "byte_fallback", 0, &u->byte_fallback));
    u->score = malloc((n ? n : 1) * sizeof *u->score);
    if (!u->score) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    TR_CHECK(tok_vocab_init(&m->vocab, n));
    int32_t root;
    TR_CHECK(trie_grow(u));
    TR_CHECK(trie_node(u, &root));
    u->min_score = INFINITY;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i), *p = json_array_get(e, 0), *sc = json_array_get(e, 1);
        snprintf(sub, sizeof sub, "model.vocab[%zu]", i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p))
            return tok_bad(file, sub, "expected [piece, score]");
        if (!json_is_number(sc)) {
            snprintf(sub, sizeof sub, "model.vocab[%zu][1]", i);
            return tok_bad(file, sub, "expected the piece's score (a number)");
        }
        const char *s = json_string_value(p);
        size_t len = json_string_length(p);
        if (tok_vocab_set(&m->vocab, (int32_t)i, s, len) != TR_OK)
            return tr_error_set(TR_ERR_PARSE, "%s: %s: %s (each piece once)", file, sub, tr_error_msg());
        u->score[i] = serde_f64(json_number_value(sc));
        if (u->score[i] < u->min_score) u->min_score = u->score[i];
        TR_CHECK(trie_insert(u, s, len, (int32_t)i));
    }
    if (m->unk_id >= 0) {
        m->unk = tok_dup(m->vocab.str[m->unk_id]);
        if (!m->unk) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    return TR_OK;
}

/* The best path ending at each character boundary of the word. */
typedef struct best { double score; int32_t start; int32_t id; } best;

static tr_status missing_unk(void) {
    return tr_error_set(TR_ERR_INVALID, "Unigram: an unknown token (a character no piece covers), but the model has no unk_id");
}

/* Pushes the piece of characters [b, e) of the word: its id, else its bytes, else unk. */
static tr_status push_piece(const tok_model *m, const tok_nstr *s, tok_range w, const char *word, const size_t *at,
                            size_t b, size_t e, int32_t id, int32_t type_id, int32_t seq, tok_enc *out) {
    size_t o0 = s->a0[w.b + b], o1 = s->a1[w.b + e - 1];
    if (id < 0) id = tok_vocab_find(&m->vocab, word + at[b], at[e] - at[b]);
    if (id >= 0) return tok_enc_push(out, id, type_id, 0, seq, o0, o1);
    if (m->uni->byte_fallback) {
        size_t first = out->e.len;
        int ok = 1;
        for (size_t k = at[b]; ok && k < at[e]; k++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)word[k]);
            int32_t bid = tok_vocab_find(&m->vocab, hex, 6);
            if (bid < 0) ok = 0;
            else TR_CHECK(tok_enc_push(out, bid, type_id, 0, seq, o0, o1));
        }
        if (ok) return TR_OK;
        out->e.len = out->e.length = first;
    }
    if (m->unk_id < 0) return missing_unk();
    TR_CHECK(tok_enc_push(out, m->unk_id, type_id, 0, seq, o0, o1));
    return tok_enc_set_text(out, out->e.len - 1, word + at[b], at[e] - at[b]); /* the token is the text */
}

tr_status tok_unigram_encode(const tok_model *m, const tok_nstr *s, tok_range w, int32_t type_id, int32_t seq,
                             tok_enc *out) {
    const tok_unigram *u = m->uni;
    size_t nch = w.e - w.b;
    if (nch == 0) return TR_OK;
    char word_s[4 * STACK_CHARS];
    size_t at_s[STACK_CHARS + 1];
    best path_s[STACK_CHARS + 1];
    int32_t link_s[2 * (STACK_CHARS + 1)];
    char *word = word_s;
    size_t *at = at_s;
    best *path = path_s;
    int32_t *link = link_s;
    if (nch > STACK_CHARS) {
        word = malloc(4 * nch);
        at = malloc((nch + 1) * sizeof *at);
        path = malloc((nch + 1) * sizeof *path);
        link = malloc(2 * (nch + 1) * sizeof *link);
        if (!word || !at || !path || !link) {
            free(word);
            free(at);
            free(path);
            free(link);
            return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        }
    }
    int32_t *next = link, *pid = link + nch + 1; /* per piece start: its end and its id */
    size_t len = 0;
    for (size_t i = 0; i < nch; i++) {
        at[i] = len;
        len += tok_utf8_put(word + len, s->cp[w.b + i]);
        path[i].start = -1;
    }
    at[nch] = len;
    path[nch].start = -1;
    path[0].score = 0.0;
    double unk_score = u->min_score - UNK_PENALTY;
    tr_status st = TR_OK;
    for (size_t i = 0; i < nch && st == TR_OK; i++) {
        double here = path[i].score;
        int single = 0;
        int32_t node = 0;
        size_t c = i; /* the character the walk is in */
        for (size_t k = at[i]; k < len; k++) {
            node = trie_child(u, node, (unsigned char)word[k]);
            if (node < 0) break;
            if (k + 1 == at[c + 1]) c++;
            else continue; /* inside a character: no piece ends here */
            int32_t id = u->piece[node];
            if (id < 0) continue;
            double cand = u->score[id] + here;
            best *t = &path[c];
            if (t->start < 0 || cand > t->score) {
                t->score = cand;
                t->start = (int32_t)i;
                t->id = id;
            }
            if (c == i + 1) single = 1;
        }
        if (!single) {
            best *t = &path[i + 1];
            double cand = unk_score + here;
            if (t->start < 0 || cand > t->score) {
                if (m->unk_id < 0) st = missing_unk();
                t->score = cand;
                t->start = (int32_t)i;
                t->id = m->unk_id;
            }
        }
    }
    /* Back from the end, linking each piece's start to its end, then out in order, fusing
     * runs of the unknown piece. */
    size_t first = out->e.len;
    if (st == TR_OK) {
        for (size_t cur = nch; cur > 0;) {
            size_t b = (size_t)path[cur].start;
            next[b] = (int32_t)cur;
            pid[b] = path[cur].id;
            cur = b;
        }
        for (size_t b = 0; b < nch && st == TR_OK;) {
            size_t e = (size_t)next[b];
            int32_t id = pid[b];
            if (m->unk_id >= 0 && id == m->unk_id) {
                while (e < nch && pid[e] == m->unk_id) e = (size_t)next[e];
                id = -1; /* the fused text is looked up */
            }
            st = push_piece(m, s, w, word, at, b, e, id, type_id, seq, out);
            b = e;
        }
    }
    if (st != TR_OK) {
        if (out->e.tokens)
            for (size_t i = first; i < out->e.len; i++) {
                free(out->e.tokens[i]);
                out->e.tokens[i] = NULL;
            }
        out->e.len = out->e.length = first;
    }
    if (word != word_s) {
        free(word);
        free(at);
        free(path);
        free(link);
    }
    return st;
}
