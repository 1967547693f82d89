/* A stop asked for from outside the training loop (tr_run_interrupt: Ctrl-C, SIGTERM): the
 * loop reads it at each step boundary, where every rank agrees on it. Internal to run/. */
#ifndef TRAINER_RUN_INTERRUPT_H
#define TRAINER_RUN_INTERRUPT_H

/* The signal tr_run_interrupt was given since the last reset, 0 when none. */
int run_interrupt_signal(void);
/* Forgets an earlier stop (a new run starts). */
void run_interrupt_reset(void);

#endif
