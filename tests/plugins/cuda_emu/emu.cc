/* Test device plugin `cuda_emu`: the CUDA plugin (plugins/devices/cuda: device.c, ops.c and
 * the kernels of kernels.cu) built over a CPU emulator of the CUDA runtime it uses
 * (runtime.h), so that everything but the driver calls and cuBLAS itself is tested where no
 * GPU is: launch geometry, argument packing, the caching allocator, staging, error
 * reporting, and the kernels' arithmetic and reductions against the core's CPU kernels.
 *
 * Devices: TRAINER_CUDA_EMU_GPUS of them (unset: none), each with TRAINER_CUDA_EMU_MIB MiB of
 * memory (default 1024). Memory is host memory, copies are memcpy, every call completes
 * before it returns; kernels run block after block on the calling thread (emu_cuda.h).
 * cu_sgemm_batched is the column-major products cublasSgemmStridedBatched documents, in plain
 * loops (with bf16, on the bf16 roundings of the operands). TRAINER_CUDA_EMU_CC sets the
 * compute capability's major version the devices claim (default 9; below 8 refuses bf16).
 * TRAINER_CUDA_EMU_WAITS set: closing a device prints how often the host waited for queued
 * work (a cu_download or cu_sync with work queued since the last), for tests that count the
 * times a step drains a GPU's queue, and how many copies ran beside the compute stream.
 * Copies beside the compute stream (cu_upload_beside) are checked against the operations
 * queued after the mark they wait for: one of those that used the memory the copy writes (a
 * pointer argument into the same allocation) is an error naming it, the race a GPU would
 * run. */
#include <stdio.h>
#include <stdlib.h>
#include <type_traits>
#include <utility>

#include "emu_cuda.h"
/* The kernels themselves, compiled as C++ against emu_cuda.h. */
#include "../../../plugins/devices/cuda/kernels.cu"
#include "../../../plugins/devices/cuda/probe.h"
#include "../../../plugins/devices/cuda/runtime.h"
#include "trainer/half.h"

thread_local emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
thread_local unsigned char emu_lanes[1024][8];

/* ---- kernels by index: a call unpacking cuLaunchKernel-style arguments ---- */

template <typename... A, size_t... I> static void call_with(void (*f)(A...), void **args, std::index_sequence<I...>) {
    f(*static_cast<A *>(args[I])...);
}
template <typename... A> static void call(void (*f)(A...), void **args) {
    call_with(f, args, std::index_sequence_for<A...>{});
}

/* The device memory a launch's pointer arguments point into (touch_ptr, below). */
static void touch_ptr(const void *p);
template <typename T> static void touch_arg(void *a) {
    if constexpr (std::is_pointer_v<T>) touch_ptr(static_cast<const void *>(*static_cast<T *>(a)));
}
template <typename... A, size_t... I> static void touch_with(void (*)(A...), void **args, std::index_sequence<I...>) {
    (void)args;
    (touch_arg<A>(args[I]), ...);
}
template <typename... A> static void touch_all(void (*f)(A...), void **args) {
    touch_with(f, args, std::index_sequence_for<A...>{});
}

struct emu_kernel {
    void (*fn)(void **);
    void (*touch)(void **);
    int barrier;
    const char *name;
};
#define EMU_THUNK(name, barrier) {[](void **a) { call(name, a); }, [](void **a) { touch_all(name, a); }, barrier, #name},
static const emu_kernel emu_kernels[CUDA_N_KERNELS] = {CUDA_KERNELS(EMU_THUNK)};
#undef EMU_THUNK

/* ---- fibers: the threads of one block of a kernel with barriers ----
 * On x86-64 a fiber switch is six callee-saved registers and the stack pointer (emu_switch,
 * a few nanoseconds: a block reduction is thousands of switches); elsewhere, ucontext. Under
 * AddressSanitizer each switch is announced to it (its fiber interface), so that it knows
 * which stack is live; swapcontext would also do, but it is a system call per switch (the
 * signal mask), which made the emulated GPU tests 17 times slower under ASan. */

enum { FIBER_STACK = 64 << 10 };

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

#if defined(__x86_64__)
#define EMU_ASM_SWITCH 1
/* Saves the callee-saved registers on the current stack and its pointer in *from, then
 * continues on the stack `to` (saved the same way, or prepared by fiber_start). */
extern "C" void emu_switch(void **from, void *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".hidden emu_switch\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, . - emu_switch\n");
#else
#include <ucontext.h>
#endif

struct emu_fiber {
#ifdef EMU_ASM_SWITCH
    void *sp;
#else
    ucontext_t ctx;
#endif
    void *fake_stack; /* ASan's, while the fiber is switched out */
    int done;
};

#ifdef EMU_ASM_SWITCH
static thread_local void *sched_sp;
#else
static thread_local ucontext_t sched;
#endif
static thread_local emu_fiber *fibers;
static thread_local char *stacks;
static thread_local int cur = -1;
static thread_local const emu_kernel *running;
static thread_local void **running_args;
static thread_local void *sched_fake_stack; /* ASan's: the scheduler's stack */
static thread_local const void *sched_stack_bottom;
static thread_local size_t sched_stack_size;

/* ASan's side of a switch: before it, the stack about to run (save: where the leaving
 * context's fake stack goes; NULL when it never runs again); after it, in the context that
 * now runs, the fake stack it saved (and, the first time a fiber runs, the scheduler's stack). */
static inline void switch_begin(void **save, const void *bottom, size_t size) {
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(save, bottom, size);
#else
    (void)save, (void)bottom, (void)size;
#endif
}

static inline void switch_end(void *saved, int first) {
#ifdef EMU_ASAN
    if (first) __sanitizer_finish_switch_fiber(saved, &sched_stack_bottom, &sched_stack_size);
    else __sanitizer_finish_switch_fiber(saved, nullptr, nullptr);
#else
    (void)saved, (void)first;
#endif
}

/* The running fiber hands the thread back to the scheduler (for good when it is done). */
static void to_scheduler(void) {
    emu_fiber *f = &fibers[cur];
    switch_begin(f->done ? nullptr : &f->fake_stack, sched_stack_bottom, sched_stack_size);
#ifdef EMU_ASM_SWITCH
    emu_switch(&f->sp, sched_sp);
#else
    swapcontext(&f->ctx, &sched);
#endif
    switch_end(f->fake_stack, 0);
}

void __syncthreads(void) {
    if (cur < 0) {
        fprintf(stderr, "cuda_emu: kernel %s reached a barrier but is declared without (kernels.h)\n",
                running ? running->name : "?");
        abort();
    }
    to_scheduler();
}

static void fiber_main(void) {
    switch_end(nullptr, 1);
    running->fn(running_args);
    fibers[cur].done = 1;
    to_scheduler(); /* never resumed */
    abort();
}

static void fiber_start(int t) {
    char *stack = stacks + (size_t)t * FIBER_STACK;
    fibers[t].done = 0;
    fibers[t].fake_stack = nullptr;
#ifdef EMU_ASM_SWITCH
    /* As emu_switch leaves a stack: six zeroed registers, then the return address; 16-byte
     * aligned so that fiber_main starts as if called. */
    void **sp = reinterpret_cast<void **>(stack + FIBER_STACK - 64);
    for (int i = 0; i < 6; i++) sp[i] = nullptr;
    sp[6] = reinterpret_cast<void *>(fiber_main);
    sp[7] = nullptr;
    fibers[t].sp = sp;
#else
    getcontext(&fibers[t].ctx);
    fibers[t].ctx.uc_stack.ss_sp = stack;
    fibers[t].ctx.uc_stack.ss_size = FIBER_STACK;
    fibers[t].ctx.uc_link = nullptr;
    makecontext(&fibers[t].ctx, fiber_main, 0);
#endif
}

static void run_block_fibers(void) {
    if (!fibers) {
        fibers = static_cast<emu_fiber *>(calloc(CUDA_BLOCK, sizeof *fibers));
        stacks = static_cast<char *>(aligned_alloc(64, (size_t)CUDA_BLOCK * FIBER_STACK));
        if (!fibers || !stacks) {
            fprintf(stderr, "cuda_emu: out of memory for fibers\n");
            abort();
        }
    }
    for (int t = 0; t < CUDA_BLOCK; t++) fiber_start(t);
    /* Round-robin: each round runs every live thread to its next barrier or its end, so all
     * of them pass barrier k in round k. */
    for (int live = CUDA_BLOCK; live > 0;) {
        live = 0;
        for (int t = 0; t < CUDA_BLOCK; t++) {
            if (fibers[t].done) continue;
            cur = t;
            threadIdx.x = (unsigned)t;
            switch_begin(&sched_fake_stack, stacks + (size_t)t * FIBER_STACK, FIBER_STACK);
#ifdef EMU_ASM_SWITCH
            emu_switch(&sched_sp, fibers[t].sp);
#else
            swapcontext(&sched, &fibers[t].ctx);
#endif
            switch_end(sched_fake_stack, 0);
            live += !fibers[t].done;
        }
    }
    cur = -1;
}

/* ---- the runtime ---- */

struct emu_alloc {
    void *p;
    size_t bytes;
    unsigned long long last_use; /* the compute stream's last operation that used it (its seq) */
    const char *last_what;       /* and what it was */
};

/* A mark: the compute stream's operations up to seq (cu_mark). */
struct emu_mark {
    unsigned long long seq;
};

struct cu_rt {
    char name[32];
    size_t limit, used;
    emu_alloc *allocs;
    size_t n_allocs, cap_allocs;
    /* Host waits for queued work: a cu_download or cu_sync with work queued since the last
     * one (a launch, GEMM, upload, copy or zero-fill), where a GPU's queue would drain. */
    unsigned long waits;
    int queued;
    /* Operations queued on the compute stream, numbered: cu_upload_beside checks that no
     * operation after its mark used the memory it writes (a copy beside the compute stream
     * would race with it on a GPU, though here every call has run before the next). */
    unsigned long long seq;
    unsigned long beside; /* cu_upload_beside calls */
    long gemms;           /* cu_sgemm_batched calls, for TRAINER_CUDA_EMU_FAIL_GEMM */
};

static thread_local cu_rt *touching;     /* the runtime of the operation being noted */
static thread_local const char *touch_what;

static emu_alloc *alloc_of(cu_rt *r, const void *p) {
    const char *c = static_cast<const char *>(p);
    for (size_t i = 0; i < r->n_allocs; i++) {
        const char *b = static_cast<const char *>(r->allocs[i].p);
        if (c >= b && c < b + (r->allocs[i].bytes ? r->allocs[i].bytes : 1)) return &r->allocs[i];
    }
    return nullptr;
}

static void touch_ptr(const void *p) {
    emu_alloc *a = touching && p ? alloc_of(touching, p) : nullptr;
    if (a) {
        a->last_use = touching->seq;
        a->last_what = touch_what;
    }
}

/* Numbers a compute-stream operation and notes the memory it uses: p1-p3, and a launch's
 * pointer arguments. */
static void note_op(cu_rt *r, const char *what, const void *p1, const void *p2 = nullptr, const void *p3 = nullptr,
                    const emu_kernel *k = nullptr, void **args = nullptr);

static void queue(cu_rt *r) { r->queued = 1; }
static void wait_queue(cu_rt *r) {
    r->waits += r->queued;
    r->queued = 0;
}

static long env_count(const char *name, long dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 ? -1 : v;
}

int cuda_probe_count(char *why, size_t size) {
    long n = env_count("TRAINER_CUDA_EMU_GPUS", 0);
    if (n <= 0) {
        snprintf(why, size, n < 0 ? "TRAINER_CUDA_EMU_GPUS is not a count" : "TRAINER_CUDA_EMU_GPUS is 0 or unset");
        return 0;
    }
    return n > 64 ? 64 : (int)n;
}

tr_status cuda_probe_info(int index, tr_device_info *out) {
    memset(out, 0, sizeof *out);
    long mib = env_count("TRAINER_CUDA_EMU_MIB", 1024);
    snprintf(out->name, sizeof out->name, "CUDA emulator %d", index);
    out->memory = (uint64_t)(mib < 0 ? 0 : mib) << 20;
    snprintf(out->detail, sizeof out->detail, "kernels.cu on the CPU (tests/plugins/cuda_emu)");
    return TR_OK;
}

tr_status cu_open(int index, const char *name, cu_rt **out) {
    *out = NULL;
    long mib = env_count("TRAINER_CUDA_EMU_MIB", 1024);
    if (mib < 0) return tr_error_set(TR_ERR_INVALID, "%s: TRAINER_CUDA_EMU_MIB is not a count", name);
    cu_rt *r = static_cast<cu_rt *>(calloc(1, sizeof *r));
    if (!r) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", name);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->limit = (size_t)mib << 20;
    (void)index;
    *out = r;
    return TR_OK;
}

void cu_close(cu_rt *r) {
    if (!r) return;
    if (getenv("TRAINER_CUDA_EMU_WAITS"))
        fprintf(stderr, "cuda_emu: %s: the host waited for queued work %lu times; %lu copies beside the compute stream\n",
                r->name, r->waits, r->beside);
    for (size_t i = 0; i < r->n_allocs; i++) free(r->allocs[i].p);
    free(r->allocs);
    free(r);
}

tr_status cu_bind(cu_rt *) { return TR_OK; }

tr_status cu_mem_alloc(cu_rt *r, size_t bytes, void **p) {
    *p = NULL;
    if (bytes > r->limit - r->used)
        return tr_error_set(TR_ERR_NOMEM, "%s: cuMemAlloc: out of memory (CUDA error 2)", r->name);
    if (r->n_allocs == r->cap_allocs) {
        size_t cap = r->cap_allocs ? 2 * r->cap_allocs : 32;
        emu_alloc *na = static_cast<emu_alloc *>(realloc(r->allocs, cap * sizeof *na));
        if (!na) return tr_error_set(TR_ERR_NOMEM, "%s: out of host memory", r->name);
        r->allocs = na;
        r->cap_allocs = cap;
    }
    void *q = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!q) return tr_error_set(TR_ERR_NOMEM, "%s: out of host memory", r->name);
    r->allocs[r->n_allocs++] = {q, bytes, 0, nullptr};
    r->used += bytes;
    *p = q;
    return TR_OK;
}

void cu_mem_free(cu_rt *r, void *p) {
    for (size_t i = 0; i < r->n_allocs; i++)
        if (r->allocs[i].p == p) {
            r->used -= r->allocs[i].bytes;
            free(p);
            r->allocs[i] = r->allocs[--r->n_allocs];
            return;
        }
}

tr_status cu_host_alloc(cu_rt *r, size_t bytes, void **p) {
    *p = malloc(bytes ? bytes : 1);
    return *p ? TR_OK : tr_error_set(TR_ERR_NOMEM, "%s: cuMemAllocHost: out of memory", r->name);
}

void cu_host_free(cu_rt *, void *p) { free(p); }

tr_status cu_upload_async(cu_rt *r, void *dst, const void *src, size_t bytes) {
    queue(r);
    note_op(r, "an upload", dst);
    memcpy(dst, src, bytes);
    return TR_OK;
}

tr_status cu_copy_async(cu_rt *r, void *dst, const void *src, size_t bytes) {
    queue(r);
    note_op(r, "a device copy", dst, src);
    memmove(dst, src, bytes);
    return TR_OK;
}

tr_status cu_zero_async(cu_rt *r, void *p, size_t bytes) {
    queue(r);
    note_op(r, "a zero-fill", p);
    memset(p, 0, bytes);
    return TR_OK;
}

tr_status cu_download(cu_rt *r, void *dst, const void *src, size_t bytes) {
    wait_queue(r);
    memcpy(dst, src, bytes);
    return TR_OK;
}

tr_status cu_mark(cu_rt *r, void **m) {
    emu_mark *k = static_cast<emu_mark *>(*m);
    if (!k && !(k = static_cast<emu_mark *>(malloc(sizeof *k))))
        return tr_error_set(TR_ERR_NOMEM, "%s: cuEventCreate: out of host memory", r->name);
    k->seq = r->seq;
    *m = k;
    return TR_OK;
}

void cu_mark_free(cu_rt *, void *m) { free(m); }

tr_status cu_upload_beside(cu_rt *r, void *dst, const void *src, size_t bytes, void *after, int) {
    emu_alloc *a = alloc_of(r, dst);
    if (!a) return tr_error_set(TR_ERR_DEVICE, "%s: cuMemcpyHtoDAsync: %p is not device memory", r->name, dst);
    unsigned long long point = after ? static_cast<emu_mark *>(after)->seq : 0;
    if (a->last_use > point)
        return tr_error_set(TR_ERR_INTERNAL, "%s: cuda_emu: a copy beside the compute stream into %p races with %s "
                            "(operation %llu) queued after the mark it waits for (operation %llu)", r->name, dst,
                            a->last_what, a->last_use, point);
    queue(r);
    r->beside++;
    memcpy(dst, src, bytes);
    return TR_OK;
}

tr_status cu_event_record(cu_rt *, int) { return TR_OK; }
tr_status cu_event_wait(cu_rt *, int) { return TR_OK; }
tr_status cu_sync(cu_rt *r) {
    wait_queue(r);
    return TR_OK;
}

/* No stream of its own (every call completes before it returns): the runtime itself stands
 * for it, so a backend handed it can check where it came from. */
void *cu_native_stream(cu_rt *r) { return r; }

static void note_op(cu_rt *r, const char *what, const void *p1, const void *p2, const void *p3, const emu_kernel *k,
                    void **args) {
    r->seq++;
    touching = r;
    touch_what = what;
    touch_ptr(p1);
    touch_ptr(p2);
    touch_ptr(p3);
    if (k) k->touch(args);
    touching = nullptr;
}

tr_status cu_launch(cu_rt *r, cuda_kernel k, unsigned grid, void **args) {
    if ((int)k < 0 || k >= CUDA_N_KERNELS || grid == 0)
        return tr_error_set(TR_ERR_DEVICE, "%s: cuLaunchKernel: invalid kernel %d or grid %u", r->name, (int)k, grid);
    queue(r);
    note_op(r, emu_kernels[k].name, nullptr, nullptr, nullptr, &emu_kernels[k], args);
    running = &emu_kernels[k];
    running_args = args;
    gridDim = {grid, 1, 1};
    blockDim = {CUDA_BLOCK, 1, 1};
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = {b, 0, 0};
        if (running->barrier) {
            run_block_fibers();
            continue;
        }
        for (unsigned t = 0; t < CUDA_BLOCK; t++) {
            threadIdx = {t, 0, 0};
            running->fn(args);
        }
    }
    running = NULL;
    return TR_OK;
}

/* One column-major product, as cublasSgemm documents it. */
static tr_status sgemm_one(cu_rt *r, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C, int ldc) {
    if (m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1) || lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) ||
        ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1))
        return tr_error_set(TR_ERR_DEVICE, "%s: cublasSgemm (%d x %d x %d) failed: status 7 (invalid value)", r->name,
                            m, n, k);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0;
            for (int l = 0; l < k; l++) {
                float a = ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda];
                float b = tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
                s += a * b;
            }
            float *c = &C[i + (size_t)j * ldc];
            *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
        }
    return TR_OK;
}

tr_status cu_sgemm_batched(cu_rt *r, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                           long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc,
                           long long sC, int batch, int bf16) {
    if (batch < 0)
        return tr_error_set(TR_ERR_DEVICE, "%s: cublasSgemmStridedBatched (batch %d) failed: status 7 (invalid value)",
                            r->name, batch);
    /* TRAINER_CUDA_EMU_FAIL_GEMM=N: the N-th product of the process fails, as cuBLAS's would. */
    if (++r->gemms == env_count("TRAINER_CUDA_EMU_FAIL_GEMM", 0))
        return tr_error_set(TR_ERR_DEVICE, "%s: cublasSgemmStridedBatched failed: status 13 (execution failed; "
                            "injected: TRAINER_CUDA_EMU_FAIL_GEMM=%ld)", r->name, r->gemms);
    note_op(r, "a GEMM", C, A, B);
    /* bf16: the span each operand's products read, rounded once into a copy with its layout. */
    float *rA = NULL, *rB = NULL;
    if (bf16 && m > 0 && n > 0 && k > 0 && batch > 0) {
        size_t spanA = (size_t)(batch - 1) * (size_t)sA + (size_t)lda * (size_t)((ta ? m : k) - 1) + (size_t)(ta ? k : m);
        size_t spanB = (size_t)(batch - 1) * (size_t)sB + (size_t)ldb * (size_t)((tb ? k : n) - 1) + (size_t)(tb ? n : k);
        rA = static_cast<float *>(malloc(spanA * sizeof *rA));
        rB = static_cast<float *>(malloc(spanB * sizeof *rB));
        if (!rA || !rB) {
            free(rA), free(rB);
            return tr_error_set(TR_ERR_NOMEM, "%s: cublasGemmStridedBatchedEx: out of host memory", r->name);
        }
        for (size_t i = 0; i < spanA; i++) rA[i] = tr_bf16_round(A[i]);
        for (size_t i = 0; i < spanB; i++) rB[i] = tr_bf16_round(B[i]);
        A = rA, B = rB;
    }
    queue(r);
    tr_status st = TR_OK;
    for (int i = 0; i < batch && st == TR_OK; i++)
        st = sgemm_one(r, ta, tb, m, n, k, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC, ldc);
    free(rA), free(rB);
    return st;
}

tr_status cu_bf16_check(cu_rt *r) {
    long major = env_count("TRAINER_CUDA_EMU_CC", 9);
    if (major < 8)
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: bf16 GEMMs need compute capability 8.0 or later (bf16 tensor "
                            "cores), this GPU has %ld.x", r->name, major);
    return TR_OK;
}
