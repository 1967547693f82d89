/* The job's world against how this process was started. A launcher (trainer launch,
 * torchrun, mpirun, srun) fixes the number of ranks; the strategy and trainer.devices must
 * mean the same number, or the job would train on another world than the one it reports, or
 * as independent copies of itself. And a world asks one sample per rank of the global batch.
 * job_plan runs this, so `trainer plan`, `trainer run` before it starts ranks, and each rank
 * of another launcher refuse the same configs with the same message. Limit: a devices count
 * of auto or -1 is not checked (job.c's pick_strategy made it the launcher's ranks, or on a
 * host with fewer GPUs than ranks, the GPUs, which the ranks share by local rank). */
#include <stdio.h>
#include <string.h>

#include "comm/env.h"
#include "job.h"
#include "trainer/comm.h"
#include "trainer/data.h"

/* "config.yaml:12:5: " for key, or "" when it is not in the config. */
static const char *where(const job *j, const char *key, char *buf, size_t size) {
    const tr_cfg_node *n = tr_cfg_find(j->root, key);
    if (!n || !tr_cfg_line(n)) snprintf(buf, size, "%s", "");
    else snprintf(buf, size, "%s:%d:%d: ", tr_cfg_source(n), tr_cfg_line(n), tr_cfg_column(n));
    return buf;
}

/* Under a launcher of ce->size ranks, running a strategy of `procs` processes for the
 * devices chosen. */
static tr_status check_launched(const job *j, const tr_comm_env *ce, int procs) {
    const char *launcher = tr_comm_env_launcher(), *var = tr_comm_env_size_var(), *name = j->strat_p->desc->name;
    char at[1200];
    int asked = j->s.n_device_ids > 0 || j->s.devices_asked >= 1, gpu = j->accelerator == TR_ACCEL_GPU;
    /* The key to blame: the strategy named, else the devices count that made auto pick it. */
    const char *key = !j->strategy_auto ? "trainer.strategy" : asked ? "trainer.devices" : "";
    /* One process whatever the devices (cpu, dataparallel, single-gpu): not ddp on one GPU,
     * whose ranks may share it. */
    int single = !j->sops->processes || j->sops->processes(j->strat_opts, ce->size) <= 1;
    if (single && ce->size > 1)
        return tr_error_set(TR_ERR_INVALID, "%s%s%sstrategy %s runs in one process (%s), but %s started %d ranks of "
                            "this command (%s=%d): each would run the whole job alone, as %d independent copies; under a "
                            "launcher use strategy ddp or sharded with trainer.devices auto (the launcher's ranks), or run "
                            "without the launcher",
                            key[0] ? where(j, key, at, sizeof at) : "", key, key[0] ? ": " : "", name, j->why, launcher,
                            ce->size, var, ce->size, ce->size);
    /* On GPUs a count names GPUs of a host, one rank each: across hosts, this host's ranks. */
    if (!asked || procs == ce->size || (gpu && procs == ce->local_size)) return TR_OK;
    return tr_error_set(TR_ERR_INVALID, "%strainer.devices: launched as %d rank%s by %s (%s=%d), but trainer.devices is %d "
                        "and strategy %s runs one rank per device: drop trainer.devices (auto takes the launcher's ranks) "
                        "or launch %d rank%s%s",
                        where(j, "trainer.devices", at, sizeof at), ce->size, ce->size == 1 ? "" : "s", launcher, var,
                        ce->size, procs, name, procs, procs == 1 ? "" : "s", gpu ? " (on each host, one per GPU)" : "");
}

int job_world(const job *j, int *local) {
    tr_comm_env ce;
    if (tr_comm_env_launcher() && tr_comm_env_detect(&ce) == TR_OK && ce.size > 1) {
        if (local) *local = ce.local_size;
        return ce.size;
    }
    int n = job_processes(j);
    if (local) *local = n;
    return n;
}

tr_status job_check_world(const job *j) {
    if (tr_comm_env_launcher()) {
        tr_comm_env ce;
        TR_CHECK(tr_comm_env_detect(&ce));
        TR_CHECK(check_launched(j, &ce, job_processes(j)));
    }
    /* The loader's own check (each rank makes its loader later), with the ranks known now. */
    tr_sampler s = {.global_batch = j->s.batch, .world = job_world(j, NULL)};
    tr_status st = tr_sampler_validate(&s);
    if (st != TR_OK) {
        char at[1200];
        tr_error_prefix("%s", where(j, "data.batch_size", at, sizeof at));
    }
    return st;
}
