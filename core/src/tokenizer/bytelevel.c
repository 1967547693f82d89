/* ByteLevel (GPT-2's byte-to-unicode scheme): the pre-tokenizer (a prefix space, the GPT-2
 * pattern, every UTF-8 byte as a printable character), the decoder (characters back to bytes,
 * invalid UTF-8 as U+FFFD the way Rust's String::from_utf8_lossy does) and trim_offsets, shared
 * by the ByteLevel and RobertaProcessing post-processors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* GPT-2's table: printable Latin-1 bytes stand for themselves, the 68 others map in order to
 * U+0100.. (space is U+0120). */
static uint32_t byte_char(unsigned b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return b + 162;
    if (b == 0xAD) return 0x143;
    return b;
}

/* The byte a character stands for, or -1. */
static int char_byte(uint32_t c) {
    if (c < 0x100) return (c <= 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) ? -1 : (int)c;
    if (c <= 0x120) return (int)(c - 0x100);
    if (c <= 0x142) return (int)(c - 162);
    if (c == 0x143) return 0xAD;
    return -1;
}

tr_status tok_load_bytelevel(const char *file, const char *path, json_t *j, tok_pretok *p) {
    p->kind = TOK_PRE_BYTELEVEL;
    TR_CHECK(tok_get_bool(file, path, j, "add_prefix_space", 1, &p->add_prefix_space));
    TR_CHECK(tok_get_bool(file, path, j, "use_regex", 1, &p->use_regex));
    int trim = 0;
    TR_CHECK(tok_get_bool(file, path, j, "trim_offsets", 1, &trim)); /* checked; used by the post-processor */
    if (p->use_regex) TR_CHECK(tok_regex_compile(file, path, GPT2_PATTERN, &p->re));
    return TR_OK;
}

tr_status tok_bytelevel_split(const tok_pretok *p, tok_nstr *s, tok_range w, tok_ranges *out) {
    if (w.e <= w.b) return TR_OK;
    tok_range r = w;
    if (p->add_prefix_space && s->cp[w.b] != ' ') {
        /* A copy with the space in front, past the end: the prefix takes the first character's
         * original bytes. */
        size_t n0 = s->n;
        TR_CHECK(tok_nstr_reserve(s, n0 + 1 + (w.e - w.b)));
        TR_CHECK(tok_nstr_push(s, ' ', s->a0[w.b], s->a1[w.b]));
        for (size_t i = w.b; i < w.e; i++) TR_CHECK(tok_nstr_push(s, s->cp[i], s->a0[i], s->a1[i]));
        r = (tok_range){n0, s->n};
    }
    tok_ranges cut = {0};
    tr_status st = TR_OK;
    if (p->use_regex) st = tok_regex_find_all(p->re, s->cp, r.b, r.e, &cut);
    size_t len = r.e - r.b, *map = st == TR_OK ? malloc((len + 1) * sizeof *map) : NULL;
    if (st == TR_OK && !map) st = tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    if (st == TR_OK) st = tok_nstr_reserve(s, s->n + 4 * len);
    if (st == TR_OK) {
        /* Each byte a character, each keeping the original range of the code point it is from. */
        for (size_t i = 0; i < len; i++) {
            char u[8];
            size_t k = tok_utf8_put(u, s->cp[r.b + i]);
            map[i] = s->n;
            for (size_t j = 0; j < k; j++) {
                size_t t = s->n++;
                s->cp[t] = byte_char((unsigned char)u[j]);
                s->a0[t] = s->a0[r.b + i];
                s->a1[t] = s->a1[r.b + i];
            }
        }
        map[len] = s->n;
        if (!p->use_regex) {
            st = tok_ranges_push(out, map[0], map[len]);
        } else {
            /* Isolated: the matches and the text between them (the pattern leaves none). */
            size_t prev = 0;
            for (size_t i = 0; st == TR_OK && i < cut.n; i++) {
                size_t b = cut.r[i].b - r.b, e = cut.r[i].e - r.b;
                if (prev < b) st = tok_ranges_push(out, map[prev], map[b]);
                if (st == TR_OK && b < e) st = tok_ranges_push(out, map[b], map[e]);
                prev = e;
            }
            if (st == TR_OK && prev < len) st = tok_ranges_push(out, map[prev], map[len]);
        }
    }
    free(map);
    free(cut.r);
    return st;
}

/* ---- decoder ---- */

/* Appends the lossy UTF-8 reading of b[0..n) to out: each maximal invalid subsequence becomes
 * one U+FFFD (Rust's from_utf8_lossy). */
static size_t lossy(const unsigned char *b, size_t n, char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned c = b[i];
        if (c < 0x80) {
            out[o++] = (char)c;
            i++;
            continue;
        }
        size_t need = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        size_t k = 1;
        if (need) {
            /* The second byte has its own range; the later ones are plain continuations. */
            if (i + 1 < n && b[i + 1] >= lo && b[i + 1] <= hi) {
                k = 2;
                while (k <= need && i + k < n && b[i + k] >= 0x80 && b[i + k] <= 0xBF) k++;
            }
        }
        if (need && k == need + 1) {
            memcpy(out + o, b + i, k);
            o += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += k;
    }
    return o;
}

tr_status tok_bytelevel_decode(const tok_strs *in, tok_strs *out) {
    size_t total = 0;
    for (size_t i = 0; i < in->n; i++) total += in->len[i];
    unsigned char *bytes = malloc(total + 1);
    char *text = malloc(3 * total + 1);
    tr_status st = TR_OK;
    if (!bytes || !text) st = tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    size_t nb = 0;
    for (size_t i = 0; st == TR_OK && i < in->n; i++) {
        /* A token whose characters all stand for bytes gives those bytes; any other gives its
         * own UTF-8. A character's byte is never longer than the character. */
        tok_nstr t = {0};
        size_t start = nb;
        int all = tok_nstr_from_utf8(&t, in->s[i], in->len[i], 0) == TR_OK;
        for (size_t k = 0; all && k < t.n; k++) {
            int b = char_byte(t.cp[k]);
            if (b < 0) all = 0;
            else bytes[nb++] = (unsigned char)b;
        }
        tok_nstr_free(&t);
        if (!all) {
            nb = start;
            memcpy(bytes + nb, in->s[i], in->len[i]);
            nb += in->len[i];
        }
    }
    tr_error_clear();
    if (st == TR_OK) st = tok_strs_push(out, text, lossy(bytes, nb, text));
    free(bytes);
    free(text);
    return st;
}

/* ---- trim_offsets ---- */

static int spacey(uint32_t c) { return c == 0x120 || tok_is_whitespace(c); }

void tok_bytelevel_trim(const struct tr_tokenizer *tk, tr_encoding *e, int add_prefix_space) {
    for (size_t i = 0; i < e->len; i++) {
        const char *tok = NULL;
        if (tr_tokenizer_id_to_token(tk, e->ids[i], &tok) != TR_OK || !tok) {
            tr_error_clear();
            continue;
        }
        uint32_t *cp = NULL;
        size_t n = 0, lead = 0, trail = 0;
        if (tok_utf8_to_cps(tok, &cp, &n) != TR_OK) {
            tr_error_clear();
            continue;
        }
        while (lead < n && spacey(cp[lead])) lead++;
        while (trail < n && spacey(cp[n - 1 - trail])) trail++;
        free(cp);
        size_t *o = &e->offsets[2 * i];
        if (lead) {
            if ((i == 0 || o[0] == 0) && add_prefix_space && lead == 1) lead = 0;
            o[0] = o[0] + lead < o[1] ? o[0] + lead : o[1];
        }
        if (trail && o[1] >= trail) o[1] = o[1] - trail > o[0] ? o[1] - trail : o[0];
    }
}
