/* `trainer tokenize TOKENIZER [FILE]`: one text per line (UTF-8, '\n' ends a line, one '\r'
 * before it is dropped) from FILE or standard input; per line, the ids separated by spaces, as
 * Hugging Face's Tokenizer.encode(line).ids gives them with the file's truncation and padding.
 * --pair reads "text<TAB>pair" lines; --tokens prints token strings; --decode turns id lines
 * back into text (skipping special tokens). The first bad line stops it, naming the line. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenize_cmd.h"
#include "trainer/tokenizer.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: trainer tokenize TOKENIZER [FILE] [options]\n"
            "  TOKENIZER is a tokenizer.json or a model folder holding one; FILE (default: standard input)\n"
            "  holds one UTF-8 text per line; each line prints its ids separated by spaces\n"
            "  --no-special     leave out the special tokens the post-processor adds ([CLS], [SEP])\n"
            "  --pair           lines are TEXT<TAB>PAIR\n"
            "  --tokens         print the token strings instead of the ids\n"
            "  --type-ids       print the token type ids instead of the ids\n"
            "  --mask           print the attention mask instead of the ids\n"
            "  --decode         lines are ids; print the text they decode to (special tokens skipped)\n"
            "  --max-length N   truncate to N tokens (specials included), longest first unless the file says\n"
            "  --truncation S   longest_first, only_first or only_second (with the file's or --max-length's length)\n"
            "  --no-truncation  ignore the file's truncation\n"
            "  --no-padding     ignore the file's padding\n");
}

/* Writes v in decimal (fprintf's "%d" dominates the time of padded output). */
static void put_int(int32_t v, FILE *out) {
    char buf[12], *p = buf + sizeof buf;
    uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
    do *--p = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) *--p = '-';
    fwrite(p, 1, (size_t)(buf + sizeof buf - p), out);
}

static int decode_line(const tr_tokenizer *tok, const char *where, size_t lineno, char *line, FILE *out) {
    size_t cap = 64, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    char *p = line, *end;
    int rc = 0;
    while (ids) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX || (*end && *end != ' ' && *end != '\t')) {
            fprintf(stderr, "trainer tokenize: %s:%zu: expected ids separated by spaces, got '%.20s'\n", where, lineno, p);
            rc = 1;
            break;
        }
        if (n == cap) {
            int32_t *g = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!g) { free(ids); ids = NULL; break; }
            ids = g;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    if (!ids) {
        fprintf(stderr, "trainer tokenize: out of memory\n");
        return 1;
    }
    char *text = NULL;
    size_t len = 0;
    if (rc == 0 && tr_tokenizer_decode_len(tok, ids, n, 1, &text, &len) != TR_OK) {
        fprintf(stderr, "trainer tokenize: %s:%zu: %s\n", where, lineno, tr_error_msg());
        rc = 1;
    }
    if (rc == 0) {
        fwrite(text, 1, len, out);
        fputc('\n', out);
    }
    free(text);
    free(ids);
    return rc;
}

int trainer_tokenize_cmd(int argc, char **argv) {
    const char *tok_path = NULL, *in_path = NULL;
    int no_special = 0, pair = 0, tokens = 0, decode = 0, no_trunc = 0, no_pad = 0, types = 0, mask = 0;
    long max_length = -1;
    int strategy = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--no-special") == 0) no_special = 1;
        else if (strcmp(a, "--pair") == 0) pair = 1;
        else if (strcmp(a, "--tokens") == 0) tokens = 1;
        else if (strcmp(a, "--type-ids") == 0) types = 1;
        else if (strcmp(a, "--mask") == 0) mask = 1;
        else if (strcmp(a, "--decode") == 0) decode = 1;
        else if (strcmp(a, "--no-truncation") == 0) no_trunc = 1;
        else if (strcmp(a, "--no-padding") == 0) no_pad = 1;
        else if (strcmp(a, "--max-length") == 0 || strncmp(a, "--max-length=", 13) == 0) {
            const char *v = a[12] == '=' ? a + 13 : (i + 1 < argc ? argv[++i] : NULL);
            char *end;
            max_length = v ? strtol(v, &end, 10) : -1;
            if (!v || *end || end == v || max_length < 1) {
                fprintf(stderr, "trainer tokenize: --max-length: expected a positive integer\n");
                return 2;
            }
        } else if (strcmp(a, "--truncation") == 0 || strncmp(a, "--truncation=", 13) == 0) {
            static const char *const names[] = {"longest_first", "only_first", "only_second"};
            const char *v = a[12] == '=' ? a + 13 : (i + 1 < argc ? argv[++i] : "");
            for (int k = 0; k < 3; k++)
                if (strcmp(v, names[k]) == 0) strategy = k;
            if (strategy < 0) {
                fprintf(stderr, "trainer tokenize: --truncation: expected longest_first, only_first or only_second\n");
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "trainer tokenize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!tok_path) tok_path = a;
        else if (!in_path) in_path = a;
        else {
            fprintf(stderr, "trainer tokenize: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (tokens + types + mask + decode > 1) {
        fprintf(stderr, "trainer tokenize: --tokens, --type-ids, --mask and --decode exclude each other\n");
        return 2;
    }
    if (!tok_path) {
        fprintf(stderr, "trainer tokenize: expected a tokenizer.json or a model folder\n");
        usage(stderr);
        return 2;
    }
    tr_tokenizer *tok = NULL;
    if (tr_tokenizer_load(&tok, tok_path) != TR_OK) {
        fprintf(stderr, "trainer tokenize: %s\n", tr_error_msg());
        return 1;
    }
    tr_truncation tr;
    tr_tokenizer_truncation(tok, &tr);
    if (no_trunc) tr.enabled = 0;
    if (max_length > 0) {
        tr.enabled = 1;
        tr.max_length = (size_t)max_length;
    }
    if (strategy >= 0) tr.strategy = (tr_truncation_strategy)strategy;
    if (strategy >= 0 && !tr.enabled) {
        fprintf(stderr, "trainer tokenize: --truncation needs --max-length (the file has no truncation)\n");
        tr_tokenizer_free(tok);
        return 2;
    }
    if (tr_tokenizer_set_truncation(tok, &tr) != TR_OK || (no_pad && tr_tokenizer_set_padding(tok, NULL) != TR_OK)) {
        fprintf(stderr, "trainer tokenize: %s\n", tr_error_msg());
        tr_tokenizer_free(tok);
        return 1;
    }
    tr_padding pad; /* padding prints the file's pad_token under --tokens, as tokenizers does */
    tr_tokenizer_padding(tok, &pad);
    FILE *in = stdin;
    const char *where = in_path ? in_path : "<stdin>";
    if (in_path && !(in = fopen(in_path, "rb"))) {
        fprintf(stderr, "trainer tokenize: %s: cannot open: %s\n", in_path, strerror(errno));
        tr_tokenizer_free(tok);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    int rc = 0;
    while (rc == 0 && (got = getline(&line, &cap, in)) >= 0) {
        size_t len = (size_t)got;
        lineno++;
        if (len && line[len - 1] == '\n') line[--len] = '\0';
        if (len && line[len - 1] == '\r') line[--len] = '\0';
        if (decode) {
            if (memchr(line, '\0', len)) {
                fprintf(stderr, "trainer tokenize: %s:%zu: a NUL byte in a line of ids\n", where, lineno);
                rc = 1;
                break;
            }
            rc = decode_line(tok, where, lineno, line, stdout);
            continue;
        }
        size_t bad = tr_utf8_valid_prefix(line, len);
        if (bad < len) {
            fprintf(stderr, "trainer tokenize: %s:%zu: invalid UTF-8 at byte %zu of the line\n", where, lineno, bad);
            rc = 1;
            break;
        }
        const char *text = line, *second = NULL;
        size_t tlen = len, plen = 0;
        if (pair) {
            char *tab = memchr(line, '\t', len);
            if (!tab) {
                fprintf(stderr, "trainer tokenize: %s:%zu: --pair expects TEXT<TAB>PAIR, found no tab\n", where, lineno);
                rc = 1;
                break;
            }
            tlen = (size_t)(tab - line);
            second = tab + 1;
            plen = len - tlen - 1;
        }
        tr_encoding enc;
        if (tr_tokenizer_encode(tok, text, tlen, second, plen, !no_special, &enc) != TR_OK) {
            fprintf(stderr, "trainer tokenize: %s:%zu: %s\n", where, lineno, tr_error_msg());
            rc = 1;
            break;
        }
        for (size_t i = 0; i < enc.len; i++) {
            if (i) fputc(' ', stdout);
            const char *s;
            if (types) put_int(enc.type_ids[i], stdout);
            else if (mask) put_int(enc.attention_mask[i], stdout);
            else if (tokens && !enc.attention_mask[i] && pad.pad_token) fputs(pad.pad_token, stdout);
            else if (tokens && enc.tokens && enc.tokens[i]) fwrite(enc.tokens[i], 1, enc.token_lens[i], stdout);
            else if (tokens && tr_tokenizer_id_to_token(tok, enc.ids[i], &s) == TR_OK) fputs(s, stdout);
            else put_int(enc.ids[i], stdout);
        }
        fputc('\n', stdout);
        tr_encoding_free(&enc);
    }
    if (rc == 0 && ferror(in)) {
        fprintf(stderr, "trainer tokenize: %s: read error\n", where);
        rc = 1;
    }
    free(line);
    if (in != stdin) fclose(in);
    tr_tokenizer_free(tok);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "trainer tokenize: cannot write the output: %s\n", strerror(errno));
        rc = 1;
    }
    return rc;
}
