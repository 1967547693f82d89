/* Decoders: WordPiece (the prefix joins a piece to the one before, others get a space; the
 * cleanup of " ." and the like), or tokens joined by spaces when the file has none. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

typedef struct sbuf { char *p; size_t n, cap; } sbuf;

static int put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* The Rust library's cleanup, replacement by replacement, in its order. */
static int cleanup(sbuf *t) {
    static const char *const rules[][2] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        const char *from = rules[r][0], *to = rules[r][1];
        size_t nf = strlen(from), nt = strlen(to);
        if (!t->n || !strstr(t->p, from)) continue;
        sbuf o = {0};
        const char *s = t->p, *hit;
        while ((hit = strstr(s, from))) {
            if (put(&o, s, (size_t)(hit - s)) || put(&o, to, nt)) goto fail;
            s = hit + nf;
        }
        if (put(&o, s, strlen(s))) goto fail;
        free(t->p);
        *t = o;
        continue;
    fail:
        free(o.p);
        return -1;
    }
    return 0;
}

tr_status tok_decode_tokens(const tok_decoder *d, const char *const *tokens, size_t n, char **out) {
    sbuf b = {0};
    if (put(&b, "", 0)) goto nomem;
    for (size_t i = 0; i < n; i++) {
        const char *t = tokens[i];
        if (!d) {
            if ((i && put(&b, " ", 1)) || put(&b, t, strlen(t))) goto nomem;
            continue;
        }
        sbuf piece = {0};
        size_t pl = strlen(d->prefix);
        int ok;
        if (i && pl && strncmp(t, d->prefix, pl) == 0) ok = put(&piece, t + pl, strlen(t) - pl) == 0;
        else if (i) ok = put(&piece, " ", 1) == 0 && put(&piece, t, strlen(t)) == 0;
        else ok = put(&piece, t, strlen(t)) == 0;
        if (ok && d->cleanup && piece.n) ok = cleanup(&piece) == 0;
        if (ok && piece.n) ok = put(&b, piece.p, piece.n) == 0;
        free(piece.p);
        if (!ok) goto nomem;
    }
    *out = b.p;
    return TR_OK;
nomem:
    free(b.p);
    return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
}
