/* `trainer plan CONFIG [--json] [key.path=value ...]`: what `trainer run` would do with this
 * config (the strategy and why, world size, per-rank and global batch) and the memory per rank
 * of the chosen strategy and the alternatives, without training. --json: the same as one JSON
 * object, sizes in bytes. */
#include <stdio.h>
#include <string.h>

#include "plan_cmd.h"
#include "plugins_cmd.h"
#include "run/run_api.h"
#include "trainer/runtime.h"

static double mib(uint64_t b) { return (double)b / 1048576.0; }

/* A string for JSON: the characters plugin and file names use, quotes and backslashes
 * escaped, control characters dropped. */
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if ((unsigned char)*s >= 0x20) putchar(*s);
    }
    putchar('"');
}

static void print_json(const tr_plan_report *r) {
    printf("{\"strategy\": ");
    json_str(r->strategy);
    printf(", \"reason\": ");
    json_str(r->reason);
    printf(", \"precision\": ");
    json_str(tr_precision_name(tr_get_precision())); /* the config's, set by the plan */
    printf(", \"model\": ");
    json_str(r->model);
    printf(", \"backend\": ");
    json_str(r->backend);
    printf(", \"params\": %zu, \"world\": %d, \"processes\": %d, \"global_batch\": %lld, \"rank_batch\": %lld, "
           "\"grad_accum\": %lld, \"rows\": [",
           r->params, r->world, r->processes, (long long)r->global_batch, (long long)r->rank_batch,
           (long long)r->grad_accum);
    for (int i = 0; i < r->n_rows; i++) {
        const tr_plan_row *w = &r->rows[i];
        const tr_strategy_memory *m = &w->memory;
        printf("%s{\"strategy\": ", i ? ", " : "");
        json_str(w->strategy);
        printf(", \"chosen\": %s", w->chosen ? "true" : "false");
        if (w->estimated)
            printf(", \"world\": %d, \"rank_batch\": %lld, \"memory\": {\"params\": %llu, \"grads\": %llu, "
                   "\"optimizer\": %llu, \"activations\": %llu, \"other\": %llu, \"all_devices\": %llu}}",
                   w->world, (long long)w->rank_batch, (unsigned long long)m->params, (unsigned long long)m->grads,
                   (unsigned long long)m->optimizer, (unsigned long long)m->activations, (unsigned long long)m->other,
                   (unsigned long long)m->all_devices);
        else {
            printf(", \"note\": ");
            json_str(w->note);
            printf("}");
        }
    }
    printf("], \"activation_checkpointing\": {\"every\": %d, \"rank_batch\": %lld, \"with\": %llu, \"without\": %llu}}\n",
           r->act_ckpt_every, (long long)r->rank_batch, (unsigned long long)r->act_with,
           (unsigned long long)r->act_without);
}

/* The activations of one rank with and without trainer.activation_checkpointing (when it is
 * on, or would save memory: the model has blocks). */
static void print_checkpointing(const tr_plan_report *r) {
    if (r->rank_batch <= 0 || (!r->act_ckpt_every && r->act_with >= r->act_without)) return;
    char every[48] = "every block";
    if (r->act_ckpt_every > 1) snprintf(every, sizeof every, "one block in %d", r->act_ckpt_every);
    if (r->act_ckpt_every)
        printf("\nactivations per rank at batch %lld: %.2f MiB with activation checkpointing (%s), %.2f MiB without\n",
               (long long)r->rank_batch, mib(r->act_with), every, mib(r->act_without));
    else
        printf("\nactivations per rank at batch %lld: %.2f MiB; %.2f MiB with trainer.activation_checkpointing true\n",
               (long long)r->rank_batch, mib(r->act_without), mib(r->act_with));
}

int trainer_plan_cmd(int argc, char **argv) {
    int json = 0, n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else argv[n++] = argv[i];
    }
    argc = n;
    if (argc < 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: trainer plan CONFIG.yaml [--json] [section.key=value ...]\n");
        return 2;
    }
    tr_plan_report r;
    if (tr_run_plan_report(argv[0], (const char *const *)argv + 1, argc - 1, trainer_default_plugin_dirs(), &r) != TR_OK) {
        fprintf(stderr, "trainer plan: %s\n", tr_error_msg());
        return 1;
    }
    if (json) {
        print_json(&r);
        return 0;
    }
    printf("plan for %s\n", argv[0]);
    printf("  model %s: %zu parameters; data %s: %lld train samples\n", r.model, r.params, r.data,
           (long long)r.train_samples);
    printf("  strategy %s (%s)\n", r.strategy, r.reason);
    if (tr_get_precision() != TR_PRECISION_FP32) /* the config's, set by the plan */
        printf("  precision %s: the GEMMs on bf16 operands with fp32 accumulation; weights, gradients, activations and "
               "optimizer state fp32 (the memory below)\n", tr_precision_name(tr_get_precision()));
    printf("  world %d (%d process%s on this host), global batch %lld, per-rank batch %lld, grad_accum %lld\n", r.world,
           r.processes, r.processes == 1 ? "" : "es", (long long)r.global_batch, (long long)r.rank_batch,
           (long long)r.grad_accum);
    if (r.backend[0]) printf("  communication %s\n", r.backend);
    printf("\nmemory per rank, MiB (estimated; * = chosen)\n");
    printf("  %-18s %5s %6s %9s %9s %10s %12s %8s %9s %9s\n", "strategy", "world", "batch", "params", "grads", "optimizer",
           "activations", "other", "total", "process");
    for (int i = 0; i < r.n_rows; i++) {
        const tr_plan_row *w = &r.rows[i];
        if (!w->estimated) {
            printf("%c %-18s %s\n", w->chosen ? '*' : ' ', w->strategy, w->note);
            continue;
        }
        const tr_strategy_memory *m = &w->memory;
        uint64_t total = m->params + m->grads + m->optimizer + m->activations + m->other;
        printf("%c %-18s %5d %6lld %9.2f %9.2f %10.2f %12.2f %8.2f %9.2f %9.2f\n", w->chosen ? '*' : ' ', w->strategy,
               w->world, (long long)w->rank_batch, mib(m->params), mib(m->grads), mib(m->optimizer), mib(m->activations),
               mib(m->other), mib(total), mib(m->all_devices));
    }
    print_checkpointing(&r);
    return 0;
}
