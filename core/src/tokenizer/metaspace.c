/* The Metaspace pre-tokenizer (SentencePiece's space marker): spaces become the replacement
 * character (U+2581 '▁' in practice), one is prepended to a word that does not start with it
 * (prepend_scheme "always"; "first": only to the piece that starts the original text, as the
 * Rust library decides it: the piece's original offset is 0), and with `split` each marker
 * starts a new word. The marked text is appended to the normalized string, so ranges of the
 * caller's other pieces stay valid. The decoder is in decoder_spm.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

tr_status tok_load_metaspace(const char *file, const char *path, json_t *j, uint32_t *replacement,
                             tok_prepend_scheme *scheme, int *split) {
    char sub[512];
    json_t *r = json_object_get(j, "replacement");
    uint32_t *cp = NULL;
    size_t n = 0;
    snprintf(sub, sizeof sub, "%s.replacement", path);
    if (!json_is_string(r) || tok_utf8_to_cps(json_string_value(r), &cp, &n) != TR_OK || n != 1) {
        free(cp);
        return tok_bad(file, sub, "expected one character");
    }
    *replacement = cp[0];
    free(cp);
    json_t *ps = json_object_get(j, "prepend_scheme");
    snprintf(sub, sizeof sub, "%s.prepend_scheme", path);
    *scheme = TOK_PREPEND_ALWAYS;
    if (ps && !json_is_null(ps)) {
        const char *v = json_is_string(ps) ? json_string_value(ps) : "";
        if (strcmp(v, "always") == 0) *scheme = TOK_PREPEND_ALWAYS;
        else if (strcmp(v, "first") == 0) *scheme = TOK_PREPEND_FIRST;
        else if (strcmp(v, "never") == 0) *scheme = TOK_PREPEND_NEVER;
        else return tok_bad(file, sub, "expected \"always\", \"first\" or \"never\"");
    }
    /* The older spelling: add_prefix_space false must agree with "never" (the Rust library
     * refuses the file otherwise); true leaves the scheme as declared. */
    int aps = 1;
    TR_CHECK(tok_get_bool(file, path, j, "add_prefix_space", 1, &aps));
    if (!aps && *scheme != TOK_PREPEND_NEVER) {
        snprintf(sub, sizeof sub, "%s.add_prefix_space", path);
        return tok_bad(file, sub, "false does not match the prepend_scheme (\"never\" goes with it)");
    }
    if (split) TR_CHECK(tok_get_bool(file, path, j, "split", 1, split));
    return TR_OK;
}

tr_status tok_metaspace(const tok_pretok *p, tok_nstr *s, tok_range w, tok_ranges *out) {
    if (w.e <= w.b) return TR_OK;
    uint32_t rep = p->replacement;
    int starts = s->cp[w.b] == ' ' || s->cp[w.b] == rep;
    int prepend = !starts && (p->prepend_scheme == TOK_PREPEND_ALWAYS ||
                              (p->prepend_scheme == TOK_PREPEND_FIRST && s->a0[w.b] == 0));
    TR_CHECK(tok_nstr_reserve(s, s->n + (w.e - w.b) + 1));
    size_t base = s->n;
    if (prepend) TR_CHECK(tok_nstr_push(s, rep, s->a0[w.b], s->a1[w.b]));
    for (size_t i = w.b; i < w.e; i++)
        TR_CHECK(tok_nstr_push(s, s->cp[i] == ' ' ? rep : s->cp[i], s->a0[i], s->a1[i]));
    if (!p->split) return tok_ranges_push(out, base, s->n);
    size_t from = base;
    for (size_t i = base + 1; i < s->n; i++)
        if (s->cp[i] == rep) {
            TR_CHECK(tok_ranges_push(out, from, i));
            from = i;
        }
    return tok_ranges_push(out, from, s->n);
}
