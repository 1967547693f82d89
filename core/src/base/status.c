/* Status names and the thread-local error message with its propagation trace. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "trainer/status.h"

#define MSG_CAP 2048
#define TRACE_CAP 512

static _Thread_local char tl_msg[MSG_CAP];
static _Thread_local char tl_trace[TRACE_CAP];

const char *tr_status_str(tr_status s) {
    switch (s) {
    case TR_OK: return "ok";
    case TR_ERR_INVALID: return "invalid argument";
    case TR_ERR_NOMEM: return "out of memory";
    case TR_ERR_IO: return "i/o error";
    case TR_ERR_PARSE: return "parse error";
    case TR_ERR_UNSUPPORTED: return "unsupported";
    case TR_ERR_PLUGIN: return "plugin error";
    case TR_ERR_COMM: return "communication error";
    case TR_ERR_TIMEOUT: return "timed out";
    case TR_ERR_DEVICE: return "device error";
    case TR_ERR_NOT_FOUND: return "not found";
    case TR_ERR_NUMERIC: return "non-finite value";
    case TR_ERR_ABORTED: return "aborted";
    case TR_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

tr_status tr_error_set(tr_status s, const char *fmt, ...) {
    /* Formatted aside first: an argument may be tr_error_msg() itself. */
    char msg[MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(tl_msg, msg, sizeof msg);
    tl_trace[0] = '\0';
    return s;
}

void tr_error_prefix(const char *fmt, ...) {
    char prefix[512];
    char old[MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tl_msg, sizeof old);
    size_t np = strlen(prefix);
    if (np >= sizeof tl_msg) np = sizeof tl_msg - 1;
    memcpy(tl_msg, prefix, np);
    size_t rest = strlen(old);
    if (np + rest >= sizeof tl_msg) rest = sizeof tl_msg - 1 - np;
    memcpy(tl_msg + np, old, rest);
    tl_msg[np + rest] = '\0';
}

const char *tr_error_msg(void) { return tl_msg; }

const char *tr_error_trace(void) { return tl_trace; }

void tr_error_clear(void) {
    tl_msg[0] = '\0';
    tl_trace[0] = '\0';
}

void tr_error_frame(const char *file, int line) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t len = strlen(tl_trace);
    if (len + 64 >= sizeof tl_trace) return; /* keep the innermost frames */
    snprintf(tl_trace + len, sizeof tl_trace - len, "%s%s:%d", len ? " <- " : "", base, line);
}
