/* The dataset plugin tests' helpers (ds_check.h). */
#define _GNU_SOURCE
#include "ds_check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define PLUGIN_DIR TRAINER_BINARY_DIR "/plugins/datasets"

char ds_tmpdir[256];


static tr_plugin *plugins[4];
static const char *plugin_names[4] = {"synthetic", "idx", "csv", "text"};

tr_plugin *ds_plugin(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(plugin_names[i], name) == 0) return plugins[i];
    return NULL;
}

/* Creates a dataset from "key=value" options; on failure returns the status (ctx NULL). */
tr_status ds_open(ds *d, const char *name, const char *const *kv, int n_kv,
                         tr_split split, uint64_t seed, const char *base, double val_fraction) {
    memset(d, 0, sizeof *d);
    d->p = ds_plugin(name);
    d->ops = d->p->desc->ops;
    tr_options *o = NULL;
    tr_status st = tr_options_create(&o, d->p->desc->options, d->p->desc->n_options, kv, n_kv,
                                     name);
    if (st != TR_OK) return st;
    tr_dataset_env env = {.split = split, .seed = seed, .base_dir = base,
                          .val_fraction = val_fraction};
    st = d->ops->create(&d->ctx, o, &env);
    tr_options_destroy(o);
    if (st != TR_OK) {
        d->ctx = NULL;
        return st;
    }
    d->ops->spec(d->ctx, &d->spec);
    d->n = d->ops->size(d->ctx);
    return TR_OK;
}

void ds_close(ds *d) {
    if (d->ctx) d->ops->destroy(d->ctx);
    d->ctx = NULL;
}

/* Expects create to fail with status want and a message holding every needle. */
void ds_expect_error(const char *name, const char *const *kv, int n_kv, tr_split split,
                         double val_fraction, tr_status want, const char *n1, const char *n2) {
    ds d;
    tr_status st = ds_open(&d, name, kv, n_kv, split, 1, ds_tmpdir, val_fraction);
    CHECK(st == want, "%s %s: expected status %s, got %s (%s)", name, kv[0], tr_status_str(want),
          tr_status_str(st), tr_error_msg());
    if (st == TR_OK) {
        ds_close(&d);
        return;
    }
    CHECK(strstr(tr_error_msg(), n1) != NULL, "%s: message '%s' lacks '%s'", name,
          tr_error_msg(), n1);
    if (n2)
        CHECK(strstr(tr_error_msg(), n2) != NULL, "%s: message '%s' lacks '%s'", name,
              tr_error_msg(), n2);
}

void ds_write_file(const char *name, const void *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ds_tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

void ds_write_text(const char *name, const char *s) { ds_write_file(name, s, strlen(s)); }

void ds_remove_file(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ds_tmpdir, name);
    unlink(path);
}

/* ---- get() from two threads equals serial ---- */

typedef struct job {
    const ds *d;
    int parity;
    float *x;          /* (n, x_numel) f32 or i32 (same size) */
    int32_t *y;        /* (n, y_numel) */
    int bad;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    const ds *d = j->d;
    for (int64_t i = j->parity; i < d->n; i += 2)
        if (d->ops->get(d->ctx, i, j->x + i * d->spec.x_numel, j->y + i * d->spec.y_numel) != TR_OK)
            j->bad = 1;
    return NULL;
}

void ds_check_threads(const char *what, const ds *d) {
    int64_t nx = d->n * d->spec.x_numel, ny = d->n * d->spec.y_numel;
    float *xs = malloc((size_t)nx * 4), *xp = malloc((size_t)nx * 4);
    int32_t *ys = malloc((size_t)ny * 4), *yp = malloc((size_t)ny * 4);
    CHECK(xs && xp && ys && yp, "alloc");
    if (!xs || !xp || !ys || !yp) goto out;
    for (int64_t i = 0; i < d->n; i++)
        d->ops->get(d->ctx, i, xs + i * d->spec.x_numel, ys + i * d->spec.y_numel);
    job a = {.d = d, .parity = 0, .x = xp, .y = yp}, b = {.d = d, .parity = 1, .x = xp, .y = yp};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_job, &a);
    pthread_create(&tb, NULL, run_job, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(!a.bad && !b.bad, "%s: threaded get failed", what);
    CHECK(memcmp(xs, xp, (size_t)nx * 4) == 0 && memcmp(ys, yp, (size_t)ny * 4) == 0,
          "%s: two threads differ from serial", what);
out:
    free(xs);
    free(xp);
    free(ys);
    free(yp);
}

int ds_setup(void) {
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/tr_data_%s.so", PLUGIN_DIR, plugin_names[i]);
        if (access(path, R_OK) != 0) {
            for (int j = 0; j < i; j++) tr_plugin_close(plugins[j]);
            char why[600];
            snprintf(why, sizeof why, "%s not built", path);
            test_skip(why);
        }
        tr_status st = tr_plugin_open(path, "test", &plugins[i]);
        CHECK(st == TR_OK, "open %s: %s", path, tr_error_msg());
        if (st != TR_OK) return -1;
        CHECK(plugins[i]->desc->kind == TR_PLUGIN_DATASET &&
                  strcmp(plugins[i]->desc->name, plugin_names[i]) == 0,
              "%s descriptor", path);
    }
    snprintf(ds_tmpdir, sizeof ds_tmpdir, "/tmp/trainer-dataset-test-XXXXXX");
    if (!mkdtemp(ds_tmpdir)) {
        CHECK(0, "mkdtemp");
        return -1;
    }
    return 0;
}

void ds_teardown(void) {
    CHECK(rmdir(ds_tmpdir) == 0, "temporary dir %s left non-empty", ds_tmpdir);
    for (int i = 0; i < 4; i++) tr_plugin_close(plugins[i]);
}
