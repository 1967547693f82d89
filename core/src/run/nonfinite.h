/* trainer.on_nan: what a step with a non-finite loss or gradient norm looked like, in words.
 * Internal to the training loop (train.c). */
#ifndef TRAINER_RUN_NONFINITE_H
#define TRAINER_RUN_NONFINITE_H

#include <stdint.h>

#include "job.h"

/* What this rank saw during one optimizer step's micro-batches. */
typedef struct nonfinite_seen {
    int loss_bad;       /* a micro-batch's loss was not finite */
    double loss;        /* the first such loss */
    int data_bad;       /* 1: an input value, 2: a target value was not finite */
    int64_t sample;     /* which sample of this rank's share of the batch */
    const tr_host_batch *last;  /* the step's last micro-batch, still valid after optim_step */
} nonfinite_seen;

/* Called for a micro-batch whose loss was not finite: notes the loss and, the first time in
 * the step, scans the batch's floating-point inputs and targets. */
void nonfinite_note(nonfinite_seen *seen, const tr_data_spec *spec, const tr_host_batch *hb, double loss);
/* The batch scan alone (a finite loss can hide non-finite inputs: ReLU maps NaN to 0, but
 * the gradient of the first layer's weights is not finite). */
void nonfinite_scan(nonfinite_seen *seen, const tr_data_spec *spec, const tr_host_batch *hb);

/* On every rank, collectively, after optim_step of `step` (1-based) left a non-finite loss
 * sum or gradient norm (gnorm: this rank's; gnorm_bad: some rank's was not finite; seen->last, unless a noted loss found the culprit already, is
 * scanned first): one line naming what was not finite and the first non-finite tensor,
 * in the order a step computes them: parameters, the batch, buffers (batch-norm statistics),
 * the loss, gradients. *model_bad: parameters or buffers are not finite (skipping the step
 * cannot help). */
tr_status nonfinite_describe(job *j, const nonfinite_seen *seen, int64_t step, double gnorm, int gnorm_bad, char *out,
                             size_t size, int *model_bad);

#endif
