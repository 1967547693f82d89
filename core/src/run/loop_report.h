/* Private: what the training loop reports beyond its steps: each epoch's end, the run's end
 * and the strategy's memory. */
#ifndef TRAINER_RUN_LOOP_REPORT_H
#define TRAINER_RUN_LOOP_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "run/loop.h"
#include "run/run_api.h"

/* The line that ends epoch ep (from 0) at step: "epoch E/N done: train loss L", or, when it
 * ended part-way (not complete) after `consumed` batches, which of trainer.early_stopping and
 * max_steps stopped it. A validation there prints it before its figures. */
void loop_report_epoch_line(const loop *lp, int64_t ep, int64_t step, int64_t consumed, int complete,
                            double epoch_loss, char *out, size_t size);

/* The epoch's metrics record: its mean train loss, marked partial when it ended part-way. */
tr_status loop_report_epoch(loop *lp, int64_t ep, int64_t step, double epoch_loss, int complete);

/* The run's result (res) and its last line: steps, time, throughput over `seconds` of the
 * `samples` this rank trained, the final validation accuracy and the steps left out. */
void loop_report_done(loop *lp, int64_t step, int64_t epochs, double epoch_loss, double vloss, double vacc,
                      double seconds, double samples, tr_run_result *res);

/* The strategy's memory after training: a line and a metrics record (rank 0). */
void loop_report_memory(job *j);
/* This process's peak resident set so far (VmHWM), bytes; 0 where /proc cannot tell. */
uint64_t loop_report_peak_resident(void);

#endif
