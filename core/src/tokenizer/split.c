/* The Split pre-tokenizer: a pattern ({"String": ...} taken literally, or {"Regex": ...}) cuts
 * each word into matches and the text between them, `invert` swaps the two, and the behaviour
 * (removed, isolated, merged with previous or next, contiguous) says what is kept, as the Rust
 * library's NormalizedString::split does, empty matches included (they count for the merges). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

tr_status tok_split_regex(const tok_regex *re, int invert, tok_split_behavior how, const tok_nstr *s, tok_range w,
                          tok_ranges *out) {
    if (w.e <= w.b) return TR_OK;
    tok_ranges m = {0};
    tr_status st = tok_regex_find_all(re, s->cp, w.b, w.e, &m);
    tok_piece *p = st == TR_OK ? malloc((2 * m.n + 2) * sizeof *p) : NULL;
    if (st == TR_OK && !p) st = tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    if (st == TR_OK) {
        size_t np = 0, prev = w.b;
        for (size_t i = 0; i < m.n; i++) {
            if (prev != m.r[i].b) p[np++] = (tok_piece){prev, m.r[i].b, invert};
            p[np++] = (tok_piece){m.r[i].b, m.r[i].e, !invert};
            prev = m.r[i].e;
        }
        if (prev != w.e) p[np++] = (tok_piece){prev, w.e, invert};
        st = tok_split_pieces(p, np, how, out);
    }
    free(p);
    free(m.r);
    return st;
}

/* A String pattern as a regular expression matching it literally: ASCII punctuation escaped. */
static char *escape(const char *s) {
    size_t n = strlen(s);
    char *r = malloc(2 * n + 1), *q = r;
    if (!r) return NULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x80 && c > 0x20 && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z'))
            *q++ = '\\';
        *q++ = (char)c;
    }
    *q = '\0';
    return r;
}

tr_status tok_load_split(const char *file, const char *path, json_t *j, tok_pretok *p) {
    p->kind = TOK_PRE_SPLIT;
    char sub[512];
    snprintf(sub, sizeof sub, "%s.pattern", path);
    json_t *pat = json_object_get(j, "pattern"), *v;
    TR_CHECK(tok_get_bool(file, path, j, "invert", 0, &p->invert));
    if (json_is_object(pat) && json_is_string(v = json_object_get(pat, "Regex"))) {
        snprintf(sub, sizeof sub, "%s.pattern.Regex", path);
        return tok_regex_compile(file, sub, json_string_value(v), &p->re);
    }
    if (json_is_object(pat) && json_is_string(v = json_object_get(pat, "String"))) {
        snprintf(sub, sizeof sub, "%s.pattern.String", path);
        char *e = escape(json_string_value(v));
        if (!e) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        tr_status st = tok_regex_compile(file, sub, e, &p->re);
        free(e);
        return st;
    }
    return tok_bad(file, sub, "expected {\"String\": ...} or {\"Regex\": ...}");
}
