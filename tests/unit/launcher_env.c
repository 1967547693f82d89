/* Which launcher started this process is decided in one place (comm/env.c), and every user
 * sees the same: for each launcher's variables, the communicator's detection
 * (tr_comm_env_detect, tr_launched_externally), the progress bar (progress_init) and the
 * launcher's terminal (tr_launch forwards its width to rank 0 only where no outer launcher
 * gathers the output) agree. stdout is a pseudo-terminal during the terminal checks. */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "check.h"
#include "comm/env.h"
#include "launch/launch_api.h"
#include "run/progress.h"
#include "run/run_api.h"
#include "trainer/comm.h"

typedef struct launcher_case {
    const char *what;
    const char *vars[8];     /* NAME=VALUE */
    const char *name;        /* tr_comm_env_launcher's answer (NULL: none) */
    int gathers;             /* the output goes through the launcher's pseudo-terminal */
    int size;                /* the world tr_comm_env_detect reads; 0: refused */
    const char *refusal;     /* part of the refusal */
} launcher_case;

static const launcher_case cases[] = {
    {"no launcher", {NULL}, NULL, 0, 1, NULL},
    {"trainer launch", {"RANK=1", "WORLD_SIZE=2", "TRAINER_JOB_ID=7-a.0"}, "trainer launch", 0, 2, NULL},
    {"torchrun", {"RANK=0", "WORLD_SIZE=3", "MASTER_PORT=29500"}, "torchrun", 0, 3, NULL},
    {"mpirun", {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "PMIX_RANK=1"}, "mpirun", 1, 4, NULL},
    {"srun", {"SLURM_PROCID=2", "SLURM_NTASKS=5", "SLURM_JOB_ID=9"}, "srun", 1, 5, NULL},
    {"a PMIx launcher", {"PMIX_RANK=0"}, "a PMIx launcher", 1, 0, "PMIX_RANK is set"},
    {"MPICH's mpiexec", {"PMI_RANK=1", "PMI_SIZE=2"}, "a PMI launcher", 1, 0, "PMI_RANK is set"},
    {"an sbatch script (SLURM_PROCID alone)", {"SLURM_PROCID=0"}, NULL, 0, 1, NULL},
    {"trainer launch inside srun", {"RANK=0", "WORLD_SIZE=2", "TRAINER_JOB_ID=1-b.0", "SLURM_PROCID=0", "SLURM_NTASKS=1"},
     "trainer launch", 0, 2, NULL},
    {"an empty RANK under mpirun", {"RANK=", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"}, "mpirun", 1, 2, NULL},
};

static const char *const all_vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TRAINER_JOB_ID",
                                       "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_RANK",
                                       "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                                       "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NNODES",
                                       "SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS_PER_NODE",
                                       "SLURM_STEP_TASKS_PER_NODE", "GROUP_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
                                       "TORCHELASTIC_RESTART_COUNT", "TRAINER_PROGRESS_COLS", "TRAINER_COMM_TIMEOUT"};

static void set_case(const launcher_case *c) {
    for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++) unsetenv(all_vars[i]);
    for (int i = 0; i < 8 && c->vars[i]; i++) {
        char name[64];
        const char *eq = strchr(c->vars[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - c->vars[i]), c->vars[i]);
        setenv(name, eq + 1, 1);
    }
}

/* A pseudo-terminal 100 columns wide as stdout; the master's fd, or -1 (the old stdout in
 * *saved). */
static int stdout_to_pty(int *saved) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0) return -1;
    int s = open(ptsname(m), O_RDWR | O_NOCTTY);
    if (s < 0) return -1;
    struct winsize ws = {.ws_row = 24, .ws_col = 100};
    ioctl(s, TIOCSWINSZ, &ws);
    fflush(stdout);
    *saved = dup(STDOUT_FILENO);
    dup2(s, STDOUT_FILENO);
    close(s);
    return m;
}

static void stdout_back(int saved) {
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
}

/* What rank 0 of a launch from this process is told of the terminal: "cols=N" or
 * "cols=none", read from the pseudo-terminal's master m. */
static void launch_cols(int m, char *out, size_t size) {
    char *cmd[] = {"/bin/sh", "-c", "echo \"cols=${TRAINER_PROGRESS_COLS-none}\"", NULL};
    tr_launch_config lc = {.nproc = 1, .argv = cmd, .quiet = 1};
    tr_launch_result res;
    snprintf(out, size, "%s", "(no output)");
    if (tr_launch(&lc, &res) != TR_OK || res.exit_code != 0) {
        snprintf(out, size, "launch failed: %.50s %.50s", tr_error_msg(), res.message);
        return;
    }
    fflush(stdout);
    /* the terminal hands the output to its master side a moment later: up to 5 s for the line */
    char buf[4096];
    size_t n = 0;
    const char *at = NULL;
    buf[0] = 0;
    for (int waited = 0; waited < 50 && !(at && strpbrk(at, "\r\n")); waited++) {
        struct pollfd pf = {.fd = m, .events = POLLIN};
        if (poll(&pf, 1, 100) == 1) {
            ssize_t k = read(m, buf + n, sizeof buf - 1 - n);
            if (k > 0) n += (size_t)k;
            buf[n] = 0;
        }
        at = strstr(buf, "cols=");
    }
    if (at) snprintf(out, size, "%.*s", (int)strcspn(at, "\r\n"), at);
}

int main(void) {
    int terminal = 1;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const launcher_case *c = &cases[k];
        set_case(c);
        const char *name = tr_comm_env_launcher();
        CHECK((name == NULL) == (c->name == NULL) && (!name || strcmp(name, c->name) == 0), "%s: launcher %s, expected %s",
              c->what, name ? name : "(none)", c->name ? c->name : "(none)");
        CHECK(tr_launched_externally() == (c->name != NULL), "%s: launched externally %d", c->what,
              tr_launched_externally());
        CHECK(tr_comm_env_gathers_output() == c->gathers, "%s: gathers output %d, expected %d", c->what,
              tr_comm_env_gathers_output(), c->gathers);
        tr_comm_env e;
        tr_status st = tr_comm_env_detect(&e);
        if (c->size)
            CHECK(st == TR_OK && e.size == c->size, "%s: detected world %d (%s), expected %d", c->what, e.size,
                  tr_error_msg(), c->size);
        else
            CHECK(st == TR_ERR_INVALID && strstr(tr_error_msg(), c->refusal), "%s: refused: %s", c->what, tr_error_msg());
        /* the terminal's two users */
        int saved = -1, m = terminal ? stdout_to_pty(&saved) : -1;
        if (m < 0) {
            if (terminal) fprintf(stderr, "no pseudo-terminal here: the progress bar and launch checks are left out\n");
            terminal = 0;
            continue;
        }
        progress p;
        progress_init(&p, 0, 0);
        progress_end(&p);
        char cols[128];
        launch_cols(m, cols, sizeof cols);
        stdout_back(saved);
        close(m);
        CHECK(p.tty == !c->gathers && p.bar == !c->gathers, "%s: the progress bar on a terminal: tty %d bar %d", c->what,
              p.tty, p.bar);
        const char *want = c->gathers ? "cols=none" : "cols=91"; /* 100 less "[rank 0] " */
        CHECK(strcmp(cols, want) == 0, "%s: rank 0 of a launch is told %s, expected %s", c->what, cols, want);
    }
    return test_finish();
}
