/* Where this process stands in a job, from the launcher's environment: trainer's own
 * launcher and torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), mpirun
 * (OMPI_COMM_WORLD_*), srun (SLURM_*), else a single rank. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/comm.h"

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

tr_status tr_comm_env_detect(tr_comm_env *env) {
    memset(env, 0, sizeof *env);
    env->size = env->local_size = 1;
    int has_rank, has_size, has_lr, has_ls;
    const long MAXR = 1 << 20;
    TR_CHECK(env_int("RANK", 0, MAXR, &env->rank, &has_rank));
    TR_CHECK(env_int("WORLD_SIZE", 1, MAXR, &env->size, &has_size));
    if (has_rank || has_size) {
        if (!has_rank || !has_size)
            return tr_error_set(TR_ERR_INVALID, "environment: %s is set without %s", has_rank ? "RANK" : "WORLD_SIZE",
                                has_rank ? "WORLD_SIZE" : "RANK");
        TR_CHECK(env_int("LOCAL_RANK", 0, MAXR, &env->local_rank, &has_lr));
        TR_CHECK(env_int("LOCAL_WORLD_SIZE", 1, MAXR, &env->local_size, &has_ls));
        if (!has_lr) env->local_rank = env->rank;
        if (!has_ls) env->local_size = env->size;
        const char *job = getenv("TRAINER_JOB_ID");
        if (job && *job) set_job(env, "trainer", job);
        else set_job(env, "torchrun", getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "0");
    } else if (getenv("OMPI_COMM_WORLD_SIZE")) {
        TR_CHECK(env_int("OMPI_COMM_WORLD_RANK", 0, MAXR, &env->rank, &has_rank));
        TR_CHECK(env_int("OMPI_COMM_WORLD_SIZE", 1, MAXR, &env->size, &has_size));
        TR_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, MAXR, &env->local_rank, &has_lr));
        TR_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, MAXR, &env->local_size, &has_ls));
        if (!has_rank) return tr_error_set(TR_ERR_INVALID, "environment: OMPI_COMM_WORLD_SIZE is set without OMPI_COMM_WORLD_RANK");
        if (!has_ls) env->local_size = env->size;
        if (!has_lr) env->local_rank = env->rank;
        const char *ns = getenv("PMIX_NAMESPACE");
        set_job(env, "ompi", ns ? ns : getenv("OMPI_MCA_ess_base_jobid"));
    } else if (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS")) {
        TR_CHECK(env_int("SLURM_PROCID", 0, MAXR, &env->rank, &has_rank));
        TR_CHECK(env_int("SLURM_NTASKS", 1, MAXR, &env->size, &has_size));
        TR_CHECK(env_int("SLURM_LOCALID", 0, MAXR, &env->local_rank, &has_lr));
        /* SLURM_NTASKS_PER_NODE when given; else SLURM_STEP_TASKS_PER_NODE's first count ("2(x3)"). */
        TR_CHECK(env_int("SLURM_NTASKS_PER_NODE", 1, MAXR, &env->local_size, &has_ls));
        if (!has_ls) {
            const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
            long v = tpn ? strtol(tpn, NULL, 10) : 0;
            env->local_size = v > 0 ? (int)v : env->size;
        }
        if (!has_lr) env->local_rank = env->rank % env->local_size;
        char id[96];
        snprintf(id, sizeof id, "%s.%s", getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "0",
                 getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : "0");
        set_job(env, "slurm", id);
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
