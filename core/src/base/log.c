/* Levelled logging to a sink; one write per line so threads and ranks do not interleave. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/log_mute.h"
#include "trainer/log.h"

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static tr_log_level log_level = TR_LOG_INFO;
static FILE *log_sink;
static char log_prefix[64];
static _Thread_local int info_muted; /* log_mute_info */

static void log_init(void) {
    const char *env = getenv("TRAINER_LOG_LEVEL");
    int lv = env ? tr_log_level_parse(env) : -1;
    if (lv >= 0) log_level = (tr_log_level)lv;
}

int tr_log_level_parse(const char *name) {
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, level_names[i]) == 0) return i;
    if (strcasecmp(name, "warning") == 0) return TR_LOG_WARN;
    return -1;
}

void tr_log_set_level(tr_log_level level) {
    pthread_once(&log_once, log_init);
    log_level = level;
}

tr_log_level tr_log_get_level(void) {
    pthread_once(&log_once, log_init);
    return log_level;
}

void tr_log_set_sink(FILE *sink) { log_sink = sink; }

void tr_log_set_prefix(const char *prefix) {
    snprintf(log_prefix, sizeof log_prefix, "%s", prefix ? prefix : "");
}

void log_mute_info(int mute) { info_muted = mute != 0; }

void tr_log(tr_log_level level, const char *fmt, ...) {
    pthread_once(&log_once, log_init);
    if (level > log_level || (info_muted && level >= TR_LOG_INFO)) return;
    char line[4096];
    int n = 0;
    if (level != TR_LOG_INFO)
        n = snprintf(line, sizeof line, "%s%s: ", log_prefix, level_names[level]);
    else
        n = snprintf(line, sizeof line, "%s", log_prefix);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    FILE *out = log_sink ? log_sink : stderr;
    fwrite(line, 1, (size_t)n, out);
    fflush(out);
}
