/* Normalizers: BertNormalizer, NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace
 * (string pattern), Prepend, Sequence, with the Rust library's rules (docs/tokenizers.md).
 * Each rewrites a normalized string and keeps every code point's original byte range; a
 * composed character spans the characters it was composed from. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer_impl.h"

static void swap_out(tok_nstr *s, tok_nstr *t) {
    tok_nstr_free(s);
    *s = *t;
}

/* The CJK ranges of the Rust library's BertNormalizer (BERT's original list). */
static int is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int ccc(uint32_t c) { return tok_combining_class(c); }

/* Stable counting sort of s[b, e) by combining class: linear, so that a line of a million
 * combining marks does not take the quadratic time an insertion sort would. */
static tr_status sort_marks(tok_nstr *s, size_t b, size_t e) {
    size_t n = e - b, count[257] = {0};
    uint8_t *k = malloc(n);
    uint32_t *cp = malloc(n * sizeof *cp);
    size_t *a = malloc(2 * n * sizeof *a);
    if (!k || !cp || !a) {
        free(k);
        free(cp);
        free(a);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        k[i] = (uint8_t)ccc(s->cp[b + i]);
        count[k[i] + 1]++;
    }
    for (size_t c = 1; c < 257; c++) count[c] += count[c - 1];
    for (size_t i = 0; i < n; i++) {
        size_t at = count[k[i]]++;
        cp[at] = s->cp[b + i];
        a[2 * at] = s->a0[b + i];
        a[2 * at + 1] = s->a1[b + i];
    }
    for (size_t i = 0; i < n; i++) {
        s->cp[b + i] = cp[i];
        s->a0[b + i] = a[2 * i];
        s->a1[b + i] = a[2 * i + 1];
    }
    free(k);
    free(cp);
    free(a);
    return TR_OK;
}

/* Canonical or compatibility decomposition, then canonical ordering of combining marks. */
static tr_status decompose(tok_nstr *s, int compat) {
    tok_nstr t = {0};
    tr_status st = tok_nstr_reserve(&t, s->n + 1);
    for (size_t i = 0; st == TR_OK && i < s->n; i++) {
        utf8proc_int32_t buf[32];
        int bound = 0, how = tok_decomposition(s->cp[i], compat);
        utf8proc_option_t opt = UTF8PROC_DECOMPOSE | (how == 2 ? UTF8PROC_COMPAT : 0);
        utf8proc_ssize_t k = 1;
        buf[0] = (utf8proc_int32_t)s->cp[i];
        if (how) k = utf8proc_decompose_char((utf8proc_int32_t)s->cp[i], buf, 32, opt, &bound);
        if (k < 0 || k > 32) k = 0, buf[0] = (utf8proc_int32_t)s->cp[i], k = 1;
        for (utf8proc_ssize_t j = 0; st == TR_OK && j < k; j++)
            st = tok_nstr_push(&t, (uint32_t)buf[j], s->a0[i], s->a1[i]);
    }
    if (st != TR_OK) {
        tok_nstr_free(&t);
        return st;
    }
    /* Canonical ordering: a stable sort by combining class of each run of non-starters. */
    for (size_t i = 0; st == TR_OK && i < t.n;) {
        if (ccc(t.cp[i]) == 0) {
            i++;
            continue;
        }
        size_t b = i;
        int sorted = 1, prev = 0;
        for (; i < t.n; i++) {
            int c = ccc(t.cp[i]);
            if (c == 0) break;
            if (c < prev) sorted = 0;
            prev = c;
        }
        if (!sorted) st = sort_marks(&t, b, i);
    }
    if (st != TR_OK) {
        tok_nstr_free(&t);
        return st;
    }
    swap_out(s, &t);
    return TR_OK;
}

static tr_status compose(tok_nstr *s, int compat) {
    TR_CHECK(decompose(s, compat));
    if (s->n == 0) return TR_OK;
    utf8proc_int32_t *buf = malloc(s->n * sizeof *buf);
    if (!buf) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < s->n; i++) buf[i] = (utf8proc_int32_t)s->cp[i];
    /* STABLE: utf8proc honours the composition exclusions only with it. */
    utf8proc_ssize_t m = utf8proc_normalize_utf32(buf, (utf8proc_ssize_t)s->n, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    if (m < 0) {
        free(buf);
        return tr_error_set(TR_ERR_INTERNAL, "tokenizer: composition failed: %s", utf8proc_errmsg(m));
    }
    /* Each composed character consumed as many characters as its canonical decomposition. */
    size_t in = 0;
    for (utf8proc_ssize_t i = 0; i < m; i++) {
        utf8proc_int32_t d[32];
        int bound = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char(buf[i], d, 32, UTF8PROC_DECOMPOSE, &bound);
        if (k < 1 || k > 32) k = 1;
        size_t first = in < s->n ? in : s->n - 1;
        size_t last = in + (size_t)k - 1 < s->n ? in + (size_t)k - 1 : s->n - 1;
        size_t a0 = s->a0[first], a1 = s->a1[first];
        for (size_t j = first; j <= last; j++) {
            if (s->a0[j] < a0) a0 = s->a0[j];
            if (s->a1[j] > a1) a1 = s->a1[j];
        }
        s->cp[i] = (uint32_t)buf[i];
        s->a0[i] = a0;
        s->a1[i] = a1;
        in += (size_t)k;
    }
    s->n = (size_t)m;
    free(buf);
    return TR_OK;
}

/* Keeps the code points keep() accepts. */
static void filter(tok_nstr *s, int (*drop)(uint32_t)) {
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (drop(s->cp[i])) continue;
        s->cp[w] = s->cp[i];
        s->a0[w] = s->a0[i];
        s->a1[w] = s->a1[i];
        w++;
    }
    s->n = w;
}

static int bert_drop(uint32_t c) { return c == 0 || c == 0xFFFD || tok_is_control(c); }

/* Rust's char::to_lowercase: the simple mapping, but U+0130 lowers to "i\u0307". */
static tr_status lowercase(tok_nstr *s) {
    size_t extra = 0;
    for (size_t i = 0; i < s->n; i++) extra += s->cp[i] == 0x130;
    if (extra) {
        tok_nstr t = {0};
        tr_status st = tok_nstr_reserve(&t, s->n + extra);
        for (size_t i = 0; st == TR_OK && i < s->n; i++) {
            if (s->cp[i] == 0x130) {
                st = tok_nstr_push(&t, 'i', s->a0[i], s->a1[i]);
                if (st == TR_OK) st = tok_nstr_push(&t, 0x307, s->a0[i], s->a1[i]);
            } else {
                st = tok_nstr_push(&t, tok_lower(s->cp[i]), s->a0[i], s->a1[i]);
            }
        }
        if (st != TR_OK) {
            tok_nstr_free(&t);
            return st;
        }
        swap_out(s, &t);
        return TR_OK;
    }
    for (size_t i = 0; i < s->n; i++) s->cp[i] = tok_lower(s->cp[i]);
    return TR_OK;
}

static tr_status bert(const tok_normalizer *n, tok_nstr *s) {
    if (n->clean_text) {
        filter(s, bert_drop);
        for (size_t i = 0; i < s->n; i++)
            if (tok_is_whitespace(s->cp[i])) s->cp[i] = ' ';
    }
    if (n->chinese) {
        size_t k = 0;
        for (size_t i = 0; i < s->n; i++) k += is_chinese(s->cp[i]);
        if (k) {
            tok_nstr t = {0};
            tr_status st = tok_nstr_reserve(&t, s->n + 2 * k);
            for (size_t i = 0; st == TR_OK && i < s->n; i++) {
                int c = is_chinese(s->cp[i]);
                if (c) st = tok_nstr_push(&t, ' ', s->a0[i], s->a1[i]);
                if (st == TR_OK) st = tok_nstr_push(&t, s->cp[i], s->a0[i], s->a1[i]);
                if (c && st == TR_OK) st = tok_nstr_push(&t, ' ', s->a0[i], s->a1[i]);
            }
            if (st != TR_OK) {
                tok_nstr_free(&t);
                return st;
            }
            swap_out(s, &t);
        }
    }
    if (n->strip_accents) {
        TR_CHECK(decompose(s, 0));
        filter(s, tok_is_nonspacing_mark);
    }
    if (n->lowercase) TR_CHECK(lowercase(s));
    return TR_OK;
}

static tr_status replace(const tok_normalizer *n, tok_nstr *s) {
    if (n->npat == 0) return TR_OK;
    tok_nstr t = {0};
    tr_status st = tok_nstr_reserve(&t, s->n + 1);
    size_t i = 0;
    while (st == TR_OK && i < s->n) {
        if (i + n->npat <= s->n && memcmp(s->cp + i, n->pat, n->npat * sizeof(uint32_t)) == 0) {
            /* As the Rust library: the content takes the alignment of the match's last character. */
            size_t a0 = s->a0[i + n->npat - 1], a1 = s->a1[i + n->npat - 1];
            for (size_t j = 0; st == TR_OK && j < n->nwith; j++) st = tok_nstr_push(&t, n->with[j], a0, a1);
            i += n->npat;
        } else {
            st = tok_nstr_push(&t, s->cp[i], s->a0[i], s->a1[i]);
            i++;
        }
    }
    if (st != TR_OK) {
        tok_nstr_free(&t);
        return st;
    }
    swap_out(s, &t);
    return TR_OK;
}

static tr_status prepend(const tok_normalizer *n, tok_nstr *s) {
    if (s->n == 0 || n->nwith == 0) return TR_OK;
    tok_nstr t = {0};
    tr_status st = tok_nstr_reserve(&t, s->n + n->nwith);
    for (size_t j = 0; st == TR_OK && j < n->nwith; j++) st = tok_nstr_push(&t, n->with[j], s->a0[0], s->a1[0]);
    for (size_t i = 0; st == TR_OK && i < s->n; i++) st = tok_nstr_push(&t, s->cp[i], s->a0[i], s->a1[i]);
    if (st != TR_OK) {
        tok_nstr_free(&t);
        return st;
    }
    swap_out(s, &t);
    return TR_OK;
}

static void strip(const tok_normalizer *n, tok_nstr *s) {
    size_t b = 0, e = s->n;
    if (n->left)
        while (b < e && tok_is_whitespace(s->cp[b])) b++;
    if (n->right)
        while (e > b && tok_is_whitespace(s->cp[e - 1])) e--;
    if (b) {
        memmove(s->cp, s->cp + b, (e - b) * sizeof *s->cp);
        memmove(s->a0, s->a0 + b, (e - b) * sizeof *s->a0);
        memmove(s->a1, s->a1 + b, (e - b) * sizeof *s->a1);
    }
    s->n = e - b;
}

tr_status tok_normalize(const tok_normalizer *n, tok_nstr *s) {
    switch (n->kind) {
    case TOK_NORM_BERT: return bert(n, s);
    case TOK_NORM_NFD: return decompose(s, 0);
    case TOK_NORM_NFKD: return decompose(s, 1);
    case TOK_NORM_NFC: return compose(s, 0);
    case TOK_NORM_NFKC: return compose(s, 1);
    case TOK_NORM_LOWERCASE: return lowercase(s);
    case TOK_NORM_STRIP: strip(n, s); return TR_OK;
    case TOK_NORM_STRIP_ACCENTS: filter(s, tok_is_mark); return TR_OK;
    case TOK_NORM_REPLACE: return n->re ? tok_replace_regex(n, s) : replace(n, s);
    case TOK_NORM_PRECOMPILED: return tok_precompiled_normalize(n->pc, s);
    case TOK_NORM_PREPEND: return prepend(n, s);
    case TOK_NORM_SEQUENCE:
        for (size_t i = 0; i < n->nkids; i++) TR_CHECK(tok_normalize(&n->kids[i], s));
        return TR_OK;
    }
    return tr_error_set(TR_ERR_INTERNAL, "tokenizer: unknown normalizer kind %d", (int)n->kind);
}

void tok_normalizer_free(tok_normalizer *n) {
    if (!n) return;
    for (size_t i = 0; i < n->nkids; i++) tok_normalizer_free(&n->kids[i]);
    free(n->kids);
    free(n->pat);
    free(n->with);
    tok_regex_free(n->re);
    tok_precompiled_free(n->pc);
}
