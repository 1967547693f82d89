/* The terminal progress bar (see progress.h). */
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "trainer/runtime.h"

void progress_init(progress *p, int mode, int64_t first_step) {
    *p = (progress){.bar = mode == 1 || (mode == 0 && isatty(STDOUT_FILENO)), .t0 = tr_now(),
                    .step0 = first_step, .last_draw = -1};
}

static void clock_text(char *out, size_t size, double seconds) {
    if (!isfinite(seconds) || seconds < 0) {
        snprintf(out, size, "--:--");
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(out, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(out, size, "%ld:%02ld", s / 60, s % 60);
}

void progress_update(progress *p, int64_t epoch, int64_t max_epochs, int64_t step, int64_t total,
                     double loss, double samples_per_sec) {
    if (!p->bar) return;
    double now = tr_now();
    if (step < total && p->last_draw >= 0 && now - p->last_draw < 0.1) return;
    p->last_draw = now;
    enum { WIDTH = 24 };
    char bar[WIDTH + 1];
    int fill = total > 0 ? (int)((double)WIDTH * (double)step / (double)total) : 0;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '-';
    bar[WIDTH] = 0;
    double done = (double)(step - p->step0), per = done > 0 ? (now - p->t0) / done : NAN;
    char eta[32], elapsed[32];
    clock_text(eta, sizeof eta, per * (double)(total - step));
    clock_text(elapsed, sizeof elapsed, now - p->t0);
    printf("\r\033[Kepoch %lld/%lld [%s] %lld/%lld  loss %.4f  %.0f samples/s  %s elapsed  ETA %s",
           (long long)epoch + 1, (long long)max_epochs, bar, (long long)step, (long long)total, loss,
           samples_per_sec, elapsed, eta);
    fflush(stdout);
    p->drawn = 1;
}

void progress_clear(progress *p) {
    if (!p->drawn) return;
    printf("\r\033[K");
    fflush(stdout);
    p->drawn = 0;
}
