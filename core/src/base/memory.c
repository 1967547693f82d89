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

/* The arena's chunks, kept in the order they were made and refilled in that order after each
 * reset: the memory the first step grew into stays mapped and faulted in, where replacing the
 * chain by one new chunk made the second step fault every page in again (418k page faults, a
 * tenth of an all-MiniLM-L6-v2 embedding run, docs/benchmarks-history.md). A step that repeats the
 * allocations of the one before lands on the same addresses, so it never grows. */
typedef struct chunk {
    struct chunk *next;
    char *base;   /* the usable bytes: after this header, or from the arena's allocator */
    size_t size;  /* usable bytes */
    size_t used;
} chunk;

#define CHUNK_HDR ((sizeof(chunk) + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN)

struct tr_arena {
    chunk *first, *last; /* oldest and newest chunk */
    chunk *cur;          /* the chunk allocations come from; those before it are full for this step */
    size_t used;         /* bytes handed out since reset, all chunks */
    size_t peak;
    size_t capacity;     /* usable bytes over all chunks */
    tr_arena_memory mem; /* alloc NULL: chunks are heap memory with their header in front */
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
        a->first = a->last = a->cur = chunk_new(a, initial_bytes);
        if (!a->first) {
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
    for (chunk *c = a->first; c;) {
        chunk *next = c->next;
        chunk_free(a, c);
        c = next;
    }
    tr_free(a);
}

void *tr_arena_alloc(tr_arena *a, size_t bytes) {
    size_t need = (bytes + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN;
    if (need == 0) need = TR_ALIGN;
    chunk *c = a->cur;
    while (c && c->size - c->used < need) c = c->next; /* the rest of a chunk too small is left */
    if (!c) {
        /* Grow geometrically (the new chunk as large as all before it) so a first step needs
         * few chunks, and a step that outgrows the arena grows it a few times at most. */
        size_t size = a->capacity > need ? a->capacity : need;
        if (size < (1u << 20)) size = 1u << 20;
        c = chunk_new(a, size);
        if (!c) {
            if (a->mem.alloc) /* the allocator's message names the device */
                tr_error_prefix("arena: growing by %zu bytes (%zu in use): ", size, a->used);
            else
                tr_error_set(TR_ERR_NOMEM, "arena: out of memory growing by %zu bytes (%zu in use)", size, a->used);
            return NULL;
        }
        if (a->last)
            a->last->next = c;
        else
            a->first = c;
        a->last = c;
        a->capacity += size;
    }
    a->cur = c;
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
    for (chunk *c = a->first; c; c = c->next) c->used = 0;
    a->cur = a->first;
    a->used = 0;
}

size_t tr_arena_used(const tr_arena *a) { return a->used; }
size_t tr_arena_peak(const tr_arena *a) { return a->peak; }
size_t tr_arena_capacity(const tr_arena *a) { return a->capacity; }
