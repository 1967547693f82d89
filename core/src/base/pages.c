/* Page-backed memory: anonymous private mappings, released page by page with
 * madvise(MADV_DONTNEED) (the pages read as zero afterwards) and measured with mincore. */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trainer/memory.h"

size_t tr_page_size(void) {
    static size_t page;
    if (!page) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

void *tr_pages_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        tr_error_set(TR_ERR_NOMEM, "out of memory mapping %zu bytes", bytes);
        return NULL;
    }
    return p;
}

void tr_pages_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes ? bytes : 1);
}

size_t tr_pages_discard(void *p, size_t bytes) {
    size_t page = tr_page_size();
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + bytes) / page * page;
    if (!p || hi <= lo) return 0;
    return madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0 ? hi - lo : 0;
}

size_t tr_pages_resident(const void *p, size_t bytes) {
    if (!p || !bytes) return 0;
    size_t page = tr_page_size();
    uintptr_t lo = (uintptr_t)p / page * page, hi = ((uintptr_t)p + bytes + page - 1) / page * page;
    size_t total = 0;
    unsigned char vec[256];
    for (uintptr_t at = lo; at < hi;) {
        size_t n = (hi - at) / page < sizeof vec ? (hi - at) / page : sizeof vec;
        if (mincore((void *)at, n * page, vec) != 0) return bytes; /* unknown: count it all */
        for (size_t i = 0; i < n; i++) total += vec[i] & 1 ? page : 0;
        at += n * page;
    }
    /* Whole pages were counted; never report more than the range itself. */
    return total < bytes ? total : bytes;
}
