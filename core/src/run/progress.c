/* The terminal progress bar (see progress.h). */
#define _DEFAULT_SOURCE /* TIOCGWINSZ, SA_RESTART */
#include "progress.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "comm/env.h"
#include "trainer/runtime.h"

/* Set by SIGWINCH: the terminal's width is read again before the next draw. */
static volatile sig_atomic_t g_resized;
/* The SIGWINCH action the process had before the bar took it (an embedding program's, e.g. a
 * curses interface), given back by progress_end. */
static struct sigaction g_old_winch;
static int g_winch_taken;

static void on_winch(int sig) {
    (void)sig;
    g_resized = 1;
}

static int terminal_cols(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 0;
}

void progress_init(progress *p, int mode, int64_t first_step) {
    const char *fwd = getenv("TRAINER_PROGRESS_COLS"); /* set by the launcher for rank 0 */
    /* mpirun and srun gather a pseudo-terminal's output into lines: a bar there is a flood of
     * half-lines; trainer launch and torchrun pass the terminal through (the launcher draws
     * rank 0's bar) */
    int tty = isatty(STDOUT_FILENO) && !tr_comm_env_gathers_output();
    int bar = mode == 1 || (mode == 0 && (tty || (fwd && *fwd)));
    int cols = tty ? terminal_cols() : 0;
    if (!tty && fwd && *fwd) cols = atoi(fwd);
    else if (!tty && getenv("COLUMNS")) cols = atoi(getenv("COLUMNS"));
    *p = (progress){.bar = bar, .tty = tty, .cols = cols > 0 ? cols : 0, .t0 = tr_now(), .step0 = first_step, .last_draw = -1};
    if (bar && tty) {
        struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        if (!g_winch_taken && sigaction(SIGWINCH, &sa, &g_old_winch) == 0) g_winch_taken = 1;
    }
}

void progress_end(progress *p) {
    progress_clear(p);
    if (g_winch_taken) {
        sigaction(SIGWINCH, &g_old_winch, NULL);
        g_winch_taken = 0;
    }
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

/* The bar's text for a terminal of `cols` columns (0: no limit), at most cols - 1 characters
 * (writing the last column wraps on some terminals): the whole line when it fits, else without
 * elapsed, then the rate, then with a shorter bar, no bar, no ETA, no loss. `ep` leads ("epoch
 * 1/3 "), `lossf` ("  loss 0.1234") may be empty. */
static void progress_format(char *out, size_t size, int cols, const char *ep, int64_t step, int64_t total,
                            const char *lossf, const char *rate, const char *elapsed, const char *eta) {
    enum { WIDTH = 24, MIN_WIDTH = 8 };
    char count[48], el[64], et[64];
    snprintf(count, sizeof count, "%lld/%lld", (long long)step, (long long)total);
    snprintf(el, sizeof el, "  %s elapsed", elapsed);
    snprintf(et, sizeof et, "  ETA %s", eta);
    size_t room = cols > 0 ? (size_t)cols - 1 : (size_t)-1;
    /* What each level keeps: [epoch, bar, loss, rate, elapsed, eta]; the bar is shortened to
     * fit before it goes. */
    static const unsigned char keep[][6] = {
        {1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 1}, {1, 1, 1, 0, 0, 1}, {1, 0, 1, 0, 0, 1},
        {1, 0, 1, 0, 0, 0}, {1, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++) {
        const unsigned char *f = keep[k];
        size_t fixed = (f[0] ? strlen(ep) : 0) + strlen(count) + (f[2] ? strlen(lossf) : 0) + (f[3] ? strlen(rate) : 0) +
                       (f[4] ? strlen(el) : 0) + (f[5] ? strlen(et) : 0);
        int width = 0;
        if (f[1]) {
            if (fixed + 3 + MIN_WIDTH > room) continue; /* "[", "] ", MIN_WIDTH marks */
            width = room - fixed - 3 < WIDTH ? (int)(room - fixed - 3) : WIDTH;
        } else if (fixed > room && k + 1 < sizeof keep / sizeof keep[0]) {
            continue;
        }
        char bar[WIDTH + 4] = "";
        if (width) {
            int fill = total > 0 ? (int)((double)width * (double)step / (double)total) : 0;
            bar[0] = '[';
            for (int i = 0; i < width; i++) bar[1 + i] = i < fill ? '#' : '-';
            bar[1 + width] = ']';
            bar[2 + width] = ' ';
            bar[3 + width] = 0;
        }
        snprintf(out, size, "%s%s%s%s%s%s%s", f[0] ? ep : "", bar, count, f[2] ? lossf : "", f[3] ? rate : "",
                 f[4] ? el : "", f[5] ? et : "");
        if (strlen(out) > room) out[room] = 0; /* only "step/total" left, on a very narrow terminal */
        return;
    }
}

/* Draws the bar (see progress_format for the fields). */
static void progress_draw(progress *p, const char *ep, int64_t step, int64_t total, const char *lossf,
                          const char *rate) {
    if (!p->bar) return;
    double now = tr_now();
    if (step < total && p->last_draw >= 0 && now - p->last_draw < 0.1) return;
    p->last_draw = now;
    if (p->tty && g_resized) {
        g_resized = 0;
        int c = terminal_cols();
        if (c > 0) p->cols = c;
    }
    double done = (double)(step - p->step0), per = done > 0 ? (now - p->t0) / done : NAN;
    char eta[32], elapsed[32], line[512];
    clock_text(eta, sizeof eta, per * (double)(total - step));
    clock_text(elapsed, sizeof elapsed, now - p->t0);
    progress_format(line, sizeof line, p->cols, ep, step, total, lossf, rate, elapsed, eta);
    printf("\r\033[K%s", line);
    fflush(stdout);
    p->drawn = 1;
}

void progress_update(progress *p, int64_t epoch, int64_t max_epochs, int64_t step, int64_t total,
                     double loss, double samples_per_sec) {
    if (!p->bar) return;
    char ep[48], lossf[48], rate[48];
    snprintf(ep, sizeof ep, "epoch %lld/%lld ", (long long)epoch + 1, (long long)max_epochs);
    snprintf(lossf, sizeof lossf, "  loss %.4f", loss);
    snprintf(rate, sizeof rate, "  %.0f samples/s", samples_per_sec);
    progress_draw(p, ep, step, total, lossf, rate);
}

void progress_update_pass(progress *p, const char *what, int64_t done, int64_t total, double per_sec,
                          const char *unit) {
    if (!p->bar) return;
    char ep[48], rate[64];
    snprintf(ep, sizeof ep, "%s ", what);
    snprintf(rate, sizeof rate, "  %.0f %s/s", per_sec, unit);
    progress_draw(p, ep, done, total, "", rate);
}

void progress_clear(progress *p) {
    if (!p->drawn) return;
    printf("\r\033[K");
    fflush(stdout);
    p->drawn = 0;
}
