/* tr_choose_devices: the auto-selection rule (see trainer/devices.h). Pure: no probing, no
 * globals; the caller says what was found. */
#include <stdio.h>
#include <string.h>

#include "trainer/devices.h"

const char *tr_accelerator_name(tr_accelerator a) {
    return a == TR_ACCEL_CPU ? "cpu" : a == TR_ACCEL_GPU ? "gpu" : "auto";
}

/* "found 2 GPUs (ids 0-1)" / "found no GPU (no CUDA driver)" into buf. */
static const char *found(char *buf, size_t size, int gpus, const char *why) {
    if (gpus <= 0) snprintf(buf, size, "found no GPU%s%s%s", why && *why ? " (" : "", why && *why ? why : "", why && *why ? ")" : "");
    else if (gpus == 1) snprintf(buf, size, "found 1 GPU (id 0)");
    else snprintf(buf, size, "found %d GPUs (ids 0-%d)", gpus, gpus - 1);
    return buf;
}

tr_status tr_choose_devices(const tr_device_request *rq, int gpus, const char *gpu_why, int cores,
                            tr_device_choice *out) {
    memset(out, 0, sizeof *out);
    char f[400];
    found(f, sizeof f, gpus, gpu_why);
    const char *strategy = rq->strategy && *rq->strategy ? rq->strategy : "auto";
    int is_auto = strcmp(strategy, "auto") == 0;
    if (cores < 1) cores = 1;

    /* The accelerator. */
    tr_accelerator acc = rq->accelerator;
    /* Auto is the GPU when there is one, unless the strategy named is the CPU one. */
    if (acc == TR_ACCEL_AUTO) acc = gpus > 0 && strcmp(strategy, "cpu") != 0 ? TR_ACCEL_GPU : TR_ACCEL_CPU;
    if (acc == TR_ACCEL_GPU && gpus <= 0)
        return tr_error_set(TR_ERR_INVALID, "trainer.accelerator: gpu asked, but this machine %s; accelerator cpu or "
                                            "auto trains on the CPU", f);
    if (rq->n_ids > 0 && acc != TR_ACCEL_GPU)
        return tr_error_set(TR_ERR_INVALID, "trainer.devices: a list of device ids names GPUs, but the accelerator is cpu (%s); "
                                            "give a number of CPU ranks instead", f);
    out->accelerator = acc;

    /* The devices. */
    if (rq->n_ids > 0) {
        if (rq->n_ids > TR_MAX_DEVICE_IDS)
            return tr_error_set(TR_ERR_INVALID, "trainer.devices: %d ids, at most %d", rq->n_ids, TR_MAX_DEVICE_IDS);
        /* The one-GPU testing modes: dataparallel's replicas on one device, ddp's and sharded's
         * ranks sharing one over a host backend. */
        int repeats_ok = strcmp(strategy, "dataparallel") == 0 || strcmp(strategy, "ddp") == 0 ||
                         strcmp(strategy, "sharded") == 0;
        for (int i = 0; i < rq->n_ids; i++) {
            if (rq->ids[i] < 0 || rq->ids[i] >= gpus)
                return tr_error_set(TR_ERR_INVALID, "trainer.devices: GPU id %d does not exist: this machine %s", rq->ids[i], f);
            for (int k = 0; k < i && !repeats_ok; k++)
                if (rq->ids[k] == rq->ids[i])
                    return tr_error_set(TR_ERR_INVALID, "trainer.devices: GPU %d is listed twice (only strategies "
                                                        "dataparallel, ddp and sharded accept that, named in "
                                                        "trainer.strategy, as a one-GPU testing mode)", rq->ids[i]);
            out->ids[i] = rq->ids[i];
        }
        out->n_ids = out->devices = rq->n_ids;
    } else if (rq->devices == TR_DEVICES_AUTO || rq->devices == TR_DEVICES_ALL) {
        out->devices = acc == TR_ACCEL_GPU ? gpus : rq->devices == TR_DEVICES_ALL ? cores : 1;
    } else if (rq->devices >= 1) {
        if (acc == TR_ACCEL_GPU && rq->devices > gpus)
            return tr_error_set(TR_ERR_INVALID, "trainer.devices: %d GPUs asked, but this machine %s; devices: %d (or -1) "
                                                "would use them all, accelerator cpu runs %d CPU ranks",
                                rq->devices, f, gpus, rq->devices);
        out->devices = rq->devices;
    } else {
        return tr_error_set(TR_ERR_INVALID, "trainer.devices: %d is not a device count (a number >= 1, -1 for all, auto, "
                                            "or a list of GPU ids)", rq->devices);
    }
    if (acc == TR_ACCEL_GPU && out->n_ids == 0) {
        out->n_ids = out->devices <= TR_MAX_DEVICE_IDS ? out->devices : TR_MAX_DEVICE_IDS;
        for (int i = 0; i < out->n_ids; i++) out->ids[i] = i;
    }

    /* The strategy. */
    const char *dev = acc == TR_ACCEL_GPU ? "GPU" : "CPU device";
    if (is_auto) {
        const char *pick = out->devices > 1 ? "ddp" : acc == TR_ACCEL_GPU ? "single-gpu" : "cpu";
        snprintf(out->strategy, sizeof out->strategy, "%s", pick);
        snprintf(out->why, sizeof out->why, "auto: %s; %d %s%s -> %s%s", f, out->devices, dev, out->devices == 1 ? "" : "s",
                 pick, out->devices > 1 ? " (one process each)" : "");
        return TR_OK;
    }
    if (strcmp(strategy, "cpu") == 0 && acc == TR_ACCEL_GPU)
        return tr_error_set(TR_ERR_INVALID, "trainer.strategy: cpu trains on the CPU, but the accelerator is gpu (%s); "
                                            "single-gpu or ddp use GPUs, accelerator cpu keeps strategy cpu", f);
    if (strcmp(strategy, "single-gpu") == 0) {
        if (acc != TR_ACCEL_GPU)
            return tr_error_set(TR_ERR_INVALID, "trainer.strategy: single-gpu needs a GPU, but this machine %s; strategy cpu "
                                                "(or auto) trains on the CPU", f);
        if (out->devices > 1)
            return tr_error_set(TR_ERR_INVALID, "trainer.strategy: single-gpu uses one GPU, %d asked; ddp or dataparallel use "
                                                "several", out->devices);
    }
    /* cpu is one replica in one process: a count it would ignore is refused, not obeyed in
     * the message alone (-1, every core, is what it uses anyway). */
    if (strcmp(strategy, "cpu") == 0 && rq->n_ids == 0 && rq->devices > 1)
        return tr_error_set(TR_ERR_INVALID, "trainer.strategy: cpu trains one replica in one process, but trainer.devices "
                                            "asks for %d CPU devices; strategy ddp or sharded runs %d ranks, dataparallel %d "
                                            "replicas in one process; or set trainer.devices: 1",
                            rq->devices, rq->devices, rq->devices);
    snprintf(out->strategy, sizeof out->strategy, "%s", strategy);
    snprintf(out->why, sizeof out->why, "named in trainer.strategy; %d %s%s", out->devices, dev, out->devices == 1 ? "" : "s");
    return TR_OK;
}
