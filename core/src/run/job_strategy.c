/* A job's strategy: chosen from the config and the devices found (the auto rule), its
 * options read and checked, and readied. */
#include "job_parts.h"
#include "plugin/plugin_impl.h"

#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io_error.h"
#include "comm/env.h"
#include "config/node.h"
#include "kernels/gemm_bf16.h"
#include "run/run_api.h"
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/runtime.h"

/* trainer.accelerator, trainer.devices and trainer.strategy through the selection rule
 * (tr_choose_devices) over the GPUs the device plugins see (trainer.gpu_backend: auto, or one
 * device plugin by name): auto picks cpu for no GPU and one device, single-gpu for one GPU,
 * ddp for several devices. no_gpu: NULL, or why the GPUs found cannot be used (a retry under
 * accelerator auto, see job_plan): the choice is then made as if none were found. The choice
 * is written into the resolved config. */
static tr_status pick_strategy(job *j, const char *no_gpu) {
    const char *name = j->strategy_asked, *backend;
    j->strat_p = NULL;
    j->choice_made = 0;
    j->gpu_refused[0] = 0;
    TR_CHECK(tr_cfg_get_string(j->root, "trainer.gpu_backend", "auto", &backend, 0));
    tr_device_request rq = {.accelerator = (tr_accelerator)j->s.accelerator, .devices = j->s.devices_asked,
                            .ids = j->s.device_ids, .n_ids = j->s.n_device_ids, .strategy = name};
    /* A CPU request (accelerator cpu, or strategy cpu) never needs the GPUs counted; a backend
     * named is checked all the same. */
    int cpu_only = rq.accelerator == TR_ACCEL_CPU || (rq.accelerator == TR_ACCEL_AUTO && strcmp(name, "cpu") == 0);
    if (!no_gpu) { /* a retry keeps the first pick's count */
        if (!cpu_only || strcmp(backend, "auto") != 0) TR_CHECK(tr_gpu_scan_registry(j->reg, backend, &j->gpus));
        else snprintf(j->gpus.why, sizeof j->gpus.why, "not counted for a CPU run");
    }
    /* Ranks started by mpirun/srun/torchrun: auto and -1 mean the job's ranks, not this rank's
     * cores (a launcher may pin each rank to one) nor every GPU of the host. On GPUs, one per
     * rank of this host (the job may span hosts); a host with fewer GPUs than ranks keeps the
     * old rule (accelerator auto: the world, which the CPU then runs; gpu: the GPUs, shared).
     * Not for cpu, which is one device (job_check_world refuses it under several ranks). */
    tr_comm_env ce;
    int gpus = no_gpu ? 0 : j->gpus.count;
    if (tr_launched_externally() && rq.n_ids == 0 && strcmp(name, "cpu") != 0 &&
        (rq.devices == TR_DEVICES_AUTO || rq.devices == TR_DEVICES_ALL) && tr_comm_env_detect(&ce) == TR_OK && ce.size > 1) {
        int on_gpus = rq.accelerator == TR_ACCEL_GPU || (rq.accelerator == TR_ACCEL_AUTO && gpus > 0);
        if (on_gpus && ce.local_size <= gpus) rq.devices = ce.local_size;
        else if (rq.accelerator != TR_ACCEL_GPU) rq.devices = ce.size;
    }
    tr_device_choice c;
    TR_CHECK(tr_choose_devices(&rq, no_gpu ? 0 : j->gpus.count, no_gpu ? no_gpu : j->gpus.why, tr_cpu_count(), &c));
    j->s.devices = c.devices;
    j->accelerator = c.accelerator;
    j->n_gpu_ids = c.accelerator == TR_ACCEL_GPU ? c.n_ids : 0;
    memcpy(j->gpu_ids, c.ids, sizeof j->gpu_ids);
    j->choice_made = 1;
    snprintf(j->picked, sizeof j->picked, "%s", c.strategy);
    snprintf(j->why, sizeof j->why, "%s", c.why);
    j->strategy_auto = strcmp(name, "auto") == 0;
    if (j->strategy_auto) {
        TR_CHECK(tr_config_set(j->cfg, "trainer.strategy", c.strategy));
        j->root = tr_config_root(j->cfg);
    }
    if (!j->strategy_auto) return job_plugin_named(j, "trainer.strategy", c.strategy, TR_PLUGIN_STRATEGY, &j->strat_p);
    tr_status st = tr_registry_find(j->reg, TR_PLUGIN_STRATEGY, c.strategy, &j->strat_p);
    if (st != TR_OK) tr_error_prefix("trainer.strategy: auto picked %s (%s), which is not installed: ", c.strategy, c.why);
    return st;
}

/* The chosen strategy's table, options and probe (can it run here, on this accelerator?). */
static tr_status ready_strategy(job *j) {
    TR_CHECK(job_strategy_ops(j->strat_p, &j->sops_table));
    j->sops = &j->sops_table;
    /* Leaving a step out whole is a promise of optim_step since ABI 0.3 (skip_nonfinite). */
    const tr_plugin_desc *d = j->strat_p->desc;
    if (j->s.on_nan == ON_NAN_SKIP && d->abi_major == 0 && d->abi_minor < 3)
        return tr_error_set(TR_ERR_PLUGIN, "trainer.on_nan: skip: strategy %s (%s) was built for plugin ABI %u.%u, which cannot "
                                           "leave a step out (ABI 0.3 can): rebuild it against this SDK or use on_nan: stop",
                            d->name, j->strat_p->path, d->abi_major, d->abi_minor);
    tr_options_destroy(j->strat_opts);
    j->strat_opts = NULL;
    TR_CHECK(job_options_from(tr_cfg_child(j->root, "strategy"), NULL, "strategy", j->strat_p, &j->strat_opts));
    /* Only a strategy whose probe saw the accelerator and the device plugin (ABI 0.5) and
     * accepted them runs on GPUs: an older one, or one without a probe, cannot open a device
     * and would train on the CPU while GPUs were asked. */
    if (j->accelerator == TR_ACCEL_GPU && (!j->sops->probe || (d->abi_major == 0 && d->abi_minor < 5))) {
        if (!j->sops->probe)
            snprintf(j->gpu_refused, sizeof j->gpu_refused, "strategy %s cannot run on GPUs (it has no probe to say it can)",
                     d->name);
        else
            snprintf(j->gpu_refused, sizeof j->gpu_refused, "strategy %s cannot run on GPUs (built for plugin ABI %u.%u: "
                     "it cannot open a device before 0.5)", d->name, d->abi_major, d->abi_minor);
        return tr_error_set(TR_ERR_UNSUPPORTED, "strategy %s (%s) cannot run here: %s", d->name, j->strat_p->path,
                            j->gpu_refused);
    }
    if (j->sops->probe) {
        tr_strategy_probe pe = {.devices = (int)j->s.devices, .gpus = j->gpus.count, .registry = j->reg,
                                .accelerator = j->accelerator,
                                .gpu_backend = j->accelerator == TR_ACCEL_GPU ? j->gpus.backend : NULL};
        tr_status st = j->sops->probe(j->strat_opts, &pe);
        if (st != TR_OK) {
            if (j->accelerator == TR_ACCEL_GPU) snprintf(j->gpu_refused, sizeof j->gpu_refused, "%s", tr_error_msg());
            tr_error_prefix("strategy %s (%s) cannot run here: ", j->strat_p->desc->name, j->strat_p->path);
            return st;
        }
    }
    return TR_OK;
}

/* Picks and readies the strategy. Under accelerator auto, GPUs found but unusable are not an
 * error: the GPU request the rule refuses (more devices than GPUs), a strategy that is not
 * installed, or one that cannot run on GPUs; the choice is then made again on the CPU, and the
 * reason printed at start says why. */
tr_status job_choose_strategy(job *j) {
    const char *name;
    TR_CHECK(tr_cfg_get_string(j->root, "trainer.strategy", "auto", &name, 0));
    snprintf(j->strategy_asked, sizeof j->strategy_asked, "%s", name);
    tr_status st = pick_strategy(j, NULL);
    if (st != TR_OK && !j->choice_made && j->gpus.count > 0) /* the rule refused a GPU request */
        snprintf(j->gpu_refused, sizeof j->gpu_refused, "%s", tr_error_msg());
    else if (st == TR_ERR_NOT_FOUND && j->choice_made && j->accelerator == TR_ACCEL_GPU)
        snprintf(j->gpu_refused, sizeof j->gpu_refused, "no strategy plugin %s is installed", j->picked);
    if (st == TR_OK) st = ready_strategy(j); /* sets gpu_refused when the strategy cannot run on GPUs */
    if (st == TR_OK || j->s.accelerator != TR_ACCEL_AUTO || !j->gpu_refused[0]) return st;
    char no_gpu[sizeof j->why];
    int n = j->gpus.count;
    snprintf(no_gpu, sizeof no_gpu, "%d GPU%s of %s left unused: %s", n, n == 1 ? "" : "s", j->gpus.backend->desc->name,
             j->gpu_refused);
    TR_CHECK(pick_strategy(j, no_gpu));
    j->gpu_fallback = 1;
    if (!j->strategy_auto) { /* auto's reason says it already ("found no GPU (...)") */
        size_t len = strlen(j->why);
        snprintf(j->why + len, sizeof j->why - len, "; %s", no_gpu);
    }
    return ready_strategy(j);
}

tr_status job_strategy_ops(const tr_plugin *p, tr_strategy_ops *out) {
    /* The first published table ends with `state`; entries after it may be absent: an older
     * plugin's shorter table is copied into a full one whose missing entries are NULL, so the
     * optional operations are plain NULL checks everywhere. */
    TR_CHECK(plugin_copy_ops(p, out, sizeof *out, offsetof(tr_strategy_ops, state) + sizeof out->state, "strategy",
                             "create ... state"));
    const char *missing = !out->create ? "create" : !out->destroy ? "destroy" : !out->train_micro ? "train_micro"
                          : !out->optim_step ? "optim_step" : !out->forward ? "forward" : !out->state ? "state" : NULL;
    if (missing)
        return tr_error_set(TR_ERR_PLUGIN, "%s: strategy %s lacks the required operation '%s'", p->path, p->desc->name, missing);
    return TR_OK;
}
