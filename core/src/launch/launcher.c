/* The single-host launcher and supervisor (see launch/launch_api.h). One poll loop reads every
 * rank's output pipe (drawing rank 0's progress bar on a terminal), reaps exits, and
 * escalates SIGTERM -> SIGKILL on failure or on a signal to the launcher (a first one is
 * forwarded with time to save a checkpoint, a second kills). Library code: no exit(), the
 * caller maps the result to a status. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/env.h"
#include "launch/launch_api.h"
#include "trainer/memory.h"
#include "trainer/runtime.h"

typedef struct rank_proc {
    pid_t pid;
    int fd;                 /* read end of its stdout+stderr pipe, -1 when closed */
    int running;
    int status;             /* waitpid status once exited */
    char partial[4096];     /* output not yet ended by a newline */
    size_t plen;
    int frame;              /* partial is a progress bar frame (it followed a '\r') */
    char last[512];         /* its last complete output line */
} rank_proc;

/* The launcher's own stdout: a terminal shows rank 0's progress bar (progress.h), redrawn on
 * one line that every other line first erases. */
typedef struct term_out {
    int tty;
    int drawn; /* a bar frame is on screen */
} term_out;

#define RANK_PREFIX "[rank %d] "

static volatile sig_atomic_t g_signal, g_signals;

/* The first SIGINT/SIGTERM is forwarded as SIGTERM (trainer run's ranks then stop together
 * at the next step and save a checkpoint); a second kills the ranks at once. */
static void on_signal(int sig) {
    if (!g_signal) g_signal = sig;
    if (g_signals < 2) g_signals++;
}

static void erase_bar(term_out *t) {
    if (!t->drawn) return;
    fputs("\r\033[K", stdout);
    t->drawn = 0;
}

static void emit_line(int rank, const char *s, size_t n, rank_proc *p, term_out *t) {
    if (n >= 3 && memcmp(s, "\033[K", 3) == 0) { /* a line printed after the bar was erased */
        s += 3;
        n -= 3;
    }
    erase_bar(t);
    printf(RANK_PREFIX "%.*s\n", rank, (int)n, s);
    if (n) snprintf(p->last, sizeof p->last, "%.*s", (int)n, s);
}

/* Draws the bar frame a rank sent ("\r\033[K" then the text), cut to the terminal's width
 * now (the rank fitted it to the width at its start). */
static void emit_frame(int rank, const char *s, size_t n, term_out *t) {
    if (n >= 3 && memcmp(s, "\033[K", 3) == 0) {
        s += 3;
        n -= 3;
    }
    if (n == 0) { /* the rank erased its bar */
        erase_bar(t);
        return;
    }
    struct winsize ws;
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, RANK_PREFIX, rank);
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        size_t room = ws.ws_col > plen + 1 ? (size_t)(ws.ws_col - plen - 1) : 0;
        if (n > room) n = room;
    }
    printf("\r\033[K%s%.*s", prefix, (int)n, s);
    t->drawn = 1;
}

/* Reads what is available from rank r's pipe and prints its complete lines; a '\r' starts a
 * progress bar frame (only rank 0 draws one, and only when told it may: spawn). */
static void drain(rank_proc *p, int rank, term_out *t) {
    char buf[4096];
    ssize_t n = read(p->fd, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            if (p->plen && !p->frame) emit_line(rank, p->partial, p->plen, p, t);
            if (p->frame) erase_bar(t);
            p->plen = 0;
            close(p->fd);
            p->fd = -1;
        }
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\r' && t->tty) {
            if (p->plen && !p->frame) emit_line(rank, p->partial, p->plen, p, t);
            p->plen = 0;
            p->frame = 1;
            continue;
        }
        if (buf[i] == '\n' || p->plen == sizeof p->partial) {
            emit_line(rank, p->partial, p->plen, p, t);
            p->plen = 0;
            p->frame = 0;
            if (buf[i] == '\n') continue;
        }
        p->partial[p->plen++] = buf[i];
    }
    if (p->frame) emit_frame(rank, p->partial, p->plen, t);
    fflush(stdout);
}

static void describe_exit(char *out, size_t size, int rank, int status, const char *last) {
    int n;
    if (WIFSIGNALED(status))
        n = snprintf(out, size, "rank %d was killed by signal %d (%s)", rank, WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        n = snprintf(out, size, "rank %d exited with code %d", rank, WEXITSTATUS(status));
    if (n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, "; its last line: %s", last[0] ? last : "(none)");
}

/* A stopped rank (SIGSTOP, a debugger let go) would keep SIGTERM pending until the SIGKILL
 * after the grace period: SIGCONT lets it act on it at once. */
static void signal_all(rank_proc *rp, int n, int sig) {
    for (int r = 0; r < n; r++)
        if (rp[r].running) {
            kill(rp[r].pid, sig);
            if (sig == SIGTERM) kill(rp[r].pid, SIGCONT);
        }
}

/* id: this attempt's TRAINER_JOB_ID; tty_cols: the width of this process's terminal (0:
 * unknown), -1 when its stdout is not one. */
static tr_status spawn(const tr_launch_config *cfg, rank_proc *rp, const char *id, int attempt, int tty_cols) {
    for (int r = 0; r < cfg->nproc; r++) {
        int fds[2];
        if (pipe(fds) != 0) return tr_error_set(TR_ERR_IO, "launch: pipe: %s", strerror(errno));
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
            close(fds[0]);
            close(fds[1]);
            return tr_error_set(TR_ERR_IO, "launch: fork rank %d: %s", r, strerror(errno));
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(127); /* the launcher died before prctl */
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGPIPE, SIG_DFL);
            dup2(fds[1], STDOUT_FILENO);
            dup2(fds[1], STDERR_FILENO);
            close(fds[0]);
            close(fds[1]);
            char v[64];
            snprintf(v, sizeof v, "%d", r);
            setenv("RANK", v, 1);
            setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%d", cfg->nproc);
            setenv("WORLD_SIZE", v, 1);
            setenv("LOCAL_WORLD_SIZE", v, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            if (!getenv("MASTER_PORT")) setenv("MASTER_PORT", "29500", 1);
            setenv("TRAINER_JOB_ID", id, 1);
            snprintf(v, sizeof v, "%d", attempt);
            setenv("TRAINER_RESTART_COUNT", v, 1);
            /* Rank 0 may draw its progress bar, as wide as this terminal less the prefix. */
            unsetenv("TRAINER_PROGRESS_COLS");
            if (r == 0 && tty_cols >= 0) {
                snprintf(v, sizeof v, "%d", tty_cols > 12 ? tty_cols - (int)strlen("[rank 0] ") : 0);
                setenv("TRAINER_PROGRESS_COLS", v, 1);
            }
            execvp(cfg->argv[0], cfg->argv);
            fprintf(stderr, "cannot run %s: %s\n", cfg->argv[0], strerror(errno));
            _exit(127);
        }
        close(fds[1]);
        fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
        fcntl(fds[0], F_SETFD, FD_CLOEXEC);
        rp[r] = (rank_proc){.pid = pid, .fd = fds[0], .running = 1};
    }
    return TR_OK;
}

/* How long an error exit waits for a signal death it may be reporting (seconds). */
#define ERROR_SETTLE_S 0.5
/* How long the other ranks get to end by themselves once one failed, before SIGTERM: those
 * waiting in a collective notice a dead peer within milliseconds and say where they were
 * ("all_reduce #35: rank 1 died in the middle of this operation"). */
#define PEER_SETTLE_S 0.2
/* How long ranks asked to stop by a signal get to finish their step and save a checkpoint
 * before SIGKILL (at least; the config's grace when longer). */
#define INTERRUPT_GRACE_S 60.0

/* Runs one attempt to the end; returns the first failing rank (-1: all succeeded). */
static int supervise(const tr_launch_config *cfg, rank_proc *rp, tr_launch_result *res, term_out *t) {
    int n = cfg->nproc, failed = -1, live = n, suspect = -1, killed = 0;
    double grace = cfg->grace_s > 0 ? cfg->grace_s : 5, kill_at = 0, decide_at = 0, term_at = 0;
    struct pollfd *pfd = tr_calloc((size_t)n, sizeof *pfd);
    int *who = tr_calloc((size_t)n, sizeof *who);
    for (;;) {
        int np = 0;
        for (int r = 0; r < n; r++)
            if (rp[r].fd >= 0) {
                pfd[np] = (struct pollfd){.fd = rp[r].fd, .events = POLLIN};
                who[np++] = r;
            }
        if (live == 0 && np == 0) break;
        if (pfd && who) {
            int k = poll(pfd, (nfds_t)np, 50);
            for (int i = 0; k > 0 && i < np; i++)
                if (pfd[i].revents) drain(&rp[who[i]], who[i], t);
        } else {
            nanosleep(&(struct timespec){0, 50000000}, NULL);
        }
        /* Reap only our ranks (the caller may have other children). A rank killed by a signal
         * is named before ranks that exited with an error: those are usually the peers
         * reporting its death, and may be reaped first (a killed process wakes its peers'
         * futexes while it exits, before it can be reaped), so an error exit is only blamed
         * once no signal death followed it within ERROR_SETTLE_S. */
        int signaled = -1, errored = -1;
        for (int r = 0; r < n; r++) {
            int st;
            if (!rp[r].running || waitpid(rp[r].pid, &st, WNOHANG) != rp[r].pid) continue;
            rp[r].running = 0;
            rp[r].status = st;
            live--;
            if (WIFSIGNALED(st) && signaled < 0) signaled = r;
            else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && errored < 0) errored = r;
        }
        if (failed < 0 && !g_signal && signaled >= 0) failed = signaled;
        if (failed < 0 && !g_signal && errored >= 0 && suspect < 0) {
            suspect = errored;
            decide_at = tr_now() + ERROR_SETTLE_S;
        }
        if (failed < 0 && !g_signal && suspect >= 0 && (tr_now() >= decide_at || live == 0)) failed = suspect;
        if (failed >= 0 && term_at == 0) term_at = tr_now() + PEER_SETTLE_S;
        if (failed >= 0 && kill_at == 0 && (tr_now() >= term_at || live == 0)) {
            signal_all(rp, n, SIGTERM);
            kill_at = tr_now() + grace;
        }
        if (g_signal && kill_at == 0) {
            erase_bar(t);
            fflush(stdout);
            if (!cfg->quiet)
                fprintf(stderr, "[launcher] signal %d (%s): asking every rank to stop (again to stop them at once)\n",
                        (int)g_signal, strsignal(g_signal));
            signal_all(rp, n, SIGTERM);
            kill_at = tr_now() + (grace > INTERRUPT_GRACE_S ? grace : INTERRUPT_GRACE_S);
        }
        if (g_signals > 1 && kill_at > 0 && live > 0 && !killed) {
            signal_all(rp, n, SIGKILL);
            killed = 1;
        }
        if (kill_at > 0 && tr_now() > kill_at && live > 0) {
            signal_all(rp, n, SIGKILL);
            kill_at = tr_now() + 3600; /* once */
        }
        /* A rank that exited may leave its pipe open in a grandchild: stop reading it once
         * every rank is gone and the pipes are quiet. */
        if (live == 0 && np > 0 && pfd && poll(pfd, (nfds_t)np, 0) == 0) {
            for (int i = 0; i < np; i++) drain(&rp[who[i]], who[i], t);
            for (int r = 0; r < n; r++)
                if (rp[r].fd >= 0) {
                    close(rp[r].fd);
                    rp[r].fd = -1;
                }
        }
    }
    tr_free(pfd);
    tr_free(who);
    if (failed >= 0) {
        describe_exit(res->message, sizeof res->message, failed, rp[failed].status, rp[failed].last);
        int st = rp[failed].status;
        res->exit_code = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
        res->failed_rank = failed;
    }
    return failed;
}

/* Backstop for the shm backend, which unlinks its names itself once every rank has mapped
 * them: whatever a killed rank left of the attempt with TRAINER_JOB_ID `id`, the job's segment
 * and its ranks' shared buffers (/trainer-<job id>, /trainer-<job id>-<rank>-m<n>; the job id
 * is "trainer-" + TRAINER_JOB_ID, tr_comm_env_detect). */
static void remove_shm(const char *id) {
    char prefix[128], name[384];
    int len = snprintf(prefix, sizeof prefix, "trainer-trainer-%s", id);
    DIR *dir = opendir("/dev/shm");
    if (!dir) return;
    for (struct dirent *e; (e = readdir(dir));)
        if (strncmp(e->d_name, prefix, (size_t)len) == 0 && (e->d_name[len] == 0 || e->d_name[len] == '-')) {
            snprintf(name, sizeof name, "/%s", e->d_name);
            shm_unlink(name);
        }
    closedir(dir);
}

tr_status tr_launch(const tr_launch_config *cfg, tr_launch_result *res) {
    memset(res, 0, sizeof *res);
    res->failed_rank = -1;
    if (cfg->nproc < 1 || cfg->nproc > 4096)
        return tr_error_set(TR_ERR_INVALID, "launch: %d processes: expected 1 to 4096", cfg->nproc);
    if (!cfg->argv || !cfg->argv[0]) return tr_error_set(TR_ERR_INVALID, "launch: no command to run");
    rank_proc *rp = tr_calloc((size_t)cfg->nproc, sizeof *rp);
    if (!rp) return tr_error_set(TR_ERR_NOMEM, "launch: out of memory");
    char job[48];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(job, sizeof job, "%ld-%lx", (long)getpid(), (unsigned long)(ts.tv_nsec ^ ts.tv_sec));
    /* SA_RESTART: poll returns early on a signal anyway; the ranks' output written to this
     * process's stdout (a pipe under a scheduler) is not cut by one. The handler's count
     * (g_signals) is updated with both signals blocked. */
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    g_signal = 0;
    g_signals = 0;
    tr_status st = TR_OK;
    /* mpirun and srun gather output through a pseudo-terminal: no bar there. */
    term_out term = {.tty = isatty(STDOUT_FILENO) && !tr_comm_env_gathers_output()};
    for (int attempt = 0;; attempt++) {
        char id[64];
        snprintf(id, sizeof id, "%s.%d", job, attempt);
        struct winsize ws;
        int cols = !term.tty ? -1 : ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
        st = spawn(cfg, rp, id, attempt, cols);
        if (st != TR_OK) {
            for (int r = 0; r < cfg->nproc; r++)
                if (rp[r].running) {
                    kill(rp[r].pid, SIGKILL);
                    waitpid(rp[r].pid, NULL, 0);
                    close(rp[r].fd);
                }
            break;
        }
        int failed = supervise(cfg, rp, res, &term);
        erase_bar(&term);
        fflush(stdout);
        remove_shm(id);
        if (g_signal) {
            int by_itself = 1; /* every rank exited, none was killed */
            for (int r = 0; r < cfg->nproc; r++) by_itself &= !WIFSIGNALED(rp[r].status);
            res->exit_code = 128 + g_signal;
            snprintf(res->message, sizeof res->message, "stopped by signal %d (%s): %s", (int)g_signal, strsignal(g_signal),
                     by_itself ? "every rank stopped by itself" : "the ranks were terminated");
            break;
        }
        if (failed < 0) {
            res->exit_code = 0;
            res->failed_rank = -1;
            res->message[0] = 0;
            break;
        }
        if (attempt >= cfg->max_restarts) break;
        res->restarts++;
        if (!cfg->quiet)
            fprintf(stderr, "[launcher] %s; restarting all %d ranks (restart %d of %d)\n", res->message, cfg->nproc,
                    attempt + 1, cfg->max_restarts);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    tr_free(rp);
    return st;
}
