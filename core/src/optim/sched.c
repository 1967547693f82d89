/* Learning-rate schedules as pure functions of the step, so resuming needs only the step.
 *
 * Warm-up (step < warmup_steps): base_lr * (step + 1) / warmup_steps, which is torch's
 * LinearLR(start_factor = 1/warmup, end_factor = 1, total_iters = warmup - 1). After it the
 * schedule proper runs on s = step - warmup_steps:
 *   CONSTANT  base_lr
 *   STEP      base_lr * gamma^floor(s / step_size)          = torch's StepLR closed form
 *   COSINE    min_lr + (base_lr - min_lr) * (1 + cos(pi * min(s, T) / T)) / 2, T = total_steps
 *             = torch's CosineAnnealingLR(T_max = T, eta_min = min_lr) closed form for s <= T;
 *             past T it stays at min_lr (torch's keeps following the cosine back up).
 * Degenerate configs never divide by zero: STEP with step_size <= 0 stays at base_lr, COSINE
 * with total_steps <= 0 is at min_lr; a negative step counts as step 0. */
#include <math.h>

#include "trainer/optim.h"

static const double PI = 3.14159265358979323846;

double tr_sched_lr(const tr_sched_config *s, double base_lr, int64_t step) {
    if (!s) return base_lr;
    if (step < 0) step = 0;
    if (s->warmup_steps > 0) {
        if (step < s->warmup_steps) return base_lr * (double)(step + 1) / (double)s->warmup_steps;
        step -= s->warmup_steps;
    }
    switch (s->kind) {
    case TR_SCHED_CONSTANT:
        return base_lr;
    case TR_SCHED_STEP:
        if (s->step_size <= 0) return base_lr;
        return base_lr * pow(s->gamma, (double)(step / s->step_size));
    case TR_SCHED_COSINE: {
        if (s->total_steps <= 0) return s->min_lr;
        double t = (double)(step < s->total_steps ? step : s->total_steps);
        double c = cos(PI * t / (double)s->total_steps);
        return s->min_lr + (base_lr - s->min_lr) * (1.0 + c) / 2.0;
    }
    }
    return base_lr;
}
