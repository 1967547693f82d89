/* Training progress on the terminal: a redrawn one-line bar (epoch, step/total, loss,
 * throughput, ETA) when stdout is a terminal, nothing otherwise (then the trainer prints
 * plain periodic lines). Internal to libtrainer's run/ parts. */
#ifndef TRAINER_RUN_PROGRESS_H
#define TRAINER_RUN_PROGRESS_H

#include <stdint.h>

typedef struct progress {
    int bar;            /* draw the bar */
    int drawn;          /* a bar is on screen now */
    double last_draw;
    double t0;          /* when the first step of this process started */
    int64_t step0;
} progress;

/* mode: 0 auto (bar when stdout is a terminal), 1 bar, 2 plain lines. */
void progress_init(progress *p, int mode, int64_t first_step);
/* Redraws at most 10 times a second (always for the last step). */
void progress_update(progress *p, int64_t epoch, int64_t max_epochs, int64_t step,
                     int64_t total, double loss, double samples_per_sec);
/* Erases the bar so a line can be printed; the next update redraws it. */
void progress_clear(progress *p);

#endif
