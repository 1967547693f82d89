/* tr_choose_devices, the auto-selection rule, for 0, 1, 2 and 8 GPUs found and every
 * combination of accelerator (auto, cpu, gpu), devices (auto, 1, 2, 4, -1, [0], [1], [0, 0],
 * [0, 1]) and strategy (auto, cpu, single-gpu, ddp, dataparallel, sharded): the expected
 * choices spelled out for the homework cases, invariants checked for all 648. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "trainer/devices.h"
#include "trainer/status.h"

enum { CORES = 16 };

/* Runs one request; *msg gets the choice's why or the error. Returns the status. */
static tr_status choose(tr_accelerator acc, int devices, const int *ids, int n_ids, const char *strategy, int gpus,
                        tr_device_choice *c) {
    tr_device_request rq = {.accelerator = acc, .devices = devices, .ids = ids, .n_ids = n_ids, .strategy = strategy};
    return tr_choose_devices(&rq, gpus, "no CUDA driver", CORES, c);
}

static void expect(tr_accelerator acc, int devices, const char *strategy, int gpus, const char *want_strategy,
                   tr_accelerator want_acc, int want_devices) {
    tr_device_choice c;
    tr_status st = choose(acc, devices, NULL, 0, strategy, gpus, &c);
    CHECK(st == TR_OK, "%s/%d/%s with %d GPUs: refused: %s", tr_accelerator_name(acc), devices, strategy, gpus,
          tr_error_msg());
    if (st != TR_OK) return;
    CHECK(strcmp(c.strategy, want_strategy) == 0 && c.accelerator == want_acc && c.devices == want_devices,
          "%s/%d/%s with %d GPUs: got %s on %s x%d, want %s on %s x%d (%s)", tr_accelerator_name(acc), devices, strategy,
          gpus, c.strategy, tr_accelerator_name(c.accelerator), c.devices, want_strategy, tr_accelerator_name(want_acc),
          want_devices, c.why);
}

static void refused(tr_accelerator acc, int devices, const int *ids, int n_ids, const char *strategy, int gpus,
                    const char *needle) {
    tr_device_choice c;
    tr_status st = choose(acc, devices, ids, n_ids, strategy, gpus, &c);
    CHECK(st != TR_OK && strstr(tr_error_msg(), needle), "%s/%d/%s with %d GPUs: want a refusal with '%s', got %s: %s",
          tr_accelerator_name(acc), devices, strategy, gpus, needle, st == TR_OK ? "ok" : "refused",
          st == TR_OK ? c.why : tr_error_msg());
}

int main(void) {
    const tr_accelerator C = TR_ACCEL_CPU, G = TR_ACCEL_GPU, A = TR_ACCEL_AUTO;
    /* The homework: no GPU -> cpu; one GPU -> single-gpu; more -> ddp, one process per GPU. */
    expect(A, TR_DEVICES_AUTO, "auto", 0, "cpu", C, 1);
    expect(A, TR_DEVICES_AUTO, "auto", 1, "single-gpu", G, 1);
    expect(A, TR_DEVICES_AUTO, "auto", 2, "ddp", G, 2);
    expect(A, TR_DEVICES_AUTO, "auto", 8, "ddp", G, 8);
    /* CPU ranks on request, whatever GPUs exist. */
    expect(C, 4, "auto", 0, "ddp", C, 4);
    expect(C, 4, "auto", 8, "ddp", C, 4);
    expect(C, TR_DEVICES_AUTO, "auto", 8, "cpu", C, 1);
    /* Strategy cpu named: accelerator auto means the CPU, GPUs or not. */
    expect(A, TR_DEVICES_AUTO, "cpu", 1, "cpu", C, 1);
    expect(A, 1, "cpu", 8, "cpu", C, 1);
    expect(C, TR_DEVICES_ALL, "auto", 0, "ddp", C, CORES);
    expect(A, 2, "auto", 0, "ddp", C, 2);
    /* A subset of the GPUs. */
    expect(A, 1, "auto", 8, "single-gpu", G, 1);
    expect(G, 2, "auto", 8, "ddp", G, 2);
    expect(G, TR_DEVICES_ALL, "auto", 8, "ddp", G, 8);
    /* Named strategies are taken as named. */
    expect(A, TR_DEVICES_AUTO, "sharded", 8, "sharded", G, 8);
    expect(C, 3, "dataparallel", 0, "dataparallel", C, 3);
    expect(A, TR_DEVICES_AUTO, "ddp", 0, "ddp", C, 1);
    /* Lists of GPU ids. */
    tr_device_choice c;
    const int two[] = {1, 0}, same[] = {0, 0}, far[] = {5};
    CHECK(choose(A, 0, two, 2, "auto", 2, &c) == TR_OK && c.devices == 2 && c.ids[0] == 1 && c.ids[1] == 0 &&
              strcmp(c.strategy, "ddp") == 0,
          "ids [1, 0] with 2 GPUs: %s", tr_error_msg());
    CHECK(choose(A, 0, same, 2, "dataparallel", 1, &c) == TR_OK && c.devices == 2 && c.ids[1] == 0,
          "dataparallel on [0, 0] with 1 GPU (testing mode): %s", tr_error_msg());
    /* Impossible requests: what was found and what would work. */
    refused(G, TR_DEVICES_AUTO, NULL, 0, "auto", 0, "gpu asked, but this machine found no GPU (no CUDA driver); accelerator cpu");
    refused(G, 4, NULL, 0, "auto", 2, "4 GPUs asked, but this machine found 2 GPUs (ids 0-1); devices: 2");
    refused(A, 0, far, 1, "auto", 2, "GPU id 5 does not exist: this machine found 2 GPUs");
    CHECK(choose(A, 0, same, 2, "ddp", 1, &c) == TR_OK && c.devices == 2 && c.ids[0] == 0 && c.ids[1] == 0,
          "ddp on [0, 0] with 1 GPU (testing mode): %s", tr_error_msg());
    refused(A, 0, same, 2, "auto", 1, "GPU 0 is listed twice (only strategies dataparallel, ddp and sharded");
    refused(A, 0, same, 2, "single-gpu", 1, "GPU 0 is listed twice");
    refused(C, 0, two, 2, "auto", 8, "a list of device ids names GPUs, but the accelerator is cpu");
    refused(G, TR_DEVICES_AUTO, NULL, 0, "cpu", 1, "cpu trains on the CPU, but the accelerator is gpu");
    refused(A, 2, NULL, 0, "cpu", 0, "cpu trains one replica in one process, but trainer.devices asks for 2 CPU devices; "
                                     "strategy ddp or sharded runs 2 ranks");
    refused(C, 4, NULL, 0, "cpu", 2, "cpu trains one replica in one process, but trainer.devices asks for 4");
    refused(C, 1, NULL, 0, "single-gpu", 4, "single-gpu needs a GPU");
    refused(A, TR_DEVICES_AUTO, NULL, 0, "single-gpu", 2, "single-gpu uses one GPU, 2 asked");
    refused(A, -7, NULL, 0, "auto", 0, "-7 is not a device count");

    /* Every combination: a choice is consistent, a refusal has a message naming what was found
     * or the key. */
    const tr_accelerator accs[] = {A, C, G};
    const int counts[] = {TR_DEVICES_AUTO, 1, 2, 4, TR_DEVICES_ALL};
    const int gpus_list[] = {0, 1, 2, 8};
    const char *strategies[] = {"auto", "cpu", "single-gpu", "ddp", "dataparallel", "sharded"};
    const int id_lists[4][2] = {{0, 0}, {1, 0}, {0, 0}, {0, 1}};
    const int id_counts[4] = {1, 1, 2, 2};
    int combos = 0, chosen = 0;
    for (int g = 0; g < 4; g++)
        for (int a = 0; a < 3; a++)
            for (int s = 0; s < 6; s++)
                for (int d = 0; d < 9; d++) {
                    const int *ids = d >= 5 ? id_lists[d - 5] : NULL;
                    int n_ids = d >= 5 ? id_counts[d - 5] : 0, devs = d < 5 ? counts[d] : 0, gpus = gpus_list[g];
                    tr_status st = choose(accs[a], devs, ids, n_ids, strategies[s], gpus, &c);
                    combos++;
                    if (st != TR_OK) {
                        CHECK(strstr(tr_error_msg(), "trainer.") != NULL, "refusal without the key: %s", tr_error_msg());
                        continue;
                    }
                    chosen++;
                    CHECK(c.devices >= 1 && c.strategy[0] && c.why[0], "empty choice");
                    CHECK(c.accelerator != TR_ACCEL_GPU || gpus > 0, "gpu chosen with no GPU");
                    CHECK(accs[a] == A || c.accelerator == accs[a], "accelerator %s asked, %s chosen",
                          tr_accelerator_name(accs[a]), tr_accelerator_name(c.accelerator));
                    if (c.accelerator == TR_ACCEL_GPU) {
                        CHECK(c.n_ids == c.devices, "GPU ids (%d) for every device (%d)", c.n_ids, c.devices);
                        for (int i = 0; i < c.n_ids; i++) CHECK(c.ids[i] >= 0 && c.ids[i] < gpus, "GPU id %d of %d", c.ids[i], gpus);
                    }
                    if (strcmp(strategies[s], "auto") == 0)
                        CHECK(strcmp(c.strategy, c.devices > 1 ? "ddp"
                                                 : c.accelerator == TR_ACCEL_GPU ? "single-gpu" : "cpu") == 0,
                              "auto chose %s for %d %s devices", c.strategy, c.devices, tr_accelerator_name(c.accelerator));
                    else
                        CHECK(strcmp(c.strategy, strategies[s]) == 0, "named %s, chose %s", strategies[s], c.strategy);
                    if (strcmp(strategies[s], "cpu") == 0)
                        CHECK(c.accelerator == TR_ACCEL_CPU, "strategy cpu on %s", tr_accelerator_name(c.accelerator));
                }
    CHECK(combos == 648, "%d combinations", combos);
    printf("%d combinations: %d chosen, %d refused\n", combos, chosen, combos - chosen);
    return test_finish();
}
