/* Dataset plugins under the fuzzer (fuzz.h): an input becomes the plugin's options and memory
 * files, the plugin's create() reads them as in a job, and an accepted dataset must keep every
 * promise of its spec (tr_data_spec, trainer/model.h) for every sample the loader may ask for
 * (a split without labels, labelled() 0, for its x only). Limits: at most the first and last
 * 256 samples are read. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "trainer/tensor.h"

#define MAX_WORDS 32
#define MAX_FILES 4
#define MAX_NUMEL (1 << 24)
#define SAMPLES_READ 256

/* Dims already checked to lie in [1, MAX_NUMEL]; -1 past MAX_NUMEL. */
static int64_t dims(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim && n > 0; i++) n = n * shape[i] > MAX_NUMEL ? -1 : n * shape[i];
    return n;
}

static void check_spec(const tr_data_spec *d, const char *name) {
    if (d->x_ndim < 0 || d->x_ndim > TR_MAX_DIMS - 1 || d->y_ndim < 0 || d->y_ndim > TR_MAX_DIMS - 1)
        fuzz_fail("%s: spec has %d x dims and %d y dims", name, d->x_ndim, d->y_ndim);
    for (int i = 0; i < d->x_ndim; i++)
        if (d->x_shape[i] <= 0 || d->x_shape[i] > MAX_NUMEL) fuzz_fail("%s: x dim %d is %lld", name, i, (long long)d->x_shape[i]);
    for (int i = 0; i < d->y_ndim; i++)
        if (d->y_shape[i] <= 0 || d->y_shape[i] > MAX_NUMEL) fuzz_fail("%s: y dim %d is %lld", name, i, (long long)d->y_shape[i]);
    if (d->x_numel != dims(d->x_shape, d->x_ndim) || d->y_numel != dims(d->y_shape, d->y_ndim))
        fuzz_fail("%s: spec numel %lld/%lld disagrees with its shapes", name, (long long)d->x_numel, (long long)d->y_numel);
    if (d->x_numel <= 0 || d->x_numel > MAX_NUMEL || d->y_numel <= 0 || d->y_numel > MAX_NUMEL)
        fuzz_fail("%s: spec numel x %lld, y %lld", name, (long long)d->x_numel, (long long)d->y_numel);
    if (!tr_dtype_size(d->x_dtype) || !tr_dtype_size(d->y_dtype)) fuzz_fail("%s: spec has an unknown dtype", name);
    if (d->task == TR_TASK_CLASSIFY && (d->y_dtype != TR_I32 || d->n_classes < 1))
        fuzz_fail("%s: classification with y %s and %lld classes", name, tr_dtype_name(d->y_dtype), (long long)d->n_classes);
    if (d->x_dtype == TR_I32 && d->vocab < 1) fuzz_fail("%s: token inputs without a vocabulary", name);
}

/* y NULL: the split has no labels. */
static void check_sample(const tr_data_spec *d, const void *x, const void *y, int64_t i, const char *name) {
    for (int64_t k = 0; k < d->x_numel; k++) {
        if (d->x_dtype == TR_F32 && !isfinite(((const float *)x)[k]))
            fuzz_fail("%s: sample %lld: x[%lld] = %g", name, (long long)i, (long long)k, ((const float *)x)[k]);
        /* token ids lie in [0, vocab); -1 is padding, only at the end of the last dim */
        int32_t id = d->x_dtype == TR_I32 ? ((const int32_t *)x)[k] : 0;
        int64_t T = d->x_ndim ? d->x_shape[d->x_ndim - 1] : 1;
        if (d->x_dtype == TR_I32 && (id < -1 || id >= d->vocab || (id == -1 && k % T == 0) ||
                                     (id != -1 && k % T && ((const int32_t *)x)[k - 1] == -1)))
            fuzz_fail("%s: sample %lld: token x[%lld] = %d outside the vocabulary of %lld or padding not at the end", name,
                      (long long)i, (long long)k, id, (long long)d->vocab);
    }
    for (int64_t k = 0; y && k < d->y_numel; k++) {
        if (d->y_dtype == TR_F32 && !isfinite(((const float *)y)[k]))
            fuzz_fail("%s: sample %lld: y[%lld] = %g", name, (long long)i, (long long)k, ((const float *)y)[k]);
        if (d->y_dtype == TR_I32 && d->task != TR_TASK_REGRESS &&
            (((const int32_t *)y)[k] < 0 || ((const int32_t *)y)[k] >= d->n_classes))
            fuzz_fail("%s: sample %lld: class y[%lld] = %d outside [0, %lld)", name, (long long)i, (long long)k,
                      ((const int32_t *)y)[k], (long long)d->n_classes);
    }
}

void fuzz_check_dataset(const tr_dataset_ops *ops, void *ds, const char *name) {
    tr_data_spec d;
    memset(&d, 0xa5, sizeof d); /* spec() must fill every field it is read for */
    ops->spec(ds, &d);
    check_spec(&d, name);
    int64_t n = ops->size(ds);
    if (n < 0) fuzz_fail("%s: size %lld", name, (long long)n);
    /* Exact-size buffers: a write past a sample is an ASan report. */
    void *x = malloc((size_t)d.x_numel * tr_dtype_size(d.x_dtype));
    void *y = malloc((size_t)d.y_numel * tr_dtype_size(d.y_dtype));
    if (!x || !y) fuzz_fail("%s: out of memory for one sample", name);
    int labelled = !ops->labelled || ops->labelled(ds);
    for (int64_t i = 0; i < n; i++) {
        if (i == SAMPLES_READ && n > 2 * SAMPLES_READ) i = n - SAMPLES_READ;
        tr_error_clear();
        if (ops->get(ds, i, x, y) != TR_OK) fuzz_fail("%s: sample %lld of %lld refused: %s", name, (long long)i, (long long)n, tr_error_msg());
        check_sample(&d, x, labelled ? y : NULL, i, name);
    }
    if (ops->get(ds, n, x, y) == TR_OK || ops->get(ds, -1, x, NULL) == TR_OK)
        fuzz_fail("%s: a sample outside [0, %lld) was served", name, (long long)n);
    free(x);
    free(y);
}

/* Splits OPTIONS into words; split=, val_fraction= and labels_optional= go to the environment. */
static int read_options(char *text, const char **kv, tr_dataset_env *env, const char *const *file_keys) {
    int n = 0;
    for (char *save = NULL, *w = strtok_r(text, " \t\r\n", &save); w; w = strtok_r(NULL, " \t\r\n", &save)) {
        if (strncmp(w, "split=", 6) == 0) {
            env->split = strcmp(w + 6, "val") == 0 ? TR_SPLIT_VAL : TR_SPLIT_TRAIN;
        } else if (strncmp(w, "val_fraction=", 13) == 0) {
            double f = atof(w + 13);
            env->val_fraction = f >= 0 && f <= 0.9 ? f : 0.1; /* the range job.c allows */
        } else if (strncmp(w, "labels_optional=", 16) == 0) {
            env->labels_optional = atoi(w + 16) != 0;
        } else if (n < MAX_WORDS) {
            int is_file = 0; /* the harness names the files */
            for (const char *const *k = file_keys; *k; k++)
                is_file |= strncmp(w, *k, strlen(*k)) == 0 && w[strlen(*k)] == '=';
            if (!is_file) kv[n++] = w;
        }
    }
    return n;
}

void fuzz_dataset_run(const tr_plugin_desc *desc, const char *const *file_keys, int (*fits)(const tr_options *o),
                      const uint8_t *data, size_t size) {
    fuzz_part part[1 + MAX_FILES];
    int np = fuzz_split(data, size, part, 1 + MAX_FILES);
    char *opts = fuzz_strdup(part[0].data, part[0].size);
    const char *kv[MAX_WORDS + MAX_FILES];
    char paths[MAX_FILES][64], kvbuf[MAX_FILES][128];
    int fds[MAX_FILES], nf = 0;
    tr_dataset_env env = {.split = TR_SPLIT_TRAIN, .seed = 1, .base_dir = NULL, .val_fraction = 0.1};
    int n = read_options(opts, kv, &env, file_keys);
    for (int i = 0; file_keys[i] && i + 1 < np && i < MAX_FILES; i++, nf++) {
        fds[i] = fuzz_memfile(part[i + 1].data, part[i + 1].size, paths[i], sizeof paths[i]);
        snprintf(kvbuf[i], sizeof kvbuf[i], "%s=%s", file_keys[i], paths[i]);
        kv[n++] = kvbuf[i];
    }
    tr_options *o = NULL;
    char where[128];
    snprintf(where, sizeof where, "fuzz.yaml: data.params (%s)", desc->name);
    tr_error_clear();
    if (tr_options_create(&o, desc->options, desc->n_options, kv, n, where) != TR_OK) {
        const char *needles[] = {"data.params", NULL};
        fuzz_expect_message("options", needles);
    } else if (!fits || fits(o)) {
        const tr_dataset_ops *ops = desc->ops;
        void *ds = NULL;
        tr_error_clear();
        if (ops->create(&ds, o, &env) == TR_OK) {
            fuzz_check_dataset(ops, ds, desc->name);
            ops->destroy(ds);
        } else {
            const char *needles[MAX_FILES + 2];
            int k = 0;
            for (int i = 0; i < nf; i++) needles[k++] = paths[i];
            needles[k++] = desc->name; /* option-level refusals name the plugin */
            needles[k] = NULL;
            fuzz_expect_message(desc->name, needles);
        }
    }
    tr_options_destroy(o);
    for (int i = 0; i < nf; i++) close(fds[i]);
    free(opts);
}
