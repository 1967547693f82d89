/* What a finished run reports: its memory. */
#include "run/loop_report.h"

void loop_report_memory(job *j) {
    tr_strategy_memory m;
    if (!j->sops->memory || j->sops->memory(j->strat, &m) != TR_OK) return;
    const double M = 1048576.0;
    job_say(j, "memory on the primary device: parameters %.2f MiB, gradients %.2f MiB, optimizer state %.2f MiB, "
               "activations (peak) %.2f MiB, other %.2f MiB; this process in all %.2f MiB",
            m.params / M, m.grads / M, m.optimizer / M, m.activations / M, m.other / M, m.all_devices / M);
    run_value v[] = {RUN_INT("params", m.params), RUN_INT("grads", m.grads), RUN_INT("optimizer", m.optimizer),
                     RUN_INT("activations", m.activations), RUN_INT("other", m.other), RUN_INT("all_devices", m.all_devices)};
    job_record(j, &(run_record){.kind = RUN_RECORD_MEMORY, .group = "memory", .v = v, .n = 6});
}
