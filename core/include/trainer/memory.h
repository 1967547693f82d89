/* Heap allocation through the core, counted, and the arena for per-step memory.
 *
 *   tr_arena *a;
 *   TR_CHECK(tr_arena_create(&a, 1 << 20));
 *   for (step = 0; step < n; step++) {
 *       tr_arena_reset(a);                      // everything from the last step is gone
 *       float *x = tr_arena_alloc(a, 4096 * sizeof(float));
 *       ...
 *   }
 *   tr_arena_destroy(a);
 *
 * The arena hands out 64-byte aligned blocks by bumping a pointer. When a step needs more
 * than the arena holds it chains another chunk; the next reset replaces the chain with one
 * chunk of the peak size, so from the second step on a step of the same shape allocates
 * nothing from the heap. tr_alloc_count() counts every heap allocation made by the core,
 * which tests use to prove the steady state allocates nothing. */
#ifndef TRAINER_MEMORY_H
#define TRAINER_MEMORY_H

#include "trainer/export.h"

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TR_ALIGN 64

/* 64-byte aligned heap memory; NULL (with tr_error_msg set) on failure. Free with tr_free. */
TR_API void *tr_malloc(size_t bytes);
TR_API void *tr_calloc(size_t count, size_t size);
TR_API void tr_free(void *ptr);
/* Number of tr_malloc/tr_calloc calls made so far, process-wide. */
TR_API uint64_t tr_alloc_count(void);

/* Page-backed memory for buffers whose parts come and go (ZeRO shards: a layer's parameters
 * exist only while it runs). tr_pages_alloc maps zero-filled pages; tr_pages_discard gives
 * the whole pages inside [p, p + bytes) back to the system (they read as zero afterwards and
 * cost nothing until written); tr_pages_resident counts the bytes of [p, p + bytes) whose
 * pages are in memory now (whole pages, so a measurement rounds up to page size). */
TR_API void *tr_pages_alloc(size_t bytes);
TR_API void tr_pages_free(void *p, size_t bytes);
/* Returns the bytes released (whole pages inside the range; partial pages are kept). */
TR_API size_t tr_pages_discard(void *p, size_t bytes);
TR_API size_t tr_pages_resident(const void *p, size_t bytes);
TR_API size_t tr_page_size(void);

typedef struct tr_arena tr_arena;

TR_API tr_status tr_arena_create(tr_arena **out, size_t initial_bytes);
/* Where an arena's chunks come from when they are not host heap memory: a device's memory
 * (trainer/accel.h). The arena then only does pointer arithmetic on the chunks and never
 * touches their bytes: tr_arena_calloc is for host arenas only. */
typedef struct tr_arena_memory {
    tr_status (*alloc)(void *user, size_t bytes, void **out);
    void (*free)(void *user, void *p, size_t bytes);
    void *user;
} tr_arena_memory;
/* An arena whose chunks come from mem (copied; NULL: the host heap, as tr_arena_create). */
TR_API tr_status tr_arena_create_on(tr_arena **out, size_t initial_bytes, const tr_arena_memory *mem);
TR_API void tr_arena_destroy(tr_arena *arena);
/* 64-byte aligned, uninitialised; NULL (with message) when memory runs out. */
TR_API void *tr_arena_alloc(tr_arena *arena, size_t bytes);
/* As tr_arena_alloc, zero-filled. */
TR_API void *tr_arena_calloc(tr_arena *arena, size_t bytes);
/* Releases everything allocated since the last reset. */
TR_API void tr_arena_reset(tr_arena *arena);
TR_API size_t tr_arena_used(const tr_arena *arena);
/* Largest number of bytes in use at once since creation. */
TR_API size_t tr_arena_peak(const tr_arena *arena);
TR_API size_t tr_arena_capacity(const tr_arena *arena);

#ifdef __cplusplus
}
#endif
#endif
