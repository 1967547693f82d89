/* A stop asked for from a signal handler (see run/run_api.h, tr_run_interrupt): one flag,
 * written only with async-signal-safe stores, read by the training loop at each step
 * boundary (train.c), which all-reduces it with the step's loss so that every rank stops at
 * the same step and the checkpoint saved there is whole. */
#include <signal.h>

#include "interrupt.h"
#include "run/run_api.h"

static volatile sig_atomic_t g_stop;

void tr_run_interrupt(int signo) { g_stop = signo > 0 ? signo : SIGINT; }

int run_interrupt_signal(void) { return g_stop; }

void run_interrupt_reset(void) { g_stop = 0; }
