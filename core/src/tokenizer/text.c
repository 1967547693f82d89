/* Normalized strings (code points with their original byte ranges), UTF-8 and the character
 * classes the Rust library uses, from utf8proc's tables (Unicode version: utf8proc's). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode_compat.inc"

#define NRANGES(t) (sizeof(t) / sizeof((t)[0]))

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t c) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < r[mid][0]) hi = mid;
        else if (c > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

/* utf8proc's class, corrected where the Rust library's older tables differ
 * (unicode_compat.inc, generated against the oracle). */
#define COMPAT(add, not, c, base) \
    (in_ranges(add, NRANGES(add), c) ? 1 : in_ranges(not, NRANGES(not), c) ? 0 : (base))

tr_status tok_nstr_reserve(tok_nstr *s, size_t n) {
    if (n <= s->cap) return TR_OK;
    size_t cap = s->cap ? s->cap : 16;
    while (cap < n) cap *= 2;
    uint32_t *cp = realloc(s->cp, cap * sizeof *cp);
    if (cp) s->cp = cp;
    size_t *a0 = realloc(s->a0, cap * sizeof *a0);
    if (a0) s->a0 = a0;
    size_t *a1 = realloc(s->a1, cap * sizeof *a1);
    if (a1) s->a1 = a1;
    if (!cp || !a0 || !a1) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    s->cap = cap;
    return TR_OK;
}

tr_status tok_nstr_push(tok_nstr *s, uint32_t c, size_t a0, size_t a1) {
    if (s->n == s->cap) TR_CHECK(tok_nstr_reserve(s, s->n + 1));
    s->cp[s->n] = c;
    s->a0[s->n] = a0;
    s->a1[s->n] = a1;
    s->n++;
    return TR_OK;
}

void tok_nstr_free(tok_nstr *s) {
    free(s->cp);
    free(s->a0);
    free(s->a1);
    memset(s, 0, sizeof *s);
}

tr_status tok_nstr_from_utf8(tok_nstr *s, const char *text, size_t len, size_t base) {
    s->n = 0;
    TR_CHECK(tok_nstr_reserve(s, len + 1));
    size_t i = 0;
    while (i < len) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0 || c < 0)
            return tr_error_set(TR_ERR_INVALID, "invalid UTF-8 at byte %zu", base + i);
        TR_CHECK(tok_nstr_push(s, (uint32_t)c, base + i, base + i + (size_t)k));
        i += (size_t)k;
    }
    return TR_OK;
}

size_t tok_utf8_put(char *buf, uint32_t c) {
    return (size_t)utf8proc_encode_char((utf8proc_int32_t)c, (utf8proc_uint8_t *)buf);
}

tr_status tok_utf8_to_cps(const char *s, uint32_t **cps, size_t *n) {
    size_t len = strlen(s);
    tok_nstr t = {0};
    tr_status st = tok_nstr_from_utf8(&t, s, len, 0);
    free(t.a0);
    free(t.a1);
    if (st != TR_OK) {
        free(t.cp);
        return st;
    }
    *cps = t.cp;
    *n = t.n;
    return TR_OK;
}

int tok_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static int punctuation(uint32_t c) {
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return 1;
    default:
        return 0;
    }
}

int tok_is_punctuation(uint32_t c) { return COMPAT(tok_punc_add, tok_punc_not, c, punctuation(c)); }

int tok_is_mark(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return COMPAT(tok_mark_add, tok_mark_not, c,
                  k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME);
}

int tok_is_nonspacing_mark(uint32_t c) {
    return COMPAT(tok_mn_add, tok_mn_not, c, utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_MN);
}

/* Cc, Cf, Co, Cs: the Rust crate's "other" has no unassigned (Cn) code points. */
static int control(uint32_t c) {
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
        return 1;
    default:
        return 0;
    }
}

int tok_is_control(uint32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return 0;
    return COMPAT(tok_ctl_add, tok_ctl_not, c, control(c));
}

static int word(uint32_t c) {
    if (c == 0x200C || c == 0x200D) return 1; /* Join_Control */
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

int tok_is_word(uint32_t c) { return COMPAT(tok_word_add, tok_word_not, c, word(c)); }

int tok_is_numeric(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return COMPAT(tok_num_add, tok_num_not, c,
                  k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO);
}

uint32_t tok_lower(uint32_t c) {
    size_t lo = 0, hi = NRANGES(tok_lower_map);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < tok_lower_map[mid][0]) hi = mid;
        else if (c > tok_lower_map[mid][0]) lo = mid + 1;
        else return tok_lower_map[mid][1];
    }
    return (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
}

int tok_decomposition(uint32_t c, int compat) {
    if (in_ranges(tok_nfd_keep, NRANGES(tok_nfd_keep), c)) return 0;
    if (compat && in_ranges(tok_nfkd_canon, NRANGES(tok_nfkd_canon), c)) return 1;
    return compat ? 2 : 1;
}

int tok_combining_class(uint32_t c) {
    if (in_ranges(tok_ccc_zero, NRANGES(tok_ccc_zero), c)) return 0;
    return utf8proc_get_property((utf8proc_int32_t)c)->combining_class;
}

tr_status tok_ranges_push(tok_ranges *r, size_t b, size_t e) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        tok_range *p = realloc(r->r, cap * sizeof *p);
        if (!p) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        r->r = p;
        r->cap = cap;
    }
    r->r[r->n++] = (tok_range){b, e};
    return TR_OK;
}

/* RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF. */
size_t tr_utf8_valid_prefix(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], lo = 0x80, hi = 0xBF;
        size_t k;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) k = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) k = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return i;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n) return i;
            unsigned d = s[i + j];
            if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xBF)) return i;
        }
        i += k + 1;
    }
    return n;
}
