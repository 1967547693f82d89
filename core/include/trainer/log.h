/* Levelled logging.
 *
 *   tr_log_set_level(TR_LOG_DEBUG);
 *   tr_log_set_prefix("[rank 1] ");
 *   TR_INFO("epoch %d: loss %.4f", epoch, loss);
 *
 * The level starts from the TRAINER_LOG_LEVEL environment variable (error, warn, info,
 * debug, trace; default info). Lines go to stderr unless another sink is set; each line is
 * written with one call so lines from threads do not interleave. */
#ifndef TRAINER_LOG_H
#define TRAINER_LOG_H

#include "trainer/export.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tr_log_level {
    TR_LOG_ERROR = 0,
    TR_LOG_WARN = 1,
    TR_LOG_INFO = 2,
    TR_LOG_DEBUG = 3,
    TR_LOG_TRACE = 4
} tr_log_level;

TR_API void tr_log_set_level(tr_log_level level);
TR_API tr_log_level tr_log_get_level(void);
/* Parses "error".."trace"; returns -1 for anything else. */
TR_API int tr_log_level_parse(const char *name);
/* Borrowed: the stream must outlive its use. NULL restores stderr. */
TR_API void tr_log_set_sink(FILE *sink);
/* Copied; at most 63 bytes are kept. */
TR_API void tr_log_set_prefix(const char *prefix);
TR_API void tr_log(tr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define TR_ERROR(...) tr_log(TR_LOG_ERROR, __VA_ARGS__)
#define TR_WARN(...) tr_log(TR_LOG_WARN, __VA_ARGS__)
#define TR_INFO(...) tr_log(TR_LOG_INFO, __VA_ARGS__)
#define TR_DEBUG(...) tr_log(TR_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
