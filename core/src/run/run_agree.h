/* Private: agreement among the ranks on whether a step failed anywhere. */
#ifndef TRAINER_RUN_RUN_AGREE_H
#define TRAINER_RUN_RUN_AGREE_H

#include "run/job.h"
#include "trainer/status.h"

/* Every rank learns whether any failed: TR_OK when none did; else this rank's own error, or
 * "WHAT: OTHERS" when only others failed. */
tr_status run_agree(job *j, tr_status st, const char *what, const char *others);

#endif
