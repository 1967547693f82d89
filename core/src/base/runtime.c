/* Version and CPU thread settings shared by the OpenMP kernels and OpenBLAS. */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <cblas.h>

#include "trainer/runtime.h"

#ifndef TRAINER_VERSION
#define TRAINER_VERSION "0.0.0"
#endif

static int num_threads;

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

int tr_get_num_threads(void) {
    if (num_threads == 0) tr_set_num_threads(0);
    return num_threads;
}

double tr_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
