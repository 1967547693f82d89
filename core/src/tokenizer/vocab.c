/* A vocabulary: id -> string and string -> id (open addressing, FNV-1a). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

static uint64_t hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

tr_status tok_vocab_init(tok_vocab *v, size_t n) {
    memset(v, 0, sizeof *v);
    size_t ns = 16;
    while (ns < 2 * n + 2) ns *= 2;
    v->str = calloc(n ? n : 1, sizeof *v->str);
    v->slots = malloc(ns * sizeof *v->slots);
    if (!v->str || !v->slots) {
        tok_vocab_free(v);
        return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    }
    memset(v->slots, 0xff, ns * sizeof *v->slots);
    v->n = n;
    v->nslots = ns;
    return TR_OK;
}

int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t len) {
    if (!v->nslots) return -1;
    size_t m = v->nslots - 1;
    for (size_t i = (size_t)hash(s, len) & m;; i = (i + 1) & m) {
        int32_t id = v->slots[i];
        if (id < 0) return -1;
        const char *t = v->str[id];
        /* s may hold NUL bytes (U+0000 in the text): compare lengths first. */
        if (strnlen(t, len + 1) == len && memcmp(t, s, len) == 0) return id;
    }
}

tr_status tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t len) {
    if (id < 0 || (size_t)id >= v->n) return tr_error_set(TR_ERR_INVALID, "id %d out of range", id);
    if (v->str[id]) return tr_error_set(TR_ERR_INVALID, "id %d is given twice", id);
    if (memchr(s, 0, len)) return tr_error_set(TR_ERR_INVALID, "token holds a NUL byte");
    if (tok_vocab_find(v, s, len) >= 0)
        return tr_error_set(TR_ERR_INVALID, "token '%.*s' is given twice", (int)len, s);
    char *c = malloc(len + 1);
    if (!c) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(c, s, len);
    c[len] = '\0';
    v->str[id] = c;
    size_t m = v->nslots - 1;
    size_t i = (size_t)hash(s, len) & m;
    while (v->slots[i] >= 0) i = (i + 1) & m;
    v->slots[i] = id;
    return TR_OK;
}

void tok_vocab_free(tok_vocab *v) {
    if (v->str)
        for (size_t i = 0; i < v->n; i++) free(v->str[i]);
    free(v->str);
    free(v->slots);
    memset(v, 0, sizeof *v);
}
