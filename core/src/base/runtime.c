/* Version and CPU thread settings shared by the OpenMP kernels and OpenBLAS; the clock, the
 * core count and whether a process has ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "trainer/runtime.h"

#include "base/fault.h"

#ifndef TRAINER_VERSION
#define TRAINER_VERSION "0.0.0"
#endif

static int num_threads;
static tr_precision precision;

const char *tr_version(void) { return TRAINER_VERSION; }

int tr_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    return 1;
}

static int env_threads(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long n = strtol(v, &end, 10);
    return (*end == '\0' && n > 0 && n < 4096) ? (int)n : 0;
}

void tr_set_num_threads(int n) {
    if (n <= 0) n = env_threads("TRAINER_NUM_THREADS");
    if (n <= 0) n = env_threads("OMP_NUM_THREADS");
    if (n <= 0) n = tr_cpu_count();
    num_threads = n;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

void tr_set_thread_local_threads(int n) {
    if (n <= 0) n = 1;
    omp_set_num_threads(n);
    /* BLAS's count is process-wide and its setter not safe to race: the first replica thread
     * sets it, the others (same n) leave it. */
    if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
}

/* This thread's control word. */
static int flush_denormals_here(int on) {
#if defined(__x86_64__) || defined(__i386__)
    const unsigned ftz_daz = 0x8040; /* FTZ bit 15, DAZ bit 6 */
    _mm_setcsr(on ? (_mm_getcsr() | ftz_daz) : (_mm_getcsr() & ~ftz_daz));
    return 1;
#elif defined(__aarch64__)
    unsigned long fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    fpcr = on ? (fpcr | (1ul << 24)) : (fpcr & ~(1ul << 24));
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
    return 1;
#else
    (void)on;
    return 0;
#endif
}

int tr_set_flush_denormals(int on) {
    int ok = flush_denormals_here(on);
    /* The pool's threads each have their own control word: set it in every one of them (one
     * parallel region at the pool's current size; a larger pool made later copies this
     * thread's word). */
#pragma omp parallel
    flush_denormals_here(on);
    return ok;
}

int tr_get_num_threads(void) {
    if (num_threads == 0) tr_set_num_threads(0);
    return num_threads;
}

void tr_set_precision(tr_precision p) { precision = p; }
tr_precision tr_get_precision(void) { return precision; }
const char *tr_precision_name(tr_precision p) { return p == TR_PRECISION_BF16_MIXED ? "bf16-mixed" : "fp32"; }

double tr_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The fault point TRAINER_FAULT_LATE_LIVENESS_MS (docs/distributed.md): each look below comes
 * that late, as if its caller had been preempted since it saw the peer not yet arrived (a
 * run refuses a malformed value in tr_fault_setup; here it counts as 0). */
static long late_liveness_ms(void) {
    static atomic_long cached = -1;
    long ms = atomic_load_explicit(&cached, memory_order_relaxed);
    if (ms >= 0) return ms;
    const char *v = getenv("TRAINER_FAULT_LATE_LIVENESS_MS");
    char *end = NULL;
    ms = v && *v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || ms < 0 || ms > TR_FAULT_LATE_LIVENESS_MAX_MS) ms = 0;
    atomic_store_explicit(&cached, ms, memory_order_relaxed);
    return ms;
}

int tr_process_gone(int pid) {
    if (pid <= 0) return 0;
    long late = late_liveness_ms();
    if (late > 0) nanosleep(&(struct timespec){late / 1000, late % 1000 * 1000000}, NULL);
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
    /* An exited child not yet reaped still answers kill(): look for the zombie state. */
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}
