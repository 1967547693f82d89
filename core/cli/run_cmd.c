/* `trainer run CONFIG [key.path=value ...]`: train from a YAML config. When the strategy
 * needs several processes (ddp: trainer.devices ranks) and no launcher started this one, it
 * launches and supervises them itself on this host, like torchrun standalone. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interrupt.h"
#include "plugins_cmd.h"
#include "run_cmd.h"
#include "launch/launch_api.h"
#include "run/run_api.h"

/* Runs N ranks of this very command line. */
static int launch_self(int argc, char **argv, const tr_run_plan_result *plan) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "trainer run: cannot find my own executable to launch %d ranks\n", plan->processes);
        return 1;
    }
    self[n] = 0;
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args) return 1;
    args[0] = self;
    args[1] = "run";
    for (int i = 0; i < argc; i++) args[i + 2] = argv[i];
    tr_launch_config lc = {.nproc = plan->processes, .max_restarts = plan->max_restarts, .argv = args};
    /* A Ctrl-C while the job was planned reached this process's handler (interrupt.c), not
     * the launcher's, which is installed next: stop here rather than start the whole job. */
    if (trainer_interrupt_signal()) {
        free(args);
        fprintf(stderr, "trainer run: stopped by signal %d before any rank started\n", trainer_interrupt_signal());
        return 1;
    }
    fprintf(stderr, "trainer run: strategy %s: launching %d ranks on this host%s\n", plan->strategy, plan->processes,
            plan->max_restarts ? " (with restarts)" : "");
    tr_launch_result r;
    tr_status st = tr_launch(&lc, &r);
    free(args);
    if (st != TR_OK) {
        fprintf(stderr, "trainer run: %s\n", tr_error_msg());
        return 1;
    }
    if (r.exit_code) fprintf(stderr, "trainer run: %s\n", r.message);
    return r.exit_code;
}

int trainer_run_cmd(int argc, char **argv) {
    if (argc < 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: trainer run CONFIG.yaml [section.key=value ...]\n");
        return 2;
    }
    const char *const *overrides = (const char *const *)argv + 1;
    if (!tr_launched_externally()) {
        tr_run_plan_result plan;
        if (tr_run_plan(argv[0], overrides, argc - 1, trainer_default_plugin_dirs(), &plan) != TR_OK) {
            fprintf(stderr, "trainer run: %s\n", tr_error_msg());
            return 1;
        }
        if (plan.processes > 1) return launch_self(argc, argv, &plan);
    }
    tr_run_result r;
    if (tr_run_train(argv[0], overrides, argc - 1, trainer_default_plugin_dirs(), &r) != TR_OK) {
        fprintf(stderr, "trainer run: %s\n", tr_error_msg());
        return 1;
    }
    return 0;
}
