/* safetensors: round trip, atomic replacement, refusal of truncated or corrupt files, and a
 * piece copied from a file truncated while open refused. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/safetensors.h"

static char dir[64];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static void expect_refused(const char *name, const void *bytes, size_t n, const char *needle) {
    char p[256];
    path_in(p, sizeof p, name);
    write_bytes(p, bytes, n);
    tr_safetensors *f = NULL;
    tr_status st = tr_safetensors_open(&f, p);
    CHECK(st != TR_OK && f == NULL, "%s refused", name);
    CHECK(strstr(tr_error_msg(), needle) && strstr(tr_error_msg(), p), "%s: message '%s' lacks '%s'",
          name, tr_error_msg(), needle);
    unlink(p);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/trainer-st-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    float w[6] = {1, 2, 3, 4, 5, 6};
    int32_t ids[3] = {7, -8, 9};
    double d[1] = {0.25};
    tr_st_entry e[3] = {
        {.name = "fc.weight", .dtype = TR_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "ids", .dtype = TR_I32, .ndim = 1, .shape = {3}, .data = ids},
        {.name = "scalar", .dtype = TR_F64, .ndim = 0, .data = d}};
    const char *meta[] = {"format", "pt", "step", "12"};
    char p[256];
    path_in(p, sizeof p, "model.safetensors");
    CHECK(tr_safetensors_write(p, e, 3, meta, 2) == TR_OK, "write: %s", tr_error_msg());
    tr_safetensors *f;
    CHECK(tr_safetensors_open(&f, p) == TR_OK, "open: %s", tr_error_msg());
    CHECK(tr_safetensors_count(f) == 3, "count");
    const tr_st_entry *g = tr_safetensors_find(f, "fc.weight");
    CHECK(g && g->dtype == TR_F32 && g->ndim == 2 && g->shape[1] == 3 && memcmp(g->data, w, sizeof w) == 0, "weights");
    g = tr_safetensors_find(f, "ids");
    CHECK(g && memcmp(g->data, ids, sizeof ids) == 0, "ints");
    g = tr_safetensors_find(f, "scalar");
    double dv = 0;
    if (g) memcpy(&dv, g->data, sizeof dv);
    CHECK(g && g->ndim == 0 && dv == 0.25, "0-d");
    CHECK(g && (uintptr_t)g->data % 8 == 0, "f64 data aligned (written first)");
    CHECK(tr_safetensors_meta(f, "step") && strcmp(tr_safetensors_meta(f, "step"), "12") == 0, "metadata");

    /* Corruptions: each refused with its own message. Take the good file's bytes. */
    FILE *fp = fopen(p, "rb");
    static char good[4096];
    size_t n = fread(good, 1, sizeof good, fp);
    fclose(fp);
    tr_safetensors_close(f);
    expect_refused("short.st", good, 5, "not a safetensors file");
    expect_refused("trunc.st", good, n - 4, "outside the");
    char bad[4096];
    memcpy(bad, good, n);
    uint64_t huge = 1ull << 40;
    memcpy(bad, &huge, 8);
    expect_refused("hlen.st", bad, n, "does not fit the file");
    memcpy(bad, good, n);
    char *q = strstr(bad + 8, "F32");
    memcpy(q, "Q32", 3);
    expect_refused("dtype.st", bad, n, "unknown dtype");
    memcpy(bad, good, n);
    bad[8] = '[';
    expect_refused("json.st", bad, n, "header is not a JSON object");
    expect_refused("text.st", "hello world, not a checkpoint", 29, "does not fit the file");

    /* tr_safetensors_copy reads a piece with pread; the file shortened under an open reader
     * is an error naming the file and what was read, never bytes from the mapping (zeros
     * or a SIGBUS). */
    CHECK(tr_safetensors_open(&f, p) == TR_OK, "reopen: %s", tr_error_msg());
    g = tr_safetensors_find(f, "fc.weight");
    float piece[2] = {0};
    CHECK(g && tr_safetensors_copy(f, piece, (const float *)g->data + 3, sizeof piece) == TR_OK && piece[0] == 4 &&
          piece[1] == 5, "copy of elements 3-4: %g %g", piece[0], piece[1]);
    uint64_t hlen;
    memcpy(&hlen, good, 8);
    CHECK(truncate(p, (off_t)(8 + hlen)) == 0, "truncate %s", p);
    tr_status st = g ? tr_safetensors_copy(f, piece, (const float *)g->data + 3, sizeof piece) : TR_OK;
    CHECK(st == TR_ERR_IO && strstr(tr_error_msg(), p) && strstr(tr_error_msg(), "read 0 of 8 bytes at offset"),
          "copy from a truncated file: status %d, '%s'", (int)st, tr_error_msg());
    tr_safetensors_close(f);

    /* Replacing a file is atomic: no temp file is left behind, and the new content wins. */
    w[0] = 42;
    CHECK(tr_safetensors_write(p, e, 3, NULL, 0) == TR_OK, "rewrite");
    CHECK(tr_safetensors_open(&f, p) == TR_OK && ((const float *)tr_safetensors_find(f, "fc.weight")->data)[0] == 42,
          "new content");
    tr_safetensors_close(f);
    tr_st_entry dup[2] = {e[0], e[0]};
    char p2[256];
    path_in(p2, sizeof p2, "dup.safetensors");
    CHECK(tr_safetensors_write(p2, dup, 2, NULL, 0) == TR_ERR_INVALID && access(p2, F_OK) != 0,
          "duplicate names refused, nothing written");
    unlink(p);
    CHECK(rmdir(dir) == 0, "no temp files left in %s", dir);
    return test_finish();
}
