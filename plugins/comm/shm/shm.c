/* Communication backend `shm`: the ranks of one host over one POSIX shared-memory segment.
 *
 * Rendezvous: rank 0 creates /trainer-<job id>, the others open it; once all have mapped it,
 * rank 0 unlinks the name, so the memory goes away with the last process whatever way it
 * ends (a crash of any rank leaves nothing in /dev/shm). Space is reserved with
 * posix_fallocate so a full /dev/shm is an error at join, never a SIGBUS later.
 *
 * Layout: a header, one cache line per rank (barrier counter, pid, current operation), two
 * sets of data slots (one slot per rank plus a result slot, `chunk_kb` each), and a ring per
 * ordered pair of ranks for send/recv. Payloads go through in chunks; each chunk is "write
 * my slot, barrier, read" and the two sets alternate, so one barrier per phase suffices: a
 * set is rewritten only after a barrier that every rank reaches after reading it.
 *
 * Shared memory for the caller (alloc, tr_comm_alloc): one more segment per rank and
 * allocation, named /trainer-<job id>-<rank>-m<n>, mapped by every rank and unlinked at once.
 * An in-place all-reduce whose buffers all lie in such segments skips the slots: each rank
 * reduces its share straight from the peers' buffers and writes the sums into theirs. So do
 * an in-place reduce-scatter (each rank reduces its part from the peers' buffers into its
 * own) and all-gather (each copies the others' parts from their buffers).
 *
 * Algorithms: all-reduce = a reduce-scatter plus an all-gather with all ranks working in
 * parallel: each rank publishes the parts of its chunk the others reduce, reduces its own
 * 1/W from its buffer and their slots into its output and the result slot, then copies the
 * other parts of the result out; reduce-scatter reduces each rank's part
 * straight into its output; broadcast, gather, scatter and all-gather are one copy in and one
 * copy out per chunk. The barrier is a counter per rank (own cache line): waiting reads the
 * others', so a timeout names exactly the ranks that did not arrive. Waits spin briefly, then
 * sleep on a futex in the segment that every arrival bumps (ranks may outnumber cores, and a
 * waiting rank must not steal a computing rank's core); between naps (2 ms at most) they
 * check the deadline, the abort flag and whether each peer process still exists. */
#define _GNU_SOURCE
#include "shm_impl.h"

/* A new segment `name` of `size` bytes (a crashed run's of that name removed first), reserved
 * and mapped into *p. 0, or the errno with *what the step that failed (then the name is gone);
 * the caller unlinks the name once every rank has mapped it. */
static int seg_create(const char *name, size_t size, void **p, const char **what) {
    *p = NULL;
    shm_unlink(name);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600), e = 0;
    if (fd < 0) {
        *what = "create";
        return errno;
    }
    void *m = MAP_FAILED;
    if ((e = posix_fallocate(fd, 0, (off_t)size))) *what = "reserve";
    else if ((m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        e = errno;
        *what = "map";
    }
    close(fd);
    if (e) shm_unlink(name);
    else *p = m;
    return e;
}

/* Maps the existing segment `name` whole into *p (*size its bytes); 0 or the errno. */
static int seg_open(const char *name, size_t *size, void **p) {
    *p = NULL;
    int fd = shm_open(name, O_RDWR, 0600), e = 0;
    if (fd < 0) return errno;
    struct stat sb;
    void *m = MAP_FAILED;
    if (fstat(fd, &sb) != 0) e = errno;
    else if (sb.st_size <= 0) e = EAGAIN; /* not sized yet */
    else if ((m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) e = errno;
    close(fd);
    if (!e) {
        *p = m;
        *size = (size_t)sb.st_size;
    }
    return e;
}

static void mem_name(const shm *s, int r, uint32_t id, char *buf, size_t size) {
    snprintf(buf, size, "%s-%d-m%u", s->name, r, (unsigned)id);
}

static void region_release(shm *s, region *g, size_t size) {
    for (int q = 0; g->base && q < s->world; q++)
        if (g->base[q]) munmap(g->base[q], size);
    tr_free(g->base);
    *g = (region){0};
}

/* Each rank makes a segment of its own, all map all: three barriers, every rank the same way
 * whatever fails (then every rank returns NULL and the core gives plain memory). Names are
 * unlinked once all have mapped them. Region ids are never reused: past MAX_REGIONS allocs
 * in a communicator's life, or past MAX_SHARED_WORLD ranks, memory is plain. */
static tr_status mem_alloc(void *ctx, size_t bytes, double deadline, void **out) {
    shm *s = ctx;
    *out = NULL;
    uint32_t id = s->made++;
    if (id >= MAX_REGIONS || s->world == 1 || s->world > MAX_SHARED_WORLD) return TR_OK;
    region *g = &s->regions[id];
    size_t size = round_up(bytes, 4096);
    char name[200];
    const char *what;
    g->base = tr_calloc((size_t)s->world, sizeof *g->base);
    mem_name(s, s->rank, id, name, sizeof name);
    int me = s->rank, ok = g->base && seg_create(name, size, (void **)&g->base[me], &what) == 0, made = ok;
    s->activity = "alloc";
    s->ranks[me].mem_ok = ok;
    tr_status st = shm_barrier(s, deadline);
    for (int q = 0; st == TR_OK && q < s->world; q++) ok &= s->ranks[q].mem_ok;
    for (int q = 0; st == TR_OK && ok && q < s->world; q++) {
        if (q == me) continue;
        char peer[200];
        size_t got = 0;
        mem_name(s, q, id, peer, sizeof peer);
        void *p;
        if (seg_open(peer, &got, &p) == 0 && got == size) g->base[q] = p;
        else ok = 0;
        if (p && got != size) munmap(p, got);
    }
    s->ranks[me].mem_ok = ok;
    if (st == TR_OK) st = shm_barrier(s, deadline);
    if (made) shm_unlink(name);
    for (int q = 0; st == TR_OK && q < s->world; q++) ok &= s->ranks[q].mem_ok;
    /* Once more, so that no rank's next alloc rewrites mem_ok before every rank has read it. */
    if (st == TR_OK) st = shm_barrier(s, deadline);
    s->activity = "joining";
    if (st != TR_OK || !ok) {
        region_release(s, g, size);
        return st;
    }
    g->bytes = size;
    *out = g->base[me];
    return TR_OK;
}

static void mem_free(void *ctx, void *ptr) {
    shm *s = ctx;
    for (uint32_t id = 0; id < s->made && id < MAX_REGIONS; id++)
        if (s->regions[id].bytes && s->regions[id].base[s->rank] == ptr) {
            region_release(s, &s->regions[id], s->regions[id].bytes);
            return;
        }
}

static void destroy(void *ctx) {
    shm *s = ctx;
    if (!s) return;
    for (uint32_t id = 0; id < s->made && id < MAX_REGIONS; id++)
        if (s->regions[id].bytes) region_release(s, &s->regions[id], s->regions[id].bytes);
    if (s->rank == 0 && !s->unlinked && s->name[0]) shm_unlink(s->name);
    if (s->base) munmap(s->base, s->size);
    tr_free(s);
}

static void abort_all(void *ctx) {
    shm *s = ctx;
    int32_t none = 0;
    atomic_compare_exchange_strong(&s->h->abort_by, &none, s->rank + 1);
    shm_notify(s);
}

static void layout(shm *s, size_t total_hint) {
    size_t W = (size_t)s->world, off = round_up(sizeof(shm_header), LINE);
    (void)total_hint;
    s->h = (shm_header *)s->base;
    s->ranks = (shm_rank *)(s->base + off);
    off += W * sizeof(shm_rank);
    s->chans = (shm_chan *)(s->base + off);
    off += W * W * sizeof(shm_chan);
    off = round_up(off, 4096);
    s->p2p = s->base + off;
    off += W * W * s->p2p_bytes;
    s->data = s->base + round_up(off, 4096);
}

static size_t total_size(size_t W, size_t chunk, size_t p2p) {
    size_t off = round_up(sizeof(shm_header), LINE) + W * sizeof(shm_rank) + W * W * sizeof(shm_chan);
    off = round_up(off, 4096) + W * W * p2p;
    return round_up(off, 4096) + 2 * (W + 1) * chunk;
}

static tr_status join(shm *s, double deadline) {
    if (s->rank == 0) {
        const char *what = "";
        void *p;
        int e = seg_create(s->name, s->size, &p, &what);
        if (e && !strcmp(what, "reserve"))
            return tr_error_set(TR_ERR_COMM, "cannot reserve %zu bytes of shared memory for %s: %s (is /dev/shm "
                                             "large enough? lower chunk_kb)", s->size, s->name, strerror(e));
        if (e) return tr_error_set(TR_ERR_COMM, "cannot %s shared memory %s: %s", what, s->name, strerror(e));
        s->base = p;
        layout(s, s->size);
        s->h->magic = SHM_MAGIC;
        s->h->world = (uint32_t)s->world;
        s->h->creator_pid = (uint32_t)getpid();
        s->h->chunk_bytes = s->chunk;
        s->h->p2p_bytes = s->p2p_bytes;
        s->h->total_bytes = s->size;
        atomic_store(&s->ranks[0].pid, (int32_t)getpid());
        atomic_store(&s->h->attached, 1);
        atomic_store_explicit(&s->h->ready, 1, memory_order_release);
    } else {
        for (;;) {
            size_t got;
            void *p;
            if (seg_open(s->name, &got, &p) == 0) {
                shm_header *h = p;
                if (got >= sizeof(shm_header) && atomic_load_explicit(&h->ready, memory_order_acquire) &&
                    h->magic == SHM_MAGIC && !tr_process_gone((int)h->creator_pid)) {
                    if (h->world != (uint32_t)s->world || h->total_bytes != (uint64_t)got || h->chunk_bytes != s->chunk ||
                        h->p2p_bytes != s->p2p_bytes) {
                        unsigned hw = h->world;
                        munmap(p, got);
                        return tr_error_set(TR_ERR_COMM, "%s was made for %u ranks (or other chunk_kb/p2p_kb), "
                                                         "this rank expects %d", s->name, hw, s->world);
                    }
                    s->base = p;
                    break;
                }
                munmap(p, got);
            }
            if (tr_now() > deadline)
                return tr_error_set(TR_ERR_TIMEOUT, "timed out joining: rank 0 never created %s", s->name);
            nanosleep(&(struct timespec){0, 2000000}, NULL);
        }
        layout(s, s->size);
        atomic_store(&s->ranks[s->rank].pid, (int32_t)getpid());
        atomic_fetch_add(&s->h->attached, 1);
    }
    /* Everyone mapped: the name can go (rank 0), nothing outlives the processes. */
    while (atomic_load(&s->h->attached) < s->world) {
        if (tr_now() > deadline) {
            char missing[256] = "";
            size_t len = 0;
            for (int r = 0; r < s->world && len < sizeof missing - 16; r++)
                if (!atomic_load(&s->ranks[r].pid)) len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", r);
            return tr_error_set(TR_ERR_TIMEOUT, "timed out joining %s: these ranks never joined: %s", s->name, missing);
        }
        if (s->rank != 0 && tr_process_gone((int)s->h->creator_pid))
            return tr_error_set(TR_ERR_COMM, "rank 0 (pid %u) died while the job was joining", s->h->creator_pid);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (s->rank == 0) {
        shm_unlink(s->name);
        s->unlinked = 1;
    }
    return TR_OK;
}

static tr_status create(void **ctx, const tr_options *o, const tr_comm_env *env, double deadline) {
    *ctx = NULL;
    shm *s = tr_calloc(1, sizeof *s);
    if (!s) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    s->rank = env->rank;
    s->world = env->size;
    if (env->local_size != env->size) {
        tr_free(s);
        return tr_error_set(TR_ERR_UNSUPPORTED, "shm joins ranks of one host: this job spans hosts (%d ranks, %d "
                                                "here); across hosts use strategy.backend mpi (nccl for GPU ranks) with "
                                                "ranks that mpirun or srun started", env->size, env->local_size);
    }
    size_t W = (size_t)s->world, pairs = W * W;
    s->chunk = round_up((size_t)tr_options_int(o, "chunk_kb") * 1024, 4096);
    s->p2p_bytes = round_up((size_t)tr_options_int(o, "p2p_kb") * 1024, 4096);
    s->spin_s = (double)tr_options_int(o, "spin_us") * 1e-6;
    s->activity = "joining";
    /* Keep the segment modest with many ranks (container /dev/shm is often 64 MiB). */
    while (s->p2p_bytes > 4096 && pairs * s->p2p_bytes > ((size_t)32 << 20)) s->p2p_bytes /= 2;
    while (s->chunk > 65536 && 2 * (W + 1) * s->chunk > ((size_t)128 << 20)) s->chunk /= 2;
    s->size = total_size(W, s->chunk, s->p2p_bytes);
    snprintf(s->name, sizeof s->name, "/trainer-%s", env->job_id[0] ? env->job_id : "job");
    tr_status st = join(s, deadline);
    if (st != TR_OK) {
        destroy(s);
        return st;
    }
    *ctx = s;
    return TR_OK;
}

static const tr_option_spec opts[] = {
    {.key = "chunk_kb", .type = TR_OPTION_INT, .default_value = "256", .min = 4, .max = 1 << 20,
     .doc = "per-rank staging slot in KiB: payloads move in chunks of this size"},
    {.key = "p2p_kb", .type = TR_OPTION_INT, .default_value = "256", .min = 4, .max = 1 << 20,
     .doc = "ring per ordered pair of ranks for send/recv, KiB"},
    {.key = "spin_us", .type = TR_OPTION_INT, .default_value = "200", .min = 0, .max = 10000000,
     .doc = "busy-wait (yielding) this long for peers before sleeping, microseconds"},
};
static const tr_comm_backend_ops ops = {
    .create = create, .destroy = destroy, .run = shm_run, .abort = abort_all, .alloc = mem_alloc, .free = mem_free};
static const tr_plugin_desc desc = {
    TR_PLUGIN_DESC_HEADER, .kind = TR_PLUGIN_COMM, .name = "shm", .version = "0.1.0",
    .description = "ranks on one host over POSIX shared memory (the CPU default)",
    .options = opts, .n_options = sizeof opts / sizeof opts[0], .ops = &ops, .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
