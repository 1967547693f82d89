/* The run's loggers (run/logger.h) on records written by hand: metrics.jsonl's exact text,
 * metrics.csv's header growing as keys appear (old rows laid out again under it) and appended
 * to on a resume, one TensorBoard event file per open, named so that they sort in order of
 * opening, and a folder that cannot be written refused naming the file. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "run/logger.h"
#include "run/tfrecord.h"

static char dir[64];

static char *slurp(const char *name, size_t *n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    *n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

static void check_text(const char *name, const char *want) {
    size_t n = 0;
    char *got = slurp(name, &n);
    CHECK(got && strcmp(got, want) == 0, "%s:\n%s\nexpected:\n%s", name, got ? got : "(missing)", want);
    free(got);
}

static void record(run_loggers *ls, run_record_kind kind, const run_value *v, int n) {
    tr_status st = run_loggers_record(ls, &(run_record){.kind = kind, .v = v, .n = n});
    CHECK(st == TR_OK, "record: %s", tr_error_msg());
}

static int name_cmp(const void *a, const void *b) { return strcmp(a, b); }

/* The names of the event files in dir/tensorboard, sorted, into names; their count. */
static int event_files(char names[4][256]) {
    char path[256];
    snprintf(path, sizeof path, "%s/tensorboard", dir);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        if (strncmp(de->d_name, "events.out.tfevents.", 20) == 0 && n < 4) snprintf(names[n++], 256, "%s", de->d_name);
    if (d) closedir(d);
    qsort(names, (size_t)n, 256, name_cmp);
    return n;
}

/* An event file starts with the record of Event{wall_time, file_version "brain.Event:2"}. */
static void check_first_event(const char *name) {
    char rel[300];
    snprintf(rel, sizeof rel, "tensorboard/%s", name);
    size_t n = 0;
    unsigned char *b = (unsigned char *)slurp(rel, &n);
    const unsigned char want[] = {0x1a, 0x0d, 'b', 'r', 'a', 'i', 'n', '.', 'E', 'v', 'e', 'n', 't', ':', '2'};
    CHECK(b && n > 40 && b[0] == 24 && b[TFRECORD_HEAD] == 0x09 && memcmp(b + TFRECORD_HEAD + 9, want, sizeof want) == 0,
          "%s: the first record is not the file_version event", name);
    if (b && n > 40) {
        unsigned char head[TFRECORD_HEAD], tail[TFRECORD_TAIL];
        tfrecord_frame(b + TFRECORD_HEAD, 24, head, tail);
        CHECK(memcmp(head, b, sizeof head) == 0 && memcmp(tail, b + TFRECORD_HEAD + 24, sizeof tail) == 0,
              "%s: the first record's CRCs", name);
    }
    free(b);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/trainer-loggers-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    run_loggers ls;
    unsigned all = RUN_LOGGER_JSONL | RUN_LOGGER_TENSORBOARD | RUN_LOGGER_CSV;
    tr_status st = run_loggers_open(&ls, all, &(run_logger_env){.run_dir = dir});
    CHECK(st == TR_OK && ls.n == 3, "open all three: %s", tr_error_msg());
    CHECK(run_loggers_text(&ls, "config", "run: {name: x}\n", 0) == TR_OK, "text: %s", tr_error_msg());
    run_value train[] = {RUN_INT("step", 2), RUN_INT("epoch", 1), RUN_REAL("loss", 0.5, "%.9g"), RUN_REAL("lr", 0.001, "%.6g")};
    record(&ls, RUN_RECORD_TRAIN, train, 4);
    run_value val[] = {RUN_INT("step", 2), RUN_INT("epoch", 1), RUN_REAL("val_loss", NAN, "%.9g")};
    record(&ls, RUN_RECORD_VAL, val, 3);
    run_value ep[] = {RUN_INT("epoch", 1), RUN_INT("step", 3), RUN_REAL("train_loss", 0.25, "%.9g"), RUN_BOOL("partial", 1)};
    record(&ls, RUN_RECORD_EPOCH, ep, 4);
    run_value mem[] = {RUN_INT("params", 10), RUN_INT("grads", 10)};
    CHECK(run_loggers_record(&ls, &(run_record){.kind = RUN_RECORD_MEMORY, .group = "memory", .v = mem, .n = 2}) == TR_OK,
          "memory record");
    CHECK(run_loggers_close(&ls) == TR_OK, "close: %s", tr_error_msg());
    CHECK(run_loggers_close(&ls) == TR_OK, "closing twice is harmless");
    check_text("metrics.jsonl", "{\"step\": 2, \"epoch\": 1, \"loss\": 0.5, \"lr\": 0.001}\n"
                                "{\"step\": 2, \"epoch\": 1, \"val_loss\": null}\n"
                                "{\"epoch\": 1, \"step\": 3, \"train_loss\": 0.25, \"partial\": true}\n"
                                "{\"memory\": {\"params\": 10, \"grads\": 10}}\n");
    check_text("metrics.csv", "epoch,loss,lr,partial,step,train_loss,val_loss\n"
                              "1,0.5,0.001,,2,,\n"
                              "1,,,,2,,nan\n"
                              "1,,,true,3,0.25,\n");

    /* A resume: the same files go on; a new key widens metrics.csv's header again. */
    /* (The second event file opens within the same second, most likely: its name must sort after.) */
    st = run_loggers_open(&ls, all, &(run_logger_env){.run_dir = dir, .resuming = 1});
    CHECK(st == TR_OK, "reopen: %s", tr_error_msg());
    run_value res[] = {RUN_INT("resumed_from_step", 2)};
    record(&ls, RUN_RECORD_RESUMED, res, 1);
    run_value skip[] = {RUN_INT("step", 3), RUN_BOOL("skipped", 1), RUN_BOOL("loss_finite", 0)};
    record(&ls, RUN_RECORD_SKIPPED, skip, 3);
    CHECK(run_loggers_close(&ls) == TR_OK, "close: %s", tr_error_msg());
    check_text("metrics.jsonl", "{\"step\": 2, \"epoch\": 1, \"loss\": 0.5, \"lr\": 0.001}\n"
                                "{\"step\": 2, \"epoch\": 1, \"val_loss\": null}\n"
                                "{\"epoch\": 1, \"step\": 3, \"train_loss\": 0.25, \"partial\": true}\n"
                                "{\"memory\": {\"params\": 10, \"grads\": 10}}\n"
                                "{\"resumed_from_step\": 2}\n"
                                "{\"step\": 3, \"skipped\": true, \"loss_finite\": false}\n");
    check_text("metrics.csv", "epoch,loss,loss_finite,lr,partial,resumed_from_step,skipped,step,train_loss,val_loss\n"
                              "1,0.5,,0.001,,,,2,,\n"
                              "1,,,,,,,2,,nan\n"
                              "1,,,,true,,,3,0.25,\n"
                              ",,,,,2,,,,\n"
                              ",,false,,,,true,3,,\n");
    struct stat sb;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s/metrics.csv.tmp", dir);
    CHECK(stat(tmp, &sb) != 0, "metrics.csv.tmp is gone after the rewrite");

    char names[4][256];
    int n = event_files(names);
    CHECK(n == 2, "two event files, one per open: %d", n);
    long long t0 = 0, t1 = 0;
    if (n == 2) {
        CHECK(sscanf(names[0] + 20, "%lld", &t0) == 1 && sscanf(names[1] + 20, "%lld", &t1) == 1 && t1 > t0,
              "the second file's seconds follow the first's: %s, %s", names[0], names[1]);
        check_first_event(names[0]);
        check_first_event(names[1]);
    }

    /* A run folder that is a file: refused, naming the file. */
    char file[256];
    snprintf(file, sizeof file, "%s/metrics.jsonl", dir);
    st = run_loggers_open(&ls, RUN_LOGGER_CSV, &(run_logger_env){.run_dir = file});
    CHECK(st == TR_ERR_IO && strstr(tr_error_msg(), "metrics.jsonl/metrics.csv"),
          "csv in a file: %s", tr_error_msg());
    CHECK(ls.n == 0, "nothing left open");
    st = run_loggers_open(&ls, RUN_LOGGER_TENSORBOARD, &(run_logger_env){.run_dir = file});
    CHECK(st != TR_OK && strstr(tr_error_msg(), "metrics.jsonl"), "tensorboard in a file: %s", tr_error_msg());

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    return test_finish();
}
