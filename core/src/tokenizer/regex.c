/* Regular expressions of tokenizer.json (Split, Replace, ByteLevel's GPT-2 pattern) on PCRE2's
 * 32-bit library: a normalized string's code points are its subject as they are, so a match's
 * bounds are code point indices. Unicode classes (\s \w \d \p{..}) follow Unicode (UCP), and
 * \w \s \d \b \p{L} \p{N} are rewritten into Oniguruma's exact sets (the Rust library's engine).
 * Matches are found as onig's find_iter finds them. JIT-compiled where PCRE2 can; a match that
 * overflows the JIT stack is run again by the interpreter. */
#include <stdlib.h>
#include <string.h>

#include <pcre2.h>

#include "tokenizer/tokenizer_impl.h"

struct tok_regex {
    pcre2_code *code;
};

/* PCRE2's message for an error code, as UTF-8. */
static const char *message(int code, char *buf, size_t size) {
    PCRE2_UCHAR msg[256];
    size_t k = 0;
    int len = pcre2_get_error_message(code, msg, sizeof msg / sizeof msg[0]);
    for (int i = 0; i < len && k + 5 < size; i++) k += tok_utf8_put(buf + k, msg[i]);
    buf[k] = '\0';
    return buf;
}

/* Oniguruma's classes (what the Rust library runs), measured code point by code point against
 * PCRE2 10.42 with tokenizers 0.21.4 (docs/tokenizers.md, "Regular expressions"): \w is
 * Alphabetic, marks, Nd, Pc and a few Latin-1 numbers (no joiners), \s has no U+180E, and \d,
 * \p{L}, \p{N} know Unicode 16's new characters. Unions only: a newer PCRE2 loses nothing. */
static const char CLASS_W[] =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{b2}-\\x{b3}\\x{b9}\\x{bc}-\\x{be}\\x{897}\\x{cf3}"
    "\\x{ece}\\x{1c89}-\\x{1c8a}\\x{a7cb}-\\x{a7cd}\\x{a7da}-\\x{a7dc}\\x{105c0}-\\x{105f3}"
    "\\x{10d40}-\\x{10d65}\\x{10d69}-\\x{10d6d}\\x{10d6f}-\\x{10d85}\\x{10ec2}-\\x{10ec4}"
    "\\x{10efc}-\\x{10eff}\\x{1123f}-\\x{11241}\\x{11380}-\\x{11389}\\x{1138b}\\x{1138e}"
    "\\x{11390}-\\x{113b5}\\x{113b7}-\\x{113c0}\\x{113c2}\\x{113c5}\\x{113c7}-\\x{113ca}"
    "\\x{113cc}-\\x{113d3}\\x{113e1}-\\x{113e2}\\x{116d0}-\\x{116e3}\\x{11bc0}-\\x{11be0}"
    "\\x{11bf0}-\\x{11bf9}\\x{11f00}-\\x{11f10}\\x{11f12}-\\x{11f3a}\\x{11f3e}-\\x{11f42}"
    "\\x{11f50}-\\x{11f5a}\\x{1342f}\\x{13440}-\\x{13455}\\x{13460}-\\x{143fa}\\x{16100}-"
    "\\x{16139}\\x{16d40}-\\x{16d6c}\\x{16d70}-\\x{16d79}\\x{18cff}\\x{1b132}\\x{1b155}"
    "\\x{1ccf0}-\\x{1ccf9}\\x{1df25}-\\x{1df2a}\\x{1e030}-\\x{1e06d}\\x{1e08f}\\x{1e4d0}-"
    "\\x{1e4f9}\\x{1e5d0}-\\x{1e5fa}\\x{2b739}\\x{2ebf0}-\\x{2ee5d}\\x{31350}-\\x{323af}";
static const char CLASS_S[] =
    "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
    "\\x{205f}\\x{3000}";
static const char CLASS_D[] =
    "\\p{Nd}\\x{10d40}-\\x{10d49}\\x{116d0}-\\x{116e3}\\x{11bf0}-\\x{11bf9}\\x{11f50}-"
    "\\x{11f59}\\x{16130}-\\x{16139}\\x{16d70}-\\x{16d79}\\x{1ccf0}-\\x{1ccf9}\\x{1e4f0}-"
    "\\x{1e4f9}\\x{1e5f1}-\\x{1e5fa}";
static const char CLASS_L[] =
    "\\p{L}\\x{1c89}-\\x{1c8a}\\x{a7cb}-\\x{a7cd}\\x{a7da}-\\x{a7dc}\\x{105c0}-\\x{105f3}"
    "\\x{10d4a}-\\x{10d65}\\x{10d6f}-\\x{10d85}\\x{10ec2}-\\x{10ec4}\\x{1123f}-\\x{11240}"
    "\\x{11380}-\\x{11389}\\x{1138b}\\x{1138e}\\x{11390}-\\x{113b5}\\x{113b7}\\x{113d1}"
    "\\x{113d3}\\x{11bc0}-\\x{11be0}\\x{11f02}\\x{11f04}-\\x{11f10}\\x{11f12}-\\x{11f33}"
    "\\x{1342f}\\x{13441}-\\x{13446}\\x{13460}-\\x{143fa}\\x{16100}-\\x{1611d}\\x{16d40}-"
    "\\x{16d6c}\\x{18cff}\\x{1b132}\\x{1b155}\\x{1df25}-\\x{1df2a}\\x{1e030}-\\x{1e06d}"
    "\\x{1e4d0}-\\x{1e4eb}\\x{1e5d0}-\\x{1e5ed}\\x{1e5f0}\\x{2b739}\\x{2ebf0}-\\x{2ee5d}"
    "\\x{31350}-\\x{323af}";
static const char CLASS_N[] =
    "\\p{N}\\x{10d40}-\\x{10d49}\\x{116d0}-\\x{116e3}\\x{11bf0}-\\x{11bf9}\\x{11f50}-\\x{11f59}"
    "\\x{16130}-\\x{16139}\\x{16d70}-\\x{16d79}\\x{1ccf0}-\\x{1ccf9}\\x{1d2c0}-\\x{1d2d3}"
    "\\x{1e4f0}-\\x{1e4f9}\\x{1e5f1}-\\x{1e5fa}";

typedef struct ubuf { uint32_t *p; size_t n, cap; int bad; } ubuf;

static void uput(ubuf *b, uint32_t c) {
    if (b->bad) return;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        uint32_t *q = realloc(b->p, cap * sizeof *q);
        if (!q) {
            b->bad = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    b->p[b->n++] = c;
}

static void uputs(ubuf *b, const char *s) {
    while (*s) uput(b, (unsigned char)*s++);
}

/* A class's body: inside [...] as it is, outside wrapped ([^...] when negated). */
static void put_class(ubuf *b, const char *body, int in_class, int neg) {
    if (!in_class) uputs(b, neg ? "[^" : "[");
    uputs(b, body);
    if (!in_class) uput(b, ']');
}

/* Rewrites \w \W \s \S \d \D \b \B \p{L} \P{L} \p{N} \P{N} (\pL \pN too) into the classes above.
 * Inside a character class the negated ones (\W \S \D \P{..}) keep PCRE2's meaning. */
static uint32_t *translate(const uint32_t *cp, size_t n, size_t *out_n) {
    ubuf b = {0};
    int in_class = 0;
    size_t class_start = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        if (c == '\\' && i + 1 < n) {
            uint32_t d = cp[i + 1];
            if (d == 'Q') { /* \Q...\E: literal */
                size_t j = i + 2;
                while (j + 1 < n && !(cp[j] == '\\' && cp[j + 1] == 'E')) j++;
                size_t end = j + 1 < n ? j + 2 : n;
                for (; i < end; i++) uput(&b, cp[i]);
                i--;
                continue;
            }
            const char *body = NULL;
            int neg = 0;
            size_t used = 2;
            switch (d) {
            case 'w': case 'W': body = CLASS_W; neg = d == 'W'; break;
            case 's': case 'S': body = CLASS_S; neg = d == 'S'; break;
            case 'd': case 'D': body = CLASS_D; neg = d == 'D'; break;
            case 'p': case 'P': {
                uint32_t name = 0;
                if (i + 2 < n && cp[i + 2] != '{') {
                    name = cp[i + 2];
                    used = 3;
                } else if (i + 4 < n && cp[i + 2] == '{' && cp[i + 4] == '}') {
                    name = cp[i + 3];
                    used = 5;
                }
                if (name == 'L') body = CLASS_L;
                else if (name == 'N') body = CLASS_N;
                neg = d == 'P';
                break;
            }
            case 'b': case 'B':
                if (in_class) break;
                uputs(&b, d == 'b' ? "(?:(?<=[" : "(?:(?<=[");
                uputs(&b, CLASS_W);
                uputs(&b, d == 'b' ? "])(?![" : "])(?=[");
                uputs(&b, CLASS_W);
                uputs(&b, d == 'b' ? "])|(?<![" : "])|(?<![");
                uputs(&b, CLASS_W);
                uputs(&b, d == 'b' ? "])(?=[" : "])(?![");
                uputs(&b, CLASS_W);
                uputs(&b, "]))");
                i++;
                continue;
            default: break;
            }
            if (body && !(in_class && neg)) {
                put_class(&b, body, in_class, neg);
                i += used - 1;
                continue;
            }
            uput(&b, c);
            uput(&b, d);
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            class_start = b.n + 1;
            uput(&b, c);
            if (i + 1 < n && cp[i + 1] == '^') {
                uput(&b, '^');
                i++;
                class_start++;
            }
            if (i + 1 < n && cp[i + 1] == ']') { /* a leading ] is a literal */
                uput(&b, ']');
                i++;
            }
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && cp[i + 1] == ':') { /* [:alpha:] */
            size_t j = i + 2;
            while (j + 1 < n && !(cp[j] == ':' && cp[j + 1] == ']')) j++;
            size_t end = j + 1 < n ? j + 2 : n;
            for (; i < end; i++) uput(&b, cp[i]);
            i--;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        uput(&b, c);
    }
    (void)class_start;
    if (b.bad) {
        free(b.p);
        return NULL;
    }
    uput(&b, 0);
    if (b.bad) {
        free(b.p);
        return NULL;
    }
    *out_n = b.n - 1;
    return b.p;
}

tr_status tok_regex_compile(const char *file, const char *path, const char *pattern, tok_regex **out) {
    *out = NULL;
    uint32_t *cp = NULL;
    size_t n = 0;
    if (tok_utf8_to_cps(pattern, &cp, &n) != TR_OK)
        return tr_error_set(TR_ERR_PARSE, "%s: %s: the pattern is not valid UTF-8", file, path);
    size_t tn = 0;
    uint32_t *t = translate(cp, n, &tn);
    if (!t) {
        free(cp);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    int err = 0;
    PCRE2_SIZE at = 0;
    const uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)t, tn, opts, &err, &at, NULL);
    free(t);
    if (!code) { /* the message and position of the pattern as written */
        pcre2_code *orig = pcre2_compile((PCRE2_SPTR)cp, n, opts, &err, &at, NULL);
        pcre2_code_free(orig);
    }
    free(cp);
    if (!code) {
        char m8[1024];
        return tr_error_set(TR_ERR_PARSE, "%s: %s: the regular expression '%s' does not compile at character %zu: %s",
                            file, path, pattern, (size_t)at, message(err, m8, sizeof m8));
    }
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* no JIT on this CPU: the interpreter runs */
    tok_regex *re = malloc(sizeof *re);
    if (!re) {
        pcre2_code_free(code);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    re->code = code;
    *out = re;
    return TR_OK;
}

void tok_regex_free(tok_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

tr_status tok_regex_find_all(const tok_regex *re, const uint32_t *cp, size_t b, size_t e, tok_ranges *out) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!md) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    static const uint32_t empty = 0;
    PCRE2_SPTR subject = (PCRE2_SPTR)(e > b ? cp + b : &empty);
    size_t len = e - b, at = 0, last = 0;
    int have_last = 0;
    tr_status st = TR_OK;
    while (at <= len) {
        int rc = pcre2_match(re->code, subject, len, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re->code, subject, len, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            char m8[1024];
            st = tr_error_set(TR_ERR_INVALID, "tokenizer: regular expression failed: %s", message(rc, m8, sizeof m8));
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s0 = ov[0], s1 = ov[1];
        if (s1 < s0) s1 = s0; /* \K can put the end first: treat as empty */
        /* onig's find_iter (the Rust library's): an empty match where the previous match ended
         * is dropped; any other empty match is kept; the search goes on one code point later. */
        if (s0 == s1) {
            at = s1 + 1;
            if (have_last && last == s1) continue;
        } else {
            at = s1;
        }
        last = s1;
        have_last = 1;
        st = tok_ranges_push(out, b + s0, b + s1);
        if (st != TR_OK) break;
    }
    pcre2_match_data_free(md);
    return st;
}
