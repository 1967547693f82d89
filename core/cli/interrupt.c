/* Ctrl-C and SIGTERM handlers of `trainer run` (see interrupt.h). Schedulers (Slurm, Kubernetes)
 * send SIGTERM before they kill a job, a terminal sends SIGINT to every process of its
 * foreground group: both mean "stop soon, lose nothing". Only async-signal-safe calls in the
 * handler: a flag store, write(2), signal and raise. */
#include "interrupt.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/run_api.h"

static volatile sig_atomic_t g_first;
static int g_claimed, g_said;      /* lock-free atomics: safe in a handler */
static int g_rank_of_launcher; /* started by trainer's launcher (TRAINER_JOB_ID) */

/* Two signals may be handled at once on two threads (each handler's mask blocks the other
 * signal on its own thread only): the first to claim is the first, and the second waits (a
 * bounded spin) until the first has said what it does before it stops the process. */
static void on_stop(int sig) {
    if (__atomic_exchange_n(&g_claimed, 1, __ATOMIC_SEQ_CST)) {
        if (g_rank_of_launcher) return;
        for (long i = 0; i < 50000000 && !__atomic_load_n(&g_said, __ATOMIC_ACQUIRE); i++) {}
        signal(sig, SIG_DFL); /* the second: stop now (checkpoints are renamed into place whole) */
        raise(sig);
        return;
    }
    g_first = sig;
    tr_run_interrupt(sig);
    if (!g_rank_of_launcher) {
        static const char msg[] = "\ntrainer run: stopping at the next step and saving a checkpoint there "
                                  "(Ctrl-C again to stop at once)\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
    }
    __atomic_store_n(&g_said, 1, __ATOMIC_RELEASE);
}

void trainer_interrupt_install(void) {
    g_rank_of_launcher = getenv("TRAINER_JOB_ID") != NULL;
    /* SA_RESTART: the stop is read at the next step boundary, so nothing needs a blocking
     * call cut short; without it a write to the launcher's pipe or a read the libraries do
     * not retry fails with EINTR and turns a clean stop into an I/O error. Each signal blocks
     * the other while its handler runs on a thread; across threads the handler's atomic claim
     * makes two arriving together one first and one second (stop at once). */
    struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int trainer_interrupt_signal(void) { return g_first; }
