/* The shm backend's operations: all-reduce as a reduce-scatter plus an all-gather with all
 * ranks working at once, chunk by chunk through the data slots (two sets alternate, one
 * barrier per phase), or straight from the peers' buffers when they lie in shared
 * allocations; reduce-scatter, all-gather, broadcast, gather, scatter, send and recv. */
#define _GNU_SOURCE
#include "shm_impl.h"

/* [lo, hi) of m elements for rank r: W blocks aligned to a cache line. */
static void part(size_t m, size_t es, int r, int world, size_t *lo, size_t *hi) {
    size_t align = LINE / es ? LINE / es : 1, blk = round_up((m + (size_t)world - 1) / (size_t)world, align);
    *lo = blk * (size_t)r < m ? blk * (size_t)r : m;
    *hi = *lo + blk < m ? *lo + blk : m;
}

/* Reduces [lo, hi) over every rank's slot of `set` into dst. */
static void reduce_slots(shm *s, int set, size_t lo, size_t hi, size_t es, tr_dtype dt, tr_red_op op, uint8_t *dst,
                         size_t slot_off) {
    if (hi <= lo) return;
    size_t n = hi - lo, off = slot_off + lo * es;
    if (s->world == 1) {
        memmove(dst, shm_slot(s, set, 0) + off, n * es);
        return;
    }
    tr_reduce2(dst, shm_slot(s, set, 0) + off, shm_slot(s, set, 1) + off, n, dt, op);
    for (int r = 2; r < s->world; r++) tr_reduce_into(dst, shm_slot(s, set, r) + off, n, dt, op);
}

static int next_set(shm *s) { return (int)(s->set++ & 1); }

/* The packed place of [p, p + bytes) inside one of this rank's regions, or 0. */
static uint64_t region_at(const shm *s, const void *ptr, size_t bytes) {
    const uint8_t *p = ptr;
    for (uint32_t id = 0; id < s->made && id < MAX_REGIONS; id++) {
        const region *g = &s->regions[id];
        const uint8_t *b = g->bytes ? g->base[s->rank] : NULL;
        if (b && p >= b && bytes <= g->bytes && (size_t)(p - b) <= g->bytes - bytes)
            return ((uint64_t)(id + 1) << REGION_SHIFT) | (uint64_t)(p - b);
    }
    return 0;
}

/* The packed place of an in-place buffer inside one of this rank's regions, or 0. */
static uint64_t shared_at(const shm *s, const void *send, const void *recv, size_t bytes) {
    return send == recv ? region_at(s, recv, bytes) : 0;
}

/* Every rank's published buffer of `bytes` as mapped in this process. */
static tr_status peer_buffers(shm *s, size_t bytes, uint8_t **buf) {
    for (int q = 0; q < s->world; q++) {
        uint64_t at = s->ranks[q].in_place;
        uint32_t id = (uint32_t)(at >> REGION_SHIFT) - 1;
        size_t off = (size_t)(at & (((uint64_t)1 << REGION_SHIFT) - 1));
        const region *g = id < MAX_REGIONS ? &s->regions[id] : NULL;
        if (!g || !g->bytes || off > g->bytes || bytes > g->bytes - off)
            return tr_error_set(TR_ERR_COMM, "rank %d's buffer lies in shared memory this rank does not hold (freed here, "
                                             "or allocated in another order)", q);
        buf[q] = g->base[q] + off;
    }
    return TR_OK;
}

/* Every rank's buffer in its region (all in place): each rank reduces its 1/W straight from
 * the peers' buffers into its own and writes the result into theirs, a block at a time so the
 * copies read it from L1; one barrier at the end. About 2 bytes of memory traffic per byte
 * reduced, half the staged path's, and no barrier per chunk. */
static tr_status all_reduce_shared(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), n = k->count, lo, hi;
    uint8_t *buf[MAX_SHARED_WORLD];
    TR_CHECK(peer_buffers(s, n * es, buf));
    /* Each rank owns the parts of each staging-sized chunk that it owns in the staged path,
     * so the sums are the same bits whichever path runs. */
    const size_t C = s->chunk / es, blk = 16384 / es;
    uint8_t *mine = buf[s->rank];
    for (size_t off = 0; off < n; off += C) {
        part(n - off < C ? n - off : C, es, s->rank, s->world, &lo, &hi);
        for (size_t i = off + lo; i < off + hi; i += blk) {
            size_t len = off + hi - i < blk ? off + hi - i : blk;
            for (int q = 0; q < s->world; q++)
                if (q != s->rank) tr_reduce_into(mine + i * es, buf[q] + i * es, len, k->dtype, k->op);
            for (int q = 0; q < s->world; q++)
                if (q != s->rank) memcpy(buf[q] + i * es, mine + i * es, len * es);
        }
    }
    return shm_barrier(s, dl);
}

/* Publishes the parts of chunk [in, in + m) that the others reduce (not my own: I read it
 * from my buffer). */
static void stage_parts(shm *s, int set, const uint8_t *in, size_t m, size_t es) {
    for (int q = 0; q < s->world; q++) {
        size_t lo, hi;
        if (q == s->rank) continue;
        part(m, es, q, s->world, &lo, &hi);
        if (hi > lo) memcpy(shm_slot(s, set, s->rank) + lo * es, in + lo * es, (hi - lo) * es);
    }
}

/* Per chunk: publish the parts the others reduce, barrier, reduce my part from my buffer and
 * their slots straight into my output and into the result slot, barrier, copy the others'
 * parts out of the result slot. About 4 bytes of memory traffic per byte reduced, against 2
 * for a memcpy.
 *
 * Once the job has allocated shared memory (s->made is the same on every rank), each rank
 * also says at the first chunk's barrier where its buffer lies in it and how many elements
 * it reduces; a rank whose buffer lies there stages nothing before it. After the barrier every
 * rank reads the same answers: all in shared memory with one count, the direct path; else
 * the ranks that staged nothing stage their chunk now and everyone meets once more (none: no
 * extra barrier). A rank whose count differs (a contract broken, or the fault point that dies
 * half-way) thus stays on the staged path, where its peers wait for the rest as they would for
 * a death inside the call. The
 * answers are read before a barrier that every rank reaches afterwards (the chunk's second one,
 * or the direct path's), so the next call cannot overwrite them too early; a call of no
 * elements has no such barrier and never asks. */
static tr_status all_reduce(shm *s, const tr_comm_call *k, double dl, int to_all) {
    size_t es = tr_dtype_size(k->dtype), C = s->chunk / es;
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv;
    int me = s->rank, out = to_all || me == k->root, staged = 0, set = 0;
    if (to_all && s->made && k->count) {
        uint64_t at = shared_at(s, k->send, k->recv, k->count * es);
        size_t m = k->count < C ? k->count : C;
        s->ranks[me].in_place = at;
        s->ranks[me].in_count = k->count;
        set = next_set(s);
        if (!at) stage_parts(s, set, src, m, es);
        TR_CHECK(shm_barrier(s, dl));
        int all = 1, any = 0;
        for (int q = 0; q < s->world; q++) {
            all &= s->ranks[q].in_place != 0 && s->ranks[q].in_count == k->count;
            any |= s->ranks[q].in_place != 0;
        }
        if (all) return all_reduce_shared(s, k, dl);
        if (any) {
            if (at) stage_parts(s, set, src, m, es);
            TR_CHECK(shm_barrier(s, dl));
        }
        staged = 1; /* the first chunk is published, its first barrier passed */
    }
    for (size_t off = 0; off < k->count; off += C) {
        size_t m = k->count - off < C ? k->count - off : C, lo, hi;
        const uint8_t *in = src + off * es;
        if (!staged) {
            set = next_set(s);
            stage_parts(s, set, in, m, es);
            TR_CHECK(shm_barrier(s, dl));
        }
        staged = 0;
        part(m, es, me, s->world, &lo, &hi);
        uint8_t *res = shm_slot(s, set, s->world);
        if (hi > lo) {
            size_t len = hi - lo;
            uint8_t *acc = out ? dst + (off + lo) * es : res + lo * es;
            int first = 1;
            for (int q = 0; q < s->world; q++) {
                if (q == me) continue;
                if (first) tr_reduce2(acc, in + lo * es, shm_slot(s, set, q) + lo * es, len, k->dtype, k->op);
                else tr_reduce_into(acc, shm_slot(s, set, q) + lo * es, len, k->dtype, k->op);
                first = 0;
            }
            if (out) memcpy(res + lo * es, acc, len * es);
        }
        TR_CHECK(shm_barrier(s, dl));
        if (!out) continue;
        for (int q = 0; q < s->world; q++) {
            if (q == me) continue;
            part(m, es, q, s->world, &lo, &hi);
            if (hi > lo) memcpy(dst + (off + lo) * es, res + lo * es, (hi - lo) * es);
        }
    }
    return TR_OK;
}

/* In-place reduce-scatter and all-gather (NCCL's layout: rank r's part at r * count of a
 * buffer of W count elements) once the job has allocated shared memory: each rank says at a
 * first barrier where its whole buffer lies (mine; NULL: not in place) and its count. When
 * every rank's lies in shared memory with one count, buf gets them all as mapped here and
 * *direct is 1; else the caller goes the staged way, whose first barrier every rank reaches
 * after reading the answers. */
static tr_status meet_in_place(shm *s, const void *mine, size_t count, size_t es, double dl, uint8_t **buf, int *direct) {
    *direct = 0;
    if (!s->made || !count) return TR_OK;
    s->ranks[s->rank].in_place = mine ? region_at(s, mine, count * es * (size_t)s->world) : 0;
    s->ranks[s->rank].in_count = count;
    TR_CHECK(shm_barrier(s, dl));
    for (int q = 0; q < s->world; q++)
        if (!s->ranks[q].in_place || s->ranks[q].in_count != count) return TR_OK;
    TR_CHECK(peer_buffers(s, count * es * (size_t)s->world, buf));
    *direct = 1;
    return TR_OK;
}

/* Every buffer in shared memory: each rank reduces its part straight from the peers' buffers,
 * a block at a time through L1 in rank order (the staged path's order, so the same bits), into
 * its own; one barrier at the end, after which the peers may write their buffers again. */
static tr_status reduce_scatter_shared(shm *s, const tr_comm_call *k, uint8_t **buf, double dl) {
    enum { BLOCK = 16384 };
    _Alignas(LINE) uint8_t acc[BLOCK];
    size_t es = tr_dtype_size(k->dtype), n = k->count, blk = BLOCK / es, at = (size_t)s->rank * n * es;
    for (size_t i = 0; i < n; i += blk) {
        size_t len = n - i < blk ? n - i : blk, off = at + i * es;
        tr_reduce2(acc, buf[0] + off, buf[1] + off, len, k->dtype, k->op);
        for (int q = 2; q < s->world; q++) tr_reduce_into(acc, buf[q] + off, len, k->dtype, k->op);
        memcpy(buf[s->rank] + off, acc, len * es);
    }
    return shm_barrier(s, dl);
}

static tr_status reduce_scatter(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), C = s->chunk / es / (size_t)s->world, n = k->count;
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv;
    if (C == 0) return tr_error_set(TR_ERR_INVALID, "chunk_kb too small for %d ranks", s->world);
    uint8_t *buf[MAX_SHARED_WORLD];
    int direct;
    TR_CHECK(meet_in_place(s, dst == src + (size_t)s->rank * n * es ? src : NULL, n, es, dl, buf, &direct));
    if (direct) return reduce_scatter_shared(s, k, buf, dl);
    for (size_t off = 0; off < n; off += C) {
        size_t m = n - off < C ? n - off : C;
        int set = next_set(s);
        uint8_t *mine = shm_slot(s, set, s->rank);
        for (int r = 0; r < s->world; r++) memcpy(mine + (size_t)r * m * es, src + ((size_t)r * n + off) * es, m * es);
        TR_CHECK(shm_barrier(s, dl));
        reduce_slots(s, set, 0, m, es, k->dtype, k->op, dst + off * es, (size_t)s->rank * m * es);
    }
    return TR_OK;
}

/* Every buffer in shared memory: each rank copies the others' parts straight from their
 * buffers into its own; one barrier at the end, after which the owners may change them. */
static tr_status all_gather_shared(shm *s, const tr_comm_call *k, uint8_t **buf, double dl) {
    size_t part = k->count * tr_dtype_size(k->dtype);
    for (int q = 0; q < s->world; q++)
        if (q != s->rank) memcpy(buf[s->rank] + (size_t)q * part, buf[q] + (size_t)q * part, part);
    return shm_barrier(s, dl);
}

/* broadcast, gather, all_gather, scatter: one copy in, one barrier, copies out. */
static tr_status move(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), n = k->count, W = (size_t)s->world, r0 = (size_t)k->root;
    size_t C = s->chunk / es / (k->kind == TR_COMM_SCATTER ? W : 1);
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv;
    int me = s->rank;
    for (size_t off = 0; off < n; off += C) {
        size_t m = n - off < C ? n - off : C;
        int set = next_set(s);
        switch (k->kind) {
        case TR_COMM_BROADCAST:
            if (me == k->root) memcpy(shm_slot(s, set, me), dst + off * es, m * es);
            break;
        case TR_COMM_SCATTER:
            if (me == k->root)
                for (size_t r = 0; r < W; r++) memcpy(shm_slot(s, set, me) + r * m * es, src + (r * n + off) * es, m * es);
            break;
        default: memcpy(shm_slot(s, set, me), src + off * es, m * es); break;
        }
        TR_CHECK(shm_barrier(s, dl));
        switch (k->kind) {
        case TR_COMM_BROADCAST:
            if (me != k->root) memcpy(dst + off * es, shm_slot(s, set, (int)r0), m * es);
            break;
        case TR_COMM_SCATTER:
            memcpy(dst + off * es, shm_slot(s, set, (int)r0) + (size_t)me * m * es, m * es);
            break;
        case TR_COMM_GATHER:
            if (me != k->root) break;
            /* fall through */
        default:
            for (size_t r = 0; r < W; r++) memcpy(dst + (r * n + off) * es, shm_slot(s, set, (int)r), m * es);
            break;
        }
    }
    /* The last chunk's readers must finish before a later point-to-point or single-phase
     * operation could reuse the set two chunks on: guaranteed by the next operation's first
     * barrier, which every collective has before it writes a set it shares. */
    return TR_OK;
}

/* In place in communicator memory on every rank: the direct path; else move's copies. */
static tr_status all_gather(shm *s, const tr_comm_call *k, double dl) {
    size_t es = tr_dtype_size(k->dtype), n = k->count;
    const uint8_t *src = k->send;
    uint8_t *dst = k->recv, *buf[MAX_SHARED_WORLD];
    int direct;
    TR_CHECK(meet_in_place(s, src == dst + (size_t)s->rank * n * es ? dst : NULL, n, es, dl, buf, &direct));
    return direct ? all_gather_shared(s, k, buf, dl) : move(s, k, dl);
}

static tr_status send_bytes(shm *s, int peer, const uint8_t *p, size_t n, double dl) {
    shm_chan *ch = &s->chans[(size_t)s->rank * (size_t)s->world + (size_t)peer];
    uint8_t *ring = s->p2p + ((size_t)s->rank * (size_t)s->world + (size_t)peer) * s->p2p_bytes;
    uint64_t w = atomic_load_explicit(&ch->written, memory_order_relaxed);
    while (n) {
        uint64_t rd;
        WAIT_UNTIL(s, (rd = atomic_load_explicit(&ch->read, memory_order_acquire), w - rd < s->p2p_bytes), dl,
                   UINT64_MAX, peer);
        size_t at = (size_t)(w % s->p2p_bytes), room = s->p2p_bytes - (size_t)(w - rd);
        size_t len = n < room ? n : room;
        if (len > s->p2p_bytes - at) len = s->p2p_bytes - at;
        memcpy(ring + at, p, len);
        w += len;
        p += len;
        n -= len;
        atomic_store_explicit(&ch->written, w, memory_order_release);
        shm_notify(s);
    }
    return TR_OK;
}

static tr_status recv_bytes(shm *s, int peer, uint8_t *p, size_t n, double dl) {
    shm_chan *ch = &s->chans[(size_t)peer * (size_t)s->world + (size_t)s->rank];
    uint8_t *ring = s->p2p + ((size_t)peer * (size_t)s->world + (size_t)s->rank) * s->p2p_bytes;
    uint64_t rd = atomic_load_explicit(&ch->read, memory_order_relaxed);
    while (n) {
        uint64_t w;
        WAIT_UNTIL(s, (w = atomic_load_explicit(&ch->written, memory_order_acquire), w > rd), dl, UINT64_MAX, peer);
        size_t at = (size_t)(rd % s->p2p_bytes), len = (size_t)(w - rd) < n ? (size_t)(w - rd) : n;
        if (len > s->p2p_bytes - at) len = s->p2p_bytes - at;
        memcpy(p, ring + at, len);
        rd += len;
        p += len;
        n -= len;
        atomic_store_explicit(&ch->read, rd, memory_order_release);
        shm_notify(s);
    }
    return TR_OK;
}

tr_status shm_run(void *ctx, const tr_comm_op *op) {
    shm *s = ctx;
    const tr_comm_call *k = &op->call;
    s->op = op;
    atomic_store_explicit(&s->ranks[s->rank].seq, op->seq, memory_order_relaxed);
    size_t bytes = k->count * tr_dtype_size(k->dtype);
    tr_status st = TR_OK;
    if (s->world == 1) { /* nothing to exchange */
        if (k->kind == TR_COMM_SCATTER || k->kind == TR_COMM_GATHER || k->kind == TR_COMM_ALL_GATHER ||
            k->kind == TR_COMM_ALL_REDUCE || k->kind == TR_COMM_REDUCE || k->kind == TR_COMM_REDUCE_SCATTER)
            if (bytes && k->recv != k->send) memmove(k->recv, k->send, bytes);
        s->op = NULL;
        return TR_OK;
    }
    switch (k->kind) {
    case TR_COMM_BARRIER: st = shm_barrier(s, op->deadline); break;
    case TR_COMM_SEND: st = send_bytes(s, k->root, k->send, bytes, op->deadline); break;
    case TR_COMM_RECV: st = recv_bytes(s, k->root, k->recv, bytes, op->deadline); break;
    case TR_COMM_ALL_REDUCE: st = all_reduce(s, k, op->deadline, 1); break;
    case TR_COMM_REDUCE: st = all_reduce(s, k, op->deadline, 0); break;
    case TR_COMM_REDUCE_SCATTER: st = reduce_scatter(s, k, op->deadline); break;
    case TR_COMM_BROADCAST:
    case TR_COMM_GATHER:
    case TR_COMM_SCATTER: st = move(s, k, op->deadline); break;
    case TR_COMM_ALL_GATHER: st = all_gather(s, k, op->deadline); break;
    default: st = tr_error_set(TR_ERR_UNSUPPORTED, "operation %d", (int)k->kind); break;
    }
    s->op = NULL;
    return st;
}
