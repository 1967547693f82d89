/* Status codes and error messages with context.
 *
 *   tr_status load(const char *path) {
 *       FILE *f = fopen(path, "rb");
 *       if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
 *       TR_CHECK(parse(f));            // propagates, recording file:line
 *       ...
 *   }
 *   if (load("x.bin") != TR_OK) fprintf(stderr, "error: %s\n", tr_error_msg());
 *
 * Every public and ABI function returns tr_status (0 = OK). The message is thread-local:
 * the thread that got the status reads it. Library code never exit()s on bad input. */
#ifndef TRAINER_STATUS_H
#define TRAINER_STATUS_H

#include "trainer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tr_status {
    TR_OK = 0,
    TR_ERR_INVALID = 1,     /* bad argument, shape or value */
    TR_ERR_NOMEM = 2,       /* allocation failed */
    TR_ERR_IO = 3,          /* file system or stream error */
    TR_ERR_PARSE = 4,       /* malformed config, data file or checkpoint */
    TR_ERR_UNSUPPORTED = 5, /* valid request this build or device cannot do */
    TR_ERR_PLUGIN = 6,      /* plugin refused or failed */
    TR_ERR_COMM = 7,        /* communication failure, peer gone */
    TR_ERR_TIMEOUT = 8,     /* an operation ran past its deadline */
    TR_ERR_DEVICE = 9,      /* device runtime error */
    TR_ERR_NOT_FOUND = 10,  /* named thing does not exist */
    TR_ERR_NUMERIC = 11,    /* non-finite value */
    TR_ERR_ABORTED = 12,    /* cancelled by abort or signal */
    TR_ERR_INTERNAL = 13    /* a bug in trainer */
} tr_status;

/* A short constant name for a status ("invalid argument"). */
TR_API const char *tr_status_str(tr_status s);

/* Sets this thread's message (printf format; an argument may be tr_error_msg()) and returns s,
 * so `return tr_error_set(...)`. */
TR_API tr_status tr_error_set(tr_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends context to this thread's message: "config.yaml: " + message. */
TR_API void tr_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* This thread's last message ("" when none). Valid until the next tr_error_* call. */
TR_API const char *tr_error_msg(void);

/* The file:line frames TR_CHECK recorded while the error propagated ("a.c:10 <- b.c:22"). */
TR_API const char *tr_error_trace(void);

TR_API void tr_error_clear(void);

/* Records a propagation frame; used by TR_CHECK. */
TR_API void tr_error_frame(const char *file, int line);

#define TR_CHECK(expr)                                                                        \
    do {                                                                                      \
        tr_status tr_check_s_ = (expr);                                                       \
        if (tr_check_s_ != TR_OK) {                                                           \
            tr_error_frame(__FILE__, __LINE__);                                               \
            return tr_check_s_;                                                               \
        }                                                                                     \
    } while (0)

/* Stores the status in `st` (a tr_status variable in scope) and jumps to label on failure. */
#define TR_CHECK_GOTO(expr, label)                                                            \
    do {                                                                                      \
        st = (expr);                                                                          \
        if (st != TR_OK) {                                                                    \
            tr_error_frame(__FILE__, __LINE__);                                               \
            goto label;                                                                       \
        }                                                                                     \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
