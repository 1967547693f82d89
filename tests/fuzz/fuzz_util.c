/* Helpers of the fuzz targets: parts, typed values from bytes, memory files, the scratch
 * folder and verdicts (fuzz.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "trainer/status.h"

int fuzz_split(const uint8_t *data, size_t size, fuzz_part *parts, int max) {
    const size_t sl = sizeof FUZZ_SEP - 1;
    int n = 0;
    while (n < max - 1) {
        const uint8_t *hit = size >= sl ? memmem(data, size, FUZZ_SEP, sl) : NULL;
        if (!hit) break;
        parts[n++] = (fuzz_part){data, (size_t)(hit - data)};
        size -= (size_t)(hit - data) + sl;
        data = hit + sl;
    }
    parts[n++] = (fuzz_part){data, size};
    return n;
}

char *fuzz_strdup(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    char *s = malloc(n + 1);
    if (!s) fuzz_fail("out of memory copying %zu bytes", n);
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

uint8_t fuzz_u8(fuzz_reader *r) {
    if (!r->left) return 0;
    r->left--;
    return *r->p++;
}

uint32_t fuzz_u32(fuzz_reader *r) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v << 8 | fuzz_u8(r);
    return v;
}

char *fuzz_str(fuzz_reader *r, size_t max) {
    uint8_t len = fuzz_u8(r);
    if (len == 255) return NULL;
    size_t n = len < max ? len : max;
    if (n > r->left) n = r->left;
    char *s = fuzz_strdup(r->p, n);
    r->p += n;
    r->left -= n;
    return s;
}

double fuzz_double(fuzz_reader *r) {
    static const double telling[] = {0, 1, -1, 0.5, 2, 10, 255, 256, 65536, 2147483647.0, 4294967295.0,
                                     9.2233720368547758e18, 1e300, -1e300, 1e-300};
    uint8_t k = fuzz_u8(r);
    if (k < sizeof telling / sizeof telling[0]) return telling[k];
    if (k == 250) return NAN;
    if (k == 251) return INFINITY;
    if (k == 252) return -INFINITY;
    double d;
    uint64_t bits = (uint64_t)fuzz_u32(r) << 32 | fuzz_u32(r);
    memcpy(&d, &bits, sizeof d);
    return d;
}

int fuzz_memfile(const void *data, size_t size, char *path, size_t cap) {
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0) fuzz_fail("memfd_create: %s", strerror(errno));
    const char *p = data;
    for (size_t left = size; left > 0;) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) fuzz_fail("writing a memory file: %s", strerror(errno));
        p += w;
        left -= (size_t)w;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

static char scratch[512];

static void remove_scratch(void) {
    if (scratch[0]) fuzz_remove_tree(scratch);
}

const char *fuzz_scratch_dir(void) {
    if (scratch[0]) return scratch;
    /* Not named trainer-*: tests look for leftovers of that name (tests/e2e/lib.sh). */
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(scratch, sizeof scratch, "%s/fuzz-scratch-XXXXXX", base);
    if (!mkdtemp(scratch)) fuzz_fail("%s: cannot make a scratch folder: %s", scratch, strerror(errno));
    atexit(remove_scratch);
    return scratch;
}

int fuzz_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    return (fclose(f) != 0 || w != size) ? -1 : 0;
}

void fuzz_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            fuzz_remove_tree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    remove_scratch(); /* abort() skips atexit */
    abort();
}

void fuzz_expect_message(const char *what, const char *const *needles) {
    const char *msg = tr_error_msg();
    if (!msg[0]) fuzz_fail("%s: refused without a message", what);
    for (const char *const *n = needles; *n; n++)
        if (strstr(msg, *n)) return;
    fuzz_fail("%s: the message does not say where the problem is (expected '%s'): %s", what, needles[0], msg);
}
