/* Counted aligned heap allocation and the per-step arena. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/memory.h"

static atomic_uint_fast64_t alloc_count;

void *tr_malloc(size_t bytes) {
    void *p = NULL;
    size_t rounded = (bytes + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN;
    if (rounded == 0) rounded = TR_ALIGN;
    if (posix_memalign(&p, TR_ALIGN, rounded) != 0 || !p) {
        tr_error_set(TR_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    atomic_fetch_add(&alloc_count, 1);
    return p;
}

void *tr_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) {
        tr_error_set(TR_ERR_NOMEM, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    void *p = tr_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void tr_free(void *ptr) { free(ptr); }

uint64_t tr_alloc_count(void) { return atomic_load(&alloc_count); }

typedef struct chunk {
    struct chunk *prev;
    char *base;   /* the usable bytes: after this header, or from the arena's allocator */
    size_t size;  /* usable bytes */
    size_t used;
} chunk;

#define CHUNK_HDR ((sizeof(chunk) + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN)

struct tr_arena {
    chunk *head;       /* newest chunk */
    size_t used;       /* bytes handed out since reset, all chunks */
    size_t peak;
    size_t capacity;   /* usable bytes over all chunks */
    tr_arena_memory mem;  /* alloc NULL: chunks are heap memory with their header in front */
};

static chunk *chunk_new(tr_arena *a, size_t size) {
    if (!a->mem.alloc) {
        chunk *c = tr_malloc(CHUNK_HDR + size);
        if (!c) return NULL;
        *c = (chunk){.base = (char *)c + CHUNK_HDR, .size = size};
        return c;
    }
    chunk *c = tr_malloc(sizeof *c);
    if (!c) return NULL;
    void *base = NULL;
    if (a->mem.alloc(a->mem.user, size, &base) != TR_OK || !base) {
        tr_free(c);
        return NULL;
    }
    *c = (chunk){.base = base, .size = size};
    return c;
}

static void chunk_free(tr_arena *a, chunk *c) {
    if (a->mem.alloc) a->mem.free(a->mem.user, c->base, c->size);
    tr_free(c);
}

tr_status tr_arena_create_on(tr_arena **out, size_t initial_bytes, const tr_arena_memory *mem) {
    *out = NULL;
    tr_arena *a = tr_calloc(1, sizeof *a);
    if (!a) return TR_ERR_NOMEM;
    if (mem) a->mem = *mem;
    if (initial_bytes) {
        a->head = chunk_new(a, initial_bytes);
        if (!a->head) {
            tr_free(a);
            if (mem && mem->alloc) {
                tr_error_prefix("arena: allocating %zu bytes: ", initial_bytes);
                return TR_ERR_NOMEM;
            }
            return tr_error_set(TR_ERR_NOMEM, "arena: out of memory allocating %zu bytes", initial_bytes);
        }
        a->capacity = initial_bytes;
    }
    *out = a;
    return TR_OK;
}

tr_status tr_arena_create(tr_arena **out, size_t initial_bytes) {
    return tr_arena_create_on(out, initial_bytes, NULL);
}

void tr_arena_destroy(tr_arena *a) {
    if (!a) return;
    for (chunk *c = a->head; c;) {
        chunk *prev = c->prev;
        chunk_free(a, c);
        c = prev;
    }
    tr_free(a);
}

void *tr_arena_alloc(tr_arena *a, size_t bytes) {
    size_t need = (bytes + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN;
    if (need == 0) need = TR_ALIGN;
    chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        /* Grow geometrically so a first step needs few chunks; reset coalesces them. */
        size_t size = a->capacity > need ? a->capacity : need;
        if (size < (1u << 20)) size = 1u << 20;
        chunk *n = chunk_new(a, size);
        if (!n) {
            if (a->mem.alloc) /* the allocator's message names the device */
                tr_error_prefix("arena: growing by %zu bytes (%zu in use): ", size, a->used);
            else
                tr_error_set(TR_ERR_NOMEM, "arena: out of memory growing by %zu bytes (%zu in use)", size, a->used);
            return NULL;
        }
        n->prev = c;
        a->head = n;
        a->capacity += size;
        c = n;
    }
    void *p = c->base + c->used;
    c->used += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

void *tr_arena_calloc(tr_arena *a, size_t bytes) {
    void *p = tr_arena_alloc(a, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void tr_arena_reset(tr_arena *a) {
    if (a->head && a->head->prev) {
        /* More than one chunk: replace them by one that holds the peak. Host memory: allocate
         * it first and keep the chain if that fails, which still works. Device memory: free
         * the chain first, so the device never holds both (if the one chunk then cannot be
         * had, the next step grows the arena again). */
        size_t size = a->capacity > a->peak ? a->capacity : a->peak;
        chunk *one = a->mem.alloc ? NULL : chunk_new(a, size);
        if (one || a->mem.alloc) {
            for (chunk *c = a->head; c;) {
                chunk *prev = c->prev;
                chunk_free(a, c);
                c = prev;
            }
            if (!one) one = chunk_new(a, size);
            a->head = one;
            a->capacity = one ? one->size : 0;
        }
    }
    for (chunk *c = a->head; c; c = c->prev) c->used = 0;
    a->used = 0;
}

size_t tr_arena_used(const tr_arena *a) { return a->used; }
size_t tr_arena_peak(const tr_arena *a) { return a->peak; }
size_t tr_arena_capacity(const tr_arena *a) { return a->capacity; }
