/* Private: the training run's closing reports. */
#ifndef TRAINER_RUN_LOOP_REPORT_H
#define TRAINER_RUN_LOOP_REPORT_H

#include "run/job.h"

/* The strategy's memory after training: a line and a metrics record (rank 0). */
void loop_report_memory(job *j);

#endif
