/* Where this process stands in a job, from the launcher's environment: trainer's own
 * launcher and torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE),
 * mpirun (OMPI_COMM_WORLD_*), srun (SLURM_*), else a single rank. The first set found wins,
 * so a launcher started inside another (trainer launch under srun) is the one that counts. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/env.h"
#include "trainer/comm.h"

/* The launchers in the order their variables are read: the one place that decides which
 * launcher started this process (tr_comm_env_detect, the launcher's and the progress bar's
 * terminal, tr_launched_externally all ask it). With each, the variable holding the world
 * size (for messages) and whether it gathers the ranks' output through a pseudo-terminal. */
typedef enum { L_NONE, L_TRAINER, L_TORCHRUN, L_OMPI, L_SLURM, L_PMIX, L_PMI } launcher_id;
static const struct {
    const char *name, *size_var;
    int gathers_output;
} launchers[] = {
    [L_NONE] = {NULL, NULL, 0},
    [L_TRAINER] = {"trainer launch", "WORLD_SIZE", 0},
    [L_TORCHRUN] = {"torchrun", "WORLD_SIZE", 0}, /* or anything else that sets its variables */
    [L_OMPI] = {"mpirun", "OMPI_COMM_WORLD_SIZE", 1},
    [L_SLURM] = {"srun", "SLURM_NTASKS", 1},
    [L_PMIX] = {"a PMIx launcher", "PMIX_RANK", 1},
    [L_PMI] = {"a PMI launcher", "PMI_SIZE", 1}, /* MPICH's and Intel MPI's mpiexec (Hydra) */
};

static int set(const char *name) {
    const char *v = getenv(name);
    return v && *v; /* an empty variable is an unset one */
}

static launcher_id which_launcher(void) {
    if (set("RANK") || set("WORLD_SIZE")) return set("TRAINER_JOB_ID") ? L_TRAINER : L_TORCHRUN;
    if (set("OMPI_COMM_WORLD_SIZE")) return L_OMPI;
    if (set("SLURM_PROCID") && set("SLURM_NTASKS")) return L_SLURM;
    if (set("PMIX_RANK")) return L_PMIX;
    if (set("PMI_RANK")) return L_PMI;
    return L_NONE;
}

const char *tr_comm_env_launcher(void) { return launchers[which_launcher()].name; }

int tr_comm_env_gathers_output(void) { return launchers[which_launcher()].gathers_output; }

const char *tr_comm_env_size_var(void) {
    launcher_id l = which_launcher();
    /* An srun step inside an allocation of more tasks: the step's count, where srun gives it. */
    return l == L_SLURM && getenv("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : launchers[l].size_var;
}

void tr_comm_env_hosts(const tr_comm_env *env, char *buf, size_t size) {
    static const struct {
        const char *count, *names;
    } vars[] = {{"SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST"}, {"SLURM_NNODES", "SLURM_JOB_NODELIST"},
                {"OMPI_MCA_orte_num_nodes", NULL}, {"GROUP_WORLD_SIZE", NULL}};
    launcher_id l = which_launcher();
    char here[256] = "";
    if (gethostname(here, sizeof here - 1) != 0) snprintf(here, sizeof here, "%s", "(unknown)");
    int n = snprintf(buf, size, "%s", "several hosts");
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *c = getenv(vars[i].count), *names = vars[i].names ? getenv(vars[i].names) : NULL;
        if (!c || !*c || (l == L_SLURM) != (i < 2) || (l == L_TORCHRUN) != (i == 3)) continue;
        const char *what = l == L_TORCHRUN ? "nodes" : "hosts";
        if (names && *names) n = snprintf(buf, size, "%s %s (%s, %s)", c, what, names, vars[i].names);
        else n = snprintf(buf, size, "%s %s (%s)", c, what, vars[i].count);
        break;
    }
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "; %d rank%s on this one, %s", env->local_size,
                 env->local_size == 1 ? "" : "s", here);
}

/* An integer variable in [min, max]; *present = 0 when unset. */
static tr_status env_int(const char *name, long min, long max, int *out, int *present) {
    const char *v = getenv(name);
    *present = v && *v;
    if (!*present) return TR_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < min || x > max)
        return tr_error_set(TR_ERR_INVALID, "environment variable %s='%s': expected an integer in [%ld, %ld]", name, v,
                            min, max);
    *out = (int)x;
    return TR_OK;
}

/* The rendezvous name: [A-Za-z0-9_.-] only (it becomes a shm segment name). */
static void set_job(tr_comm_env *env, const char *a, const char *b) {
    snprintf(env->job_id, sizeof env->job_id, "%s%s%s", a, b && *b ? "-" : "", b ? b : "");
    for (char *p = env->job_id; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') *p = '_';
}

/* SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of nodes 0-2, 1 on node 3): the
 * count of `node` into *out; 0 when the text is absent or does not parse. */
static int tasks_on_node(const char *tpn, int node, int *out) {
    if (!tpn || !*tpn) return 0;
    const char *p = tpn;
    for (int first = 0;;) {
        char *end;
        long n = strtol(p, &end, 10), times = 1;
        if (end == p || n < 1 || n > INT32_MAX) return 0;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x') return 0;
            times = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || times < 1 || times > 1 << 20) return 0;
            p = end + 1;
        }
        if (node < first + times) {
            *out = (int)n;
            return 1;
        }
        first += (int)times;
        if (*p != ',') return 0;
        p++;
    }
}

tr_status tr_comm_env_detect(tr_comm_env *env) {
    memset(env, 0, sizeof *env);
    env->size = env->local_size = 1;
    int has_rank, has_size, has_lr, has_ls;
    const long MAXR = 1 << 20;
    launcher_id l = which_launcher();
    if (l == L_TRAINER || l == L_TORCHRUN) {
        TR_CHECK(env_int("RANK", 0, MAXR, &env->rank, &has_rank));
        TR_CHECK(env_int("WORLD_SIZE", 1, MAXR, &env->size, &has_size));
        if (!has_rank || !has_size)
            return tr_error_set(TR_ERR_INVALID, "environment: %s is set without %s", has_rank ? "RANK" : "WORLD_SIZE",
                                has_rank ? "WORLD_SIZE" : "RANK");
        TR_CHECK(env_int("LOCAL_RANK", 0, MAXR, &env->local_rank, &has_lr));
        TR_CHECK(env_int("LOCAL_WORLD_SIZE", 1, MAXR, &env->local_size, &has_ls));
        /* torchrun's nodes: GROUP_WORLD_SIZE of them, LOCAL_WORLD_SIZE ranks each. */
        int nodes = 1, has_nodes;
        TR_CHECK(env_int("GROUP_WORLD_SIZE", 1, MAXR, &nodes, &has_nodes));
        if (!has_ls) env->local_size = nodes > 1 && env->size % nodes == 0 ? env->size / nodes : env->size;
        if (nodes > 1 && env->local_size == env->size)
            return tr_error_set(TR_ERR_INVALID, "environment: GROUP_WORLD_SIZE=%d nodes, but LOCAL_WORLD_SIZE %s all %d ranks "
                                "on this one: set LOCAL_WORLD_SIZE to the ranks on this node", nodes,
                                has_ls ? "puts" : "is not set, which puts", env->size);
        if (!has_lr) env->local_rank = env->local_size == env->size ? env->rank : env->rank % env->local_size;
        const char *job = getenv("TRAINER_JOB_ID");
        if (job && *job) {
            set_job(env, "trainer", job);
        } else { /* a torchrun restart is a new rendezvous: a dead attempt's segment is not joined */
            char id[96];
            const char *port = getenv("MASTER_PORT"), *run = getenv("TORCHELASTIC_RUN_ID"),
                       *again = getenv("TORCHELASTIC_RESTART_COUNT");
            snprintf(id, sizeof id, "%s%s%s%s%s", port ? port : "0", run && *run ? "-" : "", run && *run ? run : "",
                     again && *again && strcmp(again, "0") != 0 ? "-r" : "",
                     again && *again && strcmp(again, "0") != 0 ? again : "");
            set_job(env, "torchrun", id);
        }
    } else if (l == L_OMPI) {
        TR_CHECK(env_int("OMPI_COMM_WORLD_RANK", 0, MAXR, &env->rank, &has_rank));
        TR_CHECK(env_int("OMPI_COMM_WORLD_SIZE", 1, MAXR, &env->size, &has_size));
        TR_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, MAXR, &env->local_rank, &has_lr));
        TR_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, MAXR, &env->local_size, &has_ls));
        if (!has_rank) return tr_error_set(TR_ERR_INVALID, "environment: OMPI_COMM_WORLD_SIZE is set without OMPI_COMM_WORLD_RANK");
        if (!has_ls) env->local_size = env->size;
        if (!has_lr) env->local_rank = env->rank;
        const char *ns = getenv("PMIX_NAMESPACE");
        set_job(env, "ompi", ns ? ns : getenv("OMPI_MCA_ess_base_jobid"));
    } else if (l == L_SLURM) {
        TR_CHECK(env_int("SLURM_PROCID", 0, MAXR, &env->rank, &has_rank));
        TR_CHECK(env_int(tr_comm_env_size_var(), 1, MAXR, &env->size, &has_size));
        TR_CHECK(env_int("SLURM_LOCALID", 0, MAXR, &env->local_rank, &has_lr));
        /* SLURM_STEP_TASKS_PER_NODE's count for this node (SLURM_NODEID) when given, else
         * SLURM_NTASKS_PER_NODE; else every rank here unless the step's nodes are several. */
        int node = 0, has_node, nodes = 1, has_nodes;
        TR_CHECK(env_int("SLURM_NODEID", 0, MAXR, &node, &has_node));
        TR_CHECK(env_int("SLURM_STEP_NUM_NODES", 1, MAXR, &nodes, &has_nodes)); /* the step's, not the job's */
        if (!has_nodes) TR_CHECK(env_int("SLURM_NNODES", 1, MAXR, &nodes, &has_nodes));
        has_ls = tasks_on_node(getenv("SLURM_STEP_TASKS_PER_NODE"), node, &env->local_size);
        if (!has_ls) TR_CHECK(env_int("SLURM_NTASKS_PER_NODE", 1, MAXR, &env->local_size, &has_ls));
        if (!has_ls) env->local_size = env->size;
        if (nodes > 1 && env->local_size == env->size)
            return tr_error_set(TR_ERR_INVALID, "environment: %d nodes (SLURM_STEP_NUM_NODES or SLURM_NNODES), but all %d "
                                "tasks (%s) would be on this one: SLURM_STEP_TASKS_PER_NODE or SLURM_NTASKS_PER_NODE is "
                                "missing", nodes, env->size, tr_comm_env_size_var());
        if (!has_lr) env->local_rank = env->rank % env->local_size;
        char id[96];
        snprintf(id, sizeof id, "%s.%s", getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "0",
                 getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : "0");
        set_job(env, "slurm", id);
    } else if (l == L_PMIX) {
        return tr_error_set(TR_ERR_INVALID, "environment: PMIX_RANK is set (a PMIx launcher started this process) but "
                            "no world size came with it (OMPI_COMM_WORLD_SIZE, SLURM_NTASKS or WORLD_SIZE): launch with "
                            "mpirun, srun or torchrun, or set RANK and WORLD_SIZE");
    } else if (l == L_PMI) {
        return tr_error_set(TR_ERR_INVALID, "environment: PMI_RANK is set (a PMI launcher, such as MPICH's or Intel MPI's "
                            "mpiexec, started this process), whose ranks this trainer does not read: launch with Open "
                            "MPI's mpirun, srun or torchrun, or set RANK and WORLD_SIZE");
    } else {
        char id[32];
        snprintf(id, sizeof id, "%ld", (long)getpid());
        set_job(env, "single", id);
    }
    if (env->rank >= env->size)
        return tr_error_set(TR_ERR_INVALID, "environment: rank %d is not below the world size %d", env->rank, env->size);
    if (env->local_rank >= env->local_size || env->local_size > env->size)
        return tr_error_set(TR_ERR_INVALID, "environment: local rank %d of local size %d does not fit a world of %d",
                            env->local_rank, env->local_size, env->size);
    const char *to = getenv("TRAINER_COMM_TIMEOUT");
    if (to && *to) {
        char *end;
        double v = strtod(to, &end);
        if (*end || !(v > 0) || v > 1e7)
            return tr_error_set(TR_ERR_INVALID, "environment variable TRAINER_COMM_TIMEOUT='%s': expected seconds > 0", to);
        env->timeout_s = v;
    }
    return TR_OK;
}
