/* The decoders of SentencePiece-style files, each a step of the decode chain (decoder.c):
 * Metaspace (the marker becomes a space, dropped in the first token unless prepend_scheme is
 * "never"), ByteFallback (runs of <0xAB> tokens become their bytes when those are UTF-8, else
 * one U+FFFD per token), Fuse (one token of all), Replace (String or Regex, per token) and
 * Strip (up to `start` leading and `stop` trailing copies of a character), as the Rust
 * library's decode_chain does them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer_impl.h"

static tr_status nomem(void) { return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory"); }

/* A String pattern as a regular expression that matches it literally. */
static char *escape(const char *s) {
    size_t n = strlen(s);
    char *e = malloc(2 * n + 1), *o = e;
    if (!e) return NULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) *o++ = '\\';
        *o++ = (char)c;
    }
    *o = '\0';
    return e;
}

static tr_status one_char(const char *file, const char *path, const char *key, json_t *j, uint32_t *out) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s.%s", path, key);
    json_t *v = json_object_get(j, key);
    uint32_t *cp = NULL;
    size_t n = 0;
    if (!json_is_string(v) || tok_utf8_to_cps(json_string_value(v), &cp, &n) != TR_OK || n != 1) {
        free(cp);
        return tok_bad(file, sub, "expected one character");
    }
    *out = cp[0];
    free(cp);
    return TR_OK;
}

static tr_status required_size(const char *file, const char *path, json_t *j, const char *key, size_t *out) {
    json_t *v = json_object_get(j, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return tr_error_set(TR_ERR_PARSE, "%s: %s.%s: expected a non-negative integer", file, path, key);
    *out = (size_t)json_integer_value(v);
    return TR_OK;
}

tr_status tok_load_decoder_spm(const char *file, const char *path, json_t *j, const char *type, tok_decoder *d,
                               int *done) {
    char sub[512];
    *done = 1;
    if (strcmp(type, "Metaspace") == 0) {
        d->kind = TOK_DEC_METASPACE;
        int split;
        return tok_load_metaspace(file, path, j, &d->replacement, &d->prepend_scheme, &split);
    }
    if (strcmp(type, "ByteFallback") == 0) {
        d->kind = TOK_DEC_BYTE_FALLBACK;
        return TR_OK;
    }
    if (strcmp(type, "Fuse") == 0) {
        d->kind = TOK_DEC_FUSE;
        return TR_OK;
    }
    if (strcmp(type, "Strip") == 0) {
        d->kind = TOK_DEC_STRIP;
        TR_CHECK(one_char(file, path, "content", j, &d->strip));
        TR_CHECK(required_size(file, path, j, "start", &d->start));
        return required_size(file, path, j, "stop", &d->stop);
    }
    if (strcmp(type, "Replace") == 0) {
        d->kind = TOK_DEC_REPLACE;
        json_t *p = json_object_get(j, "pattern"), *c = json_object_get(j, "content");
        snprintf(sub, sizeof sub, "%s.pattern", path);
        if (!json_is_object(p)) return tok_bad(file, sub, "expected {\"String\": ...} or {\"Regex\": ...}");
        json_t *re = json_object_get(p, "Regex"), *str = json_object_get(p, "String");
        if (json_is_string(re)) {
            snprintf(sub, sizeof sub, "%s.pattern.Regex", path);
            TR_CHECK(tok_regex_compile(file, sub, json_string_value(re), &d->re));
        } else if (json_is_string(str)) {
            snprintf(sub, sizeof sub, "%s.pattern.String", path);
            char *e = escape(json_string_value(str));
            if (!e) return nomem();
            tr_status st = tok_regex_compile(file, sub, e, &d->re);
            free(e);
            TR_CHECK(st);
        } else {
            return tok_bad(file, sub, "expected {\"String\": ...} or {\"Regex\": ...}");
        }
        snprintf(sub, sizeof sub, "%s.content", path);
        if (!json_is_string(c)) return tok_bad(file, sub, "expected a string");
        d->ncontent = json_string_length(c);
        d->content = malloc(d->ncontent + 1);
        if (!d->content) return nomem();
        memcpy(d->content, json_string_value(c), d->ncontent + 1);
        return TR_OK;
    }
    *done = 0;
    return TR_OK;
}

static tr_status metaspace(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    char rep[4];
    size_t nrep = tok_utf8_put(rep, d->replacement);
    tok_buf b = {0};
    tr_status st = TR_OK;
    for (size_t i = 0; st == TR_OK && i < in->n; i++) {
        const char *t = in->s[i];
        size_t n = in->len[i];
        b.n = 0;
        for (size_t k = 0; k < n;) {
            if (k + nrep <= n && memcmp(t + k, rep, nrep) == 0) {
                if ((i || d->prepend_scheme == TOK_PREPEND_NEVER) && tok_buf_put(&b, " ", 1)) st = nomem();
                k += nrep;
            } else {
                if (tok_buf_put(&b, t + k, 1)) st = nomem();
                k++;
            }
        }
        if (st == TR_OK) st = tok_strs_push(out, b.p ? b.p : "", b.n);
    }
    free(b.p);
    return st;
}

/* "<0xAB>" -> 0xAB as Rust's u8::from_str_radix(.., 16) reads the two characters (a leading
 * '+' is allowed); -1 otherwise. */
static int byte_token(const char *t, size_t n) {
    if (n != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') return -1;
    int v = 0, digits = 0;
    for (int k = 3; k < 5; k++) {
        char c = t[k];
        int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (x < 0) {
            if (k == 3 && c == '+') continue;
            return -1;
        }
        v = v * 16 + x;
        digits++;
    }
    return digits ? v : -1;
}

static int valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

static tr_status flush_bytes(tok_buf *bytes, tok_strs *out) {
    if (!bytes->n) return TR_OK;
    if (valid_utf8(bytes->p, bytes->n)) TR_CHECK(tok_strs_push(out, bytes->p, bytes->n));
    else
        for (size_t k = 0; k < bytes->n; k++) TR_CHECK(tok_strs_push(out, "\xEF\xBF\xBD", 3));
    bytes->n = 0;
    return TR_OK;
}

static tr_status byte_fallback(const tok_strs *in, tok_strs *out) {
    tok_buf bytes = {0};
    tr_status st = TR_OK;
    for (size_t i = 0; st == TR_OK && i < in->n; i++) {
        int v = byte_token(in->s[i], in->len[i]);
        if (v >= 0) {
            char c = (char)v;
            if (tok_buf_put(&bytes, &c, 1)) st = nomem();
            continue;
        }
        st = flush_bytes(&bytes, out);
        if (st == TR_OK) st = tok_strs_push(out, in->s[i], in->len[i]);
    }
    if (st == TR_OK) st = flush_bytes(&bytes, out);
    free(bytes.p);
    return st;
}

static tr_status fuse(const tok_strs *in, tok_strs *out) {
    tok_buf b = {0};
    for (size_t i = 0; i < in->n; i++)
        if (tok_buf_put(&b, in->s[i], in->len[i])) {
            free(b.p);
            return nomem();
        }
    tr_status st = tok_strs_push(out, b.p ? b.p : "", b.n);
    free(b.p);
    return st;
}

/* A token's characters with their byte ranges; 0 when it is not UTF-8 (it is then kept as it is). */
static tr_status chars(const char *t, size_t n, tok_nstr *s, int *ok) {
    *ok = 1;
    if (tok_nstr_from_utf8(s, t, n, 0) != TR_OK) {
        tr_error_clear();
        *ok = 0;
    }
    return TR_OK;
}

static tr_status replace(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    tok_nstr s = {0};
    tok_ranges m = {0};
    tok_buf b = {0};
    tr_status st = TR_OK;
    for (size_t i = 0; st == TR_OK && i < in->n; i++) {
        const char *t = in->s[i];
        size_t n = in->len[i];
        int ok;
        m.n = 0;
        b.n = 0;
        st = chars(t, n, &s, &ok);
        if (st == TR_OK && ok && s.n) st = tok_regex_find_all(d->re, s.cp, 0, s.n, &m);
        if (st != TR_OK) break;
        if (!ok || !m.n) {
            st = tok_strs_push(out, t, n);
            continue;
        }
        size_t last = 0; /* bytes */
        for (size_t k = 0; st == TR_OK && k < m.n; k++) {
            size_t b0 = m.r[k].b < s.n ? s.a0[m.r[k].b] : n, b1 = m.r[k].e < s.n ? s.a0[m.r[k].e] : n;
            if (tok_buf_put(&b, t + last, b0 - last) || tok_buf_put(&b, d->content, d->ncontent)) st = nomem();
            last = b1;
        }
        if (st == TR_OK && tok_buf_put(&b, t + last, n - last)) st = nomem();
        if (st == TR_OK) st = tok_strs_push(out, b.p ? b.p : "", b.n);
    }
    tok_nstr_free(&s);
    free(m.r);
    free(b.p);
    return st;
}

static tr_status strip(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    tok_nstr s = {0};
    tr_status st = TR_OK;
    for (size_t i = 0; st == TR_OK && i < in->n; i++) {
        const char *t = in->s[i];
        size_t n = in->len[i];
        int ok;
        st = chars(t, n, &s, &ok);
        if (st != TR_OK) break;
        if (!ok) {
            st = tok_strs_push(out, t, n);
            continue;
        }
        size_t b = 0, e = s.n;
        for (size_t k = 0; k < d->start && k < s.n && s.cp[k] == d->strip; k++) b = k + 1;
        for (size_t k = 0; k < d->stop && k < s.n && s.cp[s.n - k - 1] == d->strip; k++) e = s.n - k - 1;
        /* Cuts that cross (the Rust library panics there) leave nothing. */
        if (b >= e) st = tok_strs_push(out, "", 0);
        else st = tok_strs_push(out, t + s.a0[b], s.a1[e - 1] - s.a0[b]);
    }
    tok_nstr_free(&s);
    return st;
}

tr_status tok_decode_spm(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    switch (d->kind) {
    case TOK_DEC_METASPACE: return metaspace(d, in, out);
    case TOK_DEC_BYTE_FALLBACK: return byte_fallback(in, out);
    case TOK_DEC_FUSE: return fuse(in, out);
    case TOK_DEC_REPLACE: return replace(d, in, out);
    case TOK_DEC_STRIP: return strip(d, in, out);
    default: break;
    }
    return tr_error_set(TR_ERR_INTERNAL, "tokenizer: decoder kind %d is not one of decoder_spm.c's", (int)d->kind);
}
