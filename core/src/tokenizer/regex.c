/* Regular expressions of tokenizer.json (Split, Replace, ByteLevel's GPT-2 pattern) on PCRE2's
 * 32-bit library: a normalized string's code points are its subject as they are, so a match's
 * bounds are code point indices. Unicode classes (\s \w \d \p{..}) follow Unicode (UCP), as
 * Oniguruma's do in the Rust library. JIT-compiled where PCRE2 can; a match that overflows the
 * JIT stack is run again by the interpreter. */
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

tr_status tok_regex_compile(const char *file, const char *path, const char *pattern, tok_regex **out) {
    *out = NULL;
    uint32_t *cp = NULL;
    size_t n = 0;
    if (tok_utf8_to_cps(pattern, &cp, &n) != TR_OK)
        return tr_error_set(TR_ERR_PARSE, "%s: %s: the pattern is not valid UTF-8", file, path);
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)cp, n, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &at, NULL);
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
