/* Tokenizer encode throughput: one thread, the lines of a text file encoded in batches, as
 * tools/bench/tokenizer_vs_hf.py runs Hugging Face's encode_batch beside it.
 *
 *   bench_tokenizer TOKENIZER FILE [--reps N] [--batch N] [--pairs]
 *
 * Padding and truncation are off (both sides measure tokenization, not the padding copy).
 * --pairs encodes adjacent lines as pairs. Prints one JSON object: the input's bytes, lines and
 * the tokens made, each repetition's seconds and the median's MB/s (10^6 bytes per second). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer/tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                free(buf);
                buf = NULL;
            } else {
                buf = b;
                cap *= 2;
            }
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    const char *tok_path = NULL, *file = NULL;
    int reps = 5, pairs = 0;
    size_t batch = 1000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--pairs") == 0) pairs = 1;
        else if (!tok_path) tok_path = argv[i];
        else if (!file) file = argv[i];
        else tok_path = NULL, i = argc;
    }
    if (!tok_path || !file || reps < 1 || reps > 1000 || batch < 1) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER FILE [--reps N] [--batch N] [--pairs]\n");
        return 2;
    }
    tr_tokenizer *tok = NULL;
    if (tr_tokenizer_load(&tok, tok_path) != TR_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", tr_error_msg());
        return 1;
    }
    tr_tokenizer_set_padding(tok, NULL);
    tr_tokenizer_set_truncation(tok, NULL);
    size_t len = 0;
    char *text = read_all(file, &len);
    if (!text) {
        fprintf(stderr, "bench_tokenizer: %s: cannot read\n", file);
        tr_tokenizer_free(tok);
        return 1;
    }
    /* The lines, as Python's str.split("\n") minus a last empty one. */
    size_t n = 0, cap = 1024;
    const char **lines = malloc(cap * sizeof *lines);
    size_t *lens = malloc(cap * sizeof *lens);
    for (char *p = text; lines && lens && p < text + len;) {
        char *e = memchr(p, '\n', (size_t)(text + len - p));
        if (!e) e = text + len;
        if (n == cap) {
            cap *= 2;
            const char **l2 = realloc(lines, cap * sizeof *lines);
            size_t *n2 = l2 ? realloc(lens, cap * sizeof *lens) : NULL;
            if (!l2 || !n2) {
                fprintf(stderr, "bench_tokenizer: out of memory\n");
                return 1;
            }
            lines = l2;
            lens = n2;
        }
        lines[n] = p;
        lens[n++] = (size_t)(e - p);
        p = e + 1;
    }
    size_t items = pairs ? n / 2 : n;
    const char **a = malloc((items + 1) * sizeof *a), **b = malloc((items + 1) * sizeof *b);
    size_t *al = malloc((items + 1) * sizeof *al), *bl = malloc((items + 1) * sizeof *bl);
    tr_encoding *enc = malloc(batch * sizeof *enc);
    double *secs = malloc((size_t)reps * sizeof *secs);
    if (!lines || !lens || !a || !b || !al || !bl || !enc || !secs) {
        fprintf(stderr, "bench_tokenizer: out of memory\n");
        return 1;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < items; i++) {
        a[i] = lines[pairs ? 2 * i : i];
        al[i] = lens[pairs ? 2 * i : i];
        b[i] = pairs ? lines[2 * i + 1] : NULL;
        bl[i] = pairs ? lens[2 * i + 1] : 0;
        bytes += al[i] + bl[i];
    }
    size_t tokens = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        size_t made = 0;
        for (size_t i = 0; i < items; i += batch) {
            size_t k = items - i < batch ? items - i : batch;
            if (tr_tokenizer_encode_batch(tok, k, a + i, al + i, pairs ? b + i : NULL, pairs ? bl + i : NULL, 1,
                                          enc) != TR_OK) {
                fprintf(stderr, "bench_tokenizer: %s: line batch at %zu: %s\n", file, i, tr_error_msg());
                return 1;
            }
            for (size_t j = 0; j < k; j++) {
                made += enc[j].len;
                tr_encoding_free(&enc[j]);
            }
        }
        secs[r] = now() - t0;
        tokens = made;
    }
    double *sorted = malloc((size_t)reps * sizeof *sorted);
    if (!sorted) return 1;
    memcpy(sorted, secs, (size_t)reps * sizeof *secs);
    qsort(sorted, (size_t)reps, sizeof *sorted, cmp_double);
    double med = sorted[reps / 2];
    printf("{\"bytes\": %zu, \"items\": %zu, \"tokens\": %zu, \"seconds\": [", bytes, items, tokens);
    for (int r = 0; r < reps; r++) printf("%s%.6f", r ? ", " : "", secs[r]);
    printf("], \"mb_s\": %.3f}\n", med > 0 ? (double)bytes / med / 1e6 : 0.0);
    free(sorted);
    free(secs);
    free(enc);
    free(a);
    free(b);
    free(al);
    free(bl);
    free(lines);
    free(lens);
    free(text);
    tr_tokenizer_free(tok);
    return 0;
}
