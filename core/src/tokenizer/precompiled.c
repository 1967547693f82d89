/* The Precompiled normalizer: SentencePiece's precompiled_charsmap (base64 in the file), a
 * double-array trie (darts-clone layout) over UTF-8 keys whose leaves point into a blob of
 * NUL-terminated replacement strings. As the Rust library does, it goes extended grapheme
 * cluster by cluster: a cluster under 6 bytes is looked up whole, else (or when that finds
 * nothing) each character is; a lookup takes the shortest key that prefixes the text. The
 * alignments follow the Rust library's NormalizedString::transform, quirks included (a removal
 * with nothing before it is dropped, which shifts the alignments that follow). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer_impl.h"

struct tok_precompiled {
    uint32_t *array; // (narray) the trie's units
    size_t narray;
    char *norm;      // (nnorm) the replacement strings
    size_t nnorm;
};

void tok_precompiled_free(tok_precompiled *pc) {
    if (!pc) return;
    free(pc->array);
    free(pc->norm);
    free(pc);
}

static int b64(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with canonical padding (the base64 crate's STANDARD engine); NULL when the
 * text is not that. */
static unsigned char *unbase64(const char *s, size_t len, size_t *out_len, const char **why) {
    if (len % 4) {
        *why = "its length is not a multiple of 4";
        return NULL;
    }
    unsigned char *out = malloc(len / 4 * 3 + 1);
    if (!out) {
        *why = "out of memory";
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            v[k] = b64(s[i + k]);
            if (v[k] < 0 || pad) {
                free(out);
                *why = "an invalid character";
                return NULL;
            }
        }
        uint32_t q = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if ((pad == 1 && (q & 0xFF)) || (pad == 2 && (q & 0xFFFF))) {
            free(out);
            *why = "non-zero trailing bits";
            return NULL;
        }
        out[n++] = (unsigned char)(q >> 16);
        if (pad < 2) out[n++] = (unsigned char)(q >> 8);
        if (pad < 1) out[n++] = (unsigned char)q;
    }
    *out_len = n;
    return out;
}

tr_status tok_load_precompiled(const char *file, const char *path, json_t *j, tok_normalizer *n) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s.precompiled_charsmap", path);
    json_t *v = json_object_get(j, "precompiled_charsmap");
    if (!json_is_string(v)) return tok_bad(file, sub, "expected the charsmap as a base64 string");
    const char *why = NULL;
    size_t len = 0;
    unsigned char *raw = unbase64(json_string_value(v), json_string_length(v), &len, &why);
    if (!raw) return tr_error_set(TR_ERR_PARSE, "%s: %s: not valid base64: %s", file, sub, why);
    tr_status st = TR_OK;
    tok_precompiled *pc = calloc(1, sizeof *pc);
    if (!pc) {
        free(raw);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    n->pc = pc;
    /* [u32 trie size in bytes][trie units, u32 little-endian][replacement strings] */
    size_t units = 0;
    if (len < 4) {
        st = tr_error_set(TR_ERR_PARSE, "%s: %s: truncated: %zu bytes, no trie size", file, sub, len);
        goto done;
    }
    units = ((size_t)raw[0] | (size_t)raw[1] << 8 | (size_t)raw[2] << 16 | (size_t)raw[3] << 24) / 4;
    if (units > (len - 4) / 4) {
        st = tr_error_set(TR_ERR_PARSE, "%s: %s: truncated: the trie needs %zu bytes, %zu follow", file, sub,
                          units * 4, len - 4);
        goto done;
    }
    if (units == 0) {
        st = tr_error_set(TR_ERR_PARSE, "%s: %s: the trie is empty", file, sub);
        goto done;
    }
    pc->narray = units;
    pc->nnorm = len - 4 - 4 * units;
    pc->array = malloc(units * sizeof *pc->array);
    pc->norm = malloc(pc->nnorm + 1);
    if (!pc->array || !pc->norm) {
        st = tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        goto done;
    }
    for (size_t i = 0; i < units; i++) {
        const unsigned char *b = raw + 4 + 4 * i;
        pc->array[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    }
    memcpy(pc->norm, raw + 4 + 4 * units, pc->nnorm);
    pc->norm[pc->nnorm] = '\0';
    for (size_t i = 0; i < pc->nnorm;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)pc->norm + i, (utf8proc_ssize_t)(pc->nnorm - i), &c);
        if (k <= 0) {
            st = tr_error_set(TR_ERR_PARSE, "%s: %s: the replacement strings are not valid UTF-8 (byte %zu)", file, sub, i);
            goto done;
        }
        i += (size_t)k;
    }
done:
    free(raw);
    return st;
}

/* The replacement of the shortest key that prefixes key[0, len) (a NUL byte ends the key):
 * 1 with [*out, *out + *nout), else 0. A unit out of the array ends the search. */
static int lookup(const tok_precompiled *pc, const unsigned char *key, size_t len, const char **out, size_t *nout) {
    size_t pos = 0;
    uint32_t unit = pc->array[0];
    pos ^= (size_t)(unit >> 10) << ((unit & (1u << 9)) >> 6);
    for (size_t i = 0; i < len && key[i]; i++) {
        pos ^= key[i];
        if (pos >= pc->narray) return 0;
        unit = pc->array[pos];
        if ((unit & ((1u << 31) | 0xFF)) != key[i]) return 0;
        pos ^= (size_t)(unit >> 10) << ((unit & (1u << 9)) >> 6);
        if (!((unit >> 8) & 1)) continue;
        if (pos >= pc->narray) return 0;
        size_t at = pc->array[pos] & ((1u << 31) - 1);
        if (at > pc->nnorm) return 0;
        if (at < pc->nnorm && ((unsigned char)pc->norm[at] & 0xC0) == 0x80) return 0; /* not a character start */
        *out = pc->norm + at;
        *nout = strlen(pc->norm + at); /* the blob is NUL-terminated past its end */
        return 1;
    }
    return 0;
}

typedef struct changes { tok_change *c; size_t n, cap; } changes;

static int push_change(changes *v, uint32_t c, int64_t change) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        tok_change *p = realloc(v->c, cap * sizeof *p);
        if (!p) return -1;
        v->c = p;
        v->cap = cap;
    }
    v->c[v->n++] = (tok_change){c, change};
    return 0;
}

/* old_count characters become the UTF-8 text r[0, nr): the Rust library's bookkeeping (new
 * characters replace old ones, the surplus is inserted, a shortfall is removed after the last
 * change made so far). */
static int replace(changes *v, size_t old_count, const char *r, size_t nr) {
    size_t first = v->n;
    for (size_t i = 0; i < nr;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)r + i, (utf8proc_ssize_t)(nr - i), &c);
        if (k <= 0) return -1; /* checked at load */
        if (push_change(v, (uint32_t)c, 0)) return -1;
        i += (size_t)k;
    }
    int64_t diff = (int64_t)(v->n - first) - (int64_t)old_count;
    if (diff > 0)
        for (size_t i = v->n - (size_t)diff; i < v->n; i++) v->c[i].change = 1;
    else if (diff < 0 && v->n) v->c[v->n - 1].change += diff;
    return 0;
}

tr_status tok_nstr_transform(tok_nstr *s, const tok_change *ch, size_t n) {
    tok_nstr t = {0};
    tr_status st = tok_nstr_reserve(&t, n + 1);
    size_t cur = 0; /* the next old character */
    for (size_t i = 0; st == TR_OK && i < n; i++) {
        size_t a0, a1;
        if (ch[i].change > 0) {
            /* Inserted: the alignment of the old character before (none at the very start). */
            a0 = cur ? s->a0[cur - 1] : (s->n ? s->a0[0] : 0);
            a1 = cur ? s->a1[cur - 1] : a0;
        } else if (cur < s->n) {
            a0 = s->a0[cur];
            a1 = s->a1[cur];
        } else { /* more replacements than characters: the Rust library panics; keep the last */
            a0 = s->n ? s->a0[s->n - 1] : 0;
            a1 = s->n ? s->a1[s->n - 1] : 0;
        }
        if (ch[i].change <= 0) cur += 1 + (size_t)(-ch[i].change);
        st = tok_nstr_push(&t, ch[i].c, a0, a1);
    }
    if (st != TR_OK) {
        tok_nstr_free(&t);
        return st;
    }
    tok_nstr_free(s);
    *s = t;
    return TR_OK;
}

/* Unassigned code points that Unicode's grapheme rules class as Control (a cluster ends before
 * and after them), as the unicode-segmentation crate has them; utf8proc 2.8 gives them Other. */
static int unassigned_control(uint32_t c) {
    return c == 0x2065 || (c >= 0xFFF0 && c <= 0xFFF8) || c == 0xE0000 || (c >= 0xE0002 && c <= 0xE001F) ||
           (c >= 0xE0080 && c <= 0xE00FF) || (c >= 0xE01F0 && c <= 0xE0FFF);
}

static int grapheme_break(uint32_t a, uint32_t b, utf8proc_int32_t *state) {
    if (unassigned_control(a) || unassigned_control(b)) {
        *state = 0;
        return 1;
    }
    return utf8proc_grapheme_break_stateful((utf8proc_int32_t)a, (utf8proc_int32_t)b, state);
}

tr_status tok_precompiled_normalize(const tok_precompiled *pc, tok_nstr *s) {
    changes v = {0};
    int modified = 0, bad = 0;
    utf8proc_int32_t state = 0;
    size_t g = 0;
    for (size_t i = 1; !bad && i <= s->n; i++) {
        if (i < s->n && !grapheme_break(s->cp[i - 1], s->cp[i], &state))
            continue;
        /* The cluster [g, i). */
        unsigned char buf[16];
        size_t len = 0, k = g;
        for (; k < i && len < 6; k++) len += tok_utf8_put((char *)buf + len, s->cp[k]);
        const char *r;
        size_t nr;
        if (k == i && len < 6 && lookup(pc, buf, len, &r, &nr)) {
            modified = 1;
            bad = replace(&v, i - g, r, nr);
        } else {
            for (k = g; !bad && k < i; k++) {
                size_t cl = tok_utf8_put((char *)buf, s->cp[k]);
                if (lookup(pc, buf, cl, &r, &nr)) {
                    modified = 1;
                    bad = replace(&v, 1, r, nr);
                } else {
                    bad = push_change(&v, s->cp[k], 0);
                }
            }
        }
        g = i;
    }
    tr_status st = TR_OK;
    if (bad) st = tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    else if (modified) st = tok_nstr_transform(s, v.c, v.n);
    free(v.c);
    return st;
}
