/* Progress on the terminal: a redrawn one-line bar (training: epoch, step/total, loss,
 * throughput, elapsed, ETA; `trainer embed`: texts done/total, texts/s, elapsed, ETA) when
 * stdout is a terminal, nothing otherwise (then `trainer run` prints plain periodic lines). The bar fits the terminal's width (re-read after SIGWINCH):
 * fields are dropped and the bar shortened rather than let the line wrap. Under mpirun or
 * srun (whose pseudo-terminals would turn every redraw into a line of the job's output) auto
 * means lines; the ranks `trainer run` launches itself draw rank 0's bar through the
 * launcher, which says so and how wide in TRAINER_PROGRESS_COLS. Internal to libtrainer's
 * run/ parts. */
#ifndef TRAINER_RUN_PROGRESS_H
#define TRAINER_RUN_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct progress {
    int bar;            /* draw the bar */
    int drawn;          /* a bar is on screen now */
    int tty;            /* stdout is the terminal itself (its width can be asked) */
    int cols;           /* the terminal's width; 0: unknown, nothing is cut */
    double last_draw;
    double t0;          /* when the first step of this process started */
    int64_t step0;
} progress;

/* mode: 0 auto (bar when stdout is a terminal), 1 bar, 2 plain lines. */
void progress_init(progress *p, int mode, int64_t first_step);
/* Redraws at most 10 times a second (always for the last step). */
void progress_update(progress *p, int64_t epoch, int64_t max_epochs, int64_t step,
                     int64_t total, double loss, double samples_per_sec);
/* The same bar for a pass that is not training (`trainer embed`): `what` where the epoch is,
 * `done`/`total` items, `per_sec` of `unit` ("texts"), no loss. */
void progress_update_pass(progress *p, const char *what, int64_t done, int64_t total, double per_sec,
                          const char *unit);
/* Erases the bar so a line can be printed; the next update redraws it. */
void progress_clear(progress *p);
/* Erases the bar and gives SIGWINCH back to the action it had before progress_init (library
 * code leaves the process's signal handlers as it found them). */
void progress_end(progress *p);

#endif
