/* trainer.loggers `tensorboard`: an event file TensorBoard reads, in runs/<name>/<version>/
 * tensorboard/, named as TensorBoard's writers name them (events.out.tfevents.<seconds>.
 * <host>.<pid>.0), a new one per process start (TensorBoard reads a folder's files in name
 * order: a start within the second of the newest file's takes the next second). The file is
 * TFRecords (tfrecord.h) of Event messages: first file_version "brain.Event:2", then a Summary
 * of float scalars per record (the tags of `tags` below, at the record's global step; each the
 * float32 of the number metrics.jsonl writes, so that every logger shows the same value), the
 * resolved config as a text summary (the text plugin's metadata and a string tensor), and on
 * a resume a SessionLog START at the first step run again, which makes TensorBoard drop what
 * the interrupted run wrote for that step and after (metrics.jsonl's superseded records).
 * The messages are encoded by protobuf-c (Debian's libprotobuf-c) from tensorboard.proto,
 * the subset of TensorBoard's own .proto files written here, compiled by protoc-c at build
 * time: encoding stays the library's, not hand-written varints. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "run/log_file.h"
#include "run/logger.h"
#include "run/tfrecord.h"
#include "tensorboard.pb-c.h"
#include "trainer/io.h"

#define EVENTS_PREFIX "events.out.tfevents."

/* TensorBoard's tag of each metrics.jsonl key (docs/config.md "Loggers"); the other keys are
 * not scalars there. */
static const struct {
    run_record_kind kind;
    const char *key, *tag;
} tags[] = {
    {RUN_RECORD_TRAIN, "epoch", "train/epoch"},
    {RUN_RECORD_TRAIN, "loss", "train/loss"},
    {RUN_RECORD_TRAIN, "lr", "train/lr"},
    {RUN_RECORD_TRAIN, "grad_norm", "train/grad_norm"},
    {RUN_RECORD_TRAIN, "samples_per_sec", "train/samples_per_sec"},
    {RUN_RECORD_TRAIN, "tokens_per_sec", "train/tokens_per_sec"},
    {RUN_RECORD_VAL, "val_loss", "val/loss"},
    {RUN_RECORD_VAL, "val_accuracy", "val/accuracy"},
    {RUN_RECORD_VAL, "val_perplexity", "val/perplexity"},
    {RUN_RECORD_VAL, "val_precision_macro", "val/precision_macro"},
    {RUN_RECORD_VAL, "val_recall_macro", "val/recall_macro"},
    {RUN_RECORD_VAL, "val_f1_macro", "val/f1_macro"},
    {RUN_RECORD_VAL, "val_precision_weighted", "val/precision_weighted"},
    {RUN_RECORD_VAL, "val_recall_weighted", "val/recall_weighted"},
    {RUN_RECORD_VAL, "val_f1_weighted", "val/f1_weighted"},
    {RUN_RECORD_VAL, "val_mae", "val/mae"},
    {RUN_RECORD_VAL, "val_rmse", "val/rmse"},
    {RUN_RECORD_VAL, "val_r2", "val/r2"},
    {RUN_RECORD_EPOCH, "train_loss", "train/loss_epoch"},
};
enum { N_TAGS = sizeof tags / sizeof tags[0] };

static const char *tag_of(run_record_kind kind, const char *key) {
    for (int i = 0; i < N_TAGS; i++)
        if (tags[i].kind == kind && strcmp(tags[i].key, key) == 0) return tags[i].tag;
    return NULL;
}

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One Event as a framed record, written through. */
static tr_status put_event(log_file *lf, Tensorboard__Event *e) {
    e->wall_time = wall_time();
    size_t n = tensorboard__event__get_packed_size(e);
    unsigned char *buf = malloc(TFRECORD_HEAD + n + TFRECORD_TAIL);
    if (!buf) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory for an event of %zu bytes", lf->path, n);
    tensorboard__event__pack(e, buf + TFRECORD_HEAD);
    tfrecord_frame(buf + TFRECORD_HEAD, n, buf, buf + TFRECORD_HEAD + n);
    tr_status st = log_file_put(lf, buf, TFRECORD_HEAD + n + TFRECORD_TAIL);
    free(buf);
    return st;
}

/* The seconds field of this process's file name: now, or after the newest file's. */
static long long file_seconds(const char *dir) {
    long long s = (long long)time(NULL), newest = -1;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        long long t;
        if (strncmp(de->d_name, EVENTS_PREFIX, strlen(EVENTS_PREFIX)) == 0 &&
            sscanf(de->d_name + strlen(EVENTS_PREFIX), "%lld", &t) == 1 && t > newest)
            newest = t;
    }
    if (d) closedir(d);
    return newest >= s ? newest + 1 : s;
}

static tr_status tb_close(void *ctx) {
    tr_status st = log_file_close(ctx);
    free(ctx);
    return st;
}

static tr_status tb_open(void **ctx, const run_logger_env *env) {
    char dir[1200], host[256] = "localhost", name[400];
    snprintf(dir, sizeof dir, "%s/tensorboard", env->run_dir);
    TR_CHECK(tr_mkdirs(dir));
    if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    snprintf(name, sizeof name, EVENTS_PREFIX "%010lld.%s.%ld.0", file_seconds(dir), host, (long)getpid());
    log_file *lf = calloc(1, sizeof *lf);
    if (!lf) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", dir);
    tr_status st = log_file_open(lf, dir, name, "wb");
    Tensorboard__Event e = TENSORBOARD__EVENT__INIT;
    e.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    e.file_version = "brain.Event:2";
    if (st == TR_OK) st = put_event(lf, &e);
    if (st != TR_OK) {
        tb_close(lf);
        return st;
    }
    *ctx = lf;
    return TR_OK;
}

static tr_status tb_record(void *ctx, const run_record *r) {
    Tensorboard__Event e = TENSORBOARD__EVENT__INIT;
    int64_t step;
    if (r->kind == RUN_RECORD_RESUMED) {
        if (!run_record_int(r, "resumed_from_step", &step)) return TR_OK;
        Tensorboard__SessionLog s = TENSORBOARD__SESSION_LOG__INIT;
        s.status = TENSORBOARD__SESSION_LOG__SESSION_STATUS__START;
        e.step = step + 1;
        e.what_case = TENSORBOARD__EVENT__WHAT_SESSION_LOG;
        e.session_log = &s;
        return put_event(ctx, &e);
    }
    if (!run_record_int(r, "step", &step)) return TR_OK;
    Tensorboard__Summary__Value v[N_TAGS], *pv[N_TAGS];
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    for (int i = 0; i < r->n && sum.n_value < N_TAGS; i++) {
        const char *tag = tag_of(r->kind, r->v[i].key);
        if (!tag || r->v[i].kind == RUN_VALUE_BOOL) continue;
        Tensorboard__Summary__Value *x = &v[sum.n_value];
        tensorboard__summary__value__init(x);
        x->tag = (char *)tag;
        x->value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        char text[48]; /* the value metrics.jsonl and metrics.csv show, not more digits */
        x->simple_value = (float)strtod(run_value_text(text, &r->v[i], 0), NULL);
        pv[sum.n_value++] = x;
    }
    if (!sum.n_value) return TR_OK;
    sum.value = pv;
    e.step = step;
    e.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    e.summary = &sum;
    return put_event(ctx, &e);
}

/* A text summary as TensorBoard's text plugin writes one: a rank-0 string tensor; the text is
 * Markdown there, so it goes in a fenced code block, which keeps its lines. */
static tr_status tb_text(void *ctx, const char *tag, const char *text, int64_t step) {
    log_file *lf = ctx;
    size_t n = strlen(text);
    char *md = malloc(n + 32);
    if (!md) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory for a text of %zu bytes", lf->path, n);
    int k = snprintf(md, n + 32, "```\n%s%s```", text, n && text[n - 1] == '\n' ? "" : "\n");
    Tensorboard__SummaryMetadata__PluginData pd = TENSORBOARD__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    pd.plugin_name = "text";
    Tensorboard__SummaryMetadata meta = TENSORBOARD__SUMMARY_METADATA__INIT;
    meta.plugin_data = &pd;
    meta.data_class = TENSORBOARD__DATA_CLASS__DATA_CLASS_TENSOR;
    Tensorboard__TensorShapeProto shape = TENSORBOARD__TENSOR_SHAPE_PROTO__INIT;
    ProtobufCBinaryData s = {.len = (size_t)k, .data = (uint8_t *)md};
    Tensorboard__TensorProto t = TENSORBOARD__TENSOR_PROTO__INIT;
    t.dtype = TENSORBOARD__DATA_TYPE__DT_STRING;
    t.tensor_shape = &shape;
    t.n_string_val = 1;
    t.string_val = &s;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT, *pv = &v;
    v.tag = (char *)tag;
    v.metadata = &meta;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR;
    v.tensor = &t;
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = &pv;
    Tensorboard__Event e = TENSORBOARD__EVENT__INIT;
    e.step = step;
    e.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    e.summary = &sum;
    tr_status st = put_event(lf, &e);
    free(md);
    return st;
}

const run_logger_ops run_logger_tensorboard = {
    .name = "tensorboard", .open = tb_open, .record = tb_record, .text = tb_text, .close = tb_close};
