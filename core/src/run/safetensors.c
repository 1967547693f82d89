/* safetensors writer (atomic: temp file, fsync, rename) and validating reader. The reader
 * maps the file, so only the bytes a caller reads come into memory, and copies pieces out
 * with pread (tr_safetensors_copy), so a sharded rank's pieces never map the file at all. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/io_error.h"
#include "trainer/memory.h"
#include "trainer/safetensors.h"

#define MAX_HEADER (100u << 20)

static const char *dtype_tag(tr_dtype d) {
    switch (d) {
    case TR_F32: return "F32";
    case TR_F64: return "F64";
    case TR_BF16: return "BF16";
    case TR_F16: return "F16";
    case TR_I32: return "I32";
    case TR_I64: return "I64";
    case TR_U8: return "U8";
    default: return NULL;
    }
}

static int dtype_from_tag(const char *s, tr_dtype *out) {
    for (int d = 0; d < TR_DTYPE_COUNT; d++) {
        const char *t = dtype_tag((tr_dtype)d);
        if (t && strcmp(t, s) == 0) {
            *out = (tr_dtype)d;
            return 1;
        }
    }
    return 0;
}

static size_t entry_bytes(const tr_st_entry *e) {
    size_t n = tr_dtype_size(e->dtype);
    for (int i = 0; i < e->ndim; i++) n *= (size_t)e->shape[i];
    return n;
}

/* Writes n bytes; *done counts the file's bytes written so far (for the message). */
static tr_status write_all(int fd, const void *p, size_t n, const char *path, size_t *done, size_t total) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            char why[256];
            return tr_error_set(TR_ERR_IO, "%s: write failed after %zu of %zu bytes: %s", path, *done, total,
                                tr_io_reason(w < 0 ? errno : ENOSPC, why, sizeof why));
        }
        c += w;
        n -= (size_t)w;
        *done += (size_t)w;
    }
    return TR_OK;
}

/* Data order: by element size, largest first (stable), so that every tensor's offset is a
 * multiple of its element size - the format allows no gaps between tensors. */
static void data_order(const tr_st_entry *entries, int n, int *order) {
    int k = 0;
    for (size_t es = 8; es >= 1; es /= 2)
        for (int i = 0; i < n; i++)
            if (tr_dtype_size(entries[i].dtype) == es) order[k++] = i;
    for (int i = 0; i < n; i++) /* unknown dtypes last; refused below */
        if (tr_dtype_size(entries[i].dtype) == 0) order[k++] = i;
}

tr_status tr_safetensors_write(const char *path, const tr_st_entry *entries, int n,
                               const char *const *meta_kv, int n_meta) {
    int *order = tr_malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order) return TR_ERR_NOMEM;
    data_order(entries, n, order);
    json_t *root = json_object();
    size_t off = 0;
    tr_status st = TR_OK;
    for (int k = 0; k < n && st == TR_OK; k++) {
        const tr_st_entry *e = &entries[order[k]];
        const char *tag = dtype_tag(e->dtype);
        if (!tag || !e->name || !*e->name || strcmp(e->name, "__metadata__") == 0 ||
            json_object_get(root, e->name)) {
            st = tr_error_set(TR_ERR_INVALID, "%s: tensor %d ('%s'): bad or duplicate name or dtype",
                              path, order[k], e->name ? e->name : "(null)");
            break;
        }
        json_t *shape = json_array();
        for (int d = 0; d < e->ndim; d++) json_array_append_new(shape, json_integer(e->shape[d]));
        size_t bytes = entry_bytes(e);
        json_object_set_new(root, e->name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", tag, "shape", shape,
                                      "data_offsets", (json_int_t)off, (json_int_t)(off + bytes)));
        off += bytes;
    }
    if (n_meta > 0 && st == TR_OK) {
        json_t *meta = json_object();
        for (int i = 0; i < n_meta; i++) json_object_set_new(meta, meta_kv[2 * i], json_string(meta_kv[2 * i + 1]));
        json_object_set_new(root, "__metadata__", meta);
    }
    char *hdr = st == TR_OK ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (st != TR_OK || !hdr) {
        tr_free(order);
        return st != TR_OK ? st : tr_error_set(TR_ERR_NOMEM, "%s: cannot encode the header", path);
    }
    /* Pad the header with spaces so the data starts 8-byte aligned (allowed by the format). */
    size_t hlen = strlen(hdr), padded = (hlen + 7) / 8 * 8;

    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        free(hdr);
        tr_free(order);
        char why[256];
        return tr_error_set(TR_ERR_IO, "%s: cannot create %s: %s", path, tmp, tr_io_reason(errno, why, sizeof why));
    }
    uint64_t le = padded; /* x86-64 and aarch64 are little-endian */
    size_t done = 0, total = 8 + padded, data = 0;
    for (int k = 0; k < n; k++) data += entry_bytes(&entries[k]);
    total += data;
    st = write_all(fd, &le, 8, path, &done, total);
    if (st == TR_OK) st = write_all(fd, hdr, hlen, path, &done, total);
    for (size_t i = hlen; i < padded && st == TR_OK; i++) st = write_all(fd, " ", 1, path, &done, total);
    int fault = tr_fault_armed(TR_FAULT_CHECKPOINT); /* tests: die half-way through the data */
    for (int k = 0; k < n && st == TR_OK; k++) {
        const tr_st_entry *e = &entries[order[k]];
        size_t b = entry_bytes(e);
        if (fault && done + b >= total - data / 2) {
            size_t part = total - data / 2 - done;
            st = write_all(fd, e->data, part, path, &done, total);
            tr_fault_kill("writing %s: %zu of %zu bytes written", tmp, done, total);
        }
        st = write_all(fd, e->data, b, path, &done, total);
    }
    free(hdr);
    tr_free(order);
    char why[256];
    if (st == TR_OK && fsync(fd) != 0)
        st = tr_error_set(TR_ERR_IO, "%s: fsync failed: %s", path, tr_io_reason(errno, why, sizeof why));
    if (close(fd) != 0 && st == TR_OK)
        st = tr_error_set(TR_ERR_IO, "%s: close failed: %s", path, tr_io_reason(errno, why, sizeof why));
    if (st == TR_OK && rename(tmp, path) != 0)
        st = tr_error_set(TR_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, tr_io_reason(errno, why, sizeof why));
    if (st != TR_OK) {
        unlink(tmp);
        return st;
    }
    char dirbuf[1100];
    snprintf(dirbuf, sizeof dirbuf, "%s", path);
    int dfd = open(dirname(dirbuf), O_RDONLY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return TR_OK;
}

struct tr_safetensors {
    char *buf;           /* the whole file: mapped read-only, or read where it cannot be mapped */
    size_t size;
    int mapped;
    int fd;              /* mapped: the file, open for tr_safetensors_copy's reads; else -1 */
    char *path;          /* for tr_safetensors_copy's messages */
    tr_st_entry *e;
    char **names;
    int n;
    json_t *meta;        /* borrowed from root */
    json_t *root;
};

void tr_safetensors_close(tr_safetensors *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) tr_free(f->names[i]);
    tr_free(f->names);
    tr_free(f->e);
    if (f->mapped) munmap(f->buf, f->size);
    else tr_free(f->buf);
    if (f->fd >= 0) close(f->fd);
    if (f->root) json_decref(f->root);
    tr_free(f->path);
    tr_free(f);
}

#define FAIL(...) do { st = tr_error_set(TR_ERR_PARSE, __VA_ARGS__); goto fail; } while (0)

tr_status tr_safetensors_open(tr_safetensors **out, const char *path) {
    *out = NULL;
    tr_status st = TR_OK;
    tr_safetensors *f = tr_calloc(1, sizeof *f);
    if (!f) return TR_ERR_NOMEM;
    f->fd = -1;
    f->path = tr_malloc(strlen(path) + 1);
    if (!f->path) {
        tr_free(f);
        return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", path);
    }
    strcpy(f->path, path);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        tr_free(f->path);
        tr_free(f);
        return tr_error_set(TR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || sb.st_size < 8) {
        fclose(fp);
        tr_free(f->path);
        tr_free(f);
        return tr_error_set(TR_ERR_PARSE, "%s: not a safetensors file (%lld bytes, truncated?)", path,
                            (long long)sb.st_size);
    }
    f->size = (size_t)sb.st_size;
    /* Private and read-only: a file replaced by rename (checkpoints are) keeps the mapped one. */
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fileno(fp), 0);
    size_t got = f->size;
    if (map != MAP_FAILED) {
        f->buf = map;
        f->mapped = 1;
        f->fd = fcntl(fileno(fp), F_DUPFD_CLOEXEC, 0); /* -1: copies go through the mapping */
    } else { /* a file system that cannot map: read it whole */
        f->buf = tr_malloc(f->size);
        got = f->buf ? fread(f->buf, 1, f->size, fp) : 0;
    }
    fclose(fp);
    if (got != f->size) {
        st = tr_error_set(TR_ERR_IO, "%s: read %zu of %zu bytes", path, got, f->size);
        goto fail;
    }
    uint64_t hlen;
    memcpy(&hlen, f->buf, 8);
    if (hlen > MAX_HEADER || hlen > f->size - 8)
        FAIL("%s: header length %llu does not fit the file of %zu bytes (truncated or not safetensors)",
             path, (unsigned long long)hlen, f->size);
    json_error_t jerr;
    f->root = json_loadb(f->buf + 8, (size_t)hlen, 0, &jerr);
    if (!f->root || !json_is_object(f->root))
        FAIL("%s: header is not a JSON object (%s)", path, f->root ? "wrong type" : jerr.text);
    size_t data_size = f->size - 8 - (size_t)hlen;
    const char *data = f->buf + 8 + hlen;
    size_t cap = json_object_size(f->root);
    f->e = tr_calloc(cap ? cap : 1, sizeof *f->e);
    f->names = tr_calloc(cap ? cap : 1, sizeof *f->names);
    if (!f->e || !f->names) { st = TR_ERR_NOMEM; goto fail; }
    const char *key;
    json_t *v;
    json_object_foreach(f->root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v)) FAIL("%s: __metadata__ is not an object", path);
            f->meta = v;
            continue;
        }
        json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
               *jo = json_object_get(v, "data_offsets");
        tr_st_entry *e = &f->e[f->n];
        if (!key[0]) FAIL("%s: a tensor has an empty name", path); /* nothing can look it up or write it */
        if (!json_is_string(jd) || !dtype_from_tag(json_string_value(jd), &e->dtype))
            FAIL("%s: tensor '%s': missing or unknown dtype", path, key);
        if (!json_is_array(js) || json_array_size(js) > TR_MAX_DIMS)
            FAIL("%s: tensor '%s': shape must be a list of at most %d sizes", path, key, TR_MAX_DIMS);
        e->ndim = (int)json_array_size(js);
        size_t numel = 1;
        for (int d = 0; d < e->ndim; d++) {
            json_t *x = json_array_get(js, (size_t)d);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1ll << 40))
                FAIL("%s: tensor '%s': bad shape", path, key);
            e->shape[d] = json_integer_value(x);
            /* Checked before multiplying: a product that wraps around could read as 0 bytes. */
            if (e->shape[d] && numel > ((size_t)1 << 40) / (size_t)e->shape[d])
                FAIL("%s: tensor '%s': more than 2^40 elements", path, key);
            numel *= (size_t)e->shape[d];
        }
        if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
            !json_is_integer(json_array_get(jo, 1)))
            FAIL("%s: tensor '%s': data_offsets must be [begin, end]", path, key);
        json_int_t b = json_integer_value(json_array_get(jo, 0)), end = json_integer_value(json_array_get(jo, 1));
        if (b < 0 || end < b || (size_t)end > data_size)
            FAIL("%s: tensor '%s': data [%lld, %lld) outside the %zu data bytes (truncated?)", path, key,
                 (long long)b, (long long)end, data_size);
        if ((size_t)(end - b) != numel * tr_dtype_size(e->dtype))
            FAIL("%s: tensor '%s': %lld data bytes for %zu elements of %s", path, key, (long long)(end - b),
                 numel, json_string_value(jd));
        f->names[f->n] = tr_malloc(strlen(key) + 1);
        if (!f->names[f->n]) { st = TR_ERR_NOMEM; goto fail; }
        strcpy(f->names[f->n], key);
        e->name = f->names[f->n];
        e->data = data + b;
        f->n++;
    }
    *out = f;
    return TR_OK;
fail:
    tr_safetensors_close(f);
    return st;
}

int tr_safetensors_count(const tr_safetensors *f) { return f->n; }
const tr_st_entry *tr_safetensors_at(const tr_safetensors *f, int i) { return i >= 0 && i < f->n ? &f->e[i] : NULL; }
const tr_st_entry *tr_safetensors_find(const tr_safetensors *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) return &f->e[i];
    return NULL;
}

tr_status tr_safetensors_copy(const tr_safetensors *f, void *dst, const void *src, size_t bytes) {
    const char *c = src;
    /* pread from the page cache straight into dst: no page of the file is mapped into this
     * process for it (a mapped page, even dropped at once, can count whole large folios). A
     * short read is an error: through the mapping it would be a SIGBUS. */
    if (f && f->fd >= 0 && c >= f->buf && bytes <= f->size && c <= f->buf + f->size - bytes) {
        size_t done = 0;
        off_t at = (off_t)(c - f->buf);
        while (done < bytes) {
            ssize_t r = pread(f->fd, (char *)dst + done, bytes - done, at + (off_t)done);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0)
                return tr_error_set(TR_ERR_IO, "%s: read %zu of %zu bytes at offset %lld: %s", f->path, done, bytes,
                                    (long long)at, strerror(errno));
            if (r == 0)
                return tr_error_set(TR_ERR_IO, "%s: read %zu of %zu bytes at offset %lld (truncated?)", f->path, done,
                                    bytes, (long long)at);
            done += (size_t)r;
        }
        return TR_OK;
    }
    memcpy(dst, c, bytes); /* read whole into memory (no mapping), or not in f */
    return TR_OK;
}

const char *tr_safetensors_meta(const tr_safetensors *f, const char *key) {
    json_t *v = f->meta ? json_object_get(f->meta, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}
