/* `trainer devices`: what this machine offers a run — the CPU (model, cores this process may
 * use, memory), the GPU device plugins found and the GPUs they see, the communication
 * backends — and, for what is missing, why. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "devices_cmd.h"
#include "plugins_cmd.h"
#include "trainer/devices.h"
#include "trainer/plugin.h"
#include "trainer/runtime.h"

/* The first "model name" line of /proc/cpuinfo, or "unknown CPU". */
static void cpu_model(char *out, size_t size) {
    snprintf(out, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = 0;
        snprintf(out, size, "%s", c);
        break;
    }
    fclose(f);
}

int trainer_devices_cmd(int argc, char **argv) {
    (void)argv;
    if (argc != 0) {
        fprintf(stderr, "usage: trainer devices\n");
        return 2;
    }
    char model[256];
    cpu_model(model, sizeof model);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double gib = pages > 0 && page > 0 ? (double)pages * (double)page / (1024.0 * 1024.0 * 1024.0) : 0;
    printf("%-5s %-6s %-50s %s\n", "KIND", "COUNT", "NAME", "MEMORY");
    printf("%-5s %-6d %-50.50s %.1f GiB\n", "cpu", tr_cpu_count(), model, gib);

    tr_registry *reg = NULL;
    if (tr_registry_create(&reg) != TR_OK || trainer_scan_plugins(reg) != TR_OK) {
        fprintf(stderr, "trainer devices: %s\n", tr_error_msg());
        tr_registry_destroy(reg);
        return 1;
    }
    /* Each device plugin: its GPUs, or why it sees none. */
    int device_plugins = 0, auto_count = 0;
    const char *auto_backend = NULL; /* what trainer.gpu_backend auto takes: the first that sees a GPU */
    char comms[256] = "";
    for (int i = 0; i < tr_registry_count(reg); i++) {
        const tr_plugin *p = tr_registry_at(reg, i);
        if (p->desc->kind == TR_PLUGIN_COMM) {
            size_t n = strlen(comms);
            snprintf(comms + n, sizeof comms - n, "%s%s", n ? ", " : "", p->desc->name);
        }
        if (p->desc->kind != TR_PLUGIN_DEVICE) continue;
        device_plugins++;
        tr_device_ops ops;
        if (tr_device_ops_of(p, &ops) != TR_OK) {
            printf("%-5s %-6d %-50s (device plugin %s refused: %s)\n", "gpu", 0, "-", p->desc->name, tr_error_msg());
            continue;
        }
        char why[256] = "";
        int n = ops.count(why, sizeof why);
        if (n <= 0) {
            printf("%-5s %-6d %-50s (device plugin %s: %s)\n", "gpu", 0, "-", p->desc->name,
                   why[0] ? why : "it sees no device");
            continue;
        }
        if (!auto_backend) {
            auto_backend = p->desc->name;
            auto_count = n;
        }
        for (int d = 0; d < n; d++) {
            tr_device_info info;
            if (ops.info(d, &info) != TR_OK) {
                printf("%-5s %-6d %-50s (device plugin %s: %s)\n", "gpu", d, "?", p->desc->name, tr_error_msg());
                continue;
            }
            printf("%-5s %-6d %-50.50s %.1f GiB (device plugin %s, id %d; %s)\n", "gpu", 1, info.name,
                   (double)info.memory / (1024.0 * 1024.0 * 1024.0), p->desc->name, d, info.detail);
        }
    }
    if (device_plugins == 0)
        printf("%-5s %-6d %-50s %s\n", "gpu", 0, "-", "no GPU: no GPU device plugin was found (the CUDA one is "
                                                         "plugins/devices/cuda)");
    printf("\ncommunication backends: %s\n", comms[0] ? comms : "none found");
    if (auto_backend)
        printf("strategy auto here: %d GPU%s of %s: single-gpu for devices 1, ddp with one process per GPU for more, "
               "where the strategy can run on GPUs (else the CPU, saying why); accelerator cpu: cpu or ddp over CPU ranks ",
               auto_count, auto_count == 1 ? "" : "s", auto_backend);
    else
        printf("strategy auto here: cpu for trainer.devices 1, ddp over N CPU ranks for trainer.devices N ");
    printf("(`trainer plan CONFIG` shows a config's choice)\n");
    tr_registry_destroy(reg);
    return 0;
}
