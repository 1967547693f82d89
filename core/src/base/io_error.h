/* Private: the reason a file operation failed, as the user should read it: strerror plus what
 * to do for the errors a full or limited disk gives (ENOSPC, EDQUOT, EFBIG, EROFS). */
#ifndef TRAINER_BASE_IO_ERROR_H
#define TRAINER_BASE_IO_ERROR_H

#include <stddef.h>

/* Writes the reason for errno value err into buf and returns buf. */
const char *tr_io_reason(int err, char *buf, size_t cap);

#endif
