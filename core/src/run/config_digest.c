/* The config digest a checkpoint records, and the list of keys that changed when a resumed
 * run's config differs from the one its checkpoint was written with. Keys that do not change
 * the math of a step (lengths, cadence, paths, threads, the strategy, activation checkpointing: docs/design.md
 * "Strategy invariance" and "Checkpoints"), or only its roundings (the accelerator, trainer.precision), are left out, so
 * extending a run or resuming under another strategy, on other devices or in another
 * precision (a bf16-mixed run's fp32 checkpoint on the CPU) is allowed. trainer.early_stopping
 * decides when a run ends, as max_epochs does; the limits how long an epoch or a validation is
 * (a resume under others goes on from its batch, as an extended run does); model.init_from
 * only starts a fresh run (a resume takes the run's own checkpoint). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "trainer/memory.h"

static const char *const ignored[] = {
    "run.name", "run.output_dir", "data.prefetch", "data.workers", "trainer.max_epochs", "trainer.max_steps",
    "trainer.log_every", "trainer.val_every_n_steps", "trainer.val_every_n_epochs",
    "trainer.limit_train_batches", "trainer.limit_val_batches", "trainer.val_check_interval", "trainer.fast_dev_run",
    "trainer.threads", "trainer.progress", "trainer.profile", "trainer.loggers",
    "trainer.strategy", "trainer.accelerator", "trainer.precision", "trainer.devices", "trainer.max_restarts",
    "trainer.early_stopping", "trainer.activation_checkpointing", "model.init_from", "strategy", "checkpoint", "plugins"};

static int is_ignored(const char *path) {
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        size_t n = strlen(ignored[i]);
        if (strncmp(path, ignored[i], n) == 0 && (path[n] == 0 || path[n] == '.' || path[n] == '['))
            return 1;
    }
    return 0;
}

typedef struct lines {
    char **v;
    size_t n, cap;
} lines;

static void collect(const tr_cfg_node *node, lines *L) {
    if (!node) return;
    if (tr_cfg_node_kind(node) != TR_CFG_SCALAR) {
        for (size_t i = 0; i < tr_cfg_size(node); i++) collect(tr_cfg_item(node, i), L);
        return;
    }
    const char *path = tr_cfg_path(node), *v = tr_cfg_scalar(node);
    if (is_ignored(path)) return;
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 64;
        char **nv = tr_malloc(cap * sizeof *nv);
        if (!nv) return; /* digest of what fits: only under memory exhaustion */
        if (L->v) memcpy(nv, L->v, L->n * sizeof *nv);
        tr_free(L->v);
        L->v = nv;
        L->cap = cap;
    }
    size_t len = strlen(path) + strlen(v) + 2;
    char *s = tr_malloc(len);
    if (!s) return;
    snprintf(s, len, "%s=%s", path, v);
    L->v[L->n++] = s;
}

/* Key of a "key=value" line and its length. */
static size_t key_len(const char *line) { return (size_t)(strchr(line, '=') - line); }

/* Orders lines by key alone (sorting and merging must agree: "a.b" < "a.b.c"). */
static int key_cmp(const char *a, const char *b) {
    size_t ka = key_len(a), kb = key_len(b);
    int c = strncmp(a, b, ka < kb ? ka : kb);
    return c ? c : (ka > kb) - (ka < kb);
}

static int by_key(const void *a, const void *b) { return key_cmp(*(char *const *)a, *(char *const *)b); }

static void flatten(const tr_cfg_node *root, lines *L) {
    *L = (lines){0};
    collect(root, L);
    if (L->n) qsort(L->v, L->n, sizeof *L->v, by_key);
}

static void lines_free(lines *L) {
    for (size_t i = 0; i < L->n; i++) tr_free(L->v[i]);
    tr_free(L->v);
}

void job_config_digest(const tr_cfg_node *root, char out[17]) {
    lines L;
    flatten(root, &L);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (size_t i = 0; i < L.n; i++)
        for (const char *p = L.v[i];; p++) {
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            if (!*p) break;
        }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    lines_free(&L);
}

static void append(char *out, size_t size, size_t *used, const char *a, const char *b) {
    const char *line = a ? a : b;
    size_t k = key_len(line);
    const char *va = a ? a + k + 1 : "(unset)", *vb = b ? b + k + 1 : "(unset)";
    if (*used >= size) return;
    int n = snprintf(out + *used, size - *used, "%s%.*s (%s -> %s)", *used ? ", " : "", (int)k, line, va, vb);
    if (n > 0) *used += (size_t)n;
}

void job_config_diff(const tr_cfg_node *a, const tr_cfg_node *b, char *out, size_t size) {
    lines A, B;
    flatten(a, &A);
    flatten(b, &B);
    size_t i = 0, k = 0, used = 0;
    if (size) out[0] = 0;
    while (i < A.n || k < B.n) {
        int c;
        if (i == A.n) c = 1;
        else if (k == B.n) c = -1;
        else c = key_cmp(A.v[i], B.v[k]);
        if (c < 0) append(out, size, &used, A.v[i++], NULL);
        else if (c > 0) append(out, size, &used, NULL, B.v[k++]);
        else {
            if (strcmp(A.v[i], B.v[k]) != 0) append(out, size, &used, A.v[i], B.v[k]);
            i++;
            k++;
        }
    }
    lines_free(&A);
    lines_free(&B);
}
